//! The `sim sweep` and `sim merge` commands: load, run or join, write the
//! CSV, report failed points on stderr, and choose the exit status (the
//! worst row's, as `sim run` would exit for it; see [`ExitStatus`]).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use algorithms::Registry;
use engine::sweep::Sweep;
use engine::sweep::merge;
use engine::sweep::run::{RunError, RunOptions, points_of, run};
use engine::sweep::status::Status;
use engine::tuning::AlgoFilter;
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::ExitStatus;

/// Creates an output file, or says why it cannot be.
fn create(path: &Path, what: &str) -> Result<BufWriter<File>, ExitStatus> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        eprintln!("error: {}: cannot write {what}: {e}", path.display());
        ExitStatus::ToolFailed
    })
}

/// A progress bar of `points` points on stderr.
fn progress_bar(points: usize) -> ProgressBar {
    let bar = ProgressBar::new(points as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} points, {elapsed_precise} elapsed, ETA {eta_precise}",
        )
        .expect("the template is valid"),
    );
    bar
}

/// `sim sweep`: runs the points of the sweep at `path`, writes the CSV to
/// `csv` (stdout if `None`), names the failed points on stderr, with a
/// progress bar on stderr if `progress`; returns the exit status. An error
/// is stdout's.
pub fn sweep(
    path: &Path,
    csv: Option<&Path>,
    options: RunOptions,
    progress: bool,
    registry: &Registry,
) -> io::Result<ExitStatus> {
    let loaded = Sweep::load(path, registry).map_err(|e| e.to_string());
    let filter = std::env::var("NCCL_ALGO").map_or(Ok(AlgoFilter::default()), |v| {
        AlgoFilter::parse(&v, registry).map_err(|e| e.to_string())
    });
    let (sweep, filter) = match (loaded, filter) {
        (Ok(s), Ok(f)) => (s, f),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    // Open the output before the (possibly long) run.
    let file = match csv.map(|p| create(p, "CSV")).transpose() {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let bar = progress.then(|| progress_bar(points_of(&sweep, options.shard).len()));
    let tick = || {
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    };
    let outcome = run(&sweep, &filter, options, &tick);
    if let Some(bar) = bar {
        bar.finish();
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(match e {
                RunError::Invalid(_) => ExitStatus::InvalidInput,
                RunError::Threads(_) => ExitStatus::ToolFailed,
            });
        }
    };
    let shard_line = outcome.shard_line.as_ref();
    match (file, csv) {
        (Some(f), Some(p)) => {
            if let Err(e) = outcome.table.write(f, shard_line) {
                eprintln!("error: {}: cannot write CSV: {e}", p.display());
                return Ok(ExitStatus::ToolFailed);
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
    Ok(ExitStatus::of_sweep(outcome.worst()))
}

/// `sim sweep --print-point`: one point's scenario file on stdout.
pub fn print_point(path: &Path, point: usize, registry: &Registry) -> io::Result<ExitStatus> {
    match Sweep::load(path, registry).and_then(|s| s.point_toml(point)) {
        Ok(text) => {
            io::Write::write_all(&mut io::stdout().lock(), text.as_bytes())?;
            Ok(ExitStatus::Success)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitStatus::InvalidInput)
        }
    }
}

/// `sim merge`: joins shard files into `out`; exits with the worst row's
/// status.
pub fn merge(out: &Path, shards: &[PathBuf]) -> io::Result<ExitStatus> {
    let table = match merge::merge(shards) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let file = match create(out, "merged CSV") {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    if let Err(e) = table.write(file, None) {
        eprintln!("error: {}: cannot write merged CSV: {e}", out.display());
        return Ok(ExitStatus::ToolFailed);
    }
    let worst = table.worst();
    if worst != Status::Ok {
        eprintln!(
            "error: {}: some points did not end ok (worst: {worst}); see the status column",
            out.display()
        );
    }
    Ok(ExitStatus::of_sweep(worst))
}
