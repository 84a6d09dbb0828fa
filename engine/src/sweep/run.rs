//! Runs a sweep's points on a thread pool, one whole study per point.
//!
//! Every point is validated before any runs. Each point is simulated on
//! one thread from start to end (the engine is single-threaded and
//! deterministic). Workers take points in point order, and the finished
//! points are handed over in point order, on the calling thread, as soon
//! as every earlier one is: so a file written from them is the same bytes
//! whatever the number of threads or the order in which points finish, and
//! at any moment holds a prefix of the points. A stop flag (an interrupt)
//! ends the sweep early: no new point starts, a point under way stops at
//! its next row and is not handed over, and neither is any point after it.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use rayon::prelude::*;

use super::Sweep;
use super::scaling;
use super::shard::{Shard, SweepLine};
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

/// Which points a streamed run leaves out, and what stops it early.
#[derive(Clone, Copy, Debug, Default)]
pub struct Control<'a> {
    /// Points not to run (already in the file being completed).
    pub skip: Option<&'a BTreeSet<usize>>,
    /// Set (by a signal handler) to stop the sweep early.
    pub stop: Option<&'a AtomicBool>,
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

/// One finished point: its CSV rows (scaling columns empty) and why it
/// did not end `ok`, if it did not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointRows {
    /// The point.
    pub point: usize,
    /// Its rows, each as long as the header.
    pub rows: Vec<Vec<String>>,
    /// Its failures.
    pub failures: Vec<PointFailure>,
}

/// What a sweep produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The CSV rows, in point order.
    pub table: Table,
    /// The file's first line.
    pub line: SweepLine,
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

/// The `# sweep` line of `sweep` (or of one shard of it) run with
/// `filter`.
pub fn sweep_line(sweep: &Sweep, filter: &AlgoFilter, shard: Option<Shard>) -> SweepLine {
    SweepLine {
        fingerprint: sweep.fingerprint(filter),
        points: sweep.points(),
        shard,
    }
}

/// Runs `sweep` (or one shard of it) with `filter` restricting the tuner
/// and returns the whole table, scaling columns filled for a whole sweep.
pub fn run(sweep: &Sweep, filter: &AlgoFilter, options: RunOptions) -> Result<Outcome, RunError> {
    let mut table = Table {
        header: header(sweep.axes()),
        rows: Vec::new(),
    };
    let mut failures = Vec::new();
    run_streamed(sweep, filter, options, Control::default(), &mut |point| {
        table.rows.extend(point.rows);
        failures.extend(point.failures);
        ControlFlow::Continue(())
    })?;
    if options.shard.is_none() {
        scaling::fill(&mut table);
    }
    Ok(Outcome {
        table,
        line: sweep_line(sweep, filter, options.shard),
        failures,
    })
}

/// Runs the points of `sweep` (or of one shard) that `control` does not
/// skip, handing each finished one to `on_point` on this thread in point
/// order; `on_point` may stop the sweep with `ControlFlow::Break`. Returns
/// whether every point was handed over (`false`: stopped early).
pub fn run_streamed(
    sweep: &Sweep,
    filter: &AlgoFilter,
    options: RunOptions,
    control: Control<'_>,
    on_point: &mut dyn FnMut(PointRows) -> ControlFlow<()>,
) -> Result<bool, RunError> {
    let points: Vec<usize> = points_of(sweep, options.shard)
        .into_iter()
        .filter(|p| control.skip.is_none_or(|s| !s.contains(p)))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .stack_size(WORKER_STACK_BYTES)
        .build()
        .map_err(|e| RunError::Threads(e.to_string()))?;
    if let Some(e) = pool.install(|| {
        points
            .par_iter()
            .find_map_first(|&p| sweep.scenario(p).err())
    }) {
        return Err(RunError::Invalid(e));
    }
    let halt = AtomicBool::new(false);
    let stopped =
        || halt.load(Ordering::SeqCst) || control.stop.is_some_and(|s| s.load(Ordering::SeqCst));
    let next = AtomicUsize::new(0);
    let workers = pool.current_num_threads().min(points.len()).max(1);
    let (tx, rx) = mpsc::channel::<(usize, Option<PointRows>)>();
    let mut handed = 0;
    std::thread::scope(|scope| {
        let (pool, points, next, stopped) = (&pool, &points, &next, &stopped);
        scope.spawn(move || {
            pool.scope(|s| {
                for _ in 0..workers {
                    let tx = tx.clone();
                    s.spawn(move |_| {
                        while !stopped() {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            let Some(&p) = points.get(i) else { break };
                            let rows = run_point(sweep, filter, p, stopped);
                            if tx.send((i, rows)).is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        });
        // Finished points wait here until every earlier one is in.
        let mut waiting: BTreeMap<usize, Option<PointRows>> = BTreeMap::new();
        let mut handing = true;
        for (i, rows) in rx {
            waiting.insert(i, rows);
            while let Some(rows) = waiting.remove(&handed) {
                // A point cut short ends the prefix.
                let go_on = handing && rows.is_some_and(|r| on_point(r).is_continue());
                if !go_on {
                    handing = false;
                    halt.store(true, Ordering::SeqCst);
                    waiting.clear();
                    break;
                }
                handed += 1;
            }
        }
    });
    Ok(handed == points.len())
}

/// Runs the study of `point`: a row per collective entry and size, `ok`
/// or `wrong`; if a run fails, a last row for it with its status, and
/// the study of this point stops there (as `sim run` stops). `None` if
/// `stopped` said to stop before the study ended.
fn run_point(
    sweep: &Sweep,
    filter: &AlgoFilter,
    point: usize,
    stopped: &(dyn Fn() -> bool + Sync),
) -> Option<PointRows> {
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
            return Some(PointRows {
                point,
                rows: vec![failed_row(Status::Error, "", 0)],
                failures: vec![failure],
            });
        }
    };
    let mut done: Vec<Row> = Vec::new();
    let mut cut = false;
    let result = run_scenario(&scenario, filter, Options::default(), |progress| {
        if let Progress::Row(_, row, _) = progress {
            done.push(row.clone());
        }
        if stopped() {
            cut = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if cut {
        return None;
    }
    let seed = scenario.seed;
    let mut out = PointRows {
        point,
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
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use algorithms::Registry;

    use super::*;

    /// Six small points on ideal links.
    fn sweep() -> Sweep {
        let text = "world_size = 2\nseed = 1\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
            [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 64\nphantom = true\n\
            [sweep]\nworld_size = [2, 3, 4]\nseed = [1, 2]\n";
        Sweep::parse(Path::new("s.toml"), text, &Registry::builtin()).unwrap()
    }

    /// The points `run_streamed` hands over, and whether it completed.
    fn handed(control: Control<'_>, stop_after: usize) -> (Vec<usize>, bool) {
        let options = RunOptions {
            threads: Some(3),
            shard: None,
        };
        let mut seen = Vec::new();
        let done = run_streamed(
            &sweep(),
            &AlgoFilter::default(),
            options,
            control,
            &mut |p| {
                seen.push(p.point);
                if seen.len() == stop_after {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .unwrap();
        (seen, done)
    }

    #[test]
    fn points_are_handed_over_in_order_skipping_those_done() {
        assert_eq!(handed(Control::default(), 0), ((0..6).collect(), true));
        let skip = BTreeSet::from([1, 3]);
        let control = Control {
            skip: Some(&skip),
            stop: None,
        };
        assert_eq!(handed(control, 0), (vec![0, 2, 4, 5], true));
        let whole = run(&sweep(), &AlgoFilter::default(), RunOptions::default()).unwrap();
        assert_eq!(whole.table.rows.len(), 6 * 4);
        assert_eq!(whole.line.points, 6);
    }

    #[test]
    fn a_stopped_sweep_hands_over_a_prefix_and_says_it_stopped() {
        assert_eq!(handed(Control::default(), 2), (vec![0, 1], false));
        let stop = AtomicBool::new(true);
        let control = Control {
            skip: None,
            stop: Some(&stop),
        };
        assert_eq!(handed(control, 0), (vec![], false));
    }
}
