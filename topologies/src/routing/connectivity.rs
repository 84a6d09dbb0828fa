//! [`Router::check_connected`]: whether every pair of placed ranks can
//! reach each other, by components of forwarding vertices (union-find).

use super::{Placement, RouteError, Router};

impl Router {
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

/// Union-find root of `x`, halving paths on the way.
fn find(parent: &mut [u32], mut x: usize) -> usize {
    while parent[x] as usize != x {
        parent[x] = parent[parent[x] as usize];
        x = parent[x] as usize;
    }
    x
}
