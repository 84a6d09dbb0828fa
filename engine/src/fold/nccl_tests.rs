//! `nccl_tree` folded by the node turn equals the full run: times on
//! every rank, every link counter.

use std::sync::Arc;

use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Registry, Time};
use topologies::presets;

use super::{RankAction, fold_by};
use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::WorldConfig;
use crate::{Execution, run};

/// GPUs per node, and the turn (half a node: the sockets swap).
const PER_NODE: usize = 8;
const TURN: usize = 4;

/// `nodes` DGX H100-style nodes on the default fat-tree at `level`, with
/// routes symmetric under the node turn and NCCL's plan on `nccl`.
fn world(nodes: usize, level: ModelLevel, nccl: NcclConfig) -> WorldConfig {
    let params = presets::FatTree {
        nodes,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let turn = presets::fat_tree_node_turn(&params, &topology, &placement, TURN).unwrap();
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

/// The node turn of `nodes` nodes as a rank action.
fn turn(nodes: usize) -> RankAction {
    let images: Vec<usize> = (0..nodes * PER_NODE)
        .map(|r| r / PER_NODE * PER_NODE + (r % PER_NODE + TURN) % PER_NODE)
        .collect();
    RankAction::permutation(&images).unwrap()
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
    let full = allreduce(world(nodes, level, NcclConfig::default()), name, count);
    let mut folded = world(nodes, level, NcclConfig::default());
    let action = turn(nodes);
    fold_by(&mut folded, action.clone()).unwrap();
    assert!(folded.folded_by().unwrap().turns_channels());
    let folded = allreduce(folded, name, count);
    assert!(full.deadlock.is_none() && folded.deadlock.is_none());
    assert_eq!(folded.outputs.len(), nodes * PER_NODE / 2);
    for r in 0..nodes * PER_NODE {
        let slot = action.position(r).0;
        assert_eq!(
            full.outputs[r], folded.outputs[slot],
            "rank {r}, {nodes} nodes"
        );
    }
    assert_eq!(full.end_time, folded.end_time);
    assert_eq!(full.stats.links.messages, folded.stats.links.messages * 2);
    let full: &[LinkUsage] = full.link_usage.as_deref().unwrap();
    let folded: &[LinkUsage] = folded.link_usage.as_deref().unwrap();
    let mut used = 0;
    for (l, (a, b)) in full.iter().zip(folded).enumerate() {
        assert_eq!(
            (a.bytes, a.units, a.busy_ps, a.max_queue),
            (b.bytes, b.units, b.busy_ps, b.max_queue),
            "link direction {l}, {nodes} nodes"
        );
        used += usize::from(a.units > 0);
    }
    assert!(used > 0);
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
