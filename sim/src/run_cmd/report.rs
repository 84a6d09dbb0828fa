//! What `sim run` prints once the study has ended: the `#wrong` summary
//! and its exit status, or the report of the point that did not complete.

use std::io::{self, Write};
use std::path::Path;

use algorithms::CollectiveError;
use engine::DeadlockReport;
use engine::scenario::Scenario;
use engine::study::{Failure, Point, Row};

use crate::exit::ExitStatus;

/// Prints the `#wrong` summary line and picks the exit status.
pub fn summarise(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    rows: &[Row],
) -> io::Result<ExitStatus> {
    let wrong: u64 = rows.iter().filter_map(|r| r.wrong).sum();
    let verdict = if wrong == 0 { "OK" } else { "FAILED" };
    writeln!(out, "# Out of bounds values : {wrong} {verdict}")?;
    out.flush()?;
    if wrong > 0 {
        crate::report!(
            "error: {}: {wrong} wrong element(s) (seed {})",
            path.display(),
            scenario.seed
        );
        return Ok(ExitStatus::WrongResult);
    }
    Ok(ExitStatus::Success)
}

/// Prints why a point did not complete (the report to stdout, one line
/// naming the file to stderr) and picks the exit status.
pub fn report_failure(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    point: &Point,
    failure: Failure,
) -> io::Result<ExitStatus> {
    let status = ExitStatus::of_failure(&failure);
    let at = format!("{} at {} bytes", point.collective, point.size_bytes);
    let file = path.display();
    writeln!(out, "# {at} did not complete")?;
    let stalled = |out: &mut dyn Write, stalled: Option<DeadlockReport>| -> io::Result<()> {
        if let Some(report) = stalled {
            writeln!(out, "the other ranks were then left waiting:")?;
            write!(out, "{report}")?;
        }
        Ok(())
    };
    match failure {
        Failure::WatchdogTimeout(report) => {
            write!(out, "{report}")?;
            crate::report!(
                "error: {file}: a collective timed out ({at}, seed {})",
                scenario.seed
            );
        }
        Failure::Deadlock(report) => {
            write!(out, "{report}")?;
            crate::report!(
                "error: {file}: the simulated system deadlocked ({at}, seed {})",
                scenario.seed
            );
        }
        Failure::TransportTimeout {
            error, stalled: s, ..
        } => {
            // Fabric errors name their rank already.
            writeln!(out, "failed: {error}")?;
            stalled(out, s)?;
            crate::report!("error: {file}: a transport timed out ({at}): {error}");
        }
        Failure::RankError {
            rank,
            error,
            stalled: s,
        } => {
            let error = match error {
                CollectiveError::Fabric(e) => e.to_string(),
                other => format!("rank {rank}: {other}"),
            };
            writeln!(out, "failed: {error}")?;
            stalled(out, s)?;
            crate::report!("error: {file}: a rank failed ({at}): {error}");
        }
        Failure::Crashed {
            rank,
            at: when,
            stalled: s,
        } => {
            writeln!(
                out,
                "failed: rank {rank} crashed at {when} (scheduled fault)"
            )?;
            stalled(out, s)?;
            crate::report!("error: {file}: rank {rank} crashed at {when} ({at})");
        }
        Failure::OutOfTime => crate::report!("error: {}", scenario.out_of_time_message(&at)),
    }
    out.flush()?;
    Ok(status)
}
