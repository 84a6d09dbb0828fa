//! [`ExitStatus`]: what the `sim` command's exit status means, in one
//! place for every subcommand.
//!
//! | status | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | the tool itself failed (an output cannot be written) |
//! | 2 | invalid input: command line, scenario, environment, or parameters that run virtual time past its end |
//! | 3 | the (simulated or checked) system deadlocked |
//! | 4 | a collective produced wrong results, or the checker found another violation |
//! | 5 | a rank's collective failed with an error |
//! | 6 | a collective outlived the watchdog (`timeout_ms`) or a transport timed out |
//! | 130 | `sim run` or `sim sweep` stopped by SIGINT (Ctrl-C): its outputs end marked partial |
//! | 143 | `sim run` or `sim sweep` stopped by SIGTERM: its outputs end marked partial |
//!
//! A failed write (a file, or stdout other than a closed pipe) is status 1
//! whatever the verdict; a closed stdout (`| head`) is not an error: the
//! verdict decides. 130 and 143 are 128 + the signal number, what a shell
//! reports for a process the signal killed.
//!
//! `sim launch` ends with its first failed rank's own status (128 + the
//! signal number for a rank killed by a signal).

use std::process::ExitCode;

use algorithms::{CollectiveError, FabricError};
use checker::spec::Verdict;
use engine::study::Failure;
use engine::sweep::status::Status;
use realnet::connect::SetupFailure;

/// The `sim` command's exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExitStatus {
    /// Everything ran and every check passed.
    Success = 0,
    /// The tool itself failed (an output cannot be written).
    ToolFailed = 1,
    /// The input is invalid.
    InvalidInput = 2,
    /// The system deadlocked.
    Deadlock = 3,
    /// A result was wrong (or the checker found a violation other than a
    /// deadlock or an error).
    WrongResult = 4,
    /// A rank's collective failed with an error.
    RankFailed = 5,
    /// A collective outlived the watchdog, or a transport timed out.
    Timeout = 6,
    /// Stopped by SIGINT; the outputs end marked partial.
    Interrupted = 130,
    /// Stopped by SIGTERM; the outputs end marked partial.
    Terminated = 143,
}

impl ExitStatus {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status of a simulated point that did not complete.
    pub fn of_failure(failure: &Failure) -> ExitStatus {
        match failure {
            Failure::Deadlock(_) => ExitStatus::Deadlock,
            Failure::WatchdogTimeout(_) | Failure::TransportTimeout { .. } => ExitStatus::Timeout,
            Failure::RankError { .. } | Failure::Crashed { .. } => ExitStatus::RankFailed,
            Failure::OutOfTime => ExitStatus::InvalidInput,
        }
    }

    /// The status of a rank's failed collective on a real fabric.
    pub fn of_collective_error(error: &CollectiveError) -> ExitStatus {
        match error {
            CollectiveError::Fabric(FabricError::Timeout { .. }) => ExitStatus::Timeout,
            _ => ExitStatus::RankFailed,
        }
    }

    /// The status of a rank that could not connect to its job.
    pub fn of_setup(failure: SetupFailure) -> ExitStatus {
        match failure {
            SetupFailure::Input => ExitStatus::InvalidInput,
            SetupFailure::Rank => ExitStatus::RankFailed,
            SetupFailure::Timeout => ExitStatus::Timeout,
        }
    }

    /// The status of a model-checking verdict.
    pub fn of_verdict(verdict: Verdict) -> ExitStatus {
        match verdict {
            Verdict::Verified => ExitStatus::Success,
            Verdict::Deadlock => ExitStatus::Deadlock,
            Verdict::Error => ExitStatus::RankFailed,
            _ => ExitStatus::WrongResult,
        }
    }

    /// The status a sweep point's row contributes.
    pub fn of_sweep(status: Status) -> ExitStatus {
        match status {
            Status::Ok => ExitStatus::Success,
            Status::Deadlock => ExitStatus::Deadlock,
            Status::Wrong => ExitStatus::WrongResult,
            Status::Error | Status::Crashed => ExitStatus::RankFailed,
            Status::Timeout => ExitStatus::Timeout,
            Status::OutOfTime => ExitStatus::InvalidInput,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_row_exits_as_sim_run_would_and_the_worst_row_wins() {
        for status in Status::ALL {
            assert_eq!(
                ExitStatus::of_sweep(status).code(),
                status.severity(),
                "{status}"
            );
        }
        assert_eq!(
            ExitStatus::of_failure(&Failure::OutOfTime),
            ExitStatus::InvalidInput
        );
        assert_eq!(
            ExitStatus::of_verdict(Verdict::Leftover),
            ExitStatus::WrongResult
        );
    }
}
