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

pub mod extrapolate;
mod inputs;
mod program;

use std::ops::ControlFlow;
use std::rc::Rc;

use algorithms::collective::{self, defined_output};
use algorithms::nccl::NcclAlgorithm;
use algorithms::tuner;
use algorithms::{
    Algorithm, CollectiveError, CostModel, DType, FabricError, Params, Payload, Time,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::deadlock::DeadlockReport;
use crate::executor::run;
use crate::network::timeline::LinkTimeline;
use crate::network::{LinkUsage, NetworkConfig};
use crate::scenario::{CollectiveSpec, Fault, Inject, Scenario};
use crate::trace::TraceLog;
use crate::tuning::AlgoFilter;
use crate::world::{EngineStats, RankFaults, WorldConfig};

pub use program::INJECTED_TAG;

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

/// The per-rank faults of the world for a point with `n` ranks (faults of
/// ranks beyond them do not apply).
fn rank_faults(faults: &[Fault], n: usize) -> RankFaults {
    let mut out = RankFaults::default();
    for f in faults {
        match *f {
            Fault::Crash { rank, at } if rank < n => out.crashes.push((rank, at)),
            Fault::Straggler {
                rank,
                compute_slowdown,
                ..
            } if rank < n && compute_slowdown != 1.0 => {
                out.compute_slowdown.push((rank, compute_slowdown));
            }
            _ => {}
        }
    }
    out
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

/// The cost model of a scenario's links, for the tuner (see
/// [`Scenario::tuner_link`]).
pub fn cost_model(scenario: &Scenario) -> CostModel {
    CostModel {
        latency_ps: scenario.tuner_link.latency_ps,
        bandwidth_bytes_per_s: scenario.tuner_link.bandwidth_bytes_per_s,
        reduce_bytes_per_s: scenario.reduce_bytes_per_s,
    }
}

/// Whether NVLS reduces `op` on `dtype` in the switch
/// (`ncclNvlsSupported`, `src/include/device.h:565-581` @b91894bd: sum,
/// min and max on 32- and 64-bit integers, sum only on floats; the
/// simulator has no 16-bit floats).
fn nvls_reduces(op: algorithms::ReduceOp, dtype: algorithms::DType) -> bool {
    use algorithms::{DType, ReduceOp};
    matches!(
        (op, dtype),
        (
            ReduceOp::Sum,
            DType::F32 | DType::F64 | DType::I32 | DType::I64
        ) | (ReduceOp::Min | ReduceOp::Max, DType::I32 | DType::I64)
    )
}

/// What [`select`] decided for one size.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its parameters (the tag is set per call).
    pub params: Params,
    /// Whether a tuner chose it.
    pub tuned: bool,
    /// For an NCCL algorithm on a topology: NCCL's choice (the protocol
    /// and channels are in `params` too), and its predicted time.
    pub nccl: Option<crate::nccl::Choice>,
}

/// The algorithm and parameters for one size: the scenario's choice, or
/// the tuner's: NCCL's (on a topology, see [`crate::nccl`]) or the
/// research tuner's among the algorithms `filter` allows.
pub fn select(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    filter: &AlgoFilter,
    count: usize,
) -> Selection {
    let params = Params {
        chunk_bytes: spec.chunk_bytes,
        slots: spec.slots,
        root: spec.root,
        ranks_per_node: spec.ranks_per_node,
        ..Params::default()
    };
    let system = scenario.nccl_system(spec.world_size);
    // The registry's algorithm that runs NCCL's `name` on NCCL's channels.
    let nccl_named = |name: &str| {
        scenario
            .registry
            .of(spec.kind)
            .find(|a| a.facts().runs_nccl_channels() && a.facts().nccl_algorithm() == Some(name))
            .cloned()
    };
    let nccl_pick = |only: Option<&Algorithm>| {
        let system = system?;
        // NCCL's model times its seven algorithms; it has no time for p2p
        // (`NCCL_NUM_FUNCTIONS` excludes SendRecv, `src/include/nccl_common.h:59`
        // @b91894bd). Anything else named runs with the scenario's parameters.
        let modelled = |a: &Algorithm| {
            NcclAlgorithm::ALL
                .iter()
                .any(|&n| a.facts().nccl_algorithm() == Some(crate::nccl::registry_name(n)))
        };
        if spec.kind == algorithms::Collective::SendRecv || only.is_some_and(|a| !modelled(a)) {
            return None;
        }
        // The named algorithm alone, or the registry's of each kind that
        // the filter allows.
        let candidate = |name: &str| match only {
            Some(a) => (a.facts().nccl_algorithm() == Some(name)).then(|| a.clone()),
            None => nccl_named(name).filter(|a| filter.allows(a)),
        };
        // What the registry can run of each of NCCL's algorithms: NCCL's
        // choice is the fastest among those (its next choice when the
        // fastest cannot run here).
        let runnable: Vec<Option<Algorithm>> = NcclAlgorithm::ALL
            .iter()
            .map(|&a| candidate(crate::nccl::registry_name(a)))
            .collect();
        let mut config = system.communicator();
        for (&a, r) in NcclAlgorithm::ALL.iter().zip(&runnable) {
            config.allowed.restrict(spec.kind, a, r.is_some());
        }
        config.nvls_reduces = nvls_reduces(spec.op, spec.dtype);
        // NCCL skips PAT for a reduce-scatter that scales (an average,
        // `src/enqueue.cc:1917-1918` @b91894bd).
        if spec.kind == algorithms::Collective::ReduceScatter
            && spec.op == algorithms::ReduceOp::Avg
        {
            config
                .allowed
                .restrict(spec.kind, NcclAlgorithm::Pat, false);
        }
        let bytes = count as u64 * spec.dtype.size_bytes() as u64;
        let n = spec.world_size as u64;
        let work = match spec.kind {
            algorithms::Collective::Allgather | algorithms::Collective::ReduceScatter => bytes / n,
            _ => bytes,
        };
        let choice = config.choose(spec.kind, bytes, work, spec.dtype.size_bytes() as u64);
        // A named algorithm NCCL's model cannot run here (NVLS on a version
        // or machine without it) runs as named, with the scenario's
        // parameters, never silently as another algorithm.
        if only.is_some_and(|a| {
            a.facts().nccl_algorithm() != Some(crate::nccl::registry_name(choice.algorithm))
        }) {
            return None;
        }
        // NCCL falls back to its ring when nothing is allowed.
        let algorithm = match choice.algorithm {
            NcclAlgorithm::Ring => runnable[1].clone().or_else(|| nccl_named("ring")),
            a => runnable[crate::nccl::model::a_index(a)].clone(),
        }?;
        let params = Params {
            protocol: choice.protocol,
            channels: choice.channels,
            chunk_bytes: choice.chunk_bytes,
            ..params
        };
        Some(Selection {
            algorithm,
            params,
            tuned: only.is_none(),
            nccl: Some(choice),
        })
    };
    if let Some(algorithm) = &spec.algorithm {
        // A named NCCL algorithm runs with NCCL's protocol, channels, chunk
        // and latencies where NCCL's model can run it (see `nccl_pick`),
        // otherwise as named.
        if algorithm.facts().runs_nccl_channels()
            && let Some(selection) = nccl_pick(Some(algorithm))
        {
            return selection;
        }
        return Selection {
            algorithm: algorithm.clone(),
            params,
            tuned: false,
            nccl: None,
        };
    }
    if scenario.tuner == crate::scenario::TunerModel::Nccl
        && let Some(selection) = nccl_pick(None)
    {
        return selection;
    }
    let every: Vec<Algorithm> = scenario.registry.of(spec.kind).cloned().collect();
    let mut allowed = filter.allowed(every.iter());
    let mut fallback = every;
    if let Some(shift) = scenario.fold {
        // A folded run may only pick what folds (see `crate::fold`).
        let folds = |a: &Algorithm| a.folds_by(shift, &params);
        fallback.retain(folds);
        allowed.retain(folds);
        if allowed.is_empty() {
            allowed.clone_from(&fallback);
        }
    }
    let model = cost_model(scenario);
    let n = spec.world_size;
    let choice = tuner::choose(&allowed, &model, n, count, spec.dtype, &params)
        .or_else(|| tuner::choose(&fallback, &model, n, count, spec.dtype, &params));
    match choice {
        Some(choice) => {
            let params = Params {
                chunk_bytes: choice.chunk_bytes,
                ..params
            };
            Selection {
                algorithm: choice.algorithm,
                params,
                tuned: true,
                nccl: None,
            }
        }
        // No cost fits in virtual time: run the first algorithm, and let
        // the simulation report that time ran out.
        None => {
            let first = fallback
                .first()
                .or_else(|| allowed.first())
                .cloned()
                .expect("validation refused a collective with no algorithm to run");
            Selection {
                algorithm: first,
                params,
                tuned: true,
                nccl: None,
            }
        }
    }
}

/// Runs one collective at one size; returns the row and what the run
/// measured, or the failure and what the run measured until it.
pub fn run_point(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    filter: &AlgoFilter,
    options: Options,
    size_bytes: u64,
    rng: &mut ChaCha8Rng,
) -> Result<(Row, Detail), Box<(Failure, Detail)>> {
    let n = spec.world_size;
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
    let selection = select(scenario, spec, filter, count);
    let model_ps = model_ps(scenario, &selection, spec, count);
    let Selection {
        algorithm,
        params,
        tuned,
        nccl,
    } = selection;
    let system = nccl.and(scenario.nccl_system(n)).cloned();
    // NCCL's base latency before every call, and a multi-GPU process's
    // launch skew (nccl-tests -g); or a calibration's per-call software
    // time.
    let call_ps = scenario
        .calibration
        .as_ref()
        .map_or(0, |c| c.calibration.model.call_overhead_ps());
    let overhead: Rc<[u64]> = match (&system, nccl) {
        (Some(system), Some(choice)) => (0..n)
            .map(|r| {
                system.call_latency_ps(choice.algorithm, choice.protocol) + system.launch_skew_ps(r)
            })
            .collect(),
        _ if call_ps > 0 => (0..n).map(|_| call_ps).collect(),
        _ => Rc::new([]),
    };
    let mut network = scenario.network.clone();
    if let NetworkConfig::Topology(t) = &mut network {
        t.timeline_bin_ps = options.timeline_bin_ps;
    }
    let mut config = WorldConfig::new(n, network)
        .reduce_bytes_per_s(scenario.reduce_bytes_per_s_of(spec.dtype))
        .traced(options.trace)
        .call_timeout_ps(scenario.call_timeout_ps)
        .faults(rank_faults(&scenario.faults, n))
        .nccl(system);
    if let Some(action) = &scenario.fold_turn {
        // Validation made sure the run folds by the node turn: NCCL's
        // channels turn with the GPUs, every size splits evenly.
        if let Err(e) = crate::fold::fold_by(&mut config, action.clone()) {
            unreachable!("validation checked the scenario folds: {e}");
        }
    } else if let Some(shift) = scenario.fold {
        // Validation made sure the run can fold: all ranks, no faults.
        if let Err(e) = crate::fold::fold(&mut config, shift) {
            unreachable!("validation checked the scenario folds: {e}");
        }
    }
    let call = program::Call {
        spec,
        algorithm: &algorithm,
        params,
        overhead_ps: &overhead,
    };
    let mut exec = run(config, |fabric| {
        program::rank_program(fabric, call, injects, &scenario.faults, Rc::clone(&inputs))
    });
    if let Some(report) = &mut exec.deadlock {
        report.label_tags(|tag| program::describe_tag(tag, spec, algorithm.name()));
    }
    let detail = Detail {
        algorithm: algorithm.name().to_string(),
        ranks: n,
        stats: exec.stats,
        end_time: exec.end_time,
        link_usage: exec.link_usage,
        trace: exec.trace,
        link_timeline: exec.link_timeline,
    };
    if let Some(&(rank, at)) = exec.crashed.first() {
        let failure = Failure::Crashed {
            rank,
            at,
            stalled: exec.deadlock,
        };
        return Err(Box::new((failure, detail)));
    }
    if let Some((rank, reason)) = exec.refused {
        // A route the topology's partial rotation cannot move: the run
        // stopped at the refusal, which its sender's call returned.
        let failure = Failure::RankError {
            rank,
            error: CollectiveError::Fabric(FabricError::Transport { rank, reason }),
            stalled: None,
        };
        return Err(Box::new((failure, detail)));
    }
    let finished = match outcome(exec.outputs, exec.deadlock, exec.out_of_time) {
        Ok(finished) => finished,
        Err(failure) => return Err(Box::new((*failure, detail))),
    };
    let calls = (spec.warmup + spec.iters) as usize;
    // A call lasts from its common start to the last rank's return.
    let call_ps = |call: usize| {
        let start = finished.iter().map(|(_, (spans, _))| spans[call].0).max();
        let end = finished.iter().map(|(_, (spans, _))| spans[call].1).max();
        end.unwrap_or(Time::ZERO).as_ps() - start.unwrap_or(Time::ZERO).as_ps()
    };
    let timed: u64 = (spec.warmup as usize..calls).map(call_ps).sum();
    let time_ps = timed / u64::from(spec.iters);
    let wrong = (spec.check && !spec.phantom)
        .then(|| count_wrong(spec, &algorithm, &params, &inputs, &finished));
    let size = count as u64 * spec.dtype.size_bytes() as u64;
    let (algbw, busbw) = bandwidths(spec, count, time_ps);
    let row = Row {
        collective: spec.kind.name(),
        algorithm: algorithm.name().to_string(),
        tuned,
        chunk_bytes: params.chunk_bytes,
        ranks: n,
        size_bytes: size,
        count,
        dtype: spec.dtype.name(),
        redop: if spec.kind.reduces() {
            spec.op.name()
        } else {
            "none"
        },
        root: spec.kind.has_root().then_some(spec.root),
        time_ps,
        algbw_gb_per_s: algbw,
        busbw_gb_per_s: busbw,
        wrong,
        model_ps,
        nccl: nccl.map(|choice| NcclRun {
            protocol: choice.protocol,
            channels: choice.channels,
            heads: choice.heads,
            algorithm: choice.algorithm,
        }),
        extrapolated: None,
    };
    Ok((row, detail))
}

/// [`run_point`] with a failure located at its point (the collective and
/// `size_bytes`).
fn run_located(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    filter: &AlgoFilter,
    options: Options,
    size_bytes: u64,
    rng: &mut ChaCha8Rng,
) -> Result<(Row, Detail), extrapolate::PointFailure> {
    run_point(scenario, spec, filter, options, size_bytes, rng).map_err(|failed| {
        let (failure, detail) = *failed;
        let point = Point {
            collective: spec.kind.name(),
            size_bytes,
        };
        Box::new((point, failure, detail))
    })
}

/// Algorithm and bus bandwidth, GB/s, of `count` elements of `spec` in
/// `time_ps` per call.
fn bandwidths(spec: &CollectiveSpec, count: usize, time_ps: u64) -> (f64, f64) {
    let size = count as u64 * spec.dtype.size_bytes() as u64;
    let algbw = if time_ps == 0 {
        0.0
    } else {
        size as f64 / (time_ps as f64 / 1e12) / 1e9
    };
    (algbw, algbw * spec.kind.busbw_factor(spec.world_size))
}

/// The row's model time: NCCL's predicted time for an NCCL choice, else
/// the algorithm's closed form on the tuner's link.
fn model_ps(
    scenario: &Scenario,
    selection: &Selection,
    spec: &CollectiveSpec,
    count: usize,
) -> Option<u64> {
    match selection.nccl {
        Some(choice) => Some((choice.predicted_us * 1e6).round() as u64),
        None => selection.algorithm.cost_ps(
            &cost_model(scenario),
            spec.world_size,
            count,
            spec.dtype,
            &selection.params,
        ),
    }
}

/// What the ranks that finished returned: `(rank, (call spans, buffer))`.
type Finished = Vec<(usize, (Vec<(Time, Time)>, Payload))>;

/// Sorts a run's outputs into the ranks' results or the failure that
/// explains them. A rank's error is the root cause of whatever its peers
/// then wait for, so it is reported before a deadlock.
fn outcome(
    outputs: Vec<Option<program::RankOutput>>,
    deadlock: Option<DeadlockReport>,
    out_of_time: bool,
) -> Result<Finished, Box<Failure>> {
    let mut finished = Vec::with_capacity(outputs.len());
    for (rank, out) in outputs.into_iter().enumerate() {
        match out {
            Some(Ok(Some(done))) => finished.push((rank, done)),
            Some(Ok(None)) | None => {} // skipped the collectives, or blocked
            Some(Err(CollectiveError::Fabric(error @ FabricError::Timeout { .. }))) => {
                return Err(Box::new(Failure::TransportTimeout {
                    rank,
                    error,
                    stalled: deadlock,
                }));
            }
            Some(Err(error)) => {
                return Err(Box::new(Failure::RankError {
                    rank,
                    error,
                    stalled: deadlock,
                }));
            }
        }
    }
    if out_of_time {
        return Err(Box::new(Failure::OutOfTime));
    }
    match deadlock {
        Some(report) if report.timeout.is_some() => Err(Box::new(Failure::WatchdogTimeout(report))),
        Some(report) => Err(Box::new(Failure::Deadlock(report))),
        None => Ok(finished),
    }
}

/// Elements in the defined outputs of the ranks that finished that differ
/// bit for bit from the exact reference (the inputs make every reduction
/// order give the same bits; the per-algorithm orders are the tests' job;
/// symbolic inputs are checked against `algorithm`'s own reference, the
/// exact tree it documents). A rank that skipped the collectives
/// holds no result: its whole defined output counts as wrong; so does
/// everything when ranks worked on different counts, since no correct
/// result exists then.
fn count_wrong(
    spec: &CollectiveSpec,
    algorithm: &Algorithm,
    params: &Params,
    inputs: &[Payload],
    finished: &Finished,
) -> u64 {
    let n = inputs.len();
    let count = inputs[0].len();
    let defined = |r| defined_output(spec.kind, r, n, count, params.root);
    if inputs.iter().any(|p| p.len() != count) {
        return inputs.iter().map(|p| p.len() as u64).sum();
    }
    let exact = || collective::exact_reference(spec.kind, inputs, spec.op, params.root);
    let expected = if spec.dtype == DType::Sym {
        algorithm.reference(inputs, spec.op, params).or_else(exact)
    } else {
        exact()
    }
    .expect("the root was validated against the world size");
    let mut wrong = (0..n).map(|r| defined(r).len()).sum::<usize>();
    for (r, (_, buf)) in finished {
        let range = defined(*r);
        let right = range.len()
            - buf
                .extract(range.clone())
                .count_wrong(&expected[*r].extract(range));
        wrong -= right;
    }
    wrong as u64
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use algorithms::{ReduceOp, Registry};

    use super::*;

    /// A scenario of every reducing pair on 5 ranks, its element type
    /// switched to symbols (which no scenario file can ask for).
    fn symbolic(op: ReduceOp, inject: &str) -> Scenario {
        let mut text = "world_size = 5\nseed = 9\n[links]\nlatency_us = 1.0\n\
                        bandwidth_gb_per_s = 25.0\n"
            .to_string();
        // Symbols are checked against each algorithm's own tree; the NCCL
        // algorithms' trees depend on the channel plan and have none.
        for e in Registry::builtin()
            .iter()
            .filter(|e| e.collective().reduces() && !e.facts().runs_nccl_channels())
        {
            text += &format!(
                "[[collective]]\nkind = \"{}\"\nalgorithm = \"{}\"\nmin_bytes = 4\n\
                 max_bytes = 256\nstep_factor = 8\nchunk_bytes = 16\nranks_per_node = 2\n\
                 root = 3\nop = \"{op}\"\ndtype = \"float\"\niters = 1\nwarmup = 1\n",
                e.collective(),
                e.name()
            );
        }
        text += inject;
        let mut scenario = Scenario::parse(Path::new("symbolic.toml"), &text, &Registry::builtin())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        for spec in &mut scenario.collectives {
            spec.dtype = DType::Sym;
        }
        scenario
    }

    fn rows(scenario: &Scenario) -> Vec<Row> {
        run_scenario(scenario, &AlgoFilter::default(), Options::default(), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("{:?}", e.1))
    }

    #[test]
    fn symbolic_inputs_are_checked_against_each_algorithms_own_tree() {
        for op in [ReduceOp::Min, ReduceOp::Avg] {
            let rows = rows(&symbolic(op, ""));
            assert_eq!(rows.len(), 10 * 3, "10 reducing pairs, sizes 4, 32, 256");
            for row in &rows {
                assert_eq!(row.dtype, "sym");
                assert_eq!(row.wrong, Some(0), "{row:?}");
            }
        }
        let corrupt = "[[inject]]\nkind = \"corrupt_result\"\nrank = 3\n";
        let rows = rows(&symbolic(ReduceOp::Sum, corrupt));
        for row in &rows {
            // Rank 3 adds a leaf to its element 0: part of its output for
            // allreduce and for reduce (rank 3 is the root), not for
            // reduce-scatter (its block is elsewhere).
            let want = u64::from(row.collective != "reduce_scatter");
            assert_eq!(row.wrong, Some(want), "{row:?}");
        }
    }
}
