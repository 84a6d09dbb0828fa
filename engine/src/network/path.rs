//! Route arithmetic shared by the network models.
//!
//! A packet crossing link `i` of a route spends `ser_i(p)` on the wire
//! (store and forward), then the link's propagation latency, then the
//! forwarding latency of the vertex it reaches unless that vertex is the
//! destination. With a message of `b` bytes cut into packets of at most
//! the path MTU, the first packet reaches the destination after
//! `sum_i (ser_i(p) + lat_i + fwd_i)` and the others follow at the pace of
//! the slowest link, so on an idle route the message arrives
//!
//! ```text
//!   b / bw_min  +  sum_i (lat_i + fwd_i)  +  sum_i ser_i(p) - max_i ser_i(p)
//! ```
//!
//! after it is sent, `p = min(b, path MTU)`. On a single link this is
//! `serialization + latency`.

use topologies::{LinkId, Topology, duration_ps};

/// The largest packet every link of `route` carries.
pub fn path_mtu(topology: &Topology, route: &[LinkId]) -> u64 {
    route
        .iter()
        .map(|&l| topology.link(l).mtu_bytes)
        .min()
        .expect("routes are never empty")
}

/// Latency added after a packet leaves link `i` of `route`: the link's
/// propagation latency plus, except on the last hop, the forwarding
/// latency of the vertex it reaches.
pub fn hop_latency_ps(topology: &Topology, route: &[LinkId], i: usize) -> u64 {
    let link = route[i];
    let mut ps = topology.link(link).latency_ps;
    if i + 1 < route.len() {
        ps += topology.vertex(topology.ends(link).1).forward_latency_ps;
    }
    ps
}

/// The fixed part of an idle route's delivery time for a message of
/// `bytes` (everything but `bytes / bw_min`; see the module docs).
pub fn idle_latency_ps(topology: &Topology, route: &[LinkId], bytes: u64) -> u64 {
    idle_latency(route, bytes, |l| Hop::of(topology, l))
}

/// [`idle_latency_ps`] with each link direction's parameters from `hop`.
#[inline]
fn idle_latency(route: &[LinkId], bytes: u64, hop: impl Fn(LinkId) -> Hop) -> u64 {
    let mtu = route
        .iter()
        .map(|&l| hop(l).mtu_bytes)
        .min()
        .expect("routes are never empty");
    let p = bytes.min(mtu);
    let mut fixed = 0u64;
    let mut ser_sum = 0u64;
    let mut ser_max = 0u64;
    for (i, &l) in route.iter().enumerate() {
        let h = hop(l);
        let mut ps = h.latency_ps;
        if i + 1 < route.len() {
            ps += h.forward_ps;
        }
        fixed = fixed.saturating_add(ps);
        let ser = duration_ps(p, h.bandwidth_bytes_per_s);
        ser_sum = ser_sum.saturating_add(ser);
        ser_max = ser_max.max(ser);
    }
    fixed.saturating_add(ser_sum - ser_max)
}

/// The smallest bandwidth on `route`, in bytes per second.
pub fn bottleneck_bytes_per_s(topology: &Topology, route: &[LinkId]) -> f64 {
    route
        .iter()
        .map(|&l| topology.link(l).bandwidth_bytes_per_s)
        .fold(f64::INFINITY, f64::min)
}

/// When a message of `bytes` sent on an idle `route` arrives, in ps after
/// it was sent (see the module docs).
pub fn idle_delivery_ps(topology: &Topology, route: &[LinkId], bytes: u64) -> u64 {
    topologies::duration_ps(bytes, bottleneck_bytes_per_s(topology, route))
        .saturating_add(idle_latency_ps(topology, route, bytes))
}

/// The parameters of one link direction that route arithmetic reads.
#[derive(Clone, Copy, Debug)]
struct Hop {
    latency_ps: u64,
    /// The forwarding latency of the vertex the direction leads to.
    forward_ps: u64,
    mtu_bytes: u64,
    bandwidth_bytes_per_s: f64,
}

impl Hop {
    /// The parameters of link direction `l` of `topology`.
    fn of(topology: &Topology, l: LinkId) -> Hop {
        let link = topology.link(l);
        Hop {
            latency_ps: link.latency_ps,
            forward_ps: topology.vertex(topology.ends(l).1).forward_latency_ps,
            mtu_bytes: link.mtu_bytes,
            bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
        }
    }
}

/// The link parameters of a topology copied into one table by link
/// direction, so that a model computing a delivery per message reads a
/// few words per hop instead of the graph's links and vertices. Its
/// results equal the free functions' exactly.
#[derive(Clone, Debug)]
pub struct PathTable {
    hops: Vec<Hop>,
}

impl PathTable {
    /// The table of `topology`'s link directions.
    pub fn new(topology: &Topology) -> PathTable {
        let hops = topology.link_ids().map(|l| Hop::of(topology, l)).collect();
        PathTable { hops }
    }

    /// [`idle_latency_ps`] of `route` for a message of `bytes`.
    pub fn idle_latency_ps(&self, route: &[LinkId], bytes: u64) -> u64 {
        idle_latency(route, bytes, |l| self.hops[l.index()])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use topologies::{Router, presets};

    use super::*;

    #[test]
    fn the_table_agrees_with_the_graph() {
        let t = Arc::new(
            presets::fat_tree(&presets::FatTree {
                nodes: 4,
                ..presets::FatTree::default()
            })
            .unwrap(),
        );
        let table = PathTable::new(&t);
        let mut router = Router::new(Arc::clone(&t), 3);
        let ends = t.endpoints();
        let mut checked = 0;
        for (i, &a) in ends.iter().enumerate() {
            for (j, &b) in ends.iter().enumerate().filter(|&(j, _)| j != i) {
                let route = router.route(a, b, (i * 64 + j) as u64).unwrap();
                for bytes in [0, 1, 999, 4096, 4097, 1 << 20] {
                    assert_eq!(
                        table.idle_latency_ps(&route, bytes),
                        idle_latency_ps(&t, &route, bytes)
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000);
    }
}
