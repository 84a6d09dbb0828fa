//! Tests of the pair search: routes equal the reference Dijkstra's on the presets and on random graphs.

use std::sync::Arc;

use crate::graph::{LinkId, Topology, VertexId};
use crate::kind::{Link, LinkKind};
use crate::presets;
use crate::routing::{Router, Routing, UNREACHABLE, ecmp_hash, splitmix64, updown};
use crate::vertex::{Vertex, VertexKind};

/// The router as it was before per-route searches, written out
/// plainly over the topology: one reverse Dijkstra per destination on
/// every link direction (parallel links separately), then the walk.
struct Reference {
    t: Arc<Topology>,
    seed: u64,
    up: Option<Box<[bool]>>,
    out: Vec<Vec<LinkId>>,
}

impl Reference {
    fn new(t: Arc<Topology>, seed: u64, routing: Routing) -> Reference {
        let out: Vec<Vec<LinkId>> = t.vertex_ids().map(|v| t.out_links(v)).collect();
        let up = match routing {
            Routing::Shortest => None,
            Routing::UpDown { root } => {
                let level = updown::levels(&t, &out, root).unwrap();
                Some(updown::up_directions(&t, &level))
            }
        };
        Reference { t, seed, up, out }
    }

    fn phases(&self) -> usize {
        if self.up.is_some() { 2 } else { 1 }
    }

    fn step(&self, phase: usize, l: LinkId) -> Option<usize> {
        match &self.up {
            None => Some(phase),
            Some(up) if up[l.index()] => (phase == 0).then_some(0),
            Some(_) => Some(1),
        }
    }

    fn cost(&self, l: LinkId, v: VertexId, dst: VertexId) -> u64 {
        let link = self.t.link(l);
        let base = link
            .latency_ps
            .saturating_add(link.serialization_ps(link.mtu_bytes))
            .max(1);
        let vertex = self.t.vertex(v);
        let penalty = if vertex.kind == VertexKind::Socket {
            crate::routing::HOST_TRANSIT_PENALTY_PS
        } else {
            0
        };
        let forward = if v == dst {
            0
        } else {
            vertex.forward_latency_ps.saturating_add(penalty)
        };
        base.saturating_add(forward)
    }

    fn dijkstra(&self, dst: VertexId) -> Vec<u64> {
        let (t, n, phases) = (&*self.t, self.t.vertex_count(), self.phases());
        let mut dist = vec![UNREACHABLE; phases * n];
        let mut done = vec![false; phases * n];
        for phase in 0..phases {
            dist[phase * n + dst.index()] = 0;
        }
        // Quadratic Dijkstra: plain enough to trust.
        while let Some(state) = (0..phases * n)
            .filter(|&s| !done[s] && dist[s] != UNREACHABLE)
            .min_by_key(|&s| dist[s])
        {
            done[state] = true;
            let (q, u) = (state / n, VertexId::new(state % n));
            if u != dst && !t.vertex(u).forwards {
                continue;
            }
            for &l_out in &self.out[u.index()] {
                let l = t.reverse(l_out);
                let w = t.ends(l).0;
                let nd = dist[state].saturating_add(self.cost(l, u, dst));
                for p in (0..phases).filter(|&p| self.step(p, l) == Some(q)) {
                    let from = p * n + w.index();
                    dist[from] = dist[from].min(nd);
                }
            }
        }
        dist
    }

    fn route(&self, dist: &[u64], src: VertexId, dst: VertexId, flow: u64) -> Option<Vec<LinkId>> {
        let (t, n) = (&*self.t, self.t.vertex_count());
        if dist[src.index()] == UNREACHABLE {
            return None;
        }
        let mut hops = Vec::new();
        let (mut cur, mut phase) = (src, 0);
        while cur != dst {
            let here = dist[phase * n + cur.index()];
            let mut candidates = Vec::new();
            for &l in &self.out[cur.index()] {
                let v = t.ends(l).1;
                if !(v == dst || t.vertex(v).forwards) {
                    continue;
                }
                let Some(next) = self.step(phase, l) else {
                    continue;
                };
                let there = dist[next * n + v.index()];
                if there != UNREACHABLE && self.cost(l, v, dst).saturating_add(there) == here {
                    candidates.push((l, next));
                }
            }
            let pick = ecmp_hash(self.seed, flow, cur.index() as u64) % candidates.len() as u64;
            let (l, next) = candidates[pick as usize];
            hops.push(l);
            (cur, phase) = (t.ends(l).1, next);
        }
        Some(hops)
    }
}

/// Every ordered pair of vertices routes as the reference does, with
/// per-route searches (at several forward budgets, so that both a
/// truncated and an exhausted forward search are exercised) and with
/// whole distance arrays, under both routing policies.
fn assert_routes_match_reference(t: Topology) {
    let t = Arc::new(t);
    let last = t.vertex_ids().filter(|&v| t.vertex(v).forwards).last();
    let mut routing = vec![Routing::Shortest];
    if last.is_some() {
        routing.extend([
            Routing::UpDown { root: None },
            Routing::UpDown { root: last },
        ]);
    }
    for routing in routing {
        let reference = Reference::new(Arc::clone(&t), 5, routing);
        let mut routers: Vec<Router> = [0, 1, 3, 16, super::FORWARD_WORK]
            .into_iter()
            .map(|work| {
                let mut r = Router::with_routing(Arc::clone(&t), 5, routing).unwrap();
                r.searches_per_target = u32::MAX;
                r.forward_work = work;
                r
            })
            .collect();
        let mut arrays = Router::with_routing(Arc::clone(&t), 5, routing).unwrap();
        arrays.searches_per_target = 0;
        routers.push(arrays);
        for dst in t.vertex_ids() {
            let dist = reference.dijkstra(dst);
            for src in t.vertex_ids() {
                let flow = splitmix64((src.index() * 1000 + dst.index()) as u64);
                let expected = reference.route(&dist, src, dst, flow);
                for r in &mut routers {
                    let got = r.route(src, dst, flow).ok().map(|route| route.to_vec());
                    assert_eq!(
                        got, expected,
                        "{routing:?}, work {}: {src:?} -> {dst:?}",
                        r.forward_work
                    );
                }
            }
        }
        assert!(routers[0].search.work() > 0, "searches ran");
        assert!(routers.last().unwrap().search.work() == 0, "arrays only");
    }
}

#[test]
fn routes_match_the_reference_on_the_presets() {
    assert_routes_match_reference(
        presets::fat_tree(&presets::FatTree {
            nodes: 3,
            ..presets::FatTree::default()
        })
        .unwrap(),
    );
    assert_routes_match_reference(
        presets::fat_tree(&presets::FatTree {
            nodes: 4,
            gpus_per_node: 2,
            spines: Some(1),
            oversubscription: 2.0,
            ..presets::FatTree::default()
        })
        .unwrap(),
    );
    assert_routes_match_reference(presets::leaf_spine(&presets::LeafSpine::default()).unwrap());
    assert_routes_match_reference(presets::pcie_box(&presets::PcieBox::default()).unwrap());
    assert_routes_match_reference(presets::torus2d(&presets::Torus::default()).unwrap());
    assert_routes_match_reference(presets::ring(&presets::RingParams::default()).unwrap());
    assert_routes_match_reference(presets::dgx_a100().unwrap());
}

/// Random graphs: vertices that forward or not, parallel links of
/// different speeds, few distinct costs (many ties), unconnected
/// parts.
#[test]
fn routes_match_the_reference_on_random_graphs() {
    let kinds = [
        VertexKind::Gpu,
        VertexKind::Leaf,
        VertexKind::Spine,
        VertexKind::Socket,
        VertexKind::PcieSwitch,
    ];
    for seed in 0..40u64 {
        let mut rng = seed;
        let mut next = move |m: u64| {
            rng = splitmix64(rng);
            rng % m
        };
        let mut t = Topology::new();
        let n = 3 + next(10) as usize;
        let v: Vec<VertexId> = (0..n)
            .map(|i| {
                let kind = kinds[next(kinds.len() as u64) as usize];
                let forwards = next(3) > 0;
                let vertex = Vertex::new(format!("v{i}"), kind)
                    .with_forwarding(forwards)
                    .with_forward_latency_ps(next(3) * 100);
                t.add_vertex(vertex).unwrap()
            })
            .collect();
        for _ in 0..next(3 * n as u64) + n as u64 / 2 {
            let (a, b) = (next(n as u64) as usize, next(n as u64) as usize);
            if a == b {
                continue;
            }
            let link = Link {
                kind: LinkKind::Pcie {
                    generation: 4,
                    width: 16,
                },
                count: 1,
                bandwidth_bytes_per_s: [1e9, 1e10, 1e12][next(3) as usize],
                latency_ps: [0, 1000, 2000][next(3) as usize],
                mtu_bytes: 1000,
                buffer_bytes: 1 << 16,
                lossless: true,
            };
            t.add_link(v[a], v[b], link).unwrap();
        }
        assert_routes_match_reference(t);
    }
}
