//! Runs a scenario's collectives over their size ranges, like nccl-tests
//! does on real hardware, and checks the results.
//!
//! For each collective and each size a fresh simulated world is built. The
//! algorithm is the scenario's, or the tuner's choice for that size (with
//! its chunk size), restricted by `NCCL_ALGO` if set. Every rank runs
//! `warmup + iters` calls (each on a fresh copy of its input, with its own
//! tag), all ranks starting each call together after a zero-cost
//! synchronisation, and records when each call returned. A call's time is
//! from that common start to the last rank's return; the reported time is
//! the mean over the timed calls. The last call's buffers
//! are checked against the algorithm's sequential reference; `#wrong` counts
//! differing elements over all ranks.
//!
//! The pieces: `selection.rs` picks the algorithm and parameters for a
//! size; `point.rs` runs one point and measures its row; `check.rs` sorts a
//! run's outputs into results or a failure and counts wrong elements;
//! `program.rs` is what every rank runs; `inputs.rs` draws the checked
//! inputs; [`extrapolate`] draws sizes above `extrapolate_above`.

mod check;
pub mod extrapolate;
mod inputs;
mod point;
mod program;
mod selection;

use std::ops::ControlFlow;

use algorithms::{CollectiveError, FabricError, Time};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::deadlock::DeadlockReport;
use crate::network::LinkUsage;
use crate::network::timeline::LinkTimeline;
use crate::scenario::Scenario;
use crate::trace::TraceLog;
use crate::tuning::AlgoFilter;
use crate::world::EngineStats;

pub use point::run_point;
use point::{bandwidths, model_ps, run_located};
pub use program::INJECTED_TAG;
pub use selection::{Selection, cost_model, select};

/// One line of the results table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Collective name.
    pub collective: &'static str,
    /// Algorithm name.
    pub algorithm: String,
    /// Whether the tuner chose the algorithm (and chunk size).
    pub tuned: bool,
    /// Pipeline chunk size used.
    pub chunk_bytes: u64,
    /// Number of ranks.
    pub ranks: usize,
    /// Message size in bytes (the collective's full buffer).
    pub size_bytes: u64,
    /// Elements of the full buffer.
    pub count: usize,
    /// Element type name.
    pub dtype: &'static str,
    /// Reduction name (`none` for collectives that do not reduce).
    pub redop: &'static str,
    /// Root of a rooted collective.
    pub root: Option<usize>,
    /// Virtual time per call.
    pub time_ps: u64,
    /// Algorithm bandwidth, GB/s.
    pub algbw_gb_per_s: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gb_per_s: f64,
    /// Wrong elements summed over ranks; `None` when not checked.
    pub wrong: Option<u64>,
    /// The algorithm's closed-form (alpha-beta-gamma) time per call on the
    /// scenario's tuner link, in ps; `None` past the range of its formula.
    /// For an NCCL algorithm, the time NCCL's own tuning model predicts.
    pub model_ps: Option<u64>,
    /// For an NCCL algorithm: the protocol and channels it ran with.
    pub nccl: Option<NcclRun>,
    /// Where the row was drawn on the line through two simulated sizes
    /// instead of simulated (`extrapolate_above`).
    pub extrapolated: Option<Box<extrapolate::Extrapolation>>,
}

/// How an NCCL algorithm ran: what NCCL chose (or the scenario forced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NcclRun {
    /// The protocol (`LL`, `LL128`, `Simple`).
    pub protocol: algorithms::nccl::Protocol,
    /// Channels used.
    pub channels: usize,
    /// Head GPUs per node (NVLS, NVLS tree, CollNet direct; 0 otherwise).
    pub heads: usize,
    /// NCCL's algorithm.
    pub algorithm: algorithms::nccl::NcclAlgorithm,
}

/// Why a point of a study did not produce a row: what the simulated
/// system did instead of completing, one variant per kind of ending.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Nothing was left to happen but some ranks had not finished.
    Deadlock(DeadlockReport),
    /// A collective outlived the scenario's watchdog (`timeout_ms`); the
    /// report says who was still waiting.
    WatchdogTimeout(DeadlockReport),
    /// A rank's transport gave up on a peer (an RDMA retry budget or
    /// TCP's `tcp_retries2` exhausted): the lowest such rank.
    TransportTimeout {
        /// The rank.
        rank: usize,
        /// The transport's error, naming the peer and the link.
        error: FabricError,
        /// What the other ranks were left waiting for, if any were.
        stalled: Option<DeadlockReport>,
    },
    /// A rank's collective returned another error (the lowest such rank).
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
    /// A rank crashed (a scheduled fault) while it still had work to do.
    Crashed {
        /// The rank (the first to crash).
        rank: usize,
        /// When.
        at: Time,
        /// What the other ranks were left waiting for, if they were.
        stalled: Option<DeadlockReport>,
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

/// What a study reports as it goes.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// The scenario's collective entry with this index starts.
    Section(usize),
    /// A point's row is ready, with what the run behind it measured.
    Row(&'a Point, &'a Row, &'a Detail),
    /// A point failed (the study stops after this); what its run measured
    /// up to the failure.
    Failed(&'a Point, &'a Detail),
}

/// What one point's run measured besides its row.
#[derive(Clone, Debug, Default)]
pub struct Detail {
    /// The algorithm that ran.
    pub algorithm: String,
    /// Number of ranks.
    pub ranks: usize,
    /// Engine counters.
    pub stats: EngineStats,
    /// Virtual time at which the run's last event happened.
    pub end_time: Time,
    /// Per-link-direction counters of a topology model.
    pub link_usage: Option<Vec<LinkUsage>>,
    /// The run's trace, when the study records one.
    pub trace: Option<TraceLog>,
    /// Link traffic per time bin, when the study records it.
    pub link_timeline: Option<LinkTimeline>,
}

/// How to run a study.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Record a trace of every run.
    pub trace: bool,
    /// Record each link's traffic per time bin of this many ps (topology
    /// scenarios).
    pub timeline_bin_ps: Option<u64>,
}

/// Runs every collective of `scenario` at every size, telling `on_progress`
/// as each entry starts and each row is ready; it may stop the study early
/// by returning `ControlFlow::Break`. Stops at the first failure.
pub fn run_scenario(
    scenario: &Scenario,
    filter: &AlgoFilter,
    options: Options,
    mut on_progress: impl FnMut(Progress) -> ControlFlow<()>,
) -> Result<Vec<Row>, Box<(Point, Failure)>> {
    let mut rows = Vec::new();
    for (ci, spec) in scenario.collectives.iter().enumerate() {
        if on_progress(Progress::Section(ci)).is_break() {
            return Ok(rows);
        }
        // Simulated runs the entry's extrapolated sizes may be drawn from.
        let mut bases: Vec<extrapolate::Base> = Vec::new();
        let base_sizes = spec.extrapolation_bases();
        for (si, size) in spec.sizes().into_iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(scenario.seed);
            rng.set_stream(((ci as u64) << 32) | si as u64);
            let point = Point {
                collective: spec.kind.name(),
                size_bytes: size,
            };
            let done = if spec.extrapolates(size) {
                let entry = extrapolate::Entry {
                    scenario,
                    spec,
                    index: ci,
                    filter,
                    options,
                };
                extrapolate::point(entry, size, &mut bases, &mut rng)
            } else {
                run_located(scenario, spec, filter, options, size, &mut rng)
            };
            let (row, detail) = match done {
                Ok(done) => done,
                Err(failed) => {
                    let (point, failure, detail) = *failed;
                    let _ = on_progress(Progress::Failed(&point, &detail));
                    return Err(Box::new((point, failure)));
                }
            };
            if row.extrapolated.is_none()
                && base_sizes.is_some_and(|(low, high)| size == low || size == high)
            {
                bases.push(extrapolate::Base::new(&row, &detail));
            }
            let flow = on_progress(Progress::Row(&point, &row, &detail));
            rows.push(row);
            if flow.is_break() {
                return Ok(rows);
            }
        }
    }
    Ok(rows)
}

/// Runs `scenario` without its link faults, quietly: the healthy rows,
/// keyed by collective entry and size (a point that fails there too is
/// simply absent).
pub fn healthy_rows(
    scenario: &Scenario,
    filter: &AlgoFilter,
) -> std::collections::BTreeMap<(usize, u64), Row> {
    let healthy = scenario.without_link_faults();
    let mut rows = std::collections::BTreeMap::new();
    let mut section = 0;
    let _ = run_scenario(&healthy, filter, Options::default(), |progress| {
        match progress {
            Progress::Section(index) => section = index,
            Progress::Row(_, row, _) => {
                rows.insert((section, row.size_bytes), row.clone());
            }
            Progress::Failed(..) => {}
        }
        ControlFlow::Continue(())
    });
    rows
}
