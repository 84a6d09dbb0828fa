//! [`JobOptions`]: what every rank of a job agrees on before connecting.

use std::time::Duration;

/// Settings shared by every transport of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobOptions {
    /// Identifies the job: connections and segments of another job (a
    /// stale process, a second job on the same hosts) are refused.
    pub job_id: u64,
    /// A secret every rank of the job knows; a connection that does not
    /// present it is refused.
    pub token: String,
    /// How long a rank waits for a peer that shows no progress before it
    /// reports that peer as dead or hung.
    pub timeout: Duration,
}

impl Default for JobOptions {
    /// Job 0, an empty token, a 30 s timeout.
    fn default() -> Self {
        JobOptions {
            job_id: 0,
            token: String::new(),
            timeout: Duration::from_secs(30),
        }
    }
}
