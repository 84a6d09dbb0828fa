//! The `sim sweep` and `sim merge` commands: load, run or join, write the
//! CSV, report failed points on stderr, and choose the exit status (the
//! worst row's, as `sim run` would exit for it; see [`ExitStatus`]).
//!
//! `sim sweep` streams: each point's rows are written as soon as it and
//! every earlier point have finished (to a temporary file beside `--csv`,
//! renamed onto it at the end; stdout too when the scaling columns need no
//! later rows). `speedup` and `efficiency` compare rows across points, so a
//! whole sweep with a rank-count axis rewrites its file with them at the
//! end. On SIGINT or SIGTERM no new point starts, the points done are
//! written, the file ends with a `# partial: ...` line, and `sim sweep
//! --resume` later runs only the points the file lacks (its `# sweep`
//! fingerprint must match), giving the same bytes as one uninterrupted run.
//! `writer.rs` holds the CSV as it is written and how it ends.

mod writer;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use algorithms::Registry;
use engine::sweep::Sweep;
use engine::sweep::file::{self, FileError, SweepFile};
use engine::sweep::merge;
use engine::sweep::run::{RunOptions, sweep_line};
use engine::sweep::shard::SweepLine;
use engine::sweep::status::Status;
use engine::sweep::table;
use engine::tuning::AlgoFilter;
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::ExitStatus;
use crate::output::{Named, OutputFile, Stdout, check_paths};
use writer::{CsvWriter, Sink};

/// `sim sweep`'s options.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// The scenario file (TOML) with a [sweep] table.
    pub scenario: PathBuf,
    /// Write the CSV to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Run only the points whose index is I modulo N, for `sim merge`.
    #[arg(long, value_name = "I/N", value_parser = engine::sweep::shard::Shard::parse)]
    pub shard: Option<engine::sweep::shard::Shard>,
    /// Complete the --csv file of an interrupted run of this sweep: run only
    /// the points it lacks (its `# sweep` line must match this sweep).
    #[arg(long, requires = "csv")]
    pub resume: bool,
    /// Print the scenario file of this point (to `sim run` it alone) and exit.
    #[arg(long, value_name = "POINT", conflicts_with_all = ["csv", "shard", "resume"])]
    pub print_point: Option<usize>,
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

/// `sim sweep`: runs the points of the sweep, streaming the CSV to
/// `--csv` (stdout if `None`), names the failed points on stderr, with a
/// progress bar on stderr if `progress`; returns the exit status. An error
/// is stdout's.
pub fn sweep(args: &SweepArgs, progress: bool, registry: &Registry) -> io::Result<ExitStatus> {
    let path = &args.scenario;
    let loaded = Sweep::load(path, registry).map_err(|e| e.to_string());
    let filter = AlgoFilter::from_env(|v| std::env::var(v).ok(), registry);
    let (sweep, filter) = match (loaded, filter) {
        (Ok(s), Ok(f)) => (s, f),
        (Err(e), _) | (_, Err(e)) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    if let Some(csv) = &args.csv {
        let input = Named {
            name: "the scenario",
            path,
        };
        let output = Named {
            name: "--csv",
            path: csv,
        };
        // The files the scenario reads (an nvidia-smi file); no axis
        // sets them, so point 0 names them for every point.
        let others = sweep.scenario(0).map(|s| s.input_files).unwrap_or_default();
        let mut inputs = vec![input];
        inputs.extend(others.iter().map(|path| Named {
            name: "a file the scenario reads",
            path,
        }));
        if let Err(e) = check_paths(&inputs, &[output]) {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    }
    let line = sweep_line(&sweep, &filter, args.shard);
    let header = table::header(sweep.axes());
    let earlier = match (&args.csv, args.resume) {
        (Some(csv), true) => match resumed(csv, &line, &header) {
            Ok(rows) => rows,
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(ExitStatus::InvalidInput);
            }
        },
        _ => BTreeMap::new(),
    };
    let sink = match &args.csv {
        Some(csv) => match OutputFile::create(csv, "CSV") {
            Ok(f) => Sink::File(f),
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(ExitStatus::ToolFailed);
            }
        },
        None => Sink::Stdout(Stdout::new()),
    };
    let options = RunOptions {
        threads: args.threads.map(usize::from),
        shard: args.shard,
    };
    let writer = CsvWriter::new(sink, line, header, earlier);
    writer.run(&sweep, &filter, options, progress, args)
}

/// The rows of the points already in the `--resume` file at `csv`, by
/// point; none if it does not exist yet.
fn resumed(
    csv: &Path,
    line: &SweepLine,
    header: &[String],
) -> Result<BTreeMap<usize, Vec<Vec<String>>>, String> {
    let read: SweepFile = match file::read(csv) {
        Ok(read) => read,
        Err(FileError::Read(inputs::InputError::Io { reason, .. })) if !csv.exists() => {
            crate::report!(
                "note: {}: nothing to resume ({reason}): running every point",
                csv.display()
            );
            return Ok(BTreeMap::new());
        }
        Err(e) => return Err(format!("{e} (cannot resume it)")),
    };
    if read.line != *line {
        return Err(format!(
            "{}:1: not this sweep's file: `{}` against this sweep's `{line}` (the scenario \
             file, NCCL_ALGO or --shard differ); remove it or drop --resume",
            csv.display(),
            read.line
        ));
    }
    if read.table.header != header {
        return Err(format!(
            "{}:2: the header is not this sweep's; remove the file or drop --resume",
            csv.display()
        ));
    }
    let mut rows: BTreeMap<usize, Vec<Vec<String>>> = BTreeMap::new();
    for row in read.table.rows {
        let point = row[0].parse().expect("file::read checked the point");
        rows.entry(point).or_default().push(row);
    }
    Ok(rows)
}

/// `sim sweep --print-point`: one point's scenario file on stdout.
pub fn print_point(path: &Path, point: usize, registry: &Registry) -> io::Result<ExitStatus> {
    match Sweep::load(path, registry).and_then(|s| s.point_toml(point)) {
        Ok(text) => {
            Stdout::new().write_all(text.as_bytes())?;
            Ok(ExitStatus::Success)
        }
        Err(e) => {
            crate::report!("error: {e}");
            Ok(ExitStatus::InvalidInput)
        }
    }
}

/// `sim merge`: joins shard files into `out`; exits with the worst row's
/// status.
pub fn merge(out: &Path, shards: &[PathBuf]) -> io::Result<ExitStatus> {
    let inputs: Vec<Named<'_>> = shards
        .iter()
        .map(|path| Named {
            name: "a shard file",
            path,
        })
        .collect();
    let output = Named {
        name: "the merged CSV",
        path: out,
    };
    if let Err(e) = check_paths(&inputs, &[output]) {
        crate::report!("error: {e}");
        return Ok(ExitStatus::InvalidInput);
    }
    let (table, line) = match merge::merge(shards) {
        Ok(merged) => merged,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let written = OutputFile::create(out, "merged CSV").and_then(|mut file| {
        table.write(&mut file, &line).map_err(|e| file.error(e))?;
        file.commit()
    });
    if let Err(e) = written {
        crate::report!("error: {e}");
        return Ok(ExitStatus::ToolFailed);
    }
    let worst = table.worst();
    if worst != Status::Ok {
        crate::report!(
            "error: {}: some points did not end ok (worst: {worst}); see the status column",
            out.display()
        );
    }
    Ok(ExitStatus::of_sweep(worst))
}
