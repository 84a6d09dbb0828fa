//! Tests of the rotations of a topology (`super`).

use std::sync::Arc;

use super::*;
use crate::kind::{Link, LinkKind};
use crate::vertex::{Vertex, VertexKind};

/// A ring of `n` GPUs joined by NVLink, and its rotation by one GPU.
fn ring(n: usize) -> (Topology, Vec<VertexId>, Vec<VertexId>, Vec<LinkId>) {
    let mut t = Topology::new();
    let gpus: Vec<VertexId> = (0..n)
        .map(|g| {
            t.add_vertex(Vertex::with_default_latency(
                format!("gpu{g}"),
                VertexKind::Gpu,
            ))
            .unwrap()
        })
        .collect();
    let link = Link::bundle(LinkKind::NvLink { generation: 4 }, 1);
    // Link i joins gpu i and gpu i+1: directions 2i (forward), 2i+1.
    for g in 0..n {
        t.add_link(gpus[g], gpus[(g + 1) % n], link).unwrap();
    }
    let vertices = (0..n).map(|g| gpus[(g + 1) % n]).collect();
    let links = (0..2 * n).map(|d| LinkId::new((d + 2) % (2 * n))).collect();
    (t, gpus, vertices, links)
}

#[test]
fn a_ring_rotates_by_one_and_every_link_moves() {
    let (t, placement, vertices, links) = ring(4);
    let r = Rotation::new(&t, &placement, 4, 1, vertices, links).unwrap();
    assert_eq!((r.shift(), r.ranks(), r.order()), (1, 4, 4));
    assert_eq!(r.link_power(LinkId::new(0), 3), LinkId::new(6));
    assert_eq!(r.link_power(LinkId::new(1), 4), LinkId::new(1));
    assert_eq!(r.link_power(LinkId::new(1), 5), LinkId::new(3));
    let orbits = r.link_orbits(&t).unwrap();
    assert_eq!(orbits[6], LinkId::new(0));
    assert_eq!(orbits[7], LinkId::new(1));
}

#[test]
fn a_rotation_that_turns_the_up_down_order_is_refused() {
    let (t, placement, vertices, links) = ring(4);
    let r = Rotation::new(&t, &placement, 4, 1, vertices, links).unwrap();
    // Up*/down* orders the GPUs by id: gpu3->gpu0 is up, and its
    // image gpu0->gpu1 down.
    let router = crate::Router::with_routing(
        Arc::new(t.clone()),
        0,
        crate::Routing::UpDown { root: None },
    )
    .unwrap();
    let up = router.up_directions().unwrap();
    let err = r.check_orientation(&t, up).unwrap_err().to_string();
    assert!(
        err.contains("is up but its image") || err.contains("is down but its image"),
        "{err}"
    );
    // An orientation every step keeps (all down) passes; one of the
    // wrong length is an error, not a panic.
    r.check_orientation(&t, &[false; 8]).unwrap();
    assert!(r.check_orientation(&t, &[false; 3]).is_err());
    // Shortest paths orient nothing.
    let shortest = crate::Router::new(Arc::new(t), 0);
    assert!(shortest.up_directions().is_none());
}

#[test]
fn a_map_that_breaks_the_graph_is_refused() {
    let (t, placement, vertices, mut links) = ring(4);
    links.swap(0, 1); // direction 0 now goes to direction 1's image
    let err = Rotation::new(&t, &placement, 4, 1, vertices, links).unwrap_err();
    assert!(err.to_string().contains("gpu0->gpu1"), "{err}");
}

#[test]
fn a_map_onto_a_vertex_that_forwards_differently_is_refused() {
    // gpu2 relays traffic, the others do not: the ring's rotation by
    // one would carry a route through gpu2 onto one through gpu3.
    let (t, placement, vertices, links) = ring(4);
    let relays = !t.vertex(placement[2]).forwards;
    let t = rebuilt_with_forwarding(&t, placement[2].index(), relays);
    let err = Rotation::new(&t, &placement, 4, 1, vertices, links).unwrap_err();
    assert!(
        err.to_string().contains("which is a different device"),
        "{err}"
    );
}

/// `t` with vertex `index` forwarding or not as `forwards` says.
fn rebuilt_with_forwarding(t: &Topology, index: usize, forwards: bool) -> Topology {
    let mut out = Topology::new();
    for v in t.vertex_ids() {
        let mut vertex = t.vertex(v).clone();
        if v.index() == index {
            vertex.forwards = forwards;
        }
        out.add_vertex(vertex).unwrap();
    }
    for l in t.link_ids().step_by(2) {
        let (a, b) = t.ends(l);
        out.add_link(a, b, *t.link(l)).unwrap();
    }
    out
}

#[test]
fn a_placement_the_map_does_not_rotate_is_refused() {
    let (t, mut placement, vertices, links) = ring(4);
    placement.swap(2, 3);
    let err = Rotation::new(&t, &placement, 4, 1, vertices, links).unwrap_err();
    assert!(err.to_string().contains("rank 1 is on gpu1"), "{err}");
}

#[test]
fn a_shift_that_does_not_divide_is_refused() {
    let (t, placement, vertices, links) = ring(4);
    let err = Rotation::new(&t, &placement, 4, 3, vertices, links).unwrap_err();
    assert!(err.to_string().contains("divide"), "{err}");
}

#[test]
fn a_map_that_does_not_come_back_in_order_steps_is_refused() {
    // Two GPUs on a 2-ring (ranks 0 and 1, shift 1: order 2) and,
    // apart, three switches on a 3-ring turned by one: they come back
    // after 3 steps, which 2 steps of the ranks never reach.
    let mut t = Topology::new();
    let link = Link::bundle(LinkKind::NvLink { generation: 4 }, 1);
    let add = |t: &mut Topology, name: String, kind| {
        t.add_vertex(Vertex::with_default_latency(name, kind))
            .unwrap()
    };
    let g: Vec<VertexId> = (0..2)
        .map(|i| add(&mut t, format!("gpu{i}"), VertexKind::Gpu))
        .collect();
    let s: Vec<VertexId> = (0..3)
        .map(|i| add(&mut t, format!("sw{i}"), VertexKind::NvSwitch))
        .collect();
    t.add_link(g[0], g[1], link).unwrap(); // directions 0, 1
    t.add_link(g[1], g[0], link).unwrap(); // directions 2, 3
    for i in 0..3 {
        t.add_link(s[i], s[(i + 1) % 3], link).unwrap(); // 4 + 2i, 5 + 2i
    }
    let vertices = vec![g[1], g[0], s[1], s[2], s[0]];
    let mut links: Vec<LinkId> = [2, 3, 0, 1].map(LinkId::new).to_vec();
    links.extend((0..6).map(|d| LinkId::new(4 + (d + 2) % 6)));
    let err = Rotation::new(&t, &g, 2, 1, vertices, links).unwrap_err();
    assert!(
        err.to_string()
            .contains("vertex sw0 back (it comes back after 3)"),
        "{err}"
    );
}

#[test]
fn a_rotation_with_a_shorter_link_orbit_cannot_fold() {
    // The ring of 4 rotated by two GPUs as ranks 0, 1, 2, 3 on
    // gpu0, gpu1, gpu0, gpu1 would not be a placement; instead rotate
    // a ring of 2 by one step as ranks 0..4 placed twice around:
    // every link comes back after 2 steps, not 4.
    let (t, gpus, vertices, links) = ring(2);
    let placement = vec![gpus[0], gpus[1], gpus[0], gpus[1]];
    let r = Rotation::new(&t, &placement, 4, 1, vertices, links);
    // Rotating 4 times is the identity, so it is a rotation...
    let r = r.unwrap();
    // ...but each link's orbit has 2 members, not 4.
    let err = r.link_orbits(&t).unwrap_err();
    assert!(
        err.to_string().contains("after 2 of the rotation's 4"),
        "{err}"
    );
}
