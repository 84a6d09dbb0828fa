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

use std::rc::Rc;

use algorithms::reference::rank_order_reference;
use algorithms::{
    CollectiveError, Fabric, Payload, RingAllreduce, Shape, Tag, Time, ring_allreduce,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::deadlock::DeadlockReport;
use crate::executor::run;
use crate::fabric::SimFabric;
use crate::scenario::{CollectiveSpec, Inject, Scenario};
use crate::world::{EngineStats, WorldConfig};

/// The tag of receives injected by [`Inject::ExtraRecv`]; no collective
/// uses it.
pub const INJECTED_TAG: Tag = Tag(u64::MAX);

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
    /// A rank's collective returned an error.
    RankError {
        /// The rank.
        rank: usize,
        /// What it returned.
        error: CollectiveError,
    },
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
/// each row is ready. Stops at the first failure.
pub fn run_scenario(
    scenario: &Scenario,
    mut on_row: impl FnMut(&Row),
) -> Result<Vec<Row>, (Point, Failure)> {
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
                .map_err(|f| (point, f))?
                .0;
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// What one rank's program returns: when each call ended and its final
/// buffer, or `None` if the rank skipped the collectives.
type RankOutput = Result<Option<(Vec<Time>, Payload)>, CollectiveError>;

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
    let inputs: Rc<Vec<Payload>> = Rc::new(if spec.phantom {
        vec![Payload::phantom(spec.dtype, count); n]
    } else {
        (0..n)
            .map(|_| inputs::draw(rng, spec.dtype, spec.op, count))
            .collect()
    });
    let config = WorldConfig {
        world_size: n,
        link: scenario.topology.link,
        reduce_bytes_per_s: scenario.reduce_bytes_per_s,
    };
    let calls = spec.warmup + spec.iters;
    let injects = &scenario.injects;
    let exec = run(config, |fabric: SimFabric| {
        let inputs = Rc::clone(&inputs);
        async move {
            let me = fabric.rank();
            for inject in injects {
                match *inject {
                    Inject::Skip { rank } if rank == me => return Ok(None),
                    Inject::ExtraRecv { rank, from } if rank == me => {
                        fabric
                            .recv(from, INJECTED_TAG, Shape::new(spec.dtype, 0))
                            .await?;
                    }
                    _ => {}
                }
            }
            let mut ends = Vec::with_capacity(calls as usize);
            // One buffer, refilled from the input before every call: the
            // copy costs wall time only, not virtual time.
            let mut buf = inputs[me].clone();
            for call in 0..calls {
                if call > 0 {
                    let whole = 0..buf.len();
                    buf.copy_from(whole, &inputs[me])?;
                }
                let params = RingAllreduce {
                    chunk_bytes: spec.chunk_bytes,
                    slots: spec.slots,
                    tag: Tag(u64::from(call)),
                };
                ring_allreduce(&fabric, &mut buf, spec.op, params).await?;
                ends.push(fabric.now());
            }
            RankOutput::Ok(Some((ends, buf)))
        }
    });
    if let Some(report) = exec.deadlock {
        return Err(Failure::Deadlock(report));
    }
    let mut finished = Vec::with_capacity(n);
    for (rank, out) in exec.outputs.into_iter().enumerate() {
        match out.expect("no deadlock, so every rank finished") {
            Ok(Some(done)) => finished.push(done),
            Ok(None) => {} // a skipping rank that did not block anyone
            Err(error) => return Err(Failure::RankError { rank, error }),
        }
    }
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
    let end = latest(calls as usize - 1);
    let time_ps = (end.as_ps() - start.as_ps()) / u64::from(spec.iters);
    let wrong = (spec.check && !spec.phantom).then(|| {
        let expected = rank_order_reference(&inputs, spec.op);
        let wrong: usize = finished
            .iter()
            .map(|(_, buf)| buf.count_wrong(&expected))
            .sum();
        // A rank that skipped the collective holds no result at all.
        (wrong + (n - finished.len()) * count) as u64
    });
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
