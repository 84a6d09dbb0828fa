//! The up*/down* orientation of a topology's link directions (Autonet:
//! Schroeder et al., "Autonet: a high-speed, self-configuring local area
//! network using point-to-point links", IEEE JSAC 9(8), 1991; InfiniBand
//! OpenSM's `updn` routing engine).
//!
//! # Levels
//! A breadth-first search from a root, over the links between
//! [forwarding](crate::Vertex::forwards) vertices only, gives each
//! forwarding vertex its level: its hop distance from the root. Each
//! connected component of forwarding vertices has its own root and search:
//! the named root for its own component; otherwise the component's
//! lowest-id vertex of the first kind present among: leaves, spines, other
//! switches (NVSwitch, PCIe switch), any forwarding vertex. (A DGX node's
//! NVSwitch, linked only to GPUs that do not forward, is a component of
//! its own.) Vertices that do not forward rank below every forwarding
//! vertex, like the hosts at the bottom of an Autonet or InfiniBand tree.
//!
//! Why a leaf before a spine: on a two-level Clos network a leaf root puts
//! every spine on level 1, so routes between the other leaves (level 2)
//! may go up to any spine and down again, as shortest paths do. A spine
//! root would put the other spines on level 2, below the leaves, and every
//! route between leaves would cross the root. With a leaf root the
//! fat-tree and leaf-spine presets route every rank pair over as many hops
//! at the same cost as shortest paths (they need no up*/down*: a Clos
//! network's shortest paths are already free of dependency cycles).
//!
//! # Up and down
//! Order vertices by `(level, id)`, non-forwarding ones last. A link
//! direction `u -> v` is *up* when `v` comes before `u` (a lower level, or
//! the same level and a lower id), and *down* otherwise. Every link has one
//! up and one down direction, and up directions never form a cycle, since
//! each one strictly decreases `(level, id)`.
//!
//! A legal route takes zero or more up directions, then zero or more down
//! ones, never up after down. A first hop out of a non-forwarding source
//! is therefore always up and a last hop into a non-forwarding destination
//! always down: endpoints constrain nothing. Every vertex's search parent
//! is an up step towards its root, so any two vertices of a component
//! reach each other (up to the root, down from it): up*/down* connects
//! exactly the pairs shortest-path routing connects.

use crate::graph::{LinkId, Topology, VertexId};
use crate::vertex::VertexKind;

use super::RouteError;

/// The level of a vertex that does not forward: after every real level.
const BELOW_ALL: u32 = u32::MAX;

/// How much a vertex of `kind` is preferred as a default root: lower
/// first (see the module docs).
fn root_tier(kind: VertexKind) -> u8 {
    match kind {
        VertexKind::Leaf => 0,
        VertexKind::Spine => 1,
        VertexKind::NvSwitch | VertexKind::PcieSwitch => 2,
        _ => 3,
    }
}

/// Every vertex's level (see the module docs), indexed by vertex id;
/// `out[v]` lists the link directions leaving `v`. `root`, if given, must
/// be a forwarding vertex of `topology`.
pub(super) fn levels(
    topology: &Topology,
    out: &[Vec<LinkId>],
    root: Option<VertexId>,
) -> Result<Vec<u32>, RouteError> {
    let t = topology;
    if let Some(r) = root {
        if r.index() >= t.vertex_count() {
            return Err(RouteError::UnknownVertex(r.index()));
        }
        if !t.vertex(r).forwards {
            return Err(RouteError::RootNotForwarding(t.vertex(r).name.clone()));
        }
    }
    let forwards = |v: VertexId| t.vertex(v).forwards;
    // Roots in order of preference: the named one, then the forwarding
    // vertices by (tier, id). The first one met in a component that has no
    // level yet is that component's root.
    let mut candidates: Vec<VertexId> = t.vertex_ids().filter(|&v| forwards(v)).collect();
    candidates.sort_by_key(|&v| (root_tier(t.vertex(v).kind), v.index()));
    let mut level = vec![BELOW_ALL; t.vertex_count()];
    let mut queue = std::collections::VecDeque::new();
    for r in root.into_iter().chain(candidates) {
        if level[r.index()] != BELOW_ALL {
            continue;
        }
        level[r.index()] = 0;
        queue.push_back(r);
        while let Some(u) = queue.pop_front() {
            for &l in &out[u.index()] {
                let v = t.ends(l).1;
                if forwards(v) && level[v.index()] == BELOW_ALL {
                    level[v.index()] = level[u.index()] + 1;
                    queue.push_back(v);
                }
            }
        }
    }
    Ok(level)
}

/// `up[l]` for every link direction `l` of `topology`, given every
/// vertex's level: whether `l` leads to an earlier vertex in `(level, id)`
/// order.
pub(super) fn up_directions(topology: &Topology, level: &[u32]) -> Box<[bool]> {
    let key = |v: VertexId| (level[v.index()], v.index());
    topology
        .link_ids()
        .map(|l| {
            let (u, v) = topology.ends(l);
            key(v) < key(u)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use super::*;
    use crate::kind::{Link, LinkKind};
    use crate::routing::{Router, Routing};
    use crate::vertex::{ETHERNET_SWITCH_LATENCY_PS, Vertex};

    fn out(t: &Topology) -> Vec<Vec<LinkId>> {
        t.vertex_ids().map(|v| t.out_links(v)).collect()
    }

    /// `gpu0 - a - b - c`, `d - e` (a second component), `f` alone; `b` is
    /// the only switch of the first component.
    fn islands() -> Topology {
        let mut t = Topology::new();
        let link = Link::bundle(LinkKind::Roce { gbps: 100 }, 1);
        let mut ids = Vec::new();
        for (name, kind) in [
            ("gpu0", VertexKind::Gpu),
            ("a", VertexKind::Nic),
            ("b", VertexKind::Leaf),
            ("c", VertexKind::Nic),
            ("d", VertexKind::Nic),
            ("e", VertexKind::Nic),
            ("f", VertexKind::Socket),
        ] {
            ids.push(t.add_vertex(Vertex::new(name, kind)).unwrap());
        }
        for (x, y) in [(0, 1), (1, 2), (2, 3), (4, 5)] {
            t.add_link(ids[x], ids[y], link).unwrap();
        }
        t
    }

    #[test]
    fn each_component_is_levelled_from_its_own_root() {
        let t = islands();
        // Default: the switch b roots the first component, d (lowest id)
        // the second, f its own; the GPU ranks below everything.
        let level = levels(&t, &out(&t), None).unwrap();
        assert_eq!(level, [BELOW_ALL, 1, 0, 1, 0, 1, 0]);
        // A named root changes its own component only.
        let c = t.find("c").unwrap();
        let level = levels(&t, &out(&t), Some(c)).unwrap();
        assert_eq!(level, [BELOW_ALL, 2, 1, 0, 0, 1, 0]);
        // Up directions: towards the root, and out of the GPU.
        let up = up_directions(&t, &level);
        let name = |l: usize| t.link_name(LinkId::new(l));
        let ups: Vec<String> = (0..up.len()).filter(|&l| up[l]).map(name).collect();
        assert_eq!(ups, ["gpu0->a", "a->b", "b->c", "e->d"]);
    }

    #[test]
    fn the_default_root_is_a_leaf_then_a_spine_then_a_switch() {
        // A chain pcie - spine - leaf - nic, inserted in that order.
        let chain = |kinds: &[VertexKind]| {
            let mut t = Topology::new();
            let link = Link::bundle(LinkKind::Roce { gbps: 100 }, 1);
            let ids: Vec<VertexId> = kinds
                .iter()
                .enumerate()
                .map(|(i, &k)| t.add_vertex(Vertex::new(format!("v{i}"), k)).unwrap())
                .collect();
            for w in ids.windows(2) {
                t.add_link(w[0], w[1], link).unwrap();
            }
            let level = levels(&t, &out(&t), None).unwrap();
            level.iter().position(|&l| l == 0).unwrap()
        };
        use VertexKind::{Leaf, Nic, PcieSwitch, Spine};
        assert_eq!(chain(&[PcieSwitch, Spine, Leaf, Nic]), 2);
        assert_eq!(chain(&[PcieSwitch, Spine, Nic, Nic]), 1);
        assert_eq!(chain(&[Nic, PcieSwitch, Nic, PcieSwitch]), 1);
        assert_eq!(chain(&[Nic, Nic, Nic]), 0);
    }

    #[test]
    fn a_root_must_forward() {
        let t = islands();
        let gpu = t.find("gpu0").unwrap();
        assert_eq!(
            levels(&t, &out(&t), Some(gpu)),
            Err(RouteError::RootNotForwarding("gpu0".into()))
        );
        assert_eq!(
            levels(&t, &out(&t), Some(VertexId::new(70))),
            Err(RouteError::UnknownVertex(70))
        );
    }

    /// Five RoCE switches `s0..s4` in a ring, `s<i>` linked to
    /// `s<i+1 mod 5>`, and a host `h<i>` on each switch. Switches are
    /// vertices 0..5, hosts 5..10.
    fn switch_ring() -> Arc<Topology> {
        let mut t = Topology::new();
        let link = Link::bundle(LinkKind::Roce { gbps: 100 }, 1);
        let s: Vec<VertexId> = (0..5)
            .map(|i| {
                let v = Vertex::new(format!("s{i}"), VertexKind::Leaf)
                    .with_forward_latency_ps(ETHERNET_SWITCH_LATENCY_PS);
                t.add_vertex(v).unwrap()
            })
            .collect();
        for (i, &switch) in s.iter().enumerate() {
            let h = t
                .add_vertex(Vertex::new(format!("h{i}"), VertexKind::Cpu))
                .unwrap();
            t.add_link(h, switch, link).unwrap();
        }
        for i in 0..5 {
            t.add_link(s[i], s[(i + 1) % 5], link).unwrap();
        }
        Arc::new(t)
    }

    fn names(t: &Topology, route: &[LinkId]) -> Vec<String> {
        route.iter().map(|&l| t.link_name(l)).collect()
    }

    /// The channel dependencies of `routes`: `(a, b)` when a route crosses
    /// link direction `a` and then `b`.
    fn dependencies(routes: &[Arc<[LinkId]>]) -> BTreeSet<(LinkId, LinkId)> {
        routes
            .iter()
            .flat_map(|r| r.windows(2).map(|w| (w[0], w[1])))
            .collect()
    }

    /// Whether the dependency graph has a cycle: Kahn's algorithm peels
    /// off link directions nothing waits on, and a cycle is what remains.
    fn has_cycle(deps: &BTreeSet<(LinkId, LinkId)>) -> bool {
        let mut waits_on: BTreeMap<LinkId, usize> = BTreeMap::new();
        for &(a, b) in deps {
            waits_on.entry(a).or_default();
            *waits_on.entry(b).or_default() += 1;
        }
        let mut free: Vec<LinkId> = waits_on
            .iter()
            .filter(|&(_, &n)| n == 0)
            .map(|(&l, _)| l)
            .collect();
        let mut peeled = 0;
        while let Some(a) = free.pop() {
            peeled += 1;
            for &(_, b) in deps.range((a, LinkId::new(0))..=(a, LinkId::end())) {
                let n = waits_on.get_mut(&b).expect("every end is counted");
                *n -= 1;
                if *n == 0 {
                    free.push(b);
                }
            }
        }
        peeled < waits_on.len()
    }

    #[test]
    fn the_cycle_check_finds_cycles() {
        let l = LinkId::new;
        let chain: BTreeSet<_> = [(l(0), l(1)), (l(1), l(2)), (l(0), l(2))].into();
        assert!(!has_cycle(&chain));
        let mut ring = chain.clone();
        ring.insert((l(2), l(0)));
        assert!(has_cycle(&ring));
    }

    #[test]
    fn shortest_paths_around_a_switch_ring_wait_on_each_other_in_a_cycle() {
        let t = switch_ring();
        let mut r = Router::new(Arc::clone(&t), 0);
        let mut routes = Vec::new();
        for i in 0..5 {
            let (j, k) = ((i + 1) % 5, (i + 2) % 5);
            let src = t.find(&format!("h{i}")).unwrap();
            let dst = t.find(&format!("h{k}")).unwrap();
            let route = r.route(src, dst, i as u64).unwrap();
            assert_eq!(
                names(&t, &route),
                [
                    format!("h{i}->s{i}"),
                    format!("s{i}->s{j}"),
                    format!("s{j}->s{k}"),
                    format!("s{k}->h{k}"),
                ]
            );
            routes.push(route);
        }
        let deps = dependencies(&routes);
        assert!(has_cycle(&deps));
        // The cycle is the clockwise one: s0s1 -> s1s2 -> ... -> s4s0.
        let clockwise = |i: usize| {
            let (a, b) = (VertexId::new(i % 5), VertexId::new((i + 1) % 5));
            t.out_links(a)
                .into_iter()
                .find(|&l| t.ends(l).1 == b)
                .unwrap()
        };
        for i in 0..5 {
            assert!(deps.contains(&(clockwise(i), clockwise(i + 1))), "{i}");
        }
    }

    /// Routes every ordered pair of distinct vertices of `t` with several
    /// flows each under `routing`, checking each is legal for `key`.
    fn all_up_down_routes(
        t: &Arc<Topology>,
        routing: Routing,
        key: impl Fn(VertexId) -> (u32, usize),
    ) -> Vec<Arc<[LinkId]>> {
        let mut r = Router::with_routing(Arc::clone(t), 5, routing).unwrap();
        let mut routes = Vec::new();
        for a in t.vertex_ids() {
            for b in t.vertex_ids().filter(|&b| b != a) {
                for flow in 0..4 {
                    let route = r.route(a, b, flow).unwrap();
                    assert_eq!(t.ends(route[0]).0, a);
                    assert_eq!(t.ends(route[route.len() - 1]).1, b);
                    let up = |l: LinkId| key(t.ends(l).1) < key(t.ends(l).0);
                    for w in route.windows(2) {
                        assert!(
                            up(w[1]) <= up(w[0]),
                            "{routing:?}: down then up in {:?}",
                            names(t, &route)
                        );
                    }
                    routes.push(route);
                }
            }
        }
        routes
    }

    #[test]
    fn up_down_routes_around_a_switch_ring_have_no_dependency_cycle() {
        let t = switch_ring();
        // Levels from the default root s0, worked out by hand: s1 and s4
        // are one hop away, s2 and s3 two; hosts rank below all.
        let by_hand = [0, 1, 2, 2, 1];
        let key = |v: VertexId| match by_hand.get(v.index()) {
            Some(&level) => (level, v.index()),
            None => (BELOW_ALL, v.index()),
        };
        let routes = all_up_down_routes(&t, Routing::UpDown { root: None }, key);
        assert!(!has_cycle(&dependencies(&routes)));
        // h2 -> h4 may not go s2 -> s3 (down) -> s4 (up): it goes the long
        // way round, up to s0 and down. The other clockwise flows are legal.
        let mut r =
            Router::with_routing(Arc::clone(&t), 0, Routing::UpDown { root: None }).unwrap();
        let hosts: Vec<VertexId> = (0..5).map(|i| t.find(&format!("h{i}")).unwrap()).collect();
        let route = r.route(hosts[2], hosts[4], 0).unwrap();
        assert_eq!(
            names(&t, &route),
            ["h2->s2", "s2->s1", "s1->s0", "s0->s4", "s4->h4"]
        );
        for i in [0, 1, 3, 4] {
            assert_eq!(r.route(hosts[i], hosts[(i + 2) % 5], 0).unwrap().len(), 4);
        }
        // Another root breaks the ring elsewhere, just as acyclically.
        let s2 = t.find("s2").unwrap();
        let by_hand = [2, 1, 0, 1, 2];
        let key = |v: VertexId| match by_hand.get(v.index()) {
            Some(&level) => (level, v.index()),
            None => (BELOW_ALL, v.index()),
        };
        let routes = all_up_down_routes(&t, Routing::UpDown { root: Some(s2) }, key);
        assert!(!has_cycle(&dependencies(&routes)));
    }
}
