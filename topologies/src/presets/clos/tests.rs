use super::*;
use crate::presets::check::{bandwidth, links_between, well_formed};

/// Uplinks over all leaves of a fat-tree, derived from the leaf split:
/// `k` leaves per rail, leaf `j` of a rail holding `(j+1)N/k - jN/k` nodes.
fn expected_fat_tree_uplinks(nodes: usize, gpus: usize, per_rail: usize, o: f64) -> usize {
    let per_rail_uplinks: usize = (0..per_rail)
        .map(|j| {
            let d = (j + 1) * nodes / per_rail - j * nodes / per_rail;
            (d as f64 / o).ceil() as usize
        })
        .sum();
    gpus * per_rail_uplinks
}

#[test]
fn fat_tree_counts_follow_the_formulas() {
    // (nodes, gpus per node, leaves, spines, oversubscription)
    let cases = [
        (8, 8, None, None, 1.0),
        (4, 2, Some(4), None, 1.0),
        (5, 4, Some(8), Some(2), 2.0),
        (2, 8, None, None, 1.0),
        (3, 8, None, Some(2), 1.5),
        (3, 8, None, None, 3.0),
        (2, 3, Some(6), Some(1), 1.0),
        (1, 1, None, None, 1.0),
    ];
    for (n, g, leaves, spines, o) in cases {
        let params = FatTree {
            nodes: n,
            gpus_per_node: g,
            leaves,
            spines,
            oversubscription: o,
            ..FatTree::default()
        };
        let t = fat_tree(&params).unwrap();
        let l = leaves.unwrap_or(g);
        // Default spines: g/2 (at least 1), at most the uplinks of a leaf
        // with the most nodes, ceil(n / (l/g)) of them.
        let max_uplinks = ((n.div_ceil(l / g)) as f64 / o).ceil() as usize;
        let s = spines.unwrap_or(if l > 1 {
            (g / 2).max(1).min(max_uplinks)
        } else {
            0
        });
        let node_vertices = 2 * g + g.div_ceil(2) + 3;
        let node_links = 3 * g + g.div_ceil(2) + 1;
        let uplinks = if s == 0 {
            0
        } else {
            expected_fat_tree_uplinks(n, g, l / g, o)
        };
        assert_eq!(t.vertex_count(), n * node_vertices + l + s, "{params:?}");
        assert_eq!(
            t.link_count(),
            n * node_links + n * g + uplinks,
            "{params:?}"
        );
        assert_eq!(t.endpoints().len(), n * g);
        well_formed(&t);
    }
    // The default by hand: 8 x 23 + 8 + 4 vertices; 8 x 29 + 64 + 64 links.
    let t = fat_tree(&FatTree::default()).unwrap();
    assert_eq!((t.vertex_count(), t.link_count()), (196, 360));
}

#[test]
fn fat_tree_rails_uplinks_and_ranks() {
    let t = fat_tree(&FatTree::default()).unwrap();
    // NIC g of every node is on leaf g, and on no other leaf.
    assert_eq!(links_between(&t, "node3/nic5", "leaf5"), 1);
    assert_eq!(links_between(&t, "node3/nic5", "leaf4"), 0);
    // 8 uplinks per leaf over 4 spines: 2 parallel links to each.
    for l in 0..8 {
        for s in 0..4 {
            assert_eq!(
                links_between(&t, &format!("leaf{l}"), &format!("spine{s}")),
                2
            );
        }
    }
    assert_eq!(bandwidth(&t, "node0/nic0", "leaf0"), 50e9); // NDR
    assert_eq!(bandwidth(&t, "leaf0", "spine3"), 50e9);
    let spine = t.vertex(t.find("spine1").unwrap());
    assert_eq!(spine.forward_latency_ps, IB_SWITCH_LATENCY_PS);
    // Ranks are node-major.
    let names: Vec<String> = t
        .endpoints()
        .into_iter()
        .map(|v| t.vertex(v).name.clone())
        .collect();
    let expected: Vec<String> = (0..8)
        .flat_map(|n| (0..8).map(move |g| format!("node{n}/gpu{g}")))
        .collect();
    assert_eq!(names, expected);
    // A100 nodes default to HDR.
    let a = fat_tree(&FatTree {
        style: NodeStyle::A100,
        nodes: 2,
        ..FatTree::default()
    })
    .unwrap();
    assert_eq!(bandwidth(&a, "node1/nic7", "leaf7"), 25e9);
    // 12 NVLink 3 links at NCCL's 20 GB/s.
    assert_eq!(bandwidth(&a, "node1/gpu7", "node1/nvswitch"), 240e9);
}

#[test]
fn fat_tree_splits_nodes_among_a_rails_leaves_in_order() {
    // 16 leaves for 8 rails: rail g has leaves 2g (nodes 0-3) and 2g+1 (4-7).
    let t = fat_tree(&FatTree {
        leaves: Some(16),
        ..FatTree::default()
    })
    .unwrap();
    assert_eq!(links_between(&t, "node3/nic5", "leaf10"), 1);
    assert_eq!(links_between(&t, "node4/nic5", "leaf11"), 1);
    assert_eq!(links_between(&t, "node4/nic5", "leaf10"), 0);
    // 4 downlinks, 4 uplinks each; 64 uplinks over 4 spines: 16 per spine.
    for s in 0..4 {
        let spine = t.find(&format!("spine{s}")).unwrap();
        assert_eq!(t.out_links(spine).len(), 16);
    }
    // 2:1 oversubscription halves the uplinks: 4 per leaf instead of 8.
    let t = fat_tree(&FatTree {
        oversubscription: 2.0,
        ..FatTree::default()
    })
    .unwrap();
    let leaf = t.find("leaf0").unwrap();
    assert_eq!(t.out_links(leaf).len(), 8 + 4);
}

#[test]
fn fat_tree_rejects_nonsense_naming_the_parameter() {
    let d = FatTree::default();
    let bad = [
        (FatTree { nodes: 0, ..d }, "nodes"),
        (
            FatTree {
                gpus_per_node: 0,
                ..d
            },
            "gpus_per_node",
        ),
        (
            FatTree {
                gpus_per_node: 9,
                ..d
            },
            "gpus_per_node",
        ),
        (
            FatTree {
                leaves: Some(0),
                ..d
            },
            "leaves",
        ),
        (
            FatTree {
                leaves: Some(12),
                ..d
            },
            "leaves",
        ),
        (
            FatTree {
                leaves: Some(72),
                ..d
            },
            "leaves",
        ), // 9 per rail, 8 nodes
        (
            FatTree {
                spines: Some(0),
                ..d
            },
            "spines",
        ),
        (
            FatTree {
                oversubscription: 0.5,
                ..d
            },
            "oversubscription",
        ),
        (
            FatTree {
                oversubscription: f64::NAN,
                ..d
            },
            "oversubscription",
        ),
        (
            FatTree {
                oversubscription: f64::INFINITY,
                ..d
            },
            "oversubscription",
        ),
        (
            FatTree {
                nic: LinkKind::parse("pcie5x16"),
                ..d
            },
            "nic",
        ),
        (
            FatTree {
                nodes: 1 << 40,
                ..d
            },
            "vertices",
        ),
    ];
    for (params, name) in bad {
        let err = fat_tree(&params).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Parameter(m) if m.contains(name)),
            "{err}"
        );
    }
    // One leaf needs no spine.
    let t = fat_tree(&FatTree {
        gpus_per_node: 1,
        spines: Some(0),
        ..d
    })
    .unwrap();
    well_formed(&t);
}

#[test]
fn leaf_spine_counts_follow_the_formulas() {
    // (hosts, hosts per leaf, spines, oversubscription, leaf sizes)
    let cases: [(usize, usize, usize, f64, &[usize]); 5] = [
        (16, 8, 2, 1.0, &[8, 8]),
        (10, 4, 2, 2.0, &[4, 4, 2]),
        (1, 8, 0, 1.0, &[1]),
        (7, 7, 1, 1.5, &[7]),
        (9, 2, 2, 1.0, &[2, 2, 2, 2, 1]),
    ];
    for (h, per_leaf, s, o, sizes) in cases {
        let params = LeafSpine {
            hosts: h,
            hosts_per_leaf: per_leaf,
            spines: s,
            oversubscription: o,
            ..LeafSpine::default()
        };
        let t = leaf_spine(&params).unwrap();
        let uplinks: usize = if s == 0 {
            0
        } else {
            sizes.iter().map(|&d| (d as f64 / o).ceil() as usize).sum()
        };
        assert_eq!(t.vertex_count(), 2 * h + sizes.len() + s, "{params:?}");
        assert_eq!(t.link_count(), 2 * h + uplinks, "{params:?}");
        assert_eq!(t.endpoints().len(), h);
        well_formed(&t);
    }
}

#[test]
fn leaf_spine_links_and_latencies() {
    let t = leaf_spine(&LeafSpine::default()).unwrap();
    // PCIe Gen4 x16 at NCCL's 1.5 GB/s per lane.
    let gen4 = 24e9;
    assert!((bandwidth(&t, "host9", "host9/nic") - gen4).abs() < 1.0);
    assert_eq!(bandwidth(&t, "host9/nic", "leaf1"), 25e9); // 200 Gb/s
    assert_eq!(links_between(&t, "leaf0", "spine1"), 4);
    let leaf = t.vertex(t.find("leaf1").unwrap());
    assert_eq!(leaf.forward_latency_ps, ETHERNET_SWITCH_LATENCY_PS);
    let ib = leaf_spine(&LeafSpine {
        nic: LinkKind::parse("ib_hdr").unwrap(),
        ..LeafSpine::default()
    })
    .unwrap();
    let spine = ib.vertex(ib.find("spine0").unwrap());
    assert_eq!(spine.forward_latency_ps, IB_SWITCH_LATENCY_PS);
}

#[test]
fn leaf_spine_rejects_nonsense_naming_the_parameter() {
    let d = LeafSpine::default();
    let bad = [
        (LeafSpine { hosts: 0, ..d }, "hosts"),
        (
            LeafSpine {
                hosts_per_leaf: 0,
                ..d
            },
            "hosts_per_leaf",
        ),
        (LeafSpine { spines: 0, ..d }, "spines"),
        (
            LeafSpine {
                oversubscription: 0.0,
                ..d
            },
            "oversubscription",
        ),
        (
            LeafSpine {
                nic: LinkKind::Smp,
                ..d
            },
            "nic",
        ),
        (
            LeafSpine {
                hosts: usize::MAX,
                ..d
            },
            "vertices",
        ),
    ];
    for (params, name) in bad {
        let err = leaf_spine(&params).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Parameter(m) if m.contains(name)),
            "{err}"
        );
    }
}

#[test]
fn fat_tree_with_two_nics_per_gpu_has_a_rail_per_nic() {
    let params = FatTree {
        nodes: 4,
        gpus_per_node: 4,
        nics_per_gpu: 2,
        style: NodeStyle::B200,
        nic: LinkKind::parse("ib_hdr"),
        ..FatTree::default()
    };
    let t = fat_tree(&params).unwrap();
    well_formed(&t);
    // 8 rails, one leaf each; default spines max(1, 8 / 2) = 4, capped at
    // a leaf's 4 uplinks. Node: 4 GPUs, 8 NICs, NVSwitch, 2 PCIe
    // switches, 2 sockets = 17 vertices; 8 + 8 + 2 + 1 = 19 links.
    assert_eq!(t.vertex_count(), 4 * 17 + 8 + 4);
    assert_eq!(t.link_count(), 4 * 19 + 4 * 8 + 8 * 4);
    // GPU 1's NICs 2 and 3 are rails 2 and 3 (2 x 200G per GPU).
    assert_eq!(links_between(&t, "node2/nic3", "leaf3"), 1);
    assert_eq!(links_between(&t, "node2/nic2", "leaf2"), 1);
    assert_eq!(bandwidth(&t, "node2/nic3", "leaf3"), 25e9);
    // It folds by one node like the one-NIC tree.
    let placement = t.endpoints();
    let r = fat_tree_rotation(&params, &t, &placement).unwrap();
    assert_eq!(r.shift(), 4);
    r.link_orbits(&t).unwrap();
    // nics_per_gpu out of range names itself.
    let err = fat_tree(&FatTree {
        nics_per_gpu: 3,
        ..params
    })
    .unwrap_err();
    assert!(err.to_string().contains("nics_per_gpu"), "{err}");
}

#[test]
fn a_fat_tree_turns_its_nodes_by_half_a_node_but_not_by_two_gpus() {
    for nodes in [2, 4] {
        let params = FatTree {
            nodes,
            ..FatTree::default()
        };
        let t = fat_tree(&params).unwrap();
        let placement = t.endpoints().to_vec();
        let turn = fat_tree_node_turn(&params, &t, &placement, 4).unwrap();
        assert_eq!((turn.order(), turn.shift()), (2, 0));
        assert_eq!(turn.rank_image(1), 5);
        assert_eq!(turn.rank_image(8 + 6), 8 + 2);
        let name = |v: VertexId| t.vertex(v).name.clone();
        let image = |n: &str| name(turn.vertex(t.find(n).unwrap()));
        assert_eq!(image("node1/socket0"), "node1/socket1");
        assert_eq!(image("node1/pcie3"), "node1/pcie1");
        assert_eq!(image("node0/nic2"), "node0/nic6");
        assert_eq!(image("leaf5"), "leaf1");
        assert_eq!(image("spine0"), "spine0");
        // Every link moves: the packet model folds it too.
        turn.link_orbits(&t).unwrap();
        // By two GPUs the sockets cannot follow the PCIe switches.
        let err = fat_tree_node_turn(&params, &t, &placement, 2).unwrap_err();
        assert!(err.to_string().contains("pcie1->node0/socket0"), "{err}");
        for bad in [0, 3, 8] {
            let err = fat_tree_node_turn(&params, &t, &placement, bad).unwrap_err();
            assert!(err.to_string().contains("must be even"), "{err}");
        }
    }
}

#[test]
fn a_fat_tree_turns_its_gpus_by_a_quarter_node_carrying_all_but_the_socket_links() {
    let params = FatTree {
        nodes: 2,
        ..FatTree::default()
    };
    let t = fat_tree(&params).unwrap();
    let placement = t.endpoints().to_vec();
    let turn = fat_tree_partial_node_turn(&params, &t, &placement, 2).unwrap();
    assert_eq!((turn.order(), turn.shift()), (4, 0));
    assert!(turn.is_partial());
    assert_eq!(turn.rank_image(7), 1);
    assert_eq!(turn.rank_image(8 + 3), 8 + 5);
    let name = |v: VertexId| t.vertex(v).name.clone();
    let image = |n: &str| name(turn.vertex(t.find(n).unwrap()));
    assert_eq!(image("node1/pcie3"), "node1/pcie0");
    assert_eq!(image("node1/socket1"), "node1/socket1");
    assert_eq!(image("node0/nic7"), "node0/nic1");
    assert_eq!(image("leaf6"), "leaf0");
    // The links that touch a socket stay in place, uncarried; every other
    // link moves with every step, so only those are left out of the
    // packet model's orbit check.
    let mut uncarried = Vec::new();
    for l in t.link_ids() {
        let (a, b) = t.ends(l);
        let socket = [a, b]
            .iter()
            .any(|&v| t.vertex(v).kind == crate::VertexKind::Socket);
        assert_eq!(turn.carries(l), !socket, "{}", t.link_name(l));
        if socket {
            assert_eq!(turn.link(l), l);
            uncarried.push(t.link_name(l));
        } else {
            assert_ne!(turn.link(l), l, "{}", t.link_name(l));
        }
    }
    // Per node: 4 PCIe uplinks and the smp bundle, both directions.
    assert_eq!(uncarried.len(), 2 * 2 * 5, "{uncarried:?}");
    assert!(uncarried.contains(&"node0/pcie1->node0/socket0".to_string()));
    let orbits = turn.link_orbits(&t).unwrap();
    let sizes = turn.link_orbit_sizes(&t);
    for l in t.link_ids() {
        let expected = if turn.carries(l) { 4 } else { 1 };
        assert_eq!(sizes[l.index()].1, expected, "{}", t.link_name(l));
        assert_eq!(orbits[l.index()], sizes[l.index()].0);
    }
    // The same bounds on the turn as the whole node's.
    for bad in [0, 3, 8] {
        let err = fat_tree_partial_node_turn(&params, &t, &placement, bad).unwrap_err();
        assert!(
            err.to_string().contains("fat_tree_partial_node_turn")
                && err.to_string().contains("must be even"),
            "{err}"
        );
    }
}

#[test]
fn a_partial_rotation_must_leave_its_uncarried_links_in_place() {
    let params = FatTree {
        nodes: 2,
        ..FatTree::default()
    };
    let t = fat_tree(&params).unwrap();
    let placement = t.endpoints().to_vec();
    let turn = fat_tree_node_turn(&params, &t, &placement, 4).unwrap();
    let vertices: Vec<VertexId> = t.vertex_ids().map(|v| turn.vertex(v)).collect();
    let links: Vec<_> = t.link_ids().map(|l| turn.link(l)).collect();
    let images: Vec<usize> = (0..placement.len()).map(|r| turn.rank_image(r)).collect();
    // Leaving out links that move is refused, naming one.
    let nvlink = |l: crate::LinkId| matches!(t.link(l).kind, crate::LinkKind::NvLink { .. });
    let carried: Vec<bool> = t.link_ids().map(|l| !nvlink(l)).collect();
    let err = crate::Rotation::permuting_partial(
        &t,
        &placement,
        images.clone(),
        vertices.clone(),
        links.clone(),
        carried.clone(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("node0/gpu0->node0/nvswitch is not carried"),
        "{err}"
    );
    // Kept in place, they may be left out; the rest is still checked.
    let kept: Vec<_> = t
        .link_ids()
        .map(|l| if nvlink(l) { l } else { turn.link(l) })
        .collect();
    let partial =
        crate::Rotation::permuting_partial(&t, &placement, images, vertices, kept, carried)
            .unwrap();
    assert!(partial.is_partial() && !turn.is_partial());
    let gpu0 = t.find("node0/gpu0").unwrap();
    let l = t.out_links(gpu0)[0];
    assert!(nvlink(l) && !partial.carries(l) && turn.carries(l));
}
