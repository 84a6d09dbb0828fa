//! The algorithm and parameters a study runs at one size: the scenario's
//! named algorithm, NCCL's choice on a simulated machine, or the research
//! tuner's among the algorithms `NCCL_ALGO` allows.

use algorithms::nccl::NcclAlgorithm;
use algorithms::tuner;
use algorithms::{Algorithm, CostModel, Params};

use crate::scenario::{CollectiveSpec, Scenario};
use crate::tuning::AlgoFilter;

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
