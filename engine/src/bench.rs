//! The engine benchmark behind `sim bench-engine`: a phantom ring
//! allreduce, timed in wall-clock time, reporting simulated events per
//! second. This is the only module that reads a wall clock; nothing it
//! measures reaches a simulation result.

use std::time::Instant;

use algorithms::allreduce::ring::messages as ring_messages;
use algorithms::layout::block_range;
use algorithms::{Algorithm, Collective, DType, Params, Payload, ReduceOp, catalogue_algorithm};
use std::sync::Arc;

use topologies::{LinkSpec, presets};

use crate::executor::run;
use crate::network::{ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::{EngineStats, WorldConfig};

/// What one benchmark repetition measured.
#[derive(Clone, Copy, Debug)]
pub struct BenchResult {
    /// Wall-clock seconds for the whole simulation.
    pub wall_s: f64,
    /// Virtual time at which the allreduce completed, in picoseconds.
    pub simulated_ps: u64,
    /// Engine counters.
    pub stats: EngineStats,
}

/// Which network the benchmark simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchNetwork {
    /// Ideal per-pair links (1 us latency, 100 GB/s).
    Ideal,
    /// The fat-tree preset (DGX H100 nodes, IB NDR), packet-level model.
    Packet,
    /// The fat-tree preset (DGX H100 nodes, IB NDR), flow-level model.
    Flow,
}

/// Which allreduce the benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchAlgorithm {
    /// The flat ring over all ranks in order.
    Ring,
    /// Reduce-scatter inside each node of 8 ranks, a ring per rail across
    /// nodes, then allgather inside each node.
    Hierarchical,
}

impl BenchAlgorithm {
    /// The catalogue's algorithm.
    pub fn algorithm(self) -> Algorithm {
        match self {
            BenchAlgorithm::Ring => catalogue_algorithm(Collective::Allreduce, "ring"),
            BenchAlgorithm::Hierarchical => {
                catalogue_algorithm(Collective::Allreduce, "hierarchical")
            }
        }
    }
}

/// Ranks per node of the benchmark's fat-tree (and of its hierarchical
/// allreduce).
pub const BENCH_RANKS_PER_NODE: usize = 8;

/// Messages one allreduce of `bytes` (float elements) in chunks of
/// `chunk_bytes` sends over all `ranks` ranks, for the benchmark's cap.
/// The ring sends `N·2(N-1)·K` (`K` chunks per segment). The hierarchical
/// allreduce with `L = min(8, N)` ranks per node and `M = N/L` nodes
/// sends `(L-1)` messages per rank in each of its in-node reduce-scatter
/// and allgather, plus one ring allreduce of in-node block `l` over `M`
/// ranks for each local rank `l`; when `L` does not divide `N` it falls
/// back to the ring.
pub fn allreduce_messages(
    algorithm: BenchAlgorithm,
    ranks: usize,
    bytes: u64,
    chunk_bytes: u64,
) -> u64 {
    let count = usize::try_from(bytes / 4).unwrap_or(usize::MAX);
    let ring = |count: usize, n: usize| ring_messages(count, n, 4, chunk_bytes);
    let local = BENCH_RANKS_PER_NODE.clamp(1, ranks.max(1));
    if algorithm == BenchAlgorithm::Ring || ranks <= 1 || !ranks.is_multiple_of(local) {
        return ring(count, ranks);
    }
    let nodes = ranks / local;
    let in_node = 2 * (ranks as u64) * (local as u64 - 1);
    (0..local)
        .map(|l| ring(block_range(count, local, l).len(), nodes))
        .fold(in_node, u64::saturating_add)
}

/// How the benchmark uses the fat-tree's symmetry (its rotation by one
/// node, see [`crate::fold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchSymmetry {
    /// Every rank simulated, ECMP hashing each flow on its own.
    None,
    /// Every rank simulated, with symmetric routes (the rotated copies of
    /// a flow take the rotated path): the full run a folded one matches.
    Routes,
    /// Symmetric routes, and only the first node's ranks simulated.
    Fold,
}

/// The network of `ranks` ranks: ideal links, or the default fat-tree
/// preset with `ceil(ranks / 8)` nodes, ranks placed in order, with the
/// rotation by one node when `symmetry` asks for it (an error when the
/// ranks do not fill whole nodes or the tree has no such rotation).
pub fn bench_network(
    network: BenchNetwork,
    ranks: usize,
    symmetry: BenchSymmetry,
) -> Result<NetworkConfig, String> {
    let level = match network {
        BenchNetwork::Ideal => {
            return Ok(NetworkConfig::Ideal(
                LinkSpec::new(1_000_000, 100e9).expect("constant link parameters are valid"),
            ));
        }
        BenchNetwork::Packet => ModelLevel::Packet,
        BenchNetwork::Flow => ModelLevel::Flow,
    };
    let params = presets::FatTree {
        nodes: ranks.div_ceil(8),
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).expect("the default fat-tree builds"));
    let placement: Arc<[_]> = topology.endpoints()[..ranks].into();
    let rotation = match symmetry {
        BenchSymmetry::None => None,
        BenchSymmetry::Routes | BenchSymmetry::Fold => Some(Arc::new(
            presets::fat_tree_rotation(&params, &topology, &placement)
                .map_err(|e| e.to_string())?,
        )),
    };
    let mut config = TopologyConfig::new(topology, placement, level, 1);
    config.rotation = rotation;
    Ok(NetworkConfig::Topology(config))
}

/// Simulates one phantom float-sum allreduce (`algorithm`) of `bytes` on
/// `ranks` ranks of `network` and times it; `fold` simulates only the
/// first node's ranks (see [`crate::fold`]). An error says why the run
/// cannot fold, or which rank failed (a folded collective that is not
/// symmetric) or that it deadlocked.
pub fn allreduce_phantom(
    network: NetworkConfig,
    algorithm: BenchAlgorithm,
    ranks: usize,
    bytes: u64,
    chunk_bytes: u64,
    fold: bool,
) -> Result<BenchResult, String> {
    let mut config = WorldConfig::new(ranks, network);
    if fold {
        crate::fold::fold(&mut config, BENCH_RANKS_PER_NODE.min(ranks))
            .map_err(|e| e.to_string())?;
    }
    let count = usize::try_from(bytes / 4).expect("sizes fit in memory");
    #[allow(clippy::disallowed_methods)] // benchmark wall time, never simulation output
    let started = Instant::now();
    let algorithm = &algorithm.algorithm();
    let exec = run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, count);
        let params = Params {
            chunk_bytes,
            ranks_per_node: BENCH_RANKS_PER_NODE,
            ..Params::default()
        };
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, &params)
            .await
    });
    let wall_s = started.elapsed().as_secs_f64();
    if let Some(d) = &exec.deadlock {
        return Err(format!("the allreduce deadlocked at {}", d.time));
    }
    for (rank, out) in exec.outputs.iter().enumerate() {
        match out {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(format!("rank {rank}: {e}")),
            None => return Err(format!("rank {rank} did not finish")),
        }
    }
    Ok(BenchResult {
        wall_s,
        simulated_ps: exec.end_time.as_ps(),
        stats: exec.stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_counts_follow_each_algorithm() {
        let mib64 = 64 << 20;
        // Ring: 2N(N-1) messages of one chunk each at 16384 ranks (a
        // segment of 4 KiB is under the 512 KiB chunk).
        assert_eq!(
            allreduce_messages(BenchAlgorithm::Ring, 16384, mib64, 512 << 10),
            16384 * 2 * 16383
        );
        // Hierarchical: 2 * 16384 * 7 in the nodes, then 8 rings of 2048.
        assert_eq!(
            allreduce_messages(BenchAlgorithm::Hierarchical, 16384, mib64, 512 << 10),
            2 * 16384 * 7 + 8 * 2048 * 2 * 2047
        );
        // Smaller chunks multiply the ring's messages: 64 KiB segments of
        // the cross-node rings at 1024 ranks in 4 KiB chunks are 16 each.
        assert_eq!(
            allreduce_messages(BenchAlgorithm::Hierarchical, 1024, mib64, 4096),
            2 * 1024 * 7 + 8 * 128 * 2 * 127 * 16
        );
        // A single node has no cross-node messages; no rank sends nothing.
        assert_eq!(
            allreduce_messages(BenchAlgorithm::Hierarchical, 8, mib64, 512 << 10),
            2 * 8 * 7
        );
        assert_eq!(
            allreduce_messages(BenchAlgorithm::Ring, 1, mib64, 512 << 10),
            0
        );
    }
}
