//! Runs a sweep's points on a thread pool, one whole study per point.
//!
//! Every point is validated before any runs. Each point is simulated on
//! one thread from start to end (the engine is single-threaded and
//! deterministic), and the results are collected in point order, so the
//! table is byte-identical whatever the number of threads or the order in
//! which points finish.

use std::ops::ControlFlow;

use rayon::prelude::*;

use super::Sweep;
use super::scaling;
use super::shard::{Shard, ShardLine};
use super::status::{Status, describe};
use super::table::{SCALING_COLUMNS, Table, header};
use crate::report::{CSV_HEADER, csv_record};
use crate::scenario::ScenarioError;
use crate::study::{Options, Progress, Row, run_scenario};
use crate::tuning::AlgoFilter;

/// The stack of each worker thread, as large as a main thread's: a
/// point's study runs there as it would under `sim run`.
const WORKER_STACK_BYTES: usize = 8 << 20;

/// How to run a sweep.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Worker threads (`None`: one per core).
    pub threads: Option<usize>,
    /// Run only this shard's points.
    pub shard: Option<Shard>,
}

/// Why a point did not end `ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointFailure {
    /// The point.
    pub point: usize,
    /// How it ended.
    pub status: Status,
    /// One line saying what happened, with the point's axis values.
    pub message: String,
}

/// What a sweep produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The CSV rows, in point order.
    pub table: Table,
    /// The first line of a shard file (`None` for a whole sweep).
    pub shard_line: Option<ShardLine>,
    /// Each failed point's status and message, in point order.
    pub failures: Vec<PointFailure>,
}

impl Outcome {
    /// The worst ending of a point ([`Status::severity`]), `Ok` when
    /// every point completed right.
    pub fn worst(&self) -> Status {
        self.failures
            .iter()
            .map(|f| f.status)
            .max_by_key(|s| s.severity())
            .unwrap_or(Status::Ok)
    }
}

/// A sweep that could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A point is not a valid scenario.
    #[error(transparent)]
    Invalid(#[from] ScenarioError),
    /// The thread pool could not be built.
    #[error("cannot start the worker threads: {0}")]
    Threads(String),
}

/// The points of `sweep` that `shard` (if any) runs, in point order.
pub fn points_of(sweep: &Sweep, shard: Option<Shard>) -> Vec<usize> {
    (0..sweep.points())
        .filter(|&p| shard.is_none_or(|s| s.has(p)))
        .collect()
}

/// Runs `sweep` (or one shard of it) with `filter` restricting the tuner;
/// `on_point_done` is called (from the worker threads) as each point
/// finishes, for a progress display.
pub fn run(
    sweep: &Sweep,
    filter: &AlgoFilter,
    options: RunOptions,
    on_point_done: &(dyn Fn() + Sync),
) -> Result<Outcome, RunError> {
    let points = points_of(sweep, options.shard);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .stack_size(WORKER_STACK_BYTES)
        .build()
        .map_err(|e| RunError::Threads(e.to_string()))?;
    let results = pool.install(|| {
        if let Some(e) = points
            .par_iter()
            .find_map_first(|&p| sweep.scenario(p).err())
        {
            return Err(RunError::Invalid(e));
        }
        let results: Vec<PointRows> = points
            .par_iter()
            .map(|&p| {
                let rows = run_point(sweep, filter, p);
                on_point_done();
                rows
            })
            .collect();
        Ok(results)
    })?;
    let mut table = Table {
        header: header(sweep.axes()),
        rows: Vec::new(),
    };
    let mut failures = Vec::new();
    for r in results {
        table.rows.extend(r.rows);
        failures.extend(r.failures);
    }
    let shard_line = options.shard.map(|shard| ShardLine {
        fingerprint: sweep.fingerprint(filter),
        points: sweep.points(),
        shard,
    });
    if shard_line.is_none() {
        scaling::fill(&mut table);
    }
    Ok(Outcome {
        table,
        shard_line,
        failures,
    })
}

/// One point's rows and failures.
struct PointRows {
    rows: Vec<Vec<String>>,
    failures: Vec<PointFailure>,
}

/// Runs the study of `point`: a row per collective entry and size, `ok`
/// or `wrong`; if a run fails, a last row for it with its status, and
/// the study of this point stops there (as `sim run` stops).
fn run_point(sweep: &Sweep, filter: &AlgoFilter, point: usize) -> PointRows {
    let values = sweep.describe(point);
    let mut prefix = vec![point.to_string()];
    prefix.extend(sweep.values(point).iter().map(|v| v.to_string()));
    let row_of = |status: Status, run: Vec<String>| -> Vec<String> {
        let mut row = prefix.clone();
        row.push(status.to_string());
        row.extend(run);
        row.extend(SCALING_COLUMNS.iter().map(|_| String::new()));
        row
    };
    let failed_row = |status: Status, collective: &str, size_bytes: u64| {
        let run = CSV_HEADER
            .iter()
            .map(|&c| match c {
                "collective" => collective.to_string(),
                "size_bytes" => size_bytes.to_string(),
                _ => String::new(),
            })
            .collect();
        row_of(status, run)
    };
    let scenario = match sweep.scenario(point) {
        Ok(s) => s,
        Err(e) => {
            // Validated before the run began; kept as a row, not a panic.
            let failure = PointFailure {
                point,
                status: Status::Error,
                message: format!("point {point} ({values}): {e}"),
            };
            return PointRows {
                rows: vec![failed_row(Status::Error, "", 0)],
                failures: vec![failure],
            };
        }
    };
    let mut done: Vec<Row> = Vec::new();
    let result = run_scenario(&scenario, filter, Options::default(), |progress| {
        if let Progress::Row(_, row, _) = progress {
            done.push(row.clone());
        }
        ControlFlow::Continue(())
    });
    let seed = scenario.seed;
    let mut out = PointRows {
        rows: Vec::new(),
        failures: Vec::new(),
    };
    for r in &done {
        let wrong = r.wrong.unwrap_or(0);
        let status = if wrong > 0 { Status::Wrong } else { Status::Ok };
        if wrong > 0 {
            out.failures.push(PointFailure {
                point,
                status,
                message: format!(
                    "point {point} ({values}): {wrong} wrong element(s) in {} at {} bytes (seed {seed})",
                    r.collective, r.size_bytes
                ),
            });
        }
        out.rows.push(row_of(status, csv_record(r).to_vec()));
    }
    if let Err(failed) = result {
        let (at, failure) = *failed;
        let status = Status::of(&failure);
        out.failures.push(PointFailure {
            point,
            status,
            message: format!(
                "point {point} ({values}): {} at {} bytes: {} (seed {seed}; for the full report, `sim run` the file `sim sweep --print-point {point}` prints)",
                at.collective,
                at.size_bytes,
                describe(&failure)
            ),
        });
        out.rows
            .push(failed_row(status, at.collective, at.size_bytes));
    }
    out
}
