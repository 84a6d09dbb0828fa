//! Folding by a permutation that is not a shift: a node turn on ideal
//! links.

use algorithms::{DType, Fabric, Payload, Rank, Shape, Tag, Time, Work};
use topologies::LinkSpec;

use super::{RankAction, fold, fold_by};
use crate::network::NetworkConfig;
use crate::world::WorldConfig;
use crate::{Execution, run};

/// Nodes and ranks per node of the runs here.
const NODES: usize = 3;
const PER_NODE: usize = 4;

/// Every node's ranks turned by one: rank `(n, i)` goes to `(n, i + 1)`.
fn node_turn() -> Vec<Rank> {
    (0..NODES * PER_NODE)
        .map(|r| r / PER_NODE * PER_NODE + (r % PER_NODE + 1) % PER_NODE)
        .collect()
}

fn ideal() -> NetworkConfig {
    NetworkConfig::Ideal(LinkSpec::new(1_500_000, 20e9).expect("a valid link"))
}

/// Rounds of a pattern that the node turn carries onto itself but no
/// shift does: each rank sends to the next rank of its node and to the
/// same GPU of the next node, messages and work sized by its node (so
/// the nodes' timelines differ), and receives from the previous ones.
fn node_pattern(world: WorldConfig) -> Execution<Time> {
    run(world, |f| async move {
        let r = f.rank();
        let (node, local) = (r / PER_NODE, r % PER_NODE);
        let at = |n: usize, i: usize| n % NODES * PER_NODE + i % PER_NODE;
        let (next_gpu, prev_gpu) = (at(node, local + 1), at(node, local + PER_NODE - 1));
        let (next_node, prev_node) = (at(node + 1, local), at(node + NODES - 1, local));
        let count = 1000 * (node + 1);
        for round in 0..3u64 {
            let inside = f.send(
                next_gpu,
                Tag(2 * round),
                Payload::phantom(DType::F32, count),
            );
            let across = f.send(
                next_node,
                Tag(2 * round + 1),
                Payload::phantom(DType::F32, 64),
            );
            let (a, b) = futures_util::join!(inside, across);
            a.unwrap();
            b.unwrap();
            f.recv(prev_gpu, Tag(2 * round), Shape::new(DType::F32, count))
                .await
                .unwrap();
            f.recv(prev_node, Tag(2 * round + 1), Shape::new(DType::F32, 64))
                .await
                .unwrap();
            f.compute(Work::Reduce {
                bytes: 4096 * (node as u64 + 1),
            })
            .await
            .unwrap();
        }
        f.now()
    })
}

fn world() -> WorldConfig {
    WorldConfig::new(NODES * PER_NODE, ideal()).reduce_bytes_per_s(Some(10e9))
}

#[test]
fn a_node_turn_folds_one_gpu_per_node_exactly() {
    let full = node_pattern(world());
    let mut folded = world();
    let action = RankAction::permutation(&node_turn()).unwrap();
    fold_by(&mut folded, action.clone()).unwrap();
    assert_eq!(folded.simulated_ranks(), NODES);
    let reps: Vec<Rank> = (0..NODES).map(|s| folded.simulated_rank(s)).collect();
    assert_eq!(reps, [0, 4, 8]);
    let folded = node_pattern(folded);
    assert!(full.deadlock.is_none() && folded.deadlock.is_none());
    assert_eq!(folded.outputs.len(), NODES);
    for r in 0..NODES * PER_NODE {
        let slot = action.position(r).0;
        assert_eq!(full.outputs[r], folded.outputs[slot], "rank {r}");
        assert_eq!(full.finished_at[r], folded.finished_at[slot], "rank {r}");
    }
    // The nodes' timelines differ: the fold really kept them apart.
    assert_ne!(full.outputs[0], full.outputs[4]);
    assert_eq!(full.end_time, folded.end_time);
    assert_eq!(
        full.stats.links.messages,
        folded.stats.links.messages * PER_NODE as u64
    );
}

#[test]
fn a_shift_does_not_fold_what_only_the_node_turn_keeps() {
    // Folded by one node's shift, node 0 stands for every node, whose
    // messages and work differ: rank 4 would finish when rank 0 does,
    // which the full run does not.
    let full = node_pattern(world());
    let mut shifted = world();
    fold(&mut shifted, PER_NODE).unwrap();
    let shifted = node_pattern(shifted);
    assert_ne!(shifted.outputs[4 % PER_NODE], full.outputs[4]);
}

#[test]
fn a_permutation_fold_is_refused_on_a_topology_with_a_shift_rotation() {
    let params = topologies::presets::FatTree {
        nodes: 2,
        ..topologies::presets::FatTree::default()
    };
    let topology = std::sync::Arc::new(topologies::presets::fat_tree(&params).unwrap());
    let placement: std::sync::Arc<[_]> = topology.endpoints().into();
    let rotation = topologies::presets::fat_tree_rotation(&params, &topology, &placement).unwrap();
    let mut t = crate::network::TopologyConfig::new(
        topology,
        placement,
        crate::network::ModelLevel::Flow,
        7,
    );
    t.rotation = Some(std::sync::Arc::new(rotation));
    let mut config = WorldConfig::new(16, NetworkConfig::Topology(t));
    let turn: Vec<Rank> = (0..16).map(|r| r / 8 * 8 + (r % 8 + 1) % 8).collect();
    let err = fold_by(&mut config, RankAction::permutation(&turn).unwrap()).unwrap_err();
    assert!(err.to_string().contains("shifts ranks"), "{err}");
    let err = fold_by(&mut config, RankAction::shift(8, 4).unwrap()).unwrap_err();
    assert!(
        err.to_string()
            .contains("acts on 8 ranks; the world has 16"),
        "{err}"
    );
}
