//! `nccl_tree` folded by the node turn (half a node, a true symmetry) and
//! by the partial quarter turn (2 GPUs, socket links not carried) equals
//! the full run with the same symmetric routes: times on every rank,
//! every link counter; routes across a link the turn does not carry are
//! refused.

use std::sync::Arc;

use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Registry, Time};
use topologies::{LinkKind, Rotation, presets};

use super::{RankAction, fold_by};
use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::WorldConfig;
use crate::{Execution, run};

/// GPUs per node, the turn by half a node (the sockets swap) and by a
/// quarter (the socket links stay, not carried).
const PER_NODE: usize = 8;
const HALF: usize = 4;
const QUARTER: usize = 2;

/// The default fat-tree of `nodes` DGX H100-style nodes.
fn fat_tree(nodes: usize) -> (presets::FatTree, Arc<topologies::Topology>) {
    let params = presets::FatTree {
        nodes,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    (params, topology)
}

/// The turn of every node's GPUs by `gpus`: the exact one by half a
/// node, the partial one otherwise.
fn node_turn(nodes: usize, gpus: usize) -> Rotation {
    let (params, topology) = fat_tree(nodes);
    let placement = &topology.endpoints();
    if gpus == HALF {
        presets::fat_tree_node_turn(&params, &topology, placement, gpus).unwrap()
    } else {
        presets::fat_tree_partial_node_turn(&params, &topology, placement, gpus).unwrap()
    }
}

/// `nodes` DGX H100-style nodes on the default fat-tree at `level`, with
/// routes symmetric under `turn` and NCCL's plan on `nccl`.
fn world_with(nodes: usize, level: ModelLevel, nccl: NcclConfig, turn: Rotation) -> WorldConfig {
    let (_, topology) = fat_tree(nodes);
    let placement: Arc<[_]> = topology.endpoints().into();
    let mut t = TopologyConfig::new(topology, placement, level, 7);
    t.rotation = Some(Arc::new(turn));
    let system = {
        let mut router = t.router.lock().unwrap();
        NcclSystem::build(&t.topology, &t.placement, &mut router, nccl)
    };
    WorldConfig::new(nodes * PER_NODE, NetworkConfig::Topology(t))
        .reduce_bytes_per_s(Some(200e9))
        .nccl(Some(Arc::new(system)))
}

/// [`world_with`] the turn by half a node.
fn world(nodes: usize, level: ModelLevel, nccl: NcclConfig) -> WorldConfig {
    world_with(nodes, level, nccl, node_turn(nodes, HALF))
}

/// The turn of `nodes` nodes' GPUs by `gpus` as a rank action.
fn turn_by(nodes: usize, gpus: usize) -> RankAction {
    let images: Vec<usize> = (0..nodes * PER_NODE)
        .map(|r| r / PER_NODE * PER_NODE + (r % PER_NODE + gpus) % PER_NODE)
        .collect();
    RankAction::permutation(&images).unwrap()
}

/// The node turn by half a node as a rank action.
fn turn(nodes: usize) -> RankAction {
    turn_by(nodes, HALF)
}

/// A phantom allreduce of `count` floats by `name` on every channel.
fn allreduce(config: WorldConfig, name: &str, count: usize) -> Execution<Time> {
    let algorithm = Registry::builtin()
        .get(Collective::Allreduce, name)
        .unwrap();
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

fn assert_folds_exactly(name: &str, nodes: usize, level: ModelLevel, count: usize) {
    assert_folds_exactly_by(name, nodes, level, count, HALF);
}

/// Folded by the turn of `gpus` GPUs, `name` gives every rank's finish
/// time and every link counter of the full run with the same symmetric
/// routes; the links the turn does not carry carry nothing in either.
fn assert_folds_exactly_by(name: &str, nodes: usize, level: ModelLevel, count: usize, gpus: usize) {
    let full_world = world_with(nodes, level, NcclConfig::default(), node_turn(nodes, gpus));
    let full = allreduce(full_world, name, count);
    let mut folded = world_with(nodes, level, NcclConfig::default(), node_turn(nodes, gpus));
    let action = turn_by(nodes, gpus);
    let order = action.order();
    fold_by(&mut folded, action.clone()).unwrap();
    assert!(folded.folded_by().unwrap().turns_channels());
    let folded = allreduce(folded, name, count);
    assert!(full.deadlock.is_none() && folded.deadlock.is_none());
    assert_eq!(folded.outputs.len(), nodes * PER_NODE / order);
    for r in 0..nodes * PER_NODE {
        let slot = action.position(r).0;
        assert_eq!(
            full.outputs[r], folded.outputs[slot],
            "rank {r}, {nodes} nodes, turn by {gpus}"
        );
    }
    assert_eq!(full.end_time, folded.end_time);
    assert_eq!(
        full.stats.links.messages,
        folded.stats.links.messages * order as u64
    );
    let turn = node_turn(nodes, gpus);
    let full: &[LinkUsage] = full.link_usage.as_deref().unwrap();
    let folded: &[LinkUsage] = folded.link_usage.as_deref().unwrap();
    let mut used = 0;
    let mut uncarried = 0;
    for (l, (a, b)) in full.iter().zip(folded).enumerate() {
        assert_eq!(
            (a.bytes, a.units, a.busy_ps, a.max_queue),
            (b.bytes, b.units, b.busy_ps, b.max_queue),
            "link direction {l}, {nodes} nodes, turn by {gpus}"
        );
        used += usize::from(a.units > 0);
        if !turn.carries(topologies::LinkId::new(l)) {
            uncarried += 1;
            assert_eq!((a.bytes, a.units), (0, 0), "uncarried link direction {l}");
        }
    }
    assert!(used > 0);
    // Per node: 4 PCIe uplinks and the sockets' bundle, both ways.
    let expected = if gpus == HALF { 0 } else { nodes * 10 };
    assert_eq!(uncarried, expected);
}

#[test]
fn nccl_tree_folded_by_the_node_turn_is_the_full_run_in_the_flow_model() {
    // 16 channels of 4 units of 16 KiB each.
    for nodes in [2, 3] {
        assert_folds_exactly("nccl_tree", nodes, ModelLevel::Flow, 16 * 4 * 4096);
    }
}

#[test]
fn nccl_tree_folded_by_the_node_turn_is_the_full_run_in_the_packet_model() {
    assert_folds_exactly("nccl_tree", 2, ModelLevel::Packet, 16 * 2 * 4096);
}

#[test]
fn channels_that_do_not_turn_with_the_gpus_are_refused() {
    // Two channels: channel 0's image under the turn (channel 4) is gone.
    let nccl = NcclConfig {
        max_channels: Some(2),
        ..NcclConfig::default()
    };
    let mut config = world(2, ModelLevel::Flow, nccl);
    let err = fold_by(&mut config, turn(2)).unwrap_err().to_string();
    assert!(
        err.contains("NCCL's channels do not turn with the GPUs")
            && err.contains("channel 0 moved by the rotation is none of the 2 channels"),
        "{err}"
    );
}

#[test]
fn nccl_tree_folded_by_the_quarter_turn_is_the_full_run_in_the_flow_model() {
    for nodes in [2, 3] {
        assert_folds_exactly_by("nccl_tree", nodes, ModelLevel::Flow, 16 * 4 * 4096, QUARTER);
    }
}

#[test]
fn nccl_tree_folded_by_the_quarter_turn_is_the_full_run_in_the_packet_model() {
    assert_folds_exactly_by("nccl_tree", 2, ModelLevel::Packet, 16 * 2 * 4096, QUARTER);
}

#[test]
fn the_quarter_and_the_half_turn_fold_to_the_same_times() {
    let run = |gpus: usize| {
        let mut config = world_with(
            2,
            ModelLevel::Flow,
            NcclConfig::default(),
            node_turn(2, gpus),
        );
        fold_by(&mut config, turn_by(2, gpus)).unwrap();
        let action = config.folded_by().unwrap().clone();
        let exec = allreduce(config, "nccl_tree", 16 * 4 * 4096);
        let times: Vec<_> = (0..2 * PER_NODE)
            .map(|r| exec.outputs[action.position(r).0])
            .collect();
        (times, exec.end_time, exec.link_usage.unwrap())
    };
    let (quarter, half) = (run(QUARTER), run(HALF));
    assert_eq!(quarter.0, half.0);
    assert_eq!(quarter.1, half.1);
    let bytes = |u: &[LinkUsage]| u.iter().map(|l| (l.bytes, l.busy_ps)).collect::<Vec<_>>();
    assert_eq!(bytes(&quarter.2), bytes(&half.2));
}

/// The half turn's maps with every NVLink direction left in place, not
/// carried: a partial rotation that nccl_tree's chains (over NVLink)
/// cross.
fn turn_without_nvlink(nodes: usize) -> Rotation {
    let (_, topology) = fat_tree(nodes);
    let placement = &topology.endpoints();
    let half = node_turn(nodes, HALF);
    let nvlink = |l: topologies::LinkId| matches!(topology.link(l).kind, LinkKind::NvLink { .. });
    let vertices = topology.vertex_ids().map(|v| half.vertex(v)).collect();
    let links = topology
        .link_ids()
        .map(|l| if nvlink(l) { l } else { half.link(l) })
        .collect();
    let images = (0..placement.len()).map(|r| half.rank_image(r)).collect();
    let carried = topology.link_ids().map(|l| !nvlink(l)).collect();
    Rotation::permuting_partial(&topology, placement, images, vertices, links, carried).unwrap()
}

#[test]
fn routes_across_a_link_the_turn_does_not_carry_are_refused_naming_it() {
    // Folding: refused before the run, naming the channel, ranks and link.
    let mut config = world_with(
        2,
        ModelLevel::Flow,
        NcclConfig::default(),
        turn_without_nvlink(2),
    );
    let err = fold_by(&mut config, turn(2)).unwrap_err().to_string();
    assert!(
        err.contains("NCCL channel 0's route from rank 0 to rank")
            && err.contains("node0/nvswitch")
            && err.contains("a link the turn does not carry"),
        "{err}"
    );
    // Symmetric routes without folding: the sender's call fails as the
    // route is built, naming the ranks and the link.
    let config = world_with(
        2,
        ModelLevel::Flow,
        NcclConfig::default(),
        turn_without_nvlink(2),
    );
    let algorithm = Registry::builtin()
        .get(Collective::Allreduce, "nccl_tree")
        .unwrap();
    let exec = run(config, |fabric| {
        let algorithm = algorithm.clone();
        async move {
            let mut buf = Payload::phantom(DType::F32, 16 * 4096);
            let params = Params {
                chunk_bytes: 16 << 10,
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
    // The run stops at the first refusal, which its sender's call
    // returns too.
    let (rank, why) = exec.refused.clone().expect("the route is refused");
    assert!(
        why.contains(&format!("the message from rank {rank} to rank"))
            && why.contains("its route crosses node")
            && why.contains("nvswitch")
            && why.contains("the topology's rotation does not carry"),
        "{why}"
    );
    assert!(exec.deadlock.is_none());
    let returned: Vec<&String> = exec.outputs.iter().flatten().flatten().collect();
    assert!(
        returned.iter().all(|e| e.contains("does not carry")),
        "{returned:?}"
    );
    // Nothing crossed a link that was not carried.
    let usage = exec.link_usage.unwrap();
    let turn = turn_without_nvlink(2);
    for (l, u) in usage.iter().enumerate() {
        if !turn.carries(topologies::LinkId::new(l)) {
            assert_eq!(u.bytes, 0, "link direction {l}");
        }
    }
}
