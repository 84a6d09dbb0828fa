//! The `sim sweep` and `sim merge` commands: load, run or join, write the
//! CSV, report failed points on stderr, and choose the exit status (the
//! codes of `sim run`, see [`Status::exit_code`], plus [`EXIT_IO`] and
//! [`EXIT_INPUT`]).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use algorithms::Registry;

use super::Sweep;
use super::merge;
use super::run::{RunError, RunOptions, run};
use super::status::Status;
use crate::tuning::AlgoFilter;

/// Exit status when the tool itself failed (an output cannot be written).
pub const EXIT_IO: u8 = 1;
/// Exit status for invalid input (command line, scenario, shard files).
pub const EXIT_INPUT: u8 = 2;

/// Creates an output file, or says why it cannot be.
fn create(path: &Path, what: &str) -> Result<BufWriter<File>, u8> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        eprintln!("error: {}: cannot write {what}: {e}", path.display());
        EXIT_IO
    })
}

/// `sim sweep`: runs the points of the sweep at `path`, writes the CSV to
/// `csv` (stdout if `None`), names the failed points on stderr; returns
/// the exit status. An error is stdout's.
pub fn sweep(
    path: &Path,
    csv: Option<&Path>,
    options: RunOptions,
    registry: &Registry,
) -> io::Result<u8> {
    let loaded = Sweep::load(path, registry).map_err(|e| e.to_string());
    let filter = std::env::var("NCCL_ALGO").map_or(Ok(AlgoFilter::default()), |v| {
        AlgoFilter::parse(&v, registry).map_err(|e| e.to_string())
    });
    let (sweep, filter) = match (loaded, filter) {
        (Ok(s), Ok(f)) => (s, f),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INPUT);
        }
    };
    // Open the output before the (possibly long) run.
    let file = match csv.map(|p| create(p, "CSV")).transpose() {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let outcome = match run(&sweep, &filter, options) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(match e {
                RunError::Invalid(_) => EXIT_INPUT,
                RunError::Threads(_) => EXIT_IO,
            });
        }
    };
    let shard_line = outcome.shard_line.as_ref();
    match (file, csv) {
        (Some(f), Some(p)) => {
            if let Err(e) = outcome.table.write(f, shard_line) {
                eprintln!("error: {}: cannot write CSV: {e}", p.display());
                return Ok(EXIT_IO);
            }
        }
        _ => outcome.table.write(io::stdout().lock(), shard_line)?,
    }
    for failure in &outcome.failures {
        eprintln!(
            "error: {}: {}: {}",
            path.display(),
            failure.status,
            failure.message
        );
    }
    Ok(outcome.exit_code())
}

/// `sim sweep --print-point`: one point's scenario file on stdout.
pub fn print_point(path: &Path, point: usize, registry: &Registry) -> io::Result<u8> {
    match Sweep::load(path, registry).and_then(|s| s.point_toml(point)) {
        Ok(text) => {
            io::Write::write_all(&mut io::stdout().lock(), text.as_bytes())?;
            Ok(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_INPUT)
        }
    }
}

/// `sim merge`: joins shard files into `out`; exits with the worst row's
/// status.
pub fn merge(out: &Path, shards: &[PathBuf]) -> io::Result<u8> {
    let table = match merge::merge(shards) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INPUT);
        }
    };
    let file = match create(out, "merged CSV") {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    if let Err(e) = table.write(file, None) {
        eprintln!("error: {}: cannot write merged CSV: {e}", out.display());
        return Ok(EXIT_IO);
    }
    let worst = table.worst();
    if worst != Status::Ok {
        eprintln!(
            "error: {}: some points did not end ok (worst: {worst}); see the status column",
            out.display()
        );
    }
    Ok(worst.exit_code())
}
