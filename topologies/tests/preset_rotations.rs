//! The presets' rotations: the shift and order each layout gets, which
//! vertices and links go where (by name), whether it folds
//! (`link_orbits`), the errors for layouts and placements with no such
//! symmetry, and the 16 384-rank fat-tree.

use topologies::presets::{
    self, FatTree, LeafSpine, Nvl72Cluster, RingParams, Torus, fat_tree_rotation,
    leaf_spine_rotation, nvl72_cluster_rotation, ring_rotation, torus2d_rotation,
};
use topologies::{LinkId, Rotation, Topology, TopologyError, VertexId, VertexKind};

/// The vertex named `name`.
fn id(t: &Topology, name: &str) -> VertexId {
    t.find(name).unwrap_or_else(|| panic!("{name} exists"))
}

/// The name of the image of the vertex named `name`.
fn image(t: &Topology, r: &Rotation, name: &str) -> String {
    t.vertex(r.vertex(id(t, name))).name.clone()
}

/// The uplinks (directions towards spines) of the leaf named `leaf`, in
/// insertion order.
fn uplinks(t: &Topology, leaf: &str) -> Vec<LinkId> {
    t.out_links(id(t, leaf))
        .into_iter()
        .filter(|&l| t.vertex(t.ends(l).1).kind == VertexKind::Spine)
        .collect()
}

/// The only link direction from `a` to `b` (by name).
fn link(t: &Topology, a: &str, b: &str) -> LinkId {
    let (a, b) = (id(t, a), id(t, b));
    let found: Vec<LinkId> = t
        .out_links(a)
        .into_iter()
        .filter(|&l| t.ends(l).1 == b)
        .collect();
    assert_eq!(found.len(), 1, "one link");
    found[0]
}

/// Steps until `next` brings `start` back, failing past `order` steps.
fn cycle<T: PartialEq + Copy>(start: T, order: usize, next: impl Fn(T) -> T) -> usize {
    let mut x = next(start);
    let mut steps = 1;
    while x != start {
        assert!(steps < order, "no cycle within the rotation's order");
        x = next(x);
        steps += 1;
    }
    steps
}

/// Every vertex's and link's cycle divides the order (`order` steps are
/// the identity); returns the shortest link cycle.
fn check_cycles(t: &Topology, r: &Rotation) -> usize {
    for v in t.vertex_ids() {
        let n = cycle(v, r.order(), |v| r.vertex(v));
        assert_eq!(r.order() % n, 0, "{}", t.vertex(v).name);
    }
    let mut shortest = r.order();
    for l in t.link_ids() {
        let n = cycle(l, r.order(), |l| r.link(l));
        assert_eq!(r.order() % n, 0, "{}", t.link_name(l));
        shortest = shortest.min(n);
    }
    shortest
}

/// What a case should give.
#[derive(Debug)]
enum Expect {
    /// A rotation with this shift and order; it folds when `folds`.
    Rotation {
        shift: usize,
        order: usize,
        folds: bool,
    },
    /// A symmetry error containing this text.
    Error(&'static str),
}

/// Checks `result` against `expected` for the topology `t`.
fn check(t: &Topology, result: Result<Rotation, TopologyError>, expected: &Expect, case: &str) {
    match (result, expected) {
        (
            Ok(r),
            &Expect::Rotation {
                shift,
                order,
                folds,
            },
        ) => {
            assert_eq!((r.shift(), r.order()), (shift, order), "{case}");
            assert_eq!(r.ranks(), t.endpoints().len(), "{case}");
            let shortest = check_cycles(t, &r);
            match r.link_orbits(t) {
                Ok(orbits) => {
                    assert!(folds, "{case}: folds");
                    assert_eq!(shortest, order, "{case}");
                    for l in t.link_ids() {
                        let rep = orbits[l.index()];
                        assert!(rep <= l, "{case}: the smallest id represents");
                        assert_eq!(orbits[r.link(l).index()], rep, "{case}: one orbit");
                    }
                }
                Err(e) => {
                    assert!(!folds, "{case}: {e}");
                    let needle = format!("after {shortest} of the rotation's {order} steps");
                    assert!(e.to_string().contains(&needle), "{case}: {e}");
                }
            }
        }
        (Err(TopologyError::Symmetry(m)), Expect::Error(text)) => {
            assert!(m.contains(text), "{case}: {m}");
        }
        (Ok(r), _) => panic!(
            "{case}: expected {expected:?}, got a rotation by {} of order {}",
            r.shift(),
            r.order()
        ),
        (Err(e), _) => panic!("{case}: expected {expected:?}, got {e:?}"),
    }
}

fn fat(
    nodes: usize,
    gpus_per_node: usize,
    leaves: Option<usize>,
    spines: Option<usize>,
    oversubscription: f64,
) -> FatTree {
    FatTree {
        nodes,
        gpus_per_node,
        leaves,
        spines,
        oversubscription,
        ..FatTree::default()
    }
}

fn ok(shift: usize, order: usize, folds: bool) -> Expect {
    Expect::Rotation {
        shift,
        order,
        folds,
    }
}

#[test]
fn fat_tree_layouts_give_their_rotation_or_say_why_not() {
    let cases = [
        // One leaf per rail: one node; u = nodes folds.
        (fat(1, 8, None, None, 1.0), ok(8, 1, true)),
        (fat(2, 8, None, None, 1.0), ok(8, 2, true)),
        (fat(4, 8, None, None, 1.0), ok(8, 4, true)),
        (fat(16, 8, None, None, 1.0), ok(8, 16, true)),
        (fat(128, 8, None, None, 1.0), ok(8, 128, true)),
        (fat(16, 8, None, Some(1), 1.0), ok(8, 16, true)),
        (fat(16, 8, None, Some(2), 1.0), ok(8, 16, true)),
        (fat(16, 8, None, Some(4), 1.0), ok(8, 16, true)),
        (fat(16, 2, None, None, 1.0), ok(2, 16, true)),
        (fat(16, 2, None, Some(2), 1.0), ok(2, 16, true)),
        // A single leaf, no spines, and with spines.
        (fat(16, 1, None, None, 1.0), ok(1, 16, true)),
        (fat(1, 1, None, None, 1.0), ok(1, 1, true)),
        (fat(16, 1, None, Some(4), 1.0), ok(1, 16, true)),
        // Oversubscribed: u = 8 of 16 nodes, u = 3 of 6: a rotation that
        // does not fold.
        (fat(16, 8, None, None, 2.0), ok(8, 16, false)),
        (fat(6, 8, None, None, 2.0), ok(8, 6, false)),
        (fat(4, 8, None, Some(2), 2.0), ok(8, 4, false)),
        // No symmetry: spines do not divide the uplinks, or uplinks the nodes.
        (
            fat(6, 8, None, Some(4), 1.0),
            Expect::Error("not a multiple of the 4 spines"),
        ),
        (
            fat(16, 8, None, Some(3), 1.0),
            Expect::Error("16 uplinks are not a multiple of the 3 spines"),
        ),
        (
            fat(3, 8, None, None, 1.5),
            Expect::Error("2 uplinks do not divide the 3 nodes"),
        ),
        (
            fat(16, 2, None, Some(1), 3.0),
            Expect::Error("6 uplinks do not divide the 16 nodes"),
        ),
        // Several leaves per rail: one leaf's nodes; always folds.
        (fat(16, 8, Some(16), None, 1.0), ok(64, 2, true)),
        (fat(16, 8, Some(32), Some(2), 2.0), ok(32, 4, true)),
        (fat(16, 8, Some(32), Some(1), 1.0), ok(32, 4, true)),
        (fat(128, 8, Some(32), None, 1.0), ok(256, 4, true)),
        (fat(128, 8, Some(16), Some(4), 2.0), ok(512, 2, true)),
        (fat(4, 2, Some(8), Some(1), 1.0), ok(2, 4, true)),
        (fat(2, 1, Some(2), Some(1), 1.0), ok(1, 2, true)),
        (
            fat(6, 8, Some(32), None, 1.0),
            Expect::Error("4 leaves per rail do not split the 6 nodes"),
        ),
        (
            fat(5, 2, Some(4), Some(2), 1.0),
            Expect::Error("2 leaves per rail do not split the 5 nodes"),
        ),
    ];
    for (params, expected) in &cases {
        let t = presets::fat_tree(params).unwrap();
        let placement = t.endpoints();
        let result = fat_tree_rotation(params, &t, &placement);
        check(&t, result, expected, &format!("{params:?}"));
    }
}

/// The numbers after `key = ` in `message` (`"nodes = 44 or 48"` gives 44
/// and 48).
fn suggested(message: &str, key: &str) -> Vec<usize> {
    let Some(at) = message.find(&format!("{key} = ")) else {
        return Vec::new();
    };
    let rest = &message[at + key.len() + 3..];
    rest.split([' ', ','])
        .filter(|word| !word.is_empty() && *word != "or")
        .map_while(|word| word.parse().ok())
        .collect()
}

#[test]
fn a_fat_tree_that_does_not_turn_names_layouts_that_do() {
    // Each refusal names node counts (and a spine count, where one works
    // with the same nodes) that turn, and the unfolded way out; each named
    // layout, built, turns.
    let refused = [
        // 368 GPUs on 4 spines: 44 or 48 nodes, or 2 spines.
        (
            fat(46, 8, None, Some(4), 1.0),
            "nodes = 44 or 48, or spines = 2 would turn",
        ),
        (fat(6, 8, None, Some(4), 1.0), ""),
        (fat(16, 8, None, Some(3), 1.0), ""),
        (fat(16, 2, None, Some(1), 3.0), ""),
        (fat(6, 8, Some(32), None, 1.0), ""),
        (fat(5, 2, Some(4), Some(2), 1.0), ""),
        // Two leaves per rail and 5 spines: 8 nodes would split evenly,
        // but their leaves (4 nodes each) have too few uplinks for 5
        // spines, so only 10 is named.
        (fat(9, 8, Some(16), Some(5), 1.0), ""),
    ];
    for (params, hint) in &refused {
        let t = presets::fat_tree(params).unwrap();
        let err = fat_tree_rotation(params, &t, &t.endpoints())
            .err()
            .unwrap_or_else(|| panic!("{params:?} turned"))
            .to_string();
        assert!(
            err.contains("drop `symmetry` to simulate every rank"),
            "{err}"
        );
        assert!(err.contains(hint), "{err}");
        let nodes = suggested(&err, "nodes");
        assert!(!nodes.is_empty(), "{err}");
        let spines = suggested(&err, "spines");
        let layouts = nodes
            .iter()
            .map(|&n| FatTree {
                nodes: n,
                ..*params
            })
            .chain(spines.iter().map(|&s| FatTree {
                spines: Some(s),
                ..*params
            }));
        for layout in layouts {
            let t = presets::fat_tree(&layout).unwrap();
            assert!(
                fat_tree_rotation(&layout, &t, &t.endpoints()).is_ok(),
                "{err}: {layout:?} does not turn"
            );
        }
    }
}

#[test]
fn an_nvl72_cluster_that_does_not_turn_names_rack_counts_that_do() {
    // Its key is `racks`, not `nodes`; each named layout, built, turns.
    let cluster = |racks, leaves, spines| Nvl72Cluster {
        racks,
        leaves,
        spines,
        ..Nvl72Cluster::default()
    };
    let refused = [
        (
            cluster(5, None, Some(4)),
            "racks = 4 or 8, or spines = 1 would turn",
        ),
        (cluster(9, Some(144), Some(5)), "racks = 10 would turn"),
    ];
    for (params, hint) in &refused {
        let t = presets::nvl72_cluster(params).unwrap();
        let err = nvl72_cluster_rotation(params, &t, &t.endpoints())
            .err()
            .unwrap_or_else(|| panic!("{params:?} turned"))
            .to_string();
        assert!(err.contains(hint), "{err}");
        assert!(!err.contains("node"), "{err}");
        let layouts = suggested(&err, "racks")
            .into_iter()
            .map(|racks| Nvl72Cluster { racks, ..*params })
            .chain(suggested(&err, "spines").into_iter().map(|s| Nvl72Cluster {
                spines: Some(s),
                ..*params
            }));
        for layout in layouts {
            let t = presets::nvl72_cluster(&layout).unwrap();
            assert!(
                nvl72_cluster_rotation(&layout, &t, &t.endpoints()).is_ok(),
                "{err}: {layout:?} does not turn"
            );
        }
    }
}

#[test]
fn fat_tree_one_leaf_per_rail_turns_nodes_uplinks_and_spines() {
    // 16 nodes, 8 rails, 4 spines: each leaf has 16 uplinks, 4 per spine.
    let params = fat(16, 8, None, None, 1.0);
    let t = presets::fat_tree(&params).unwrap();
    let r = fat_tree_rotation(&params, &t, &t.endpoints()).unwrap();
    assert_eq!(image(&t, &r, "node0/gpu3"), "node1/gpu3");
    assert_eq!(image(&t, &r, "node15/gpu3"), "node0/gpu3");
    assert_eq!(image(&t, &r, "node7/nvswitch"), "node8/nvswitch");
    assert_eq!(image(&t, &r, "node7/socket1"), "node8/socket1");
    assert_eq!(image(&t, &r, "leaf5"), "leaf5");
    assert_eq!(image(&t, &r, "spine0"), "spine1");
    assert_eq!(image(&t, &r, "spine3"), "spine0");
    let nic = link(&t, "node15/nic2", "leaf2");
    assert_eq!(r.link(nic), link(&t, "node0/nic2", "leaf2"));
    let inside = link(&t, "node3/pcie1", "node3/socket0");
    assert_eq!(r.link(inside), link(&t, "node4/pcie1", "node4/socket0"));
    // Uplink i goes to uplink i + 1: uplink 3 (to spine 3) to uplink 4
    // (to spine 0, the second link there); the last to the first.
    let up = uplinks(&t, "leaf5");
    assert_eq!(up.len(), 16);
    for i in 0..16 {
        assert_eq!(r.link(up[i]), up[(i + 1) % 16], "uplink {i}");
        assert_eq!(r.link(t.reverse(up[i])), t.reverse(up[(i + 1) % 16]));
    }
    assert_eq!(t.vertex(t.ends(up[3]).1).name, "spine3");
    assert_eq!(t.vertex(t.ends(up[4]).1).name, "spine0");
    // Every uplink of a leaf is one orbit: copies of a flow use all spines.
    let orbits = r.link_orbits(&t).unwrap();
    assert!(up.iter().all(|&l| orbits[l.index()] == up[0]));
}

#[test]
fn fat_tree_several_leaves_per_rail_turns_a_rails_leaves() {
    // 8 nodes, 16 leaves: rail g has leaves 2g (nodes 0-3) and 2g+1 (4-7).
    let params = fat(8, 8, Some(16), None, 1.0);
    let t = presets::fat_tree(&params).unwrap();
    let r = fat_tree_rotation(&params, &t, &t.endpoints()).unwrap();
    assert_eq!((r.shift(), r.order()), (32, 2));
    assert_eq!(image(&t, &r, "node0/gpu0"), "node4/gpu0");
    assert_eq!(image(&t, &r, "node5/nic7"), "node1/nic7");
    assert_eq!(image(&t, &r, "leaf10"), "leaf11");
    assert_eq!(image(&t, &r, "leaf11"), "leaf10");
    assert_eq!(image(&t, &r, "spine2"), "spine2");
    assert_eq!(
        r.link(link(&t, "node3/nic5", "leaf10")),
        link(&t, "node7/nic5", "leaf11")
    );
    let (up10, up11) = (uplinks(&t, "leaf10"), uplinks(&t, "leaf11"));
    assert_eq!(up10.len(), 4);
    for i in 0..4 {
        assert_eq!(r.link(up10[i]), up11[i]);
        assert_eq!(r.link(up11[i]), up10[i]);
    }
}

#[test]
fn fat_tree_placements_that_do_not_rotate_are_refused() {
    let params = fat(2, 8, None, None, 1.0);
    let t = presets::fat_tree(&params).unwrap();
    let gpus = t.endpoints();
    // Ranks 0..8 on node 0 only: node 0 goes to node 1, which has no rank.
    let err = fat_tree_rotation(&params, &t, &gpus[..8]).unwrap_err();
    assert!(
        err.to_string()
            .contains("rank 0 is on node0/gpu0 but the rotation takes it to node1/gpu0"),
        "{err}"
    );
    // Two ranks swapped.
    let mut swapped = gpus.clone();
    swapped.swap(1, 2);
    let err = fat_tree_rotation(&params, &t, &swapped).unwrap_err();
    assert!(err.to_string().contains("rank 1 is on node0/gpu2"), "{err}");
    // 12 ranks: the shift of 8 does not divide them; no ranks at all.
    let err = fat_tree_rotation(&params, &t, &gpus[..12]).unwrap_err();
    assert!(
        err.to_string().contains("divide the number of ranks (12)"),
        "{err}"
    );
    assert!(matches!(
        fat_tree_rotation(&params, &t, &[]),
        Err(TopologyError::Symmetry(_))
    ));
}

#[test]
fn fat_tree_bad_parameters_or_another_topology_are_errors() {
    let params = fat(4, 8, None, None, 1.0);
    let t = presets::fat_tree(&params).unwrap();
    let bad = FatTree {
        gpus_per_node: 0,
        ..params
    };
    let err = fat_tree_rotation(&bad, &t, &t.endpoints()).unwrap_err();
    assert!(matches!(&err, TopologyError::Parameter(m) if m.contains("gpus_per_node")));
    // A topology of 8 nodes rotated as one of 4: node4 is foreign.
    let big = presets::fat_tree(&fat(8, 8, None, None, 1.0)).unwrap();
    let err = fat_tree_rotation(&params, &big, &big.endpoints()).unwrap_err();
    assert!(err.to_string().contains("node4/gpu0"), "{err}");
    // Another preset altogether.
    let ring = presets::ring(&RingParams::default()).unwrap();
    let err = fat_tree_rotation(&params, &ring, &ring.endpoints()).unwrap_err();
    assert!(err.to_string().contains("the topology has gpu0"), "{err}");
}

/// The scale case: 2048 default DGX H100 nodes, 16 384 ranks, one leaf
/// per rail. The rotation by one node builds and folds onto node 0.
#[test]
fn fat_tree_of_2048_nodes_folds() {
    let nodes = 2048;
    let params = FatTree {
        nodes,
        ..FatTree::default()
    };
    let start = std::time::Instant::now();
    let t = presets::fat_tree(&params).unwrap();
    let built = start.elapsed();
    let r = fat_tree_rotation(&params, &t, &t.endpoints()).unwrap();
    let orbits = r.link_orbits(&t).unwrap();
    eprintln!(
        "fat_tree of {nodes} nodes ({} ranks, {} link directions): built in {built:?}, \
         rotation and orbits in {:?}",
        r.ranks(),
        t.link_direction_count(),
        start.elapsed() - built
    );
    assert_eq!((r.ranks(), r.shift(), r.order()), (16_384, 8, nodes));
    assert_eq!(image(&t, &r, "node2047/gpu7"), "node0/gpu7");
    // Each orbit has `nodes` members, so there are that many times fewer
    // representatives than link directions.
    let reps = t.link_ids().filter(|&l| orbits[l.index()] == l).count();
    assert_eq!(reps * nodes, t.link_direction_count());
}

fn spine(hosts: usize, hosts_per_leaf: usize, spines: usize, o: f64) -> LeafSpine {
    LeafSpine {
        hosts,
        hosts_per_leaf,
        spines,
        oversubscription: o,
        ..LeafSpine::default()
    }
}

#[test]
fn leaf_spine_layouts_give_their_rotation_or_say_why_not() {
    let cases = [
        (LeafSpine::default(), ok(8, 2, true)),
        (spine(12, 4, 2, 2.0), ok(4, 3, true)),
        (spine(64, 8, 8, 1.0), ok(8, 8, true)),
        (spine(7, 8, 0, 1.0), ok(1, 7, true)),
        (spine(1, 8, 0, 1.0), ok(1, 1, true)),
        // One leaf with a spine: the uplinks stay, so it does not fold.
        (spine(7, 7, 1, 1.0), ok(1, 7, false)),
        (
            spine(10, 4, 2, 1.0),
            Expect::Error("4 hosts per leaf do not divide the 10 hosts"),
        ),
    ];
    for (params, expected) in &cases {
        let t = presets::leaf_spine(params).unwrap();
        let result = leaf_spine_rotation(params, &t, &t.endpoints());
        check(&t, result, expected, &format!("{params:?}"));
    }
}

#[test]
fn leaf_spine_images_and_wrong_placements() {
    let params = LeafSpine::default();
    let t = presets::leaf_spine(&params).unwrap();
    let r = leaf_spine_rotation(&params, &t, &t.endpoints()).unwrap();
    assert_eq!(image(&t, &r, "host0"), "host8");
    assert_eq!(image(&t, &r, "host15/nic"), "host7/nic");
    assert_eq!(image(&t, &r, "leaf1"), "leaf0");
    assert_eq!(image(&t, &r, "spine1"), "spine1");
    let (up0, up1) = (uplinks(&t, "leaf0"), uplinks(&t, "leaf1"));
    assert_eq!(up0.len(), 8);
    for i in 0..8 {
        assert_eq!(r.link(up0[i]), up1[i]);
    }
    let one = spine(7, 7, 1, 1.0);
    let t1 = presets::leaf_spine(&one).unwrap();
    let r1 = leaf_spine_rotation(&one, &t1, &t1.endpoints()).unwrap();
    assert_eq!(image(&t1, &r1, "host6"), "host0");
    let err = r1.link_orbits(&t1).unwrap_err();
    assert!(err.to_string().contains("leaf0->spine0"), "{err}");
    let mut hosts = t.endpoints();
    hosts.swap(0, 15);
    let err = leaf_spine_rotation(&params, &t, &hosts).unwrap_err();
    assert!(err.to_string().contains("rank 0 is on host15"), "{err}");
    let err = leaf_spine_rotation(&spine(16, 0, 2, 1.0), &t, &t.endpoints()).unwrap_err();
    assert!(matches!(&err, TopologyError::Parameter(m) if m.contains("hosts_per_leaf")));
}

#[test]
fn rings_turn_by_one_gpu() {
    for n in [1, 2, 3, 8, 17] {
        let params = RingParams {
            gpus: n,
            ..RingParams::default()
        };
        let t = presets::ring(&params).unwrap();
        let r = ring_rotation(&params, &t, &t.endpoints());
        check(&t, r, &ok(1, n, true), &format!("ring of {n}"));
    }
    let params = RingParams::default();
    let t = presets::ring(&params).unwrap();
    let r = ring_rotation(&params, &t, &t.endpoints()).unwrap();
    assert_eq!(image(&t, &r, "gpu7"), "gpu0");
    assert_eq!(r.link(link(&t, "gpu7", "gpu0")), link(&t, "gpu0", "gpu1"));
    // Ranks going round the other way are a different rotation.
    let mut backwards = t.endpoints();
    backwards.reverse();
    let err = ring_rotation(&params, &t, &backwards).unwrap_err();
    assert!(err.to_string().contains("rank 0 is on gpu7"), "{err}");
    // A ring of 8 rotated as a ring of 4: gpu4 is foreign.
    let four = RingParams { gpus: 4, ..params };
    let err = ring_rotation(&four, &t, &t.endpoints()).unwrap_err();
    assert!(err.to_string().contains("the topology has gpu4"), "{err}");
    // A two-GPU ring's one link is turned round.
    let two = RingParams { gpus: 2, ..params };
    let t = presets::ring(&two).unwrap();
    let r = ring_rotation(&two, &t, &t.endpoints()).unwrap();
    assert_eq!(r.link(link(&t, "gpu0", "gpu1")), link(&t, "gpu1", "gpu0"));
}

#[test]
fn tori_move_down_by_one_row() {
    for (x, y) in [(4, 4), (3, 5), (1, 5), (5, 1), (2, 2), (8, 2), (2, 3)] {
        let params = Torus {
            x,
            y,
            ..Torus::default()
        };
        let t = presets::torus2d(&params).unwrap();
        let r = torus2d_rotation(&params, &t, &t.endpoints());
        check(&t, r, &ok(x, y, true), &format!("{x}x{y}"));
    }
    let params = Torus::default();
    let t = presets::torus2d(&params).unwrap();
    let r = torus2d_rotation(&params, &t, &t.endpoints()).unwrap();
    assert_eq!(image(&t, &r, "gpu5"), "gpu9");
    assert_eq!(image(&t, &r, "gpu13"), "gpu1");
    assert_eq!(r.link(link(&t, "gpu4", "gpu7")), link(&t, "gpu8", "gpu11"));
    assert_eq!(r.link(link(&t, "gpu13", "gpu1")), link(&t, "gpu1", "gpu5"));
    // Column-major ranks do not move by a row.
    let column_major: Vec<VertexId> = (0..16)
        .map(|i| id(&t, &format!("gpu{}", (i % 4) * 4 + i / 4)))
        .collect();
    let err = torus2d_rotation(&params, &t, &column_major).unwrap_err();
    assert!(err.to_string().contains("rank 0 is on gpu0"), "{err}");
    let err = torus2d_rotation(&Torus { x: 0, ..params }, &t, &t.endpoints()).unwrap_err();
    assert!(matches!(err, TopologyError::Parameter(_)));
}
