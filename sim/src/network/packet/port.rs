//! An egress port: one link direction's queues, wire and buffer.

use std::collections::VecDeque;

use topologies::{LinkId, Topology};

/// Where a port's next packet comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The head of the transit FIFO.
    Transit,
    /// The next packet of the flow at the front of the injection round.
    Local,
}

/// The state of one link direction `u -> v`.
#[derive(Debug)]
pub(super) struct Port {
    /// Nominal bandwidth, in bytes per second.
    nominal_bandwidth_bytes_per_s: f64,
    /// Current bandwidth (nominal times the last positive factor of a
    /// link change), in bytes per second.
    bandwidth_bytes_per_s: f64,
    /// Whether a link change has taken the link down: it starts no packet.
    pub(super) down: bool,
    /// Propagation latency, in ps.
    pub(super) latency_ps: u64,
    /// Forwarding latency of `v`, added when `v` is not the destination.
    pub(super) forward_latency_ps: u64,
    /// Buffer for packets waiting for (or on) this port, in bytes.
    pub(super) buffer_bytes: u64,
    /// Whether upstream ports need credit from this port's buffer: `u`
    /// is not an endpoint (an endpoint relays through its own memory).
    pub(super) credited: bool,

    /// Transit packets that reached `u` and wait for this port, in order.
    pub(super) transit: VecDeque<u32>,
    /// Flows of `u` with a message to inject here, served round-robin.
    pub(super) flows: VecDeque<u32>,
    /// Whether the next choice between waiting transit and local packets
    /// goes to a local one (they alternate packet by packet).
    pub(super) local_next: bool,
    /// Whether the wire is serialising a packet.
    pub(super) busy: bool,
    /// The packet chosen to go next, waiting for credit downstream.
    pub(super) blocked: Option<Source>,
    /// Bytes of the packet on the wire to release from this port's
    /// buffer when it is serialised (zero for a locally injected one).
    pub(super) on_wire_transit_bytes: u64,
    /// Bytes reserved in this port's buffer: transit packets on their way
    /// here, queued here, or on this port's wire.
    pub(super) reserved_bytes: u64,
    /// Upstream ports waiting for credit here, in the order they began
    /// waiting.
    pub(super) waiters: VecDeque<u32>,
    /// The current busy period: bytes serialised and their exact
    /// (rounded once) duration, so per-packet rounding does not drift.
    period_bytes: u64,
    period_ps: u64,
}

impl Port {
    /// An idle port for link direction `id` of `topology`.
    pub(super) fn new(topology: &Topology, id: LinkId) -> Port {
        let link = topology.link(id);
        let (u, v) = topology.ends(id);
        Port {
            nominal_bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
            bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
            down: false,
            latency_ps: link.latency_ps,
            forward_latency_ps: topology.vertex(v).forward_latency_ps,
            buffer_bytes: link.buffer_bytes,
            credited: !topology.vertex(u).kind.is_endpoint(),
            transit: VecDeque::new(),
            flows: VecDeque::new(),
            local_next: false,
            busy: false,
            blocked: None,
            on_wire_transit_bytes: 0,
            reserved_bytes: 0,
            waiters: VecDeque::new(),
            period_bytes: 0,
            period_ps: 0,
        }
    }

    /// Which queue the next packet comes from, if any: transit and local
    /// packets alternate when both wait.
    pub(super) fn choose(&self) -> Option<Source> {
        match (!self.transit.is_empty(), !self.flows.is_empty()) {
            (true, true) if self.local_next => Some(Source::Local),
            (true, _) => Some(Source::Transit),
            (false, true) => Some(Source::Local),
            (false, false) => None,
        }
    }

    /// Whether this port's buffer takes `bytes` more without overflowing.
    /// An empty buffer takes any packet, so that a buffer smaller than a
    /// packet slows traffic down instead of stopping it forever.
    pub(super) fn fits(&self, bytes: u64) -> bool {
        self.reserved_bytes == 0 || self.reserved_bytes.saturating_add(bytes) <= self.buffer_bytes
    }

    /// Serialization time of the next `bytes` of the current busy period:
    /// `duration(total + bytes) - duration(total)`, so that a busy period
    /// of `b` bytes takes exactly `duration(b)` whatever its packets.
    pub(super) fn serialize(&mut self, bytes: u64) -> u64 {
        self.period_bytes = self.period_bytes.saturating_add(bytes);
        let end_ps = topologies::duration_ps(self.period_bytes, self.bandwidth_bytes_per_s);
        // `duration_ps` is monotonic in the byte count, so this never
        // underflows; the `max` keeps that true even for huge periods.
        let ser_ps = end_ps.saturating_sub(self.period_ps);
        self.period_ps = self.period_ps.max(end_ps);
        ser_ps
    }

    /// Sets the bandwidth to nominal times `factor` for packets started
    /// from now on; a factor that is not positive (0, or a NaN the caller
    /// should have rejected) takes the link down instead. A new rate
    /// starts a new rounding period, so each rate's times stay exact.
    pub(super) fn set_bandwidth_factor(&mut self, factor: f64) {
        self.down = factor.is_nan() || factor <= 0.0;
        if self.down {
            return;
        }
        let rate = self.nominal_bandwidth_bytes_per_s * factor;
        if rate != self.bandwidth_bytes_per_s {
            self.bandwidth_bytes_per_s = rate;
            // A packet on the wire keeps the time it was given; the next
            // one is the first of a period at the new rate.
            self.period_bytes = 0;
            self.period_ps = 0;
        }
    }

    /// Ends the busy period: the wire is idle.
    pub(super) fn go_idle(&mut self) {
        self.period_bytes = 0;
        self.period_ps = 0;
    }
}
