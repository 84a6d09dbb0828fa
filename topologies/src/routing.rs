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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::graph::{LinkId, Topology, VertexId};
use crate::vertex::VertexKind;

mod search;
pub mod updown;

pub use search::FORWARD_WORK;
use search::{Adjacency, Graph, Hop, PairSearch};

/// Routing weight added for passing through a CPU socket (see the module
/// docs): 1 ms, more than any path through switches costs, so a route
/// crosses a host only when it must.
pub const HOST_TRANSIT_PENALTY_PS: u64 = 1_000_000_000;

/// Which vertex each rank runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    ranks: Vec<VertexId>,
}

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

impl Placement {
    /// Rank `i` on the `i`-th endpoint, for `world_size` ranks.
    pub fn in_order(topology: &Topology, world_size: usize) -> Result<Placement, RouteError> {
        let endpoints = topology.endpoints();
        if world_size == 0 {
            return Err(RouteError::Placement(
                "a placement needs at least one rank".into(),
            ));
        }
        if world_size > endpoints.len() {
            return Err(RouteError::Placement(format!(
                "{world_size} ranks do not fit: the topology has {} endpoints (GPUs and CPUs)",
                endpoints.len()
            )));
        }
        Ok(Placement {
            ranks: endpoints[..world_size].to_vec(),
        })
    }

    /// Rank `i` on endpoint number `map[i]` (an index into
    /// [`Topology::endpoints`]); each endpoint at most once.
    pub fn from_endpoints(topology: &Topology, map: &[usize]) -> Result<Placement, RouteError> {
        let endpoints = topology.endpoints();
        if map.is_empty() {
            return Err(RouteError::Placement(
                "a placement needs at least one rank".into(),
            ));
        }
        let mut used_by: Vec<Option<usize>> = vec![None; endpoints.len()];
        let mut ranks = Vec::with_capacity(map.len());
        for (rank, &e) in map.iter().enumerate() {
            let Some(&vertex) = endpoints.get(e) else {
                return Err(RouteError::Placement(format!(
                    "rank {rank}: endpoint {e} is out of range (the topology has {} endpoints)",
                    endpoints.len()
                )));
            };
            if let Some(other) = used_by[e] {
                return Err(RouteError::Placement(format!(
                    "rank {rank}: endpoint {e} ({}) is already used by rank {other}",
                    topology.vertex(vertex).name
                )));
            }
            used_by[e] = Some(rank);
            ranks.push(vertex);
        }
        Ok(Placement { ranks })
    }

    /// The vertex rank `rank` runs on.
    pub fn vertex(&self, rank: usize) -> VertexId {
        self.ranks[rank]
    }

    /// Every rank's vertex, indexed by rank.
    pub fn vertices(&self) -> &[VertexId] {
        &self.ranks
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Whether no rank is placed.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
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

/// Distances to a route's destination, from its own array or from the
/// array of its stub anchor (see [`Router::stub_anchor`]).
struct Distances<'a> {
    /// By state: `to_target[phase * vertex_count + v]`.
    to_target: &'a [u64],
    vertex_count: usize,
    dst: VertexId,
    /// `(w, last hop cost, forward(w) + last hop cost)`.
    anchor: Option<(VertexId, u64, u64)>,
}

impl Distances<'_> {
    /// The cost from `v`, in `phase`, to the destination.
    fn get(&self, v: VertexId, phase: usize) -> u64 {
        let state = phase * self.vertex_count + v.index();
        match self.anchor {
            None => self.to_target[state],
            // The last hop w -> dst is down (dst does not forward), legal
            // in either phase.
            Some(_) if v == self.dst => 0,
            Some((w, last_ps, _)) if v == w => last_ps,
            Some((_, _, through_ps)) => match self.to_target[state] {
                UNREACHABLE => UNREACHABLE,
                d => d.saturating_add(through_ps),
            },
        }
    }
}

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

    /// For a non-forwarding `dst` whose links all lead to one forwarding
    /// vertex `w` (a GPU on one leaf): `w` and the cheapest `w -> dst`
    /// cost. Every route to `dst` ends with that hop, so `dst` can share
    /// `w`'s distance array: `dist(v, dst) = dist(v, w) + forward(w) +
    /// last` for `v` other than `w` and `dst`.
    fn stub_anchor(&self, dst: VertexId) -> Option<(VertexId, u64)> {
        let t = &*self.topology;
        let links = &self.out[dst.index()];
        let w = t.ends(*links.first()?).1;
        if t.vertex(dst).forwards
            || !t.vertex(w).forwards
            || links.iter().any(|&l| t.ends(l).1 != w)
        {
            return None;
        }
        let last_ps = links
            .iter()
            .map(|&l| self.cost(t.reverse(l), dst, dst))
            .min()?;
        Some((w, last_ps))
    }

    /// Computes the distances to `dst` if not yet cached: Dijkstra over
    /// the reversed link directions and the routing states, relaxing only
    /// out of `dst` and out of forwarding vertices.
    fn ensure_distances(&mut self, dst: VertexId) {
        let key = dst.index() as u32;
        if self.dist_to.contains_key(&key) {
            return;
        }
        if self.dist_order.len() >= self.dist_capacity
            && let Some(oldest) = self.dist_order.pop_front()
        {
            self.dist_to.remove(&oldest);
        }
        let dist = self.dijkstra(dst);
        self.dist_to.insert(key, dist);
        self.dist_order.push_back(key);
    }

    /// Every state's distance to `dst`, indexed `phase * vertex_count +
    /// vertex`: Dijkstra over the links into each state (parallel links
    /// merged, see [`search`]).
    fn dijkstra(&self, dst: VertexId) -> Box<[u64]> {
        let n = self.topology.vertex_count();
        let phases = self.phases();
        let up_down = self.up.is_some();
        let mut dist = vec![UNREACHABLE; phases * n].into_boxed_slice();
        let mut heap = BinaryHeap::new();
        for phase in 0..phases {
            let state = phase * n + dst.index();
            dist[state] = 0;
            heap.push(Reverse((0u64, state as u32)));
        }
        while let Some(Reverse((du, state))) = heap.pop() {
            let (q, u) = (state as usize / n, state as usize % n);
            if du > dist[state as usize] || (u != dst.index() && !self.forwards[u]) {
                continue;
            }
            let forward_ps = if u == dst.index() {
                0
            } else {
                self.transit_ps[u]
            };
            for h in self.in_hops.of(u) {
                let nd = du.saturating_add(h.base_ps.saturating_add(forward_ps));
                // The phases in which h.vertex may cross the link and
                // arrive in phase q (the router's `step`).
                for p in 0..phases {
                    let allowed = match (up_down, h.up) {
                        (false, _) => p == q,
                        (true, true) => p == 0 && q == 0,
                        (true, false) => q == 1,
                    };
                    let from = p * n + h.vertex as usize;
                    if allowed && nd < dist[from] {
                        dist[from] = nd;
                        heap.push(Reverse((nd, from as u32)));
                    }
                }
            }
        }
        dist
    }

    /// Checks every pair of placed ranks is connected; otherwise names the
    /// first unconnected pair (lowest `a`, then lowest `b`).
    pub fn check_connected(&mut self, placement: &Placement) -> Result<(), RouteError> {
        let t = &*self.topology;
        let n = t.vertex_count();
        if let Some(v) = placement.ranks.iter().find(|v| v.index() >= n) {
            return Err(RouteError::UnknownVertex(v.index()));
        }
        let forwards: Vec<bool> = t.vertex_ids().map(|v| t.vertex(v).forwards).collect();
        // Components of the forwarding vertices (union-find).
        let mut parent: Vec<u32> = (0..n as u32).collect();
        for l in t.link_ids() {
            let (u, v) = t.ends(l);
            if forwards[u.index()] && forwards[v.index()] {
                let (ru, rv) = (find(&mut parent, u.index()), find(&mut parent, v.index()));
                if ru != rv {
                    parent[ru.max(rv)] = ru.min(rv) as u32;
                }
            }
        }
        // The components each rank touches, sorted.
        let touches: Vec<Vec<u32>> = placement
            .ranks
            .iter()
            .map(|&x| {
                let mut c: Vec<u32> = if forwards[x.index()] {
                    vec![find(&mut parent, x.index()) as u32]
                } else {
                    self.out[x.index()]
                        .iter()
                        .map(|&l| t.ends(l).1.index())
                        .filter(|&y| forwards[y])
                        .map(|y| find(&mut parent, y) as u32)
                        .collect()
                };
                c.sort_unstable();
                c.dedup();
                c
            })
            .collect();
        // Fast path: one component every rank touches.
        let mut common = touches.first().cloned().unwrap_or_default();
        for c in &touches[1.min(touches.len())..] {
            common.retain(|x| c.binary_search(x).is_ok());
        }
        if placement.len() <= 1 || !common.is_empty() {
            return Ok(());
        }
        // General case: for each rank, stamp every rank it reaches.
        let mut rank_of = vec![u32::MAX; n];
        let mut ranks_in: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (r, &x) in placement.ranks.iter().enumerate() {
            rank_of[x.index()] = r as u32;
            for &c in &touches[r] {
                ranks_in[c as usize].push(r as u32);
            }
        }
        let mut stamp = vec![usize::MAX; placement.len()];
        for (a, &x) in placement.ranks.iter().enumerate() {
            stamp[a] = a;
            for &c in &touches[a] {
                for &r in &ranks_in[c as usize] {
                    stamp[r as usize] = a;
                }
            }
            for &l in &self.out[x.index()] {
                let r = rank_of[t.ends(l).1.index()];
                if r != u32::MAX {
                    stamp[r as usize] = a;
                }
            }
            if let Some(b) = (a + 1..placement.len()).find(|&b| stamp[b] != a) {
                return Err(RouteError::Unconnected {
                    a,
                    a_name: t.vertex(x).name.clone(),
                    b,
                    b_name: t.vertex(placement.ranks[b]).name.clone(),
                });
            }
        }
        Ok(())
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

/// Union-find root of `x`, halving paths on the way.
fn find(parent: &mut [u32], mut x: usize) -> usize {
    while parent[x] as usize != x {
        parent[x] = parent[parent[x] as usize];
        x = parent[x] as usize;
    }
    x
}

/// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a fixed, well-mixed
/// 64-bit hash of `z`.
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The ECMP hash of a flow at a vertex: `splitmix64` chained over the
/// seed, the flow and the vertex index.
pub fn ecmp_hash(seed: u64, flow: u64, vertex: u64) -> u64 {
    splitmix64(splitmix64(splitmix64(seed) ^ flow) ^ vertex)
}

#[cfg(test)]
mod tests {
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
                    anchor: anchor
                        .map(|(w, last)| (w, last, last + t.vertex(w).forward_latency_ps)),
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
}
