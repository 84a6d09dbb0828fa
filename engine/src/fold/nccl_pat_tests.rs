//! `nccl_pat` folded by a shift of whole nodes (every channel kept)
//! equals the full run with the same symmetric routes: times on every
//! rank, every link counter.

use std::sync::Arc;

use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Registry, Time};
use topologies::presets;

use super::fold;
use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::WorldConfig;
use crate::{Execution, run};

/// GPUs per node: the fold's shift (one node).
pub(super) const PER_NODE: usize = 8;

/// `nodes` DGX H100-style nodes on a fat-tree at `level` (`leaves`
/// leaves, the preset's default spines), routes symmetric under the preset's rotation (a shift of
/// whole nodes), NCCL's plan on `nccl`; and the rotation's shift.
pub(super) fn world(
    nodes: usize,
    leaves: Option<usize>,
    level: ModelLevel,
    nccl: NcclConfig,
) -> (WorldConfig, usize) {
    let params = presets::FatTree {
        nodes,
        leaves,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let rotation = presets::fat_tree_rotation(&params, &topology, &placement).unwrap();
    let shift = rotation.shift();
    let mut t = TopologyConfig::new(topology, placement, level, 7);
    t.rotation = Some(Arc::new(rotation));
    let system = {
        let mut router = t.router.lock().unwrap();
        NcclSystem::build(&t.topology, &t.placement, &mut router, nccl)
    };
    let config = WorldConfig::new(nodes * PER_NODE, NetworkConfig::Topology(t))
        .reduce_bytes_per_s(Some(200e9))
        .nccl(Some(Arc::new(system)));
    (config, shift)
}

/// A phantom `collective` of `count` floats by `nccl_pat` on every channel.
fn pat(config: WorldConfig, collective: Collective, count: usize) -> Execution<Time> {
    nccl(config, "nccl_pat", collective, count)
}

/// A phantom `collective` of `count` floats by the NCCL algorithm `name`
/// on every channel.
pub(super) fn nccl(
    config: WorldConfig,
    name: &str,
    collective: Collective,
    count: usize,
) -> Execution<Time> {
    let algorithm = Registry::builtin().get(collective, name).unwrap();
    run(config, |fabric| {
        let algorithm = algorithm.clone();
        async move {
            let mut buf = Payload::phantom(DType::F32, count);
            let params = Params {
                chunk_bytes: 16 << 10,
                ranks_per_node: PER_NODE,
                ..Params::default()
            };
            algorithm
                .run(&fabric, &mut buf, ReduceOp::Sum, &params)
                .await
                .unwrap();
            fabric.now()
        }
    })
}

fn assert_folds_exactly(
    collective: Collective,
    nodes: usize,
    leaves: Option<usize>,
    level: ModelLevel,
    count: usize,
) {
    assert_nccl_folds_exactly("nccl_pat", collective, nodes, leaves, level, count);
}

/// Runs `collective` by the NCCL algorithm `name` in full and folded by
/// the preset's node shift: every rank's finish, the end, the message
/// count and every link direction's counters must be equal.
pub(super) fn assert_nccl_folds_exactly(
    name: &str,
    collective: Collective,
    nodes: usize,
    leaves: Option<usize>,
    level: ModelLevel,
    count: usize,
) {
    let what = format!(
        "{name} {collective:?}, {count} floats, {nodes} nodes, {leaves:?} leaves, {level:?}"
    );
    let (config, shift) = world(nodes, leaves, level, NcclConfig::default());
    let full = nccl(config, name, collective, count);
    let (mut folded, _) = world(nodes, leaves, level, NcclConfig::default());
    fold(&mut folded, shift).unwrap();
    let folded = nccl(folded, name, collective, count);
    assert!(
        full.deadlock.is_none() && folded.deadlock.is_none(),
        "{what}"
    );
    let n = nodes * PER_NODE;
    assert_eq!(folded.outputs.len(), shift, "{what}");
    for r in 0..n {
        assert_eq!(
            full.outputs[r],
            folded.outputs[r % shift],
            "rank {r}, {what}"
        );
    }
    assert_eq!(full.end_time, folded.end_time, "{what}");
    assert_eq!(
        full.stats.links.messages,
        folded.stats.links.messages * (n / shift) as u64,
        "{what}"
    );
    let full: &[LinkUsage] = full.link_usage.as_deref().unwrap();
    let folded: &[LinkUsage] = folded.link_usage.as_deref().unwrap();
    let mut used = 0;
    for (l, (a, b)) in full.iter().zip(folded).enumerate() {
        assert_eq!(
            (a.bytes, a.units, a.busy_ps, a.max_queue),
            (b.bytes, b.units, b.busy_ps, b.max_queue),
            "link direction {l}, {what}"
        );
        used += usize::from(a.units > 0 && a.bytes > 0);
    }
    assert!(used > 0, "{what}");
}

#[test]
fn nccl_pat_folded_by_a_node_shift_is_the_full_run_in_the_flow_model() {
    // One leaf per rail (a shift by one node); two leaves per rail (a
    // shift by half the nodes, cross-leaf traffic through the spines).
    for (nodes, leaves) in [(4, None), (8, Some(16))] {
        // Every rank's block: 16 channels of 2 chunks of 16 KiB, and of
        // one chunk of 8 KiB.
        for per_channel in [2 * 4096, 2048] {
            let count = nodes * PER_NODE * 16 * per_channel;
            assert_folds_exactly(
                Collective::Allgather,
                nodes,
                leaves,
                ModelLevel::Flow,
                count,
            );
        }
    }
}

#[test]
fn nccl_pat_reduce_scatter_folded_by_a_node_shift_is_the_full_run_in_the_flow_model() {
    // Its reductions tie: 8 channels' messages reach a GPU at one
    // picosecond, handled in an order that follows global flow and rank
    // numbers; served in channel order (the world's `compute` module),
    // every rank of an orbit lives through the same timeline.
    for (nodes, leaves) in [(4, None), (8, Some(16))] {
        for per_channel in [2 * 4096, 2048] {
            let count = nodes * PER_NODE * 16 * per_channel;
            assert_folds_exactly(
                Collective::ReduceScatter,
                nodes,
                leaves,
                ModelLevel::Flow,
                count,
            );
        }
    }
}

#[test]
fn nccl_pat_reduce_scatter_ties_are_served_in_channel_order() {
    // Ranks one node apart finish together in the full run (they did
    // not when a tie was served in the order its messages were handled:
    // ranks 0 and 8 of 4 nodes 0.14% apart), and the reductions' time
    // counts (without it every rank finishes at another time).
    let count = 4 * PER_NODE * 16 * 2 * 4096;
    let (config, _) = world(4, None, ModelLevel::Flow, NcclConfig::default());
    let full = pat(config, Collective::ReduceScatter, count);
    assert!(full.deadlock.is_none());
    for r in PER_NODE..4 * PER_NODE {
        assert_eq!(full.outputs[r], full.outputs[r % PER_NODE], "rank {r}");
    }
    let (config, _) = world(4, None, ModelLevel::Flow, NcclConfig::default());
    let free = pat(
        config.reduce_bytes_per_s(None),
        Collective::ReduceScatter,
        count,
    );
    for r in 0..4 * PER_NODE {
        assert_ne!(free.outputs[r], full.outputs[r], "rank {r}");
    }
}

#[test]
fn nccl_pat_folded_by_a_node_shift_is_the_full_run_in_the_packet_model() {
    let count = 4 * PER_NODE * 16 * 4096;
    for collective in [Collective::Allgather, Collective::ReduceScatter] {
        assert_folds_exactly(collective, 4, None, ModelLevel::Packet, count);
    }
}
