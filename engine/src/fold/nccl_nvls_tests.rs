//! `nccl_nvls_tree` folded by the quarter and the half node turn, its
//! tags turned with the heads, equals the full run with the same
//! symmetric routes: times on every rank, every link counter (NVSwitch
//! legs included); a turn its tags do not follow is refused.

use std::sync::Arc;

use algorithms::nccl::nvls_tree::head_turn;
use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Registry, Time};
use topologies::{Rotation, presets};

use super::{RankAction, fold_by};
use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::WorldConfig;
use crate::{Execution, run};

/// GPUs per node; the turns by half and a quarter of a node.
const PER_NODE: usize = 8;
const HALF: usize = 4;
const QUARTER: usize = 2;
/// Channels of the calls, 16 KiB units (4096 floats), 8 per loop.
const CHANNELS: usize = 4;
const LOOP: usize = PER_NODE * 4096;

/// The default fat-tree of `nodes` DGX H100-style nodes.
fn fat_tree(nodes: usize) -> (presets::FatTree, Arc<topologies::Topology>) {
    let params = presets::FatTree {
        nodes,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    (params, topology)
}

/// The turn of every node's GPUs by `gpus` (exact by half a node, partial
/// by a quarter: the socket links stay).
fn node_turn(nodes: usize, gpus: usize) -> Rotation {
    let (params, topology) = fat_tree(nodes);
    let placement = &topology.endpoints();
    if gpus == HALF {
        presets::fat_tree_node_turn(&params, &topology, placement, gpus).unwrap()
    } else {
        presets::fat_tree_partial_node_turn(&params, &topology, placement, gpus).unwrap()
    }
}

/// `nodes` nodes at `level`, routes symmetric under the turn by `gpus`,
/// NCCL's plan built.
fn world(nodes: usize, level: ModelLevel, gpus: usize) -> WorldConfig {
    let (_, topology) = fat_tree(nodes);
    let placement: Arc<[_]> = topology.endpoints().into();
    let mut t = TopologyConfig::new(topology, placement, level, 7);
    t.rotation = Some(Arc::new(node_turn(nodes, gpus)));
    let system = {
        let mut router = t.router.lock().unwrap();
        NcclSystem::build(
            &t.topology,
            &t.placement,
            &mut router,
            NcclConfig::default(),
        )
    };
    WorldConfig::new(nodes * PER_NODE, NetworkConfig::Topology(t))
        .reduce_bytes_per_s(Some(200e9))
        .nccl(Some(Arc::new(system)))
}

/// The turn of every node's GPUs by `gpus` with NVLS-Tree's heads.
fn turn_by(nodes: usize, gpus: usize) -> RankAction {
    let images: Vec<usize> = (0..nodes * PER_NODE)
        .map(|r| r / PER_NODE * PER_NODE + (r % PER_NODE + gpus) % PER_NODE)
        .collect();
    RankAction::permutation(&images)
        .unwrap()
        .with_tag_turn(head_turn(PER_NODE, gpus, CHANNELS))
        .unwrap()
}

/// A phantom NVLS-Tree allreduce of `count` floats.
fn allreduce(config: WorldConfig, count: usize) -> Execution<Time> {
    let algorithm = Registry::builtin()
        .get(Collective::Allreduce, "nccl_nvls_tree")
        .unwrap();
    run(config, |fabric| {
        let algorithm = algorithm.clone();
        async move {
            let mut buf = Payload::phantom(DType::F32, count);
            let params = Params {
                chunk_bytes: 16 << 10,
                channels: CHANNELS,
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

/// Folded by the turn of `gpus` GPUs, every rank's finish and every link
/// counter are the full run's.
fn assert_folds_exactly(nodes: usize, level: ModelLevel, count: usize, gpus: usize) {
    let full = allreduce(world(nodes, level, gpus), count);
    let mut folded = world(nodes, level, gpus);
    let action = turn_by(nodes, gpus);
    let order = action.order();
    fold_by(&mut folded, action.clone()).unwrap();
    let folded = allreduce(folded, count);
    assert!(full.deadlock.is_none() && folded.deadlock.is_none());
    assert!(full.refused.is_none() && folded.refused.is_none());
    assert_eq!(folded.outputs.len(), nodes * PER_NODE / order);
    for r in 0..nodes * PER_NODE {
        let slot = action.position(r).0;
        assert_eq!(
            full.outputs[r], folded.outputs[slot],
            "rank {r}, {nodes} nodes, turn by {gpus}, {level:?}"
        );
    }
    assert_eq!(full.end_time, folded.end_time);
    assert_eq!(
        full.stats.links.messages,
        folded.stats.links.messages * order as u64
    );
    let topology = fat_tree(nodes).1;
    let full: &[LinkUsage] = full.link_usage.as_deref().unwrap();
    let folded: &[LinkUsage] = folded.link_usage.as_deref().unwrap();
    let mut nvlink = 0;
    for (l, (a, b)) in full.iter().zip(folded).enumerate() {
        assert_eq!(
            (a.bytes, a.units, a.busy_ps, a.max_queue),
            (b.bytes, b.units, b.busy_ps, b.max_queue),
            "link direction {l}, {nodes} nodes, turn by {gpus}, {level:?}"
        );
        let link = topology.link(topologies::LinkId::new(l));
        if matches!(link.kind, topologies::LinkKind::NvLink { .. }) && a.bytes > 0 {
            nvlink += 1;
        }
    }
    // Every GPU's NVLink to and from its NVSwitch carried legs.
    assert_eq!(nvlink, 2 * nodes * PER_NODE);
}

/// Every channel's block: `loops` full loops and a short one of 800
/// floats, 100 per head.
fn count(loops: usize) -> usize {
    CHANNELS * (loops * LOOP + 800)
}

#[test]
fn nvls_tree_folded_by_the_quarter_turn_is_the_full_run_in_the_flow_model() {
    // 11 units per head and channel: more than the 8 in flight.
    for nodes in [2, 3] {
        assert_folds_exactly(nodes, ModelLevel::Flow, count(10), QUARTER);
    }
}

#[test]
fn nvls_tree_folded_by_the_half_turn_is_the_full_run_in_the_flow_model() {
    assert_folds_exactly(3, ModelLevel::Flow, count(10), HALF);
}

#[test]
fn a_turn_its_tags_do_not_follow_is_refused_naming_the_call() {
    // Without NVLS-Tree's head turn (and without NCCL's plan, whose
    // channel turn would stand in for it), every step keeps a node's
    // group and tag: one representative's call cannot stand for its
    // copies.
    let mut config = world(2, ModelLevel::Flow, QUARTER);
    config.nccl = None;
    let images: Vec<usize> = (0..2 * PER_NODE)
        .map(|r| r / PER_NODE * PER_NODE + (r % PER_NODE + QUARTER) % PER_NODE)
        .collect();
    fold_by(&mut config, RankAction::permutation(&images).unwrap()).unwrap();
    let algorithm = Registry::builtin()
        .get(Collective::Allreduce, "nccl_nvls_tree")
        .unwrap();
    let exec = run(config, |fabric| {
        let algorithm = algorithm.clone();
        async move {
            let mut buf = Payload::phantom(DType::F32, count(1));
            let params = Params {
                chunk_bytes: 16 << 10,
                channels: CHANNELS,
                ranks_per_node: PER_NODE,
                ..Params::default()
            };
            algorithm
                .run(&fabric, &mut buf, ReduceOp::Sum, &params)
                .await
                .err()
                .map(|e| e.to_string())
        }
    });
    // The run stops at the first such call, naming it.
    let (rank, why) = exec.refused.clone().expect("the call is refused");
    assert!(rank < 2 * PER_NODE, "{rank}");
    assert!(
        why.contains("a folded run cannot stand one representative's in-network call")
            && why.contains("the fold's turn keeps group [0, 1, 2, 3, 4, 5, 6, 7]")
            && why.contains("run it unfolded"),
        "{why}"
    );
    assert!(exec.deadlock.is_none());
}
