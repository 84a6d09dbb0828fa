//! Routes on every preset: every pair of ranks is connected, and a route
//! passes through a vertex only if that vertex forwards (through a GPU only
//! where the preset makes GPUs forward: the ring and the torus).

use std::sync::Arc;

use topologies::presets::{self, FatTree, LeafSpine, PcieBox, RingParams, Torus};
use topologies::{Placement, Router, Topology, VertexKind};

fn every_preset() -> Vec<(&'static str, Topology)> {
    vec![
        ("dgx_a100", presets::dgx_a100().unwrap()),
        ("dgx_h100", presets::dgx_h100().unwrap()),
        ("pcie_box", presets::pcie_box(&PcieBox::default()).unwrap()),
        (
            "fat_tree",
            presets::fat_tree(&FatTree {
                nodes: 4,
                ..FatTree::default()
            })
            .unwrap(),
        ),
        (
            "fat_tree_oversubscribed",
            presets::fat_tree(&FatTree {
                nodes: 4,
                gpus_per_node: 4,
                oversubscription: 3.0,
                ..FatTree::default()
            })
            .unwrap(),
        ),
        (
            "leaf_spine",
            presets::leaf_spine(&LeafSpine::default()).unwrap(),
        ),
        ("ring", presets::ring(&RingParams::default()).unwrap()),
        ("torus2d", presets::torus2d(&Torus::default()).unwrap()),
    ]
}

#[test]
fn every_rank_pair_routes_only_through_forwarding_vertices() {
    for (name, topology) in every_preset() {
        let topology = Arc::new(topology);
        let n = topology.endpoints().len();
        let placement = Placement::in_order(&topology, n).unwrap();
        let mut router = Router::new(Arc::clone(&topology), 3);
        router.check_connected(&placement).unwrap();
        let gpus_forward = matches!(name, "ring" | "torus2d");
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    continue;
                }
                let (src, dst) = (placement.vertex(a), placement.vertex(b));
                let route = router.route(src, dst, (a * n + b) as u64).unwrap();
                // The route is a chain from src to dst.
                assert_eq!(topology.ends(route[0]).0, src, "{name}");
                assert_eq!(topology.ends(*route.last().unwrap()).1, dst, "{name}");
                for pair in route.windows(2) {
                    assert_eq!(topology.ends(pair[0]).1, topology.ends(pair[1]).0);
                }
                for hop in &route[..route.len() - 1] {
                    let via = topology.vertex(topology.ends(*hop).1);
                    assert!(via.forwards, "{name}: {a}->{b} passes {}", via.name);
                    if via.kind == VertexKind::Gpu {
                        assert!(gpus_forward, "{name}: {a}->{b} relays through {}", via.name);
                    }
                }
            }
        }
    }
}

#[test]
fn network_traffic_leaves_a_node_through_the_nearest_nic() {
    // On the fat-tree, GPU g of one node reaches GPU h of another through a
    // NIC on its own PCIe switch (GPUs 2k and 2k+1 share switch k with
    // NICs 2k and 2k+1), the network, and a NIC on the destination's
    // switch: never through a CPU socket.
    let topology = Arc::new(
        presets::fat_tree(&FatTree {
            nodes: 2,
            ..FatTree::default()
        })
        .unwrap(),
    );
    let mut router = Router::new(Arc::clone(&topology), 1);
    for g in 0..8 {
        for h in 0..8 {
            let src = topology.find(&format!("node0/gpu{g}")).unwrap();
            let dst = topology.find(&format!("node1/gpu{h}")).unwrap();
            let route = router.route(src, dst, 1).unwrap();
            let via: Vec<String> = route[..route.len() - 1]
                .iter()
                .map(|&l| topology.vertex(topology.ends(l).1).name.clone())
                .collect();
            let near = |node: usize, gpu: usize| {
                let k = gpu / 2;
                [
                    format!("node{node}/nic{}", 2 * k),
                    format!("node{node}/nic{}", 2 * k + 1),
                ]
            };
            assert_eq!(via[0], format!("node0/pcie{}", g / 2), "{via:?}");
            assert!(near(0, g).contains(&via[1]), "{via:?}");
            assert!(near(1, h).iter().any(|n| via.contains(n)), "{via:?}");
            assert!(!via.iter().any(|v| v.contains("socket")), "{via:?}");
        }
    }
}
