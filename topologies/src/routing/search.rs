//! The searches behind a route: a compact copy of the graph, and the
//! distances one route needs, found without a distance array over the
//! whole graph.
//!
//! # Adjacency
//! [`Adjacency`] keeps, per vertex, its neighbours with the cheapest base
//! cost over parallel links (a leaf with 512 links to each spine has four
//! entries for them, not 2048). Parallel links join the same two vertices,
//! so they cost the same towards any destination up to their base cost
//! and have the same up*/down* direction; the cheapest one gives every
//! distance. Routes still pick among the parallel links themselves.
//!
//! # One route's distances
//! A route from `s` to `t` follows the distances to `t` (see the parent
//! module), but only at the states of its cheapest paths (the *DAG*: `s`,
//! `t` and every state `x` with `ds(x) + dt(x) = D`, `D = dt(s)`) and
//! at their successors. [`PairSearch`] finds exactly those:
//!
//! 1. A forward Dijkstra from `(s, 0)`, stopped once it has scanned
//!    [`FORWARD_WORK`] adjacency entries, gives `h(x)`: `ds(x)` for the
//!    states it settled, the smallest key left in its heap for the others
//!    (no unsettled state is closer), infinity for all when it ran out
//!    (they are unreachable from `s`).
//! 2. A reverse A* search from `t` with the lower bound `h`, by key
//!    `dt(x) + h(x)`, stopped when the smallest key exceeds the best
//!    distance found for `(s, 0)`.
//!
//! `h` is consistent on every link the reverse search crosses into a
//! state it can expand (`h(v) <= cost(u -> v) + h(u)` for `u` the source
//! or a forwarding vertex), so every state with key at most `D` is popped
//! with its exact `dt`; each DAG state has key at most `D` (`h <= ds`).
//! States the search did not finish hold a real path length, never less
//! than `dt`, or nothing. The route's walk tests a link `l = (x -> y)`
//! from a DAG state `x` with `cost(l) + dt(y) == dt(x)`; when that holds
//! `y` is a DAG state, so its value is exact, and when it does not, a
//! larger value still fails it. The walk therefore picks among exactly
//! the candidates a full distance array gives, and the routes are the
//! same (the tests compare them with the full arrays on every pair).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::UNREACHABLE;

/// Adjacency entries the forward search scans before it stops (it
/// bounds the reverse search's work, never changes a route): enough to
/// get past a leaf switch's fan-out in a fat-tree.
pub const FORWARD_WORK: usize = 1024;

/// One neighbour of a vertex in [`Adjacency`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Hop {
    /// The neighbour's index.
    pub(super) vertex: u32,
    /// The cheapest base cost (latency plus one MTU) of the links to
    /// (forward lists) or from (reverse lists) the neighbour.
    pub(super) base_ps: u64,
    /// Whether those links are up directions (up*/down* routing only).
    pub(super) up: bool,
}

/// Neighbour lists of every vertex, stored flat.
#[derive(Debug, Default)]
pub(super) struct Adjacency {
    start: Vec<u32>,
    hops: Vec<Hop>,
}

impl Adjacency {
    /// The lists from `(vertex, neighbour, base, up)` entries grouped by
    /// vertex in vertex order (`entries(v)` gives vertex `v`'s);
    /// parallel entries to one neighbour are merged.
    pub(super) fn build(
        vertex_count: usize,
        mut entries: impl FnMut(usize, &mut Vec<Hop>),
    ) -> Adjacency {
        let mut start = Vec::with_capacity(vertex_count + 1);
        let mut hops: Vec<Hop> = Vec::new();
        let mut scratch = Vec::new();
        start.push(0);
        for v in 0..vertex_count {
            scratch.clear();
            entries(v, &mut scratch);
            scratch.sort_unstable_by_key(|h| (h.vertex, h.base_ps));
            let first = hops.len();
            for h in &scratch {
                // Sorted by neighbour then cost: the first of a group is
                // the cheapest.
                if hops.len() == first || hops[hops.len() - 1].vertex != h.vertex {
                    hops.push(*h);
                } else {
                    debug_assert_eq!(
                        hops[hops.len() - 1].up,
                        h.up,
                        "parallel links share a direction"
                    );
                }
            }
            start.push(u32::try_from(hops.len()).expect("fewer than 2^32 links"));
        }
        Adjacency { start, hops }
    }

    /// Vertex `v`'s neighbours.
    pub(super) fn of(&self, v: usize) -> &[Hop] {
        &self.hops[self.start[v] as usize..self.start[v + 1] as usize]
    }
}

/// What a search needs to know of the router: the graph and the costs.
pub(super) struct Graph<'a> {
    /// Neighbours reached by each vertex's outgoing links.
    pub(super) out: &'a Adjacency,
    /// Neighbours whose links come into each vertex.
    pub(super) into: &'a Adjacency,
    /// Whether each vertex forwards traffic.
    pub(super) forwards: &'a [bool],
    /// Each vertex's routing cost of passing through it.
    pub(super) transit_ps: &'a [u64],
    /// 1 for shortest paths, 2 for up*/down*.
    pub(super) phases: usize,
    /// Whether up directions are restricted (up*/down*).
    pub(super) up_down: bool,
}

impl Graph<'_> {
    /// The phase after crossing a link of direction `up` in `phase`, or
    /// `None` if the policy forbids it (the router's `step`).
    fn step(&self, phase: usize, up: bool) -> Option<usize> {
        match (self.up_down, up) {
            (false, _) => Some(phase),
            (true, true) => (phase == 0).then_some(0),
            (true, false) => Some(1),
        }
    }

    /// The cost of a hop of base cost `base_ps` into `v` towards `dst`.
    fn cost(&self, base_ps: u64, v: usize, dst: usize) -> u64 {
        let forward_ps = if v == dst { 0 } else { self.transit_ps[v] };
        base_ps.saturating_add(forward_ps)
    }
}

/// Values per state, valid only when stamped with the table's current
/// epoch: clearing is bumping the epoch, not writing every state.
#[derive(Debug, Default)]
struct Stamped {
    epoch: u32,
    stamp: Vec<u32>,
    value: Vec<u64>,
}

impl Stamped {
    /// Forgets every value, for `states` states.
    fn clear(&mut self, states: usize) {
        if self.stamp.len() != states || self.epoch == u32::MAX {
            self.stamp = vec![0; states];
            self.value = vec![UNREACHABLE; states];
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    fn get(&self, state: usize) -> u64 {
        if self.stamp[state] == self.epoch {
            self.value[state]
        } else {
            UNREACHABLE
        }
    }

    fn set(&mut self, state: usize, value: u64) {
        self.stamp[state] = self.epoch;
        self.value[state] = value;
    }
}

/// Scratch of the per-route searches, reused so that a route allocates
/// only its result.
#[derive(Debug, Default)]
pub(super) struct PairSearch {
    /// Forward distances from the source (tentative or settled).
    from_src: Stamped,
    /// Forward distances of the settled states.
    settled: Stamped,
    /// The forward search's heap, kept so that it can go on.
    forward_heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Adjacency entries the forward search has scanned for this route.
    forward_done: usize,
    /// The forward search's smallest remaining key (`UNREACHABLE` once
    /// its heap ran out).
    front_ps: u64,
    /// Reverse distances to the destination: exact on the DAG.
    to_dst: Stamped,
    reverse_heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Adjacency entries scanned so far, over all searches.
    work: u64,
}

impl PairSearch {
    /// Adjacency entries scanned by all searches so far.
    pub(super) fn work(&self) -> u64 {
        self.work
    }

    /// Runs both searches for a route from `src` to `dst` (different
    /// vertices); afterwards [`PairSearch::to_dst`] answers the walk.
    ///
    /// The forward search first scans up to `forward_work` adjacency
    /// entries; a reverse search that scans more than eight times the
    /// forward budget is abandoned, and the forward search goes on with
    /// twice the budget before the reverse one starts again. The budgets
    /// balance the two searches; they change no distance the walk reads.
    pub(super) fn run(&mut self, g: &Graph<'_>, src: usize, dst: usize, forward_work: usize) {
        let states = g.phases * g.forwards.len();
        self.from_src.clear(states);
        self.settled.clear(states);
        self.forward_heap.clear();
        self.forward_done = 0;
        self.from_src.set(src, 0);
        self.forward_heap.push(Reverse((0, src as u32)));
        let mut budget = forward_work;
        loop {
            self.forward(g, dst, budget);
            self.to_dst.clear(states);
            let limit = match self.front_ps {
                UNREACHABLE => usize::MAX, // Exact lower bounds: no retry.
                _ => budget.saturating_mul(8),
            };
            if self.reverse(g, src, dst, limit) {
                return;
            }
            budget = budget.saturating_mul(2).max(1);
        }
    }

    /// The distance from state `phase * vertex_count + v` to the
    /// destination as the walk needs it (see the module docs).
    pub(super) fn to_dst(&self, state: usize) -> u64 {
        self.to_dst.get(state)
    }

    /// Step 1: the forward Dijkstra from `(src, 0)`, going on until
    /// expanding the next state would take it past `budget` entries.
    /// Only states a route can leave are pushed: the source and
    /// forwarding vertices other than the destination.
    fn forward(&mut self, g: &Graph<'_>, dst: usize, budget: usize) {
        let n = g.forwards.len();
        while let Some(&Reverse((d, state))) = self.forward_heap.peek() {
            let state = state as usize;
            if d > self.from_src.get(state) || self.settled.get(state) != UNREACHABLE {
                self.forward_heap.pop();
                continue; // Outdated.
            }
            let (p, u) = (state / n, state % n);
            let hops = g.out.of(u);
            if self.forward_done + hops.len() > budget {
                break;
            }
            self.forward_heap.pop();
            self.forward_done += hops.len();
            self.work += hops.len() as u64;
            self.settled.set(state, d);
            for h in hops {
                let v = h.vertex as usize;
                if v == dst || !g.forwards[v] {
                    continue;
                }
                let Some(q) = g.step(p, h.up) else {
                    continue;
                };
                let to = q * n + v;
                let nd = d.saturating_add(g.cost(h.base_ps, v, dst));
                if nd < self.from_src.get(to) {
                    self.from_src.set(to, nd);
                    self.forward_heap.push(Reverse((nd, to as u32)));
                }
            }
        }
        self.front_ps = self
            .forward_heap
            .peek()
            .map_or(UNREACHABLE, |&Reverse((d, _))| d);
    }

    /// The lower bound `h` of a state (see the module docs).
    fn lower_bound(&self, state: usize) -> u64 {
        match self.settled.get(state) {
            UNREACHABLE => self.front_ps,
            d => d,
        }
    }

    /// Step 2: the reverse A* search from `dst`; false if it scanned more
    /// than `limit` entries before it finished. Only states a route can
    /// pass through are pushed (forwarding vertices); the others, the
    /// source among them, only get their distance.
    fn reverse(&mut self, g: &Graph<'_>, src: usize, dst: usize, limit: usize) -> bool {
        let n = g.forwards.len();
        let mut heap = std::mem::take(&mut self.reverse_heap);
        heap.clear();
        for phase in 0..g.phases {
            let state = phase * n + dst;
            self.to_dst.set(state, 0);
            heap.push(Reverse((0, state as u32)));
        }
        let mut work = 0usize;
        let mut finished = true;
        while let Some(Reverse((key, state))) = heap.pop() {
            // `(src, 0)` is state `src`; nothing with a larger key is on a
            // cheapest path.
            if key > self.to_dst.get(src) {
                break;
            }
            let state = state as usize;
            let d = self.to_dst.get(state);
            let (q, u) = (state / n, state % n);
            if u != dst && key > d.saturating_add(self.lower_bound(state)) {
                continue; // Outdated.
            }
            let hops = g.into.of(u);
            work += hops.len();
            if work > limit {
                finished = false;
                break;
            }
            let forward_ps = if u == dst { 0 } else { g.transit_ps[u] };
            for h in hops {
                let w = h.vertex as usize;
                let nd = d.saturating_add(h.base_ps.saturating_add(forward_ps));
                for p in (0..g.phases).filter(|&p| g.step(p, h.up) == Some(q)) {
                    let from = p * n + w;
                    if nd >= self.to_dst.get(from) {
                        continue;
                    }
                    let lb = self.lower_bound(from);
                    if lb == UNREACHABLE {
                        continue; // Not reachable from the source.
                    }
                    self.to_dst.set(from, nd);
                    if w != dst && g.forwards[w] {
                        heap.push(Reverse((nd.saturating_add(lb), from as u32)));
                    }
                }
            }
        }
        self.work += work as u64;
        self.reverse_heap = heap;
        finished
    }
}

#[cfg(test)]
mod tests;
