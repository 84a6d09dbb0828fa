//! `nccl_ring` folded by a shift of whole nodes (every channel kept)
//! equals the full run with the same symmetric routes: times on every
//! rank, every link counter; a plan whose rings do not move with the
//! shift is refused.

use std::sync::Arc;

use algorithms::Collective;
use algorithms::nccl::ChannelPlan;

use super::nccl_pat_tests::{PER_NODE, assert_nccl_folds_exactly, world};
use super::{fold, nccl_rings_shift};
use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::{ModelLevel, NetworkConfig};
use crate::world::WorldConfig;

/// Floats of a call whose every channel (16) splits into equal ring
/// segments (one per rank) of `per_segment` floats.
fn count(nodes: usize, per_segment: usize) -> usize {
    nodes * PER_NODE * 16 * per_segment
}

#[test]
fn nccl_ring_folded_by_a_node_shift_is_the_full_run_in_the_flow_model() {
    // One leaf per rail (a shift by one node), two leaves per rail (a
    // shift by half the nodes, cross-leaf traffic through the spines);
    // segments of 3 units of 16 KiB and of one unit of 8 KiB.
    for (nodes, leaves) in [(4, None), (8, Some(16))] {
        for per_segment in [3 * 4096, 2048] {
            for collective in [
                Collective::Allreduce,
                Collective::Allgather,
                Collective::ReduceScatter,
            ] {
                assert_nccl_folds_exactly(
                    "nccl_ring",
                    collective,
                    nodes,
                    leaves,
                    ModelLevel::Flow,
                    count(nodes, per_segment),
                );
            }
        }
    }
}

#[test]
fn nccl_ring_folded_by_a_node_shift_is_the_full_run_in_the_packet_model() {
    for collective in [
        Collective::Allreduce,
        Collective::Allgather,
        Collective::ReduceScatter,
    ] {
        assert_nccl_folds_exactly(
            "nccl_ring",
            collective,
            4,
            None,
            ModelLevel::Packet,
            count(4, 4096),
        );
    }
}

/// The system of `config`, with its plan's rings replaced by `rings`.
fn with_rings(config: &mut WorldConfig, rings: impl FnOnce(&ChannelPlan) -> Vec<Vec<usize>>) {
    let system = config.nccl.as_ref().unwrap();
    let mut plan = (*system.plan).clone();
    plan.rings = rings(&plan);
    let mut system: NcclSystem = (**system).clone();
    system.plan = Arc::new(plan);
    config.nccl = Some(Arc::new(system));
}

#[test]
fn rings_that_do_not_move_with_the_shift_are_refused() {
    let (mut config, shift) = world(4, None, ModelLevel::Flow, NcclConfig::default());
    let NetworkConfig::Topology(t) = &config.network else {
        unreachable!()
    };
    let rotation = Arc::clone(t.rotation.as_ref().unwrap());
    // The preset's rings do move with it.
    nccl_rings_shift(config.nccl.as_ref().unwrap(), &rotation).unwrap();
    // Channel 0 enters node 0 (only) at another GPU: its moved ring is no
    // channel's.
    let swap_first_two = |ring: &[usize]| {
        let mut ring = ring.to_vec();
        let a = ring.iter().position(|&r| r < PER_NODE).unwrap();
        let b = ring.iter().rposition(|&r| r < PER_NODE).unwrap();
        ring.swap(a, b);
        ring
    };
    with_rings(&mut config, |plan| {
        let mut rings = plan.rings.clone();
        rings[0] = swap_first_two(&rings[0]);
        rings
    });
    let err = fold(&mut config, shift).unwrap_err().to_string();
    assert!(
        err.contains("NCCL's channels do not move with the shift")
            && err.contains("channel 0's ring moved by the rotation is no channel's ring"),
        "{err}"
    );
    // Channel 0's moved ring is channel 1's: the shift would have to turn
    // channels, which it does not.
    let (mut config, shift) = world(4, None, ModelLevel::Flow, NcclConfig::default());
    with_rings(&mut config, |plan| {
        let mut rings = plan.rings.clone();
        rings[0] = swap_first_two(&rings[0]);
        rings[1] = rings[0].iter().map(|&r| rotation.rank_image(r)).collect();
        rings
    });
    let err = fold(&mut config, shift).unwrap_err().to_string();
    assert!(
        err.contains("channel 0's ring moved by the rotation is channel 1's ring"),
        "{err}"
    );
}
