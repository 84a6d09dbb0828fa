//! Runs a scenario's collectives over their size ranges, like nccl-tests
//! does on real hardware, and checks the results.
//!
//! For each collective and each size a fresh simulated world is built. Every
//! rank runs `warmup + iters` back-to-back calls of the collective (each on
//! a fresh copy of its input, with its own tag), and records the virtual
//! time at which each call returned. The reported time per call is
//! `(max over ranks of the last end - max over ranks of the end of the
//! warm-up) / iters`. The last call's buffers are checked against a
//! sequential reference; `#wrong` counts differing elements over all ranks.

mod inputs;
mod program;

use std::ops::ControlFlow;
use std::rc::Rc;

use algorithms::reference::rank_order_reference;
use algorithms::{CollectiveError, Payload, ReduceOp, Time};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::deadlock::DeadlockReport;
use crate::executor::run;
use crate::scenario::{CollectiveSpec, Inject, Scenario};
use crate::world::{EngineStats, WorldConfig};

pub use program::INJECTED_TAG;

/// One line of the results table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Collective name.
    pub collective: &'static str,
    /// Algorithm name.
    pub algorithm: &'static str,
    /// Message size in bytes.
    pub size_bytes: u64,
    /// Elements per rank.
    pub count: usize,
    /// Element type name.
    pub dtype: &'static str,
    /// Reduction name.
    pub redop: &'static str,
    /// Virtual time per call.
    pub time_ps: u64,
    /// Algorithm bandwidth, GB/s.
    pub algbw_gb_per_s: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gb_per_s: f64,
    /// Wrong elements summed over ranks; `None` when not checked.
    pub wrong: Option<u64>,
}

/// Why a point of a study did not produce a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Nothing was left to happen but some ranks had not finished.
    Deadlock(DeadlockReport),
    /// A rank's collective returned an error (the lowest such rank).
    RankError {
        /// The rank.
        rank: usize,
        /// What it returned.
        error: CollectiveError,
        /// What the other ranks were left waiting for, if any were.
        stalled: Option<DeadlockReport>,
    },
    /// Virtual time passed its end (2^64 ps, about 213 days): the link or
    /// compute parameters are unrealistic for the sizes asked for.
    OutOfTime,
}

/// The identity of one point of a study, for error messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Collective name.
    pub collective: &'static str,
    /// Message size in bytes.
    pub size_bytes: u64,
}

/// Runs every collective of `scenario` at every size, calling `on_row` as
/// each row is ready; `on_row` may stop the study early by returning
/// `ControlFlow::Break`. Stops at the first failure.
pub fn run_scenario(
    scenario: &Scenario,
    mut on_row: impl FnMut(&Row) -> ControlFlow<()>,
) -> Result<Vec<Row>, Box<(Point, Failure)>> {
    let mut rows = Vec::new();
    for (ci, spec) in scenario.collectives.iter().enumerate() {
        for (si, size) in spec.sizes().into_iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(scenario.seed);
            rng.set_stream(((ci as u64) << 32) | si as u64);
            let point = Point {
                collective: spec.kind.name(),
                size_bytes: size,
            };
            let row = run_point(scenario, spec, size, &mut rng)
                .map_err(|f| Box::new((point, f)))?
                .0;
            let flow = on_row(&row);
            rows.push(row);
            if flow.is_break() {
                return Ok(rows);
            }
        }
    }
    Ok(rows)
}

/// Runs one collective at one size; returns the row and the engine counters.
pub fn run_point(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    size_bytes: u64,
    rng: &mut ChaCha8Rng,
) -> Result<(Row, EngineStats), Failure> {
    let n = scenario.topology.world_size;
    let count =
        usize::try_from(size_bytes / spec.dtype.size_bytes() as u64).expect("sizes fit in memory");
    let injects = &scenario.injects;
    // A rank with a count mismatch works on one element more than the rest.
    let count_of = |rank: usize| {
        let wrong_size = injects.contains(&Inject::CountMismatch { rank });
        count + usize::from(wrong_size)
    };
    let inputs: Rc<Vec<Payload>> = Rc::new(if spec.phantom {
        (0..n)
            .map(|r| Payload::phantom(spec.dtype, count_of(r)))
            .collect()
    } else {
        (0..n)
            .map(|r| inputs::draw(rng, spec.dtype, spec.op, count_of(r)))
            .collect()
    });
    let config = WorldConfig {
        world_size: n,
        link: scenario.topology.link,
        reduce_bytes_per_s: scenario.reduce_bytes_per_s,
    };
    let exec = run(config, |fabric| {
        program::rank_program(fabric, spec, injects, Rc::clone(&inputs))
    });
    let mut finished = Vec::with_capacity(n);
    let mut first_error = None;
    for (rank, out) in exec.outputs.into_iter().enumerate() {
        match out {
            Some(Ok(Some(done))) => finished.push(done),
            Some(Ok(None)) | None => {} // skipped the collectives, or blocked
            Some(Err(error)) => {
                first_error.get_or_insert(Failure::RankError {
                    rank,
                    error,
                    stalled: None,
                });
            }
        }
    }
    // A rank's error is the root cause of whatever its peers then wait for.
    if let Some(Failure::RankError { rank, error, .. }) = first_error {
        return Err(Failure::RankError {
            rank,
            error,
            stalled: exec.deadlock,
        });
    }
    if exec.out_of_time {
        return Err(Failure::OutOfTime);
    }
    if let Some(report) = exec.deadlock {
        return Err(Failure::Deadlock(report));
    }
    let calls = (spec.warmup + spec.iters) as usize;
    let latest = |call: usize| {
        finished
            .iter()
            .map(|(ends, _)| ends[call])
            .max()
            .unwrap_or(Time::ZERO)
    };
    let start = if spec.warmup == 0 {
        Time::ZERO
    } else {
        latest(spec.warmup as usize - 1)
    };
    let end = latest(calls - 1);
    let time_ps = (end.as_ps() - start.as_ps()) / u64::from(spec.iters);
    let wrong = (spec.check && !spec.phantom).then(|| count_wrong(&inputs, &finished, spec.op));
    let size = count as u64 * spec.dtype.size_bytes() as u64;
    let algbw = if time_ps == 0 {
        0.0
    } else {
        size as f64 / (time_ps as f64 / 1e12) / 1e9
    };
    let row = Row {
        collective: spec.kind.name(),
        algorithm: spec.algorithm.name(),
        size_bytes: size,
        count,
        dtype: spec.dtype.name(),
        redop: spec.op.name(),
        time_ps,
        algbw_gb_per_s: algbw,
        busbw_gb_per_s: algbw * spec.kind.busbw_factor(n),
        wrong,
    };
    Ok((row, exec.stats))
}

/// Elements, over all ranks that finished, that differ bit for bit from the
/// rank-order reference. Ranks that skipped the collectives hold no result:
/// all their elements count as wrong; so do all elements when ranks worked
/// on different counts, since no correct result exists then.
fn count_wrong(inputs: &[Payload], finished: &[(Vec<Time>, Payload)], op: ReduceOp) -> u64 {
    let n = inputs.len();
    let count = inputs[0].len();
    if inputs.iter().any(|p| p.len() != count) {
        return inputs.iter().map(|p| p.len() as u64).sum();
    }
    let expected = rank_order_reference(inputs, op);
    let wrong: usize = finished
        .iter()
        .map(|(_, buf)| buf.count_wrong(&expected))
        .sum();
    (wrong + (n - finished.len()) * count) as u64
}
