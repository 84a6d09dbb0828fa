//! Tests of routing: ECMP, costs, connectivity, distances, placements.

use super::*;
use crate::kind::{Link, LinkKind};
use crate::vertex::{Vertex, VertexKind};

/// A link with the given bandwidth, 1 us latency and 1000-byte MTU.
fn link(bandwidth_bytes_per_s: f64) -> Link {
    Link {
        kind: LinkKind::Pcie {
            generation: 4,
            width: 16,
        },
        count: 1,
        bandwidth_bytes_per_s,
        latency_ps: 1_000_000,
        mtu_bytes: 1000,
        buffer_bytes: 1 << 16,
        lossless: true,
    }
}

fn add(t: &mut Topology, name: &str, kind: VertexKind) -> VertexId {
    t.add_vertex(Vertex::new(name, kind)).unwrap()
}

fn names(t: &Topology, route: &[LinkId]) -> Vec<String> {
    route.iter().map(|&l| t.link_name(l)).collect()
}

/// gpu0 - sw0 =(two parallel links)= sw1 - gpu1.
fn parallel() -> (Arc<Topology>, VertexId, VertexId) {
    let mut t = Topology::new();
    let g0 = add(&mut t, "gpu0", VertexKind::Gpu);
    let g1 = add(&mut t, "gpu1", VertexKind::Gpu);
    let s0 = add(&mut t, "sw0", VertexKind::Leaf);
    let s1 = add(&mut t, "sw1", VertexKind::Leaf);
    t.add_link(g0, s0, link(1e10)).unwrap();
    t.add_link(s0, s1, link(1e10)).unwrap();
    t.add_link(s0, s1, link(1e10)).unwrap();
    t.add_link(s1, g1, link(1e10)).unwrap();
    (Arc::new(t), g0, g1)
}

#[test]
fn ecmp_spreads_flows_over_parallel_links_deterministically() {
    let (t, g0, g1) = parallel();
    let middle = |seed: u64| -> Vec<usize> {
        let mut r = Router::new(Arc::clone(&t), seed);
        (0..64)
            .map(|flow| {
                let route = r.route(g0, g1, flow).unwrap();
                assert_eq!(route.len(), 3);
                assert_eq!(t.ends(route[0]).0, g0);
                assert_eq!(t.ends(route[2]).1, g1);
                route[1].index()
            })
            .collect()
    };
    let a = middle(7);
    // Link directions 2 and 4 are the two sw0 -> sw1 directions.
    assert!(a.iter().all(|&l| l == 2 || l == 4));
    let on_first = a.iter().filter(|&&l| l == 2).count();
    assert!((16..=48).contains(&on_first), "{on_first} of 64 flows");
    assert_eq!(a, middle(7), "same seed, same routes");
    assert_ne!(a, middle(8), "another seed reshuffles some flows");
    // The choice is the documented hash of (seed, flow, vertex sw0).
    for (flow, &l) in a.iter().enumerate() {
        let pick = ecmp_hash(7, flow as u64, 2) % 2;
        assert_eq!(l, [2, 4][pick as usize]);
    }
}

#[test]
fn routes_are_cached_per_flow() {
    let (t, g0, g1) = parallel();
    let mut r = Router::new(t, 1);
    let a = r.route(g0, g1, 3).unwrap();
    assert!(Arc::ptr_eq(&a, &r.route(g0, g1, 3).unwrap()));
    assert!(r.route(g0, g0, 3).unwrap().is_empty());
    // The reverse route uses the reverse directions of some shortest path.
    let back = r.route(g1, g0, 3).unwrap();
    assert_eq!(back.len(), 3);
    assert_eq!(r.topology().ends(back[2]).1, g0);
}

#[test]
fn non_forwarding_gpus_are_not_transit() {
    // sw0 - gpuX - sw1 is the short way; sw0 - a - b - sw1 the long one.
    let build = |gpu_forwards: bool| {
        let mut t = Topology::new();
        let g0 = add(&mut t, "gpu0", VertexKind::Gpu);
        let g1 = add(&mut t, "gpu1", VertexKind::Gpu);
        let x = t
            .add_vertex(Vertex::new("gpuX", VertexKind::Gpu).with_forwarding(gpu_forwards))
            .unwrap();
        let s0 = add(&mut t, "sw0", VertexKind::Leaf);
        let s1 = add(&mut t, "sw1", VertexKind::Leaf);
        let a = add(&mut t, "a", VertexKind::Spine);
        let b = add(&mut t, "b", VertexKind::Spine);
        for (u, v) in [
            (g0, s0),
            (s1, g1),
            (s0, x),
            (x, s1),
            (s0, a),
            (a, b),
            (b, s1),
        ] {
            t.add_link(u, v, link(1e10)).unwrap();
        }
        let t = Arc::new(t);
        let route = Router::new(Arc::clone(&t), 0).route(g0, g1, 0).unwrap();
        names(&t, &route)
    };
    assert_eq!(
        build(false),
        ["gpu0->sw0", "sw0->a", "a->b", "b->sw1", "sw1->gpu1"]
    );
    assert_eq!(
        build(true),
        ["gpu0->sw0", "sw0->gpuX", "gpuX->sw1", "sw1->gpu1"]
    );
}

#[test]
fn cost_prefers_the_faster_path_of_equal_hops() {
    // Two-hop paths through "pcie" (10 GB/s) and "nvs" (300 GB/s).
    // Per hop, one 1000-byte packet: 1 us + 100 ns versus 1 us + 3.34 ns.
    let mut t = Topology::new();
    let g0 = add(&mut t, "gpu0", VertexKind::Gpu);
    let g1 = add(&mut t, "gpu1", VertexKind::Gpu);
    let pcie = add(&mut t, "pcie", VertexKind::PcieSwitch);
    let nvs = add(&mut t, "nvs", VertexKind::NvSwitch);
    for g in [g0, g1] {
        t.add_link(g, pcie, link(1e10)).unwrap();
        t.add_link(g, nvs, link(3e11)).unwrap();
    }
    let t = Arc::new(t);
    let mut r = Router::new(Arc::clone(&t), 0);
    for flow in 0..8 {
        let route = r.route(g0, g1, flow).unwrap();
        assert_eq!(names(&t, &route), ["gpu0->nvs", "nvs->gpu1"]);
    }
    // A forwarding latency on the NVSwitch larger than the difference
    // (2 x (100 ns - 3.34 ns) = 193.3 ns) makes PCIe cheaper.
    let mut slow = Topology::new();
    for v in t.vertex_ids() {
        let vertex = t.vertex(v).clone();
        let latency_ps = if vertex.name == "nvs" { 200_000 } else { 0 };
        slow.add_vertex(vertex.with_forward_latency_ps(latency_ps))
            .unwrap();
    }
    for l in t.link_ids().step_by(2) {
        let (a, b) = t.ends(l);
        slow.add_link(a, b, *t.link(l)).unwrap();
    }
    let slow = Arc::new(slow);
    let route = Router::new(Arc::clone(&slow), 0).route(g0, g1, 0).unwrap();
    assert_eq!(names(&slow, &route), ["gpu0->pcie", "pcie->gpu1"]);
}

#[test]
fn unconnected_pairs_are_named() {
    let mut t = Topology::new();
    let g: Vec<VertexId> = (0..3)
        .map(|i| add(&mut t, &format!("gpu{i}"), VertexKind::Gpu))
        .collect();
    let s0 = add(&mut t, "sw0", VertexKind::Leaf);
    let s1 = add(&mut t, "sw1", VertexKind::Leaf);
    t.add_link(g[0], s0, link(1e10)).unwrap();
    t.add_link(g[1], s0, link(1e10)).unwrap();
    t.add_link(g[2], s1, link(1e10)).unwrap();
    let t = Arc::new(t);
    let mut r = Router::new(Arc::clone(&t), 0);
    let p = Placement::in_order(&t, 3).unwrap();
    let err = r.check_connected(&p).unwrap_err();
    assert_eq!(
        err,
        RouteError::Unconnected {
            a: 0,
            a_name: "gpu0".into(),
            b: 2,
            b_name: "gpu2".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "ranks 0 (gpu0) and 2 (gpu2) are not connected"
    );
    assert_eq!(
        r.route(g[1], g[2], 0).unwrap_err().to_string(),
        "no route from gpu1 to gpu2"
    );
    r.check_connected(&Placement::in_order(&t, 2).unwrap())
        .unwrap();
}

#[test]
fn connectivity_without_a_common_switch() {
    // gpu0 on sw0, gpu1 on sw0 and sw1, gpu2 on sw1, gpu2 - gpu3 direct:
    // every pair but (0, 2), (0, 3) and (1, 3) is connected.
    let mut t = Topology::new();
    let g: Vec<VertexId> = (0..4)
        .map(|i| add(&mut t, &format!("gpu{i}"), VertexKind::Gpu))
        .collect();
    let s0 = add(&mut t, "sw0", VertexKind::Leaf);
    let s1 = add(&mut t, "sw1", VertexKind::Leaf);
    for (u, v) in [(g[0], s0), (g[1], s0), (g[1], s1), (g[2], s1), (g[2], g[3])] {
        t.add_link(u, v, link(1e10)).unwrap();
    }
    let t = Arc::new(t);
    let mut r = Router::new(Arc::clone(&t), 0);
    let check = |r: &mut Router, map: &[usize]| {
        r.check_connected(&Placement::from_endpoints(&t, map).unwrap())
            .map_err(|e| match e {
                RouteError::Unconnected { a, b, .. } => (a, b),
                other => panic!("{other}"),
            })
    };
    assert_eq!(check(&mut r, &[0, 1, 2]), Err((0, 2)));
    assert_eq!(check(&mut r, &[1, 2, 3]), Err((0, 2))); // gpu1 / gpu3
    assert_eq!(check(&mut r, &[2, 3]), Ok(())); // direct link
    assert_eq!(check(&mut r, &[1, 2]), Ok(()));
    // The router agrees pair by pair.
    for a in 0..4 {
        for b in (0..4).filter(|&b| b != a) {
            let connected = check(&mut r, &[a, b]).is_ok();
            assert_eq!(r.route(g[a], g[b], 0).is_ok(), connected, "{a} {b}");
        }
    }
}

/// A two-level fat-tree: `leaves` leaves of `per_leaf` GPUs, each leaf
/// linked to every one of `spines` spines.
fn fat_tree(leaves: usize, per_leaf: usize, spines: usize) -> Topology {
    let mut t = Topology::new();
    let spine: Vec<VertexId> = (0..spines)
        .map(|s| add(&mut t, &format!("spine{s}"), VertexKind::Spine))
        .collect();
    for l in 0..leaves {
        let leaf = add(&mut t, &format!("leaf{l}"), VertexKind::Leaf);
        for &s in &spine {
            t.add_link(leaf, s, link(5e10)).unwrap();
        }
        for g in 0..per_leaf {
            let gpu = add(&mut t, &format!("gpu{l}_{g}"), VertexKind::Gpu);
            t.add_link(gpu, leaf, link(5e10)).unwrap();
        }
    }
    t
}

#[test]
fn fat_tree_routes_are_deterministic_and_spread_over_spines() {
    let t = Arc::new(fat_tree(4, 2, 4));
    let p = Placement::in_order(&t, 8).unwrap();
    let run = |seed| {
        let mut r = Router::new(Arc::clone(&t), seed);
        let mut all = Vec::new();
        for flow in 0..32u64 {
            let route = r.route(p.vertex(0), p.vertex(7), flow).unwrap();
            all.push(names(&t, &route));
        }
        all
    };
    let a = run(42);
    assert_eq!(a, run(42));
    for route in &a {
        assert_eq!(route.len(), 4, "gpu, leaf, spine, leaf, gpu");
    }
    let spines_used: std::collections::BTreeSet<&str> =
        a.iter().map(|r| r[1].split("->").nth(1).unwrap()).collect();
    assert!(spines_used.len() >= 3, "{spines_used:?}");
    // Same-leaf neighbours never go up to a spine.
    let mut r = Router::new(Arc::clone(&t), 42);
    assert_eq!(r.route(p.vertex(0), p.vertex(1), 0).unwrap().len(), 2);
}

#[test]
fn connectivity_check_scales() {
    // 4096 ranks on 128 leaves: the common-switch fast path.
    let t = Arc::new(fat_tree(128, 32, 8));
    let p = Placement::in_order(&t, 4096).unwrap();
    let mut r = Router::new(Arc::clone(&t), 0);
    r.check_connected(&p).unwrap();
    let route = r.route(p.vertex(0), p.vertex(4095), 0).unwrap();
    assert_eq!(route.len(), 4);
}

/// Checks that the distances a route uses, shared or not, equal a
/// Dijkstra run for the destination itself, in every phase, under
/// shortest and up*/down* routing (from the default root and from the
/// last forwarding vertex).
fn assert_shared_distances_exact(t: Arc<Topology>) {
    let last = t.vertex_ids().filter(|&v| t.vertex(v).forwards).last();
    for routing in [
        Routing::Shortest,
        Routing::UpDown { root: None },
        Routing::UpDown { root: last },
    ] {
        let mut r = Router::with_routing(Arc::clone(&t), 0, routing).unwrap();
        let n = t.vertex_count();
        for dst in t.vertex_ids() {
            let direct = r.dijkstra(dst);
            assert_eq!(direct.len(), r.phases() * n);
            let anchor = r.stub_anchor(dst);
            let target = anchor.map_or(dst, |(w, _)| w);
            r.ensure_distances(target);
            let d = Distances {
                to_target: &r.dist_to[&(target.index() as u32)],
                vertex_count: n,
                dst,
                anchor: anchor.map(|(w, last)| (w, last, last + t.vertex(w).forward_latency_ps)),
            };
            for phase in 0..r.phases() {
                for v in t.vertex_ids() {
                    assert_eq!(
                        d.get(v, phase),
                        direct[phase * n + v.index()],
                        "{routing:?}: {v:?} in phase {phase} to {dst:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn shared_distance_arrays_are_exact() {
    // Leaves with a forwarding latency and GPUs on parallel uplinks.
    let mut t = Topology::new();
    let spine = t
        .add_vertex(Vertex::new("spine", VertexKind::Spine).with_forward_latency_ps(700))
        .unwrap();
    for l in 0..3 {
        let leaf = t
            .add_vertex(
                Vertex::new(format!("leaf{l}"), VertexKind::Leaf).with_forward_latency_ps(300),
            )
            .unwrap();
        t.add_link(leaf, spine, link(5e10)).unwrap();
        for g in 0..2 {
            let gpu = add(&mut t, &format!("gpu{l}_{g}"), VertexKind::Gpu);
            t.add_link(gpu, leaf, link(1e10)).unwrap();
            t.add_link(gpu, leaf, link(2e10)).unwrap();
        }
    }
    assert_shared_distances_exact(Arc::new(t));
    assert_shared_distances_exact(Arc::new(fat_tree(3, 2, 2)));
    assert_shared_distances_exact(parallel().0);
}

#[test]
fn evicting_distances_changes_no_route() {
    let t = Arc::new(fat_tree(8, 4, 4));
    let p = Placement::in_order(&t, 32).unwrap();
    for routing in [Routing::Shortest, Routing::UpDown { root: None }] {
        let mut roomy = Router::with_routing(Arc::clone(&t), 9, routing).unwrap();
        let mut tight = Router::with_routing(Arc::clone(&t), 9, routing).unwrap();
        tight.dist_capacity = 1;
        for a in 0..32 {
            for b in 0..32 {
                let (x, y) = (p.vertex(a), p.vertex((a * 7 + b) % 32));
                let flow = (a * 32 + b) as u64;
                assert_eq!(roomy.route(x, y, flow), tight.route(x, y, flow));
            }
        }
        assert_eq!(tight.dist_to.len(), 1);
        assert_eq!(roomy.dist_to.len(), 8, "one array per leaf");
    }
}

#[test]
fn up_down_distance_arrays_hold_two_phases() {
    let t = Arc::new(fat_tree(2, 2, 2));
    let shortest = Router::new(Arc::clone(&t), 0);
    let up_down = Router::with_routing(t, 0, Routing::UpDown { root: None }).unwrap();
    assert_eq!(shortest.dist_capacity, 2 * up_down.dist_capacity);
    assert_eq!(up_down.routing(), Routing::UpDown { root: None });
    assert!(format!("{up_down:?}").contains("UpDown"));
}

#[test]
fn placement_errors_name_the_rank() {
    let t = fat_tree(1, 4, 1);
    let err = |e: RouteError| e.to_string();
    assert_eq!(
        err(Placement::in_order(&t, 5).unwrap_err()),
        "5 ranks do not fit: the topology has 4 endpoints (GPUs and CPUs)"
    );
    assert!(Placement::in_order(&t, 0).is_err());
    assert_eq!(
        err(Placement::from_endpoints(&t, &[0, 4]).unwrap_err()),
        "rank 1: endpoint 4 is out of range (the topology has 4 endpoints)"
    );
    assert_eq!(
        err(Placement::from_endpoints(&t, &[3, 1, 3]).unwrap_err()),
        "rank 2: endpoint 3 (gpu0_3) is already used by rank 0"
    );
    let p = Placement::from_endpoints(&t, &[3, 1]).unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(t.vertex(p.vertex(0)).name, "gpu0_3");
    let mut r = Router::new(Arc::new(t), 0);
    assert_eq!(
        r.route(VertexId::new(99), VertexId::new(0), 0),
        Err(RouteError::UnknownVertex(99))
    );
}

#[test]
fn splitmix_matches_the_reference_sequence() {
    // SplitMix64 seeded with 0: the generator adds the golden gamma
    // before mixing, so the first output is splitmix64(0).
    assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
}
