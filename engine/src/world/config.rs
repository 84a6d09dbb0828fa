//! What a run simulates ([`WorldConfig`]): the ranks, their network, the
//! cost of local work, faults, folding and the NCCL model.

use std::sync::Arc;

use algorithms::{Rank, Time};

use crate::fold::RankAction;
use crate::nccl::NcclSystem;
use crate::network::NetworkConfig;

/// What a run simulates: how many ranks, their network and the cost of
/// local work.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Number of ranks.
    pub(crate) world_size: usize,
    /// The network: ideal links or a topology model.
    pub(crate) network: NetworkConfig,
    /// Reduction throughput of one rank in bytes per second; `None` makes
    /// reductions free.
    pub(crate) reduce_bytes_per_s: Option<f64>,
    /// Whether to record a trace (rank spans, link backlogs).
    pub(crate) trace: bool,
    /// The collective watchdog: a call (from the synchronisation that
    /// starts it) not finished on every rank within this many picoseconds
    /// stops the run with a timeout report; `None` waits forever.
    pub(crate) call_timeout_ps: Option<u64>,
    /// Ranks that crash or compute slowly.
    pub(crate) faults: RankFaults,
    /// A folded run (see [`crate::fold`]): only one representative per
    /// orbit of the action runs, standing for its orbit; set by
    /// [`crate::fold::fold_by`], which checks that the run can be folded.
    pub(crate) fold: Option<RankAction>,
    /// The NCCL model: the channel plan ranks see, per-hop latencies and
    /// NIC-pinned channels of framed messages.
    pub(crate) nccl: Option<Arc<NcclSystem>>,
}

impl WorldConfig {
    /// A world of `world_size` ranks on `network`: free reductions, no
    /// trace, no watchdog, no faults, not folded (each settable below).
    pub fn new(world_size: usize, network: NetworkConfig) -> WorldConfig {
        WorldConfig {
            world_size,
            network,
            reduce_bytes_per_s: None,
            trace: false,
            call_timeout_ps: None,
            faults: RankFaults::default(),
            fold: None,
            nccl: None,
        }
    }

    /// Runs NCCL's channels and costs on `nccl` (see [`crate::nccl`]).
    pub fn nccl(mut self, nccl: Option<Arc<NcclSystem>>) -> WorldConfig {
        self.nccl = nccl;
        self
    }

    /// The NCCL model, if the run has one.
    pub fn nccl_system(&self) -> Option<&Arc<NcclSystem>> {
        self.nccl.as_ref()
    }

    /// Reductions at `bytes_per_s` per rank (`None`: free).
    pub fn reduce_bytes_per_s(mut self, bytes_per_s: Option<f64>) -> WorldConfig {
        self.reduce_bytes_per_s = bytes_per_s;
        self
    }

    /// Records a trace of the run.
    pub fn traced(mut self, trace: bool) -> WorldConfig {
        self.trace = trace;
        self
    }

    /// The collective watchdog, in ps (`None`: wait forever).
    pub fn call_timeout_ps(mut self, timeout_ps: Option<u64>) -> WorldConfig {
        self.call_timeout_ps = timeout_ps;
        self
    }

    /// The ranks that crash or compute slowly.
    pub fn faults(mut self, faults: RankFaults) -> WorldConfig {
        self.faults = faults;
        self
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The network.
    pub fn network(&self) -> &NetworkConfig {
        &self.network
    }

    /// The action a folded run folds by (see [`crate::fold`]), if folded.
    pub fn folded_by(&self) -> Option<&RankAction> {
        self.fold.as_ref()
    }

    /// How many ranks the engine runs: all of them, or one per orbit when
    /// folded.
    pub fn simulated_ranks(&self) -> usize {
        self.fold
            .as_ref()
            .map_or(self.world_size, RankAction::orbits)
    }

    /// The rank simulated at `slot` (`0..simulated_ranks()`): the slot
    /// itself, or its orbit's representative when folded.
    pub fn simulated_rank(&self, slot: usize) -> Rank {
        self.fold.as_ref().map_or(slot, |a| a.representative(slot))
    }

    /// The slot of rank `rank`'s orbit: the rank itself, or its orbit when
    /// folded (a simulated rank's own slot).
    pub fn slot_of(&self, rank: Rank) -> usize {
        self.fold.as_ref().map_or(rank, |a| a.position(rank).0)
    }
}

/// Faults of individual ranks: crashes and slow compute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankFaults {
    /// `(rank, time)`: the rank's program stops at that virtual time (its
    /// messages already sent still arrive; it sends nothing more).
    pub crashes: Vec<(Rank, Time)>,
    /// `(rank, factor)`: the rank's reductions take `factor` times longer.
    pub compute_slowdown: Vec<(Rank, f64)>,
}

impl RankFaults {
    /// How many times slower than configured `rank` reduces.
    pub fn slowdown(&self, rank: Rank) -> f64 {
        self.compute_slowdown
            .iter()
            .filter(|(r, _)| *r == rank)
            .map(|(_, f)| *f)
            .product()
    }
}
