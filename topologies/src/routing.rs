//! Rank placement and routing: which vertex each rank runs on, and which
//! link directions a flow between two vertices crosses.
//!
//! # Cost
//! Crossing link direction `l = (u -> v)` on the way to destination `d`
//! costs the time one MTU-sized packet takes to cross it, store and
//! forward, in integer picoseconds:
//!
//! ```text
//! cost(l, d) = latency_ps(l) + serialization_ps(l, mtu_bytes(l))
//!            + (if v == d { 0 } else { forward_latency_ps(v) })
//! ```
//!
//! (at least 1 ps, so that every hop costs something and a route can never
//! loop). Passing *through* a CPU socket (a root complex or the SMP link
//! behind it) also costs [`HOST_TRANSIT_PENALTY_PS`], a routing weight, not
//! a delay: traffic crosses a host only when no other path exists, as NCCL
//! uses a GPU's nearest NIC and treats PHB/SYS paths as a last resort. On a
//! fat-tree, a GPU therefore reaches another rail through its own NIC and
//! the spine, never through the other socket's NIC; in a PCIe box, GPUs
//! under different sockets still talk across the SMP link. Bandwidth counts: a two-hop path over a 240 GB/s NVLink
//! bundle beats a two-hop PCIe path, because one packet serialises faster.
//!
//! # Routes
//! A route is a cheapest legal path under that cost. It may pass *through*
//! a vertex only if [`Vertex::forwards`](crate::Vertex::forwards) (GPUs
//! and CPUs normally do not; the ring and torus presets make GPUs
//! forward); its source and destination may be any vertex. Which paths are
//! legal is the [`Routing`] policy:
//!
//! - [`Routing::Shortest`] (the default): every path.
//! - [`Routing::UpDown`]: up*/down* routing ([`updown`] has the
//!   definition): up link directions, then down ones, never up after down.
//!   The channel dependencies of such routes cannot form a cycle, so
//!   lossless (credit or PFC) traffic cannot deadlock on one, where
//!   shortest paths around a ring of switches can.
//!
//! Up*/down* routes are found over states `(vertex, phase)`, phase 0
//! meaning only up directions so far and phase 1 a down one taken: an up
//! direction is allowed only in phase 0 and keeps it, a down one is
//! allowed in both and leads to phase 1. A route starts in phase 0.
//! Shortest-path routing is the same with a single phase and every
//! direction allowed.
//!
//! # ECMP
//! At each vertex on the way, the outgoing link directions that start a
//! cheapest legal remaining path are the candidates, in [`LinkId`] order
//! (parallel links count separately). The route takes candidate number
//! `ecmp_hash(seed, flow, vertex) % candidates`, where `ecmp_hash` is the
//! fixed [`splitmix64`] mix below: the same seed and flow always give the
//! same route, different flows spread over equal-cost links, and nothing
//! depends on `std`'s randomly keyed hashers.
//!
//! # Distances
//! A route needs the distances to its destination only on its cheapest
//! paths and one hop off them. The first [`PAIR_SEARCHES_PER_TARGET`]
//! routes towards a destination each get a search around their own pair
//! (`search`: a short forward search from the source bounds a reverse
//! A* search from the destination), so a ring on 16,384 ranks of the
//! fat-tree preset never computes a distance array over its 47,116
//! vertices. After that, the destination's whole array is computed by a
//! reverse Dijkstra (one `u64` per vertex and phase) and kept, as a
//! pattern sending to it from many sources (an alltoall) needs. A GPU
//! whose links all lead to one switch shares that switch's array (hosts
//! on a leaf share the leaf's; the DGX presets' GPUs also link to a PCIe
//! switch, so there each destination GPU has its own); and at most
//! [`DISTANCE_CACHE_BYTES`] of arrays are kept (oldest dropped first,
//! recomputed if needed again). Both ways give every route exactly the
//! same links. Per `(source, destination, flow)` the finished route is
//! kept in a `HashMap` that is only looked up, never iterated.
//!
//! # Connectivity
//! [`Router::check_connected`] does not route every pair: two vertices are
//! connected exactly when they are adjacent or touch one connected
//! component of forwarding vertices (links are full duplex). When every
//! placed rank touches one common component, which is the case on any
//! switched fabric, the check is linear in the number of ranks. The check
//! holds for both policies: up*/down* connects every pair that shortest
//! paths connect ([`updown`] says why).

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::graph::{LinkId, Topology, VertexId};
use crate::vertex::VertexKind;

mod connectivity;
mod distances;
mod ecmp;
mod placement;
mod search;
pub mod updown;

use distances::Distances;
pub use ecmp::{ecmp_hash, splitmix64};
pub use placement::Placement;

pub use search::FORWARD_WORK;
use search::{Adjacency, Graph, Hop, PairSearch};

/// Routing weight added for passing through a CPU socket (see the module
/// docs): 1 ms, more than any path through switches costs, so a route
/// crosses a host only when it must.
pub const HOST_TRANSIT_PENALTY_PS: u64 = 1_000_000_000;

/// The link directions a flow crosses, source first.
pub type Route = Arc<[LinkId]>;

/// Why ranks cannot be placed or routed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// Two ranks with no path between them.
    #[error("ranks {a} ({a_name}) and {b} ({b_name}) are not connected")]
    Unconnected {
        /// One rank.
        a: usize,
        /// Its vertex name.
        a_name: String,
        /// The other rank.
        b: usize,
        /// Its vertex name.
        b_name: String,
    },
    /// A placement that does not fit the topology.
    #[error("{0}")]
    Placement(String),
    /// Two vertices with no path between them.
    #[error("no route from {src} to {dst}")]
    NoPath {
        /// The source vertex's name.
        src: String,
        /// The destination vertex's name.
        dst: String,
    },
    /// A vertex id that is not in the router's topology.
    #[error("vertex {0} is not in the topology")]
    UnknownVertex(usize),
    /// An up*/down* root that does not forward traffic.
    #[error("the up*/down* root {0} does not forward traffic")]
    RootNotForwarding(String),
}

/// Which paths a [`Router`] may choose (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    /// The cheapest path.
    #[default]
    Shortest,
    /// The cheapest up*/down* path.
    UpDown {
        /// The root of the up*/down* levels; `None` is the default root
        /// (see [`updown`]).
        root: Option<VertexId>,
    },
}

/// No path (a distance larger than any real one).
const UNREACHABLE: u64 = u64::MAX;

/// The most memory a [`Router`] spends on cached distance arrays (one
/// `u64` per vertex per destination); beyond it the oldest array is
/// dropped and recomputed when needed again, which changes no route.
pub const DISTANCE_CACHE_BYTES: usize = 256 << 20;

/// The most finished routes kept (about 100 MB); beyond it the cache is
/// emptied and refilled, so an alltoall on thousands of ranks does not
/// keep one route per rank pair forever.
pub const ROUTES_CACHED_MAX: usize = 1 << 20;

/// Route searches towards one distance-array target (a destination or
/// its stub anchor) before the router computes the target's whole array
/// instead: a pattern that sends to a vertex from many sources (an
/// alltoall) pays one Dijkstra per destination, a ring one small search
/// per pair.
pub const PAIR_SEARCHES_PER_TARGET: u32 = 16;

/// Computes and caches routes.
pub struct Router {
    topology: Arc<Topology>,
    seed: u64,
    routing: Routing,
    /// `up[l]` under up*/down* routing; `None` for shortest paths.
    up: Option<Box<[bool]>>,
    /// `out[v]`: the link directions leaving `v`, sorted by id.
    out: Vec<Vec<LinkId>>,
    /// `head[l]`: the vertex link direction `l` leads to.
    head: Box<[u32]>,
    /// `forwards[v]`: whether `v` forwards traffic.
    forwards: Box<[bool]>,
    /// `transit_ps[v]`: the routing cost of passing through `v`.
    transit_ps: Box<[u64]>,
    /// Per vertex, the neighbours its links lead to, parallel links merged.
    out_hops: Adjacency,
    /// Per vertex, the neighbours whose links lead to it.
    in_hops: Adjacency,
    /// Scratch of the per-route searches.
    search: PairSearch,
    /// Per target vertex: route searches made without its distance array.
    searches: Vec<u32>,
    /// [`PAIR_SEARCHES_PER_TARGET`] (tests lower it).
    searches_per_target: u32,
    /// [`FORWARD_WORK`] (tests lower it).
    forward_work: usize,
    /// `base_ps[l]`: latency plus one MTU's serialisation on `l`.
    base_ps: Vec<u64>,
    /// `dist_to[d][phase * vertex_count + v]`: cost of the best route
    /// from `v` in `phase` to `d`, by `d`; computed on first use, looked
    /// up only.
    dist_to: HashMap<u32, Box<[u64]>>,
    /// The keys of `dist_to`, oldest first, for eviction.
    dist_order: VecDeque<u32>,
    /// How many distance arrays `dist_to` keeps.
    dist_capacity: usize,
    /// Finished routes by `(src, dst, flow)`; looked up only.
    routes: HashMap<(u32, u32, u64), Route>,
}

/// A summary: the caches can hold millions of entries, in hash order.
impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("vertices", &self.topology.vertex_count())
            .field("seed", &self.seed)
            .field("routing", &self.routing)
            .field("distance_arrays", &self.dist_to.len())
            .field("routes_cached", &self.routes.len())
            .field("search_work", &self.search.work())
            .finish_non_exhaustive()
    }
}

impl Router {
    /// A shortest-path router over `topology`; `seed` salts the ECMP hash.
    pub fn new(topology: Arc<Topology>, seed: u64) -> Router {
        Router::with_routing(topology, seed, Routing::Shortest)
            .expect("shortest-path routing has no root to reject")
    }

    /// A router over `topology` choosing routes by `routing`; `seed` salts
    /// the ECMP hash. Fails when an up*/down* root is not a forwarding
    /// vertex of `topology`.
    pub fn with_routing(
        topology: Arc<Topology>,
        seed: u64,
        routing: Routing,
    ) -> Result<Router, RouteError> {
        let out: Vec<Vec<LinkId>> = topology
            .vertex_ids()
            .map(|v| topology.out_links(v))
            .collect();
        let up = match routing {
            Routing::Shortest => None,
            Routing::UpDown { root } => {
                let level = updown::levels(&topology, &out, root)?;
                Some(updown::up_directions(&topology, &level))
            }
        };
        let phases = if up.is_some() { 2 } else { 1 };
        let base_ps: Vec<u64> = topology
            .link_ids()
            .map(|l| {
                let link = topology.link(l);
                link.latency_ps
                    .saturating_add(link.serialization_ps(link.mtu_bytes))
                    .max(1)
            })
            .collect();
        let n = topology.vertex_count();
        let head: Box<[u32]> = topology
            .link_ids()
            .map(|l| topology.ends(l).1.index() as u32)
            .collect();
        let forwards = topology
            .vertex_ids()
            .map(|v| topology.vertex(v).forwards)
            .collect();
        let transit_ps = topology
            .vertex_ids()
            .map(|v| transit_cost_ps(&topology, v))
            .collect();
        let is_up = |l: LinkId| up.as_ref().is_some_and(|up| up[l.index()]);
        let hop = |l: LinkId, vertex: usize| Hop {
            vertex: vertex as u32,
            base_ps: base_ps[l.index()],
            up: is_up(l),
        };
        let out_hops = Adjacency::build(n, |v, hops| {
            hops.extend(out[v].iter().map(|&l| hop(l, head[l.index()] as usize)));
        });
        // The links into `v` are the reverses of those out of it.
        let in_hops = Adjacency::build(n, |v, hops| {
            hops.extend(out[v].iter().map(|&l| {
                let back = topology.reverse(l);
                hop(back, head[l.index()] as usize)
            }));
        });
        let array_bytes = 8 * phases * n.max(1);
        Ok(Router {
            head,
            forwards,
            transit_ps,
            out_hops,
            in_hops,
            search: PairSearch::default(),
            searches: vec![0; n],
            searches_per_target: PAIR_SEARCHES_PER_TARGET,
            forward_work: FORWARD_WORK,
            dist_to: HashMap::default(),
            dist_order: VecDeque::new(),
            dist_capacity: (DISTANCE_CACHE_BYTES / array_bytes).max(16),
            topology,
            seed,
            routing,
            up,
            out,
            base_ps,
            routes: HashMap::default(),
        })
    }

    /// The routing policy.
    pub fn routing(&self) -> Routing {
        self.routing
    }

    /// Under up*/down* routing, whether each link direction is an up
    /// direction (indexed by [`LinkId::index`]; see [`updown`]); `None`
    /// for shortest paths, which orient nothing.
    pub fn up_directions(&self) -> Option<&[bool]> {
        self.up.as_deref()
    }

    /// Phases of the routing states: 1 for shortest paths, 2 for up*/down*.
    fn phases(&self) -> usize {
        if self.up.is_some() { 2 } else { 1 }
    }

    /// The phase after crossing `l` in `phase`, or `None` if the policy
    /// forbids `l` there (an up direction after a down one).
    fn step(&self, phase: usize, l: LinkId) -> Option<usize> {
        match &self.up {
            None => Some(phase),
            Some(up) if up[l.index()] => (phase == 0).then_some(0),
            Some(_) => Some(1),
        }
    }

    /// The topology routed over.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// The route of flow `flow` from `src` to `dst` (empty when they are
    /// the same vertex).
    pub fn route(&mut self, src: VertexId, dst: VertexId, flow: u64) -> Result<Route, RouteError> {
        for v in [src, dst] {
            if v.index() >= self.topology.vertex_count() {
                return Err(RouteError::UnknownVertex(v.index()));
            }
        }
        let key = (src.index() as u32, dst.index() as u32, flow);
        if let Some(route) = self.routes.get(&key) {
            return Ok(Arc::clone(route));
        }
        let route = self.compute_route(src, dst, flow)?;
        if self.routes.len() >= ROUTES_CACHED_MAX {
            // Routes are a pure function of (src, dst, flow, seed): dropping
            // them changes no result, only the time to find them again.
            self.routes.clear();
        }
        self.routes.insert(key, Arc::clone(&route));
        Ok(route)
    }

    /// The route of `flow` from `src` to `dst`: the distances to `dst`
    /// from a whole array (cached, shared with a stub anchor) once the
    /// target has been searched for often, from a search for this pair
    /// alone before (see [`search`]); both give the same route.
    fn compute_route(
        &mut self,
        src: VertexId,
        dst: VertexId,
        flow: u64,
    ) -> Result<Route, RouteError> {
        if src == dst {
            return Ok(Vec::new().into());
        }
        let anchor = self.stub_anchor(dst);
        let target = anchor.map_or(dst, |(w, _)| w);
        let key = target.index() as u32;
        let searched = &mut self.searches[target.index()];
        if !self.dist_to.contains_key(&key) && *searched < self.searches_per_target {
            *searched += 1;
            let graph = Graph {
                out: &self.out_hops,
                into: &self.in_hops,
                forwards: &self.forwards,
                transit_ps: &self.transit_ps,
                phases: self.phases(),
                up_down: self.up.is_some(),
            };
            self.search
                .run(&graph, src.index(), dst.index(), self.forward_work);
            let n = self.topology.vertex_count();
            let search = &self.search;
            return self.walk(src, dst, flow, |v, phase| {
                search.to_dst(phase * n + v.index())
            });
        }
        self.ensure_distances(target);
        let dist = Distances {
            to_target: &self.dist_to[&key],
            vertex_count: self.topology.vertex_count(),
            dst,
            anchor: anchor
                .map(|(w, last_ps)| (w, last_ps, last_ps.saturating_add(self.transit_ps(w)))),
        };
        self.walk(src, dst, flow, |v, phase| dist.get(v, phase))
    }

    /// Follows `dist` (a state's distance to `dst`, exact at least on the
    /// cheapest paths from `src`) from `src`, choosing among equal-cost
    /// next hops by the ECMP hash.
    fn walk(
        &self,
        src: VertexId,
        dst: VertexId,
        flow: u64,
        dist: impl Fn(VertexId, usize) -> u64,
    ) -> Result<Route, RouteError> {
        let t = &*self.topology;
        if dist(src, 0) == UNREACHABLE {
            return Err(RouteError::NoPath {
                src: t.vertex(src).name.clone(),
                dst: t.vertex(dst).name.clone(),
            });
        }
        let mut hops = Vec::new();
        let mut candidates = Vec::new();
        let (mut cur, mut phase) = (src, 0);
        while cur != dst {
            candidates.clear();
            let here = dist(cur, phase);
            for &l in &self.out[cur.index()] {
                let v = VertexId::new(self.head[l.index()] as usize);
                if !(v == dst || self.forwards[v.index()]) {
                    continue;
                }
                let Some(next) = self.step(phase, l) else {
                    continue;
                };
                let there = dist(v, next);
                if there != UNREACHABLE && self.cost(l, v, dst).saturating_add(there) == here {
                    candidates.push((l, next));
                }
            }
            let pick = ecmp_hash(self.seed, flow, cur.index() as u64) % candidates.len() as u64;
            let (l, next) = candidates[pick as usize];
            hops.push(l);
            (cur, phase) = (VertexId::new(self.head[l.index()] as usize), next);
            // Each hop lowers the remaining distance by at least 1 ps, and
            // a vertex's phase-1 distance is at least its phase-0 one (phase
            // 1 allows fewer paths), so no vertex is visited twice.
            assert!(
                hops.len() <= t.vertex_count(),
                "routes are loop-free because every hop costs at least 1 ps"
            );
        }
        Ok(hops.into())
    }

    /// Cost of crossing `l`, which ends at `v`, towards `dst` (see the
    /// module docs).
    fn cost(&self, l: LinkId, v: VertexId, dst: VertexId) -> u64 {
        let forward_ps = if v == dst { 0 } else { self.transit_ps(v) };
        self.base_ps[l.index()].saturating_add(forward_ps)
    }

    /// The routing cost of passing through `v`: its forwarding latency,
    /// plus [`HOST_TRANSIT_PENALTY_PS`] for a CPU socket.
    fn transit_ps(&self, v: VertexId) -> u64 {
        self.transit_ps[v.index()]
    }
}

/// The routing cost of passing through `v`: its forwarding latency, plus
/// [`HOST_TRANSIT_PENALTY_PS`] for a CPU socket.
fn transit_cost_ps(topology: &Topology, v: VertexId) -> u64 {
    let vertex = topology.vertex(v);
    let penalty = if vertex.kind == VertexKind::Socket {
        HOST_TRANSIT_PENALTY_PS
    } else {
        0
    };
    vertex.forward_latency_ps.saturating_add(penalty)
}

#[cfg(test)]
mod tests;
