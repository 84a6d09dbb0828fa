//! Routes on every preset: every pair of ranks is connected, and a route
//! passes through a vertex only if that vertex forwards (through a GPU only
//! where the preset makes GPUs forward: the ring and the torus). On the
//! tree-like presets up*/down* routing costs nothing.

use std::sync::Arc;

use topologies::presets::{self, FatTree, LeafSpine, PcieBox, RingParams, Torus};
use topologies::{Placement, Router, Routing, Topology, VertexKind};

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
        (
            "fat_tree_b300_two_nics",
            presets::fat_tree(&FatTree {
                nodes: 2,
                gpus_per_node: 4,
                nics_per_gpu: 2,
                style: presets::NodeStyle::B300,
                ..FatTree::default()
            })
            .unwrap(),
        ),
        (
            "gb300_nvl72",
            presets::nvl72_rack(presets::RackStyle::Gb300).unwrap(),
        ),
        (
            "nvl72_cluster",
            presets::nvl72_cluster(&presets::Nvl72Cluster::default()).unwrap(),
        ),
        (
            "cpu_cluster",
            presets::cpu_cluster(&presets::CpuCluster {
                hosts: 3,
                sockets: 2,
                cores_per_socket: Some(4),
                hosts_per_leaf: 2,
                ..presets::CpuCluster::default()
            })
            .unwrap(),
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

#[test]
fn up_down_routes_on_trees_and_clos_networks_are_as_short_as_shortest_paths() {
    // Clos networks and DGX nodes are already up-down: every rank pair
    // still routes, over as many hops at the same cost.
    let tree_like = [
        "dgx_h100",
        "pcie_box",
        "fat_tree",
        "fat_tree_oversubscribed",
        "leaf_spine",
    ];
    for (name, topology) in every_preset()
        .into_iter()
        .filter(|(name, _)| tree_like.contains(name))
    {
        let topology = Arc::new(topology);
        let n = topology.endpoints().len();
        let placement = Placement::in_order(&topology, n).unwrap();
        let mut shortest = Router::new(Arc::clone(&topology), 3);
        let up_down = Routing::UpDown { root: None };
        let mut router = Router::with_routing(Arc::clone(&topology), 3, up_down).unwrap();
        assert_eq!(router.routing(), up_down);
        router.check_connected(&placement).unwrap();
        // Latency, one MTU's serialization and forwarding, hop by hop (a
        // detour through a CPU socket would cost its forwarding latency).
        let cost = |route: &[topologies::LinkId]| -> u64 {
            let t = &topology;
            let links: u64 = route
                .iter()
                .map(|&l| t.link(l).latency_ps + t.link(l).serialization_ps(t.link(l).mtu_bytes))
                .sum();
            let forwarding: u64 = route[1..]
                .iter()
                .map(|&l| t.vertex(t.ends(l).0).forward_latency_ps)
                .sum();
            links + forwarding
        };
        for a in 0..n {
            for b in (0..n).filter(|&b| b != a) {
                let (src, dst) = (placement.vertex(a), placement.vertex(b));
                let flow = (a * n + b) as u64;
                let want = shortest.route(src, dst, flow).unwrap();
                let got = router.route(src, dst, flow).unwrap();
                assert_eq!(got.len(), want.len(), "{name}: {a}->{b}");
                let names = |r: &[topologies::LinkId]| -> Vec<String> {
                    r.iter().map(|&l| topology.link_name(l)).collect()
                };
                assert_eq!(
                    cost(&got),
                    cost(&want),
                    "{name}: {a}->{b}: {:?} instead of {:?}",
                    names(&got),
                    names(&want)
                );
            }
        }
    }
}
