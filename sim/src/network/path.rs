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

use topologies::{LinkId, Topology};

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
    let p = bytes.min(path_mtu(topology, route));
    let mut fixed = 0u64;
    let mut ser_sum = 0u64;
    let mut ser_max = 0u64;
    for i in 0..route.len() {
        fixed = fixed.saturating_add(hop_latency_ps(topology, route, i));
        let ser = topology.link(route[i]).serialization_ps(p);
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
