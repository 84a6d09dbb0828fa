//! How a sweep's row ended, as the `status` column says it, and which of
//! two endings is the worse (a sweep reports its worst row).

use std::fmt;

use algorithms::CollectiveError;

use crate::study::Failure;

/// The outcome of one row of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Completed with right results (or unchecked ones).
    Ok,
    /// Completed, but some elements were wrong.
    Wrong,
    /// The ranks deadlocked.
    Deadlock,
    /// The collective watchdog fired or a transport gave up.
    Timeout,
    /// A rank's collective returned an error.
    Error,
    /// A rank crashed (a scheduled fault) with work left.
    Crashed,
    /// Virtual time ran out: parameters unrealistic for the size.
    OutOfTime,
}

impl Status {
    /// Every status.
    pub const ALL: [Status; 7] = [
        Status::Ok,
        Status::Wrong,
        Status::Deadlock,
        Status::Timeout,
        Status::Error,
        Status::Crashed,
        Status::OutOfTime,
    ];

    /// The word in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Wrong => "wrong",
            Status::Deadlock => "deadlock",
            Status::Timeout => "timeout",
            Status::Error => "error",
            Status::Crashed => "crashed",
            Status::OutOfTime => "out_of_time",
        }
    }

    /// Reads the word in the CSV.
    pub fn parse(word: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == word)
    }

    /// How bad the ending is, for picking a sweep's worst row: the order
    /// of `sim run`'s exit statuses for the same endings (ok, out of
    /// virtual time, deadlock, wrong results, a rank's error or crash,
    /// timeout).
    pub fn severity(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::OutOfTime => 2,
            Status::Deadlock => 3,
            Status::Wrong => 4,
            Status::Error | Status::Crashed => 5,
            Status::Timeout => 6,
        }
    }

    /// The status of a point that failed this way.
    pub fn of(failure: &Failure) -> Status {
        match failure {
            Failure::WatchdogTimeout(_) | Failure::TransportTimeout { .. } => Status::Timeout,
            Failure::Deadlock(_) => Status::Deadlock,
            Failure::RankError { .. } => Status::Error,
            Failure::Crashed { .. } => Status::Crashed,
            Failure::OutOfTime => Status::OutOfTime,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One line saying why a point failed (the headline of what `sim run`
/// reports in full).
pub fn describe(failure: &Failure) -> String {
    match failure {
        Failure::WatchdogTimeout(_) => {
            "a collective outlived the watchdog (timeout_ms)".to_string()
        }
        Failure::Deadlock(_) => "the simulated system deadlocked".to_string(),
        Failure::TransportTimeout { error, .. } => error.to_string(),
        Failure::RankError {
            error: CollectiveError::Fabric(e),
            ..
        } => e.to_string(),
        Failure::RankError { rank, error, .. } => format!("rank {rank}: {error}"),
        Failure::Crashed { rank, at, .. } => format!("rank {rank} crashed at {at}"),
        Failure::OutOfTime => "virtual time passed its end (2^64 ps)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_severities_follow_sim_runs_exit_statuses() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.name()), Some(s));
        }
        assert_eq!(Status::parse("fine"), None);
        let codes: Vec<u8> = Status::ALL.iter().map(|s| s.severity()).collect();
        assert_eq!(codes, [0, 4, 3, 6, 5, 5, 2]);
        assert_eq!(Status::of(&Failure::OutOfTime), Status::OutOfTime);
    }
}
