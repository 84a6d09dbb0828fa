//! One point of a study: a fresh world for one collective at one size,
//! every rank's calls run on it, and the row measured from their spans
//! (time per call, bandwidths, model time), or the failure that ended it.

use std::rc::Rc;

use algorithms::{CollectiveError, FabricError, Payload, Time};
use rand_chacha::ChaCha8Rng;

use super::check::{count_wrong, outcome};
use super::selection::{Selection, cost_model, select};
use super::{Detail, Failure, NcclRun, Options, Point, Row, extrapolate, inputs, program};
use crate::executor::run;
use crate::network::NetworkConfig;
use crate::scenario::{CollectiveSpec, Fault, Inject, Scenario};
use crate::tuning::AlgoFilter;
use crate::world::{RankFaults, WorldConfig};

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
pub(super) fn run_located(
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
pub(super) fn bandwidths(spec: &CollectiveSpec, count: usize, time_ps: u64) -> (f64, f64) {
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
pub(super) fn model_ps(
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
