//! The distances a route follows once its target has been searched for
//! often: the target's whole array, by a reverse Dijkstra over the routing
//! states, cached (at most [`DISTANCE_CACHE_BYTES`](super::DISTANCE_CACHE_BYTES),
//! oldest dropped first) and shared by a stub destination with the one
//! forwarding vertex its links lead to (see the parent module's
//! "Distances").

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::graph::VertexId;

use super::{Router, UNREACHABLE};

/// Distances to a route's destination, from its own array or from the
/// array of its stub anchor (see [`Router::stub_anchor`]).
pub(super) struct Distances<'a> {
    /// By state: `to_target[phase * vertex_count + v]`.
    pub(super) to_target: &'a [u64],
    pub(super) vertex_count: usize,
    pub(super) dst: VertexId,
    /// `(w, last hop cost, forward(w) + last hop cost)`.
    pub(super) anchor: Option<(VertexId, u64, u64)>,
}

impl Distances<'_> {
    /// The cost from `v`, in `phase`, to the destination.
    pub(super) fn get(&self, v: VertexId, phase: usize) -> u64 {
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

impl Router {
    /// For a non-forwarding `dst` whose links all lead to one forwarding
    /// vertex `w` (a GPU on one leaf): `w` and the cheapest `w -> dst`
    /// cost. Every route to `dst` ends with that hop, so `dst` can share
    /// `w`'s distance array: `dist(v, dst) = dist(v, w) + forward(w) +
    /// last` for `v` other than `w` and `dst`.
    pub(super) fn stub_anchor(&self, dst: VertexId) -> Option<(VertexId, u64)> {
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
    pub(super) fn ensure_distances(&mut self, dst: VertexId) {
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
    /// merged, see [`search`](super::search)).
    pub(super) fn dijkstra(&self, dst: VertexId) -> Box<[u64]> {
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
}
