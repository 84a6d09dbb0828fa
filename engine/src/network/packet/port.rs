//! An egress port: one link direction's queues, wire and buffer.

use std::collections::VecDeque;

use algorithms::Time;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use topologies::{LinkId, LinkKind, Topology};

use super::NONE;
use super::transport::TransportKind;
use super::wire::Wire;
use crate::network::PfcConfig;

/// How the receiving end `v` of a link direction `u -> v` keeps its
/// buffer from overflowing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Control {
    /// Credit-based (InfiniBand, NVLink, PCIe, UPI): `u` starts a packet
    /// only when the buffer it goes to next has room for it.
    Credit,
    /// Priority flow control (lossless Ethernet, RoCE): `v` counts what
    /// it holds from this link and sends PAUSE above a threshold.
    Pfc,
    /// None (plain Ethernet): a packet that finds the buffer full is
    /// dropped.
    Lossy,
}

/// What happened to a packet that did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Lost on the wire (the link's random loss rate).
    Wire,
    /// Arrived corrupted; the receiver's CRC check dropped it.
    Corrupted,
    /// Found the buffer full (a lossy link) or the PFC headroom exceeded.
    Overflow,
}

impl Loss {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Wire => "random loss",
            Loss::Corrupted => "corruption (CRC error)",
            Loss::Overflow => "buffer overflow",
        }
    }
}

/// The PFC state of one link direction `u -> v` (see the module docs of
/// [`super`], *PFC*): `v`'s accounting of what it holds from this link,
/// and `u`'s view of whether it may send.
#[derive(Debug, Default)]
pub(super) struct Pfc {
    /// `v` sends PAUSE when it holds this many bytes from the link.
    pub(super) xoff_bytes: u64,
    /// `v` sends RESUME when what it holds falls to this many bytes.
    pub(super) xon_bytes: u64,
    /// Room above `xoff_bytes` for what arrives after PAUSE is sent.
    pub(super) headroom_bytes: u64,
    /// Bytes `v` holds that arrived over this link.
    pub(super) ingress_bytes: u64,
    /// Whether `v`'s last PFC frame for this link was a PAUSE.
    pub(super) pause_sent: bool,
    /// Whether a PAUSE has reached `u` (and no RESUME since).
    pub(super) paused: bool,
    /// When the current pause began at `u`.
    pub(super) paused_since: Time,
}

/// A link direction's random loss: rates and their seeded stream.
#[derive(Debug, Default)]
pub(super) struct LinkLoss {
    pub(super) loss_rate: f64,
    pub(super) corruption_rate: f64,
    /// One uniform draw per packet crossing while a rate is positive;
    /// created at the first positive rate. Boxed: most links never draw,
    /// and the stream's buffer would triple the size of every port.
    rng: Option<Box<ChaCha8Rng>>,
}

impl LinkLoss {
    /// Sets the rates; the stream is seeded by `seed` and the link's id.
    pub(super) fn set(&mut self, loss_rate: f64, corruption_rate: f64, seed: u64, link: usize) {
        self.loss_rate = loss_rate;
        self.corruption_rate = corruption_rate;
        if (loss_rate > 0.0 || corruption_rate > 0.0) && self.rng.is_none() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(link as u64);
            self.rng = Some(Box::new(rng));
        }
    }

    /// Whether a rate is positive (or not a number): only then does a
    /// packet crossing draw.
    pub(super) fn may_lose(&self) -> bool {
        !(self.loss_rate <= 0.0 && self.corruption_rate <= 0.0)
    }

    /// Whether the next packet crossing is lost, and how: one uniform
    /// draw `x`, lost on the wire if `x < loss_rate`, corrupted if
    /// `x < loss_rate + corruption_rate`. No draw while both rates are 0.
    pub(super) fn draw(&mut self) -> Option<Loss> {
        if !self.may_lose() {
            return None;
        }
        let x: f64 = self.rng.as_mut()?.random();
        if x < self.loss_rate {
            Some(Loss::Wire)
        } else if x < self.loss_rate + self.corruption_rate {
            Some(Loss::Corrupted)
        } else {
            None
        }
    }
}

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
    /// The serialization clock, at the current bandwidth (nominal times
    /// the last positive factor of a link change).
    wire: Wire,
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
    /// How `v` protects its buffer from this link.
    pub(super) control: Control,
    /// PFC state (meaningful when `control` is [`Control::Pfc`]).
    pub(super) pfc: Pfc,
    /// Random loss and corruption.
    pub(super) loss: LinkLoss,
    /// The transport a flow crossing this link needs, if any
    /// ([`TransportKind::of_link`]).
    pub(super) transport: Option<TransportKind>,

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
    /// The PFC link whose ingress count the packet on the wire leaves
    /// when serialised, or [`NONE`].
    pub(super) on_wire_ingress: u32,
    /// Bytes reserved in this port's buffer: transit packets on their way
    /// here, queued here, or on this port's wire.
    pub(super) reserved_bytes: u64,
    /// Upstream ports waiting for credit here, in the order they began
    /// waiting.
    pub(super) waiters: VecDeque<u32>,
}

impl Port {
    /// An idle port for link direction `id` of `topology`.
    pub(super) fn new(topology: &Topology, id: LinkId) -> Port {
        let link = topology.link(id);
        let (u, v) = topology.ends(id);
        let ethernet = matches!(link.kind, LinkKind::Roce { .. } | LinkKind::Ethernet { .. });
        let control = match (link.lossless, ethernet) {
            (false, _) => Control::Lossy,
            (true, true) => Control::Pfc,
            (true, false) => Control::Credit,
        };
        let mut pfc = Pfc::default();
        let forward_latency_ps = topology.vertex(v).forward_latency_ps;
        pfc.set_thresholds(
            PfcConfig::default(),
            link.bandwidth_bytes_per_s,
            link.latency_ps,
            forward_latency_ps,
            link.mtu_bytes,
            link.buffer_bytes,
        );
        Port {
            control,
            pfc,
            loss: LinkLoss::default(),
            transport: TransportKind::of_link(link),
            on_wire_ingress: NONE,
            nominal_bandwidth_bytes_per_s: link.bandwidth_bytes_per_s,
            wire: Wire::new(link.bandwidth_bytes_per_s),
            down: false,
            latency_ps: link.latency_ps,
            forward_latency_ps,
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
    #[inline]
    pub(super) fn serialize(&mut self, bytes: u64) -> u64 {
        self.wire.serialize(bytes)
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
        // A packet on the wire keeps the time it was given; the next one
        // is the first of a period at the new rate.
        self.wire
            .set_bandwidth(self.nominal_bandwidth_bytes_per_s * factor);
    }

    /// Ends the busy period: the wire is idle.
    #[inline]
    pub(super) fn go_idle(&mut self) {
        self.wire.go_idle();
    }
}

impl Pfc {
    /// Sets the thresholds from `config`, or where it gives none, from the
    /// link: headroom covers what is in flight while PAUSE takes effect,
    /// `bandwidth x (2 x latency + forwarding latency) + 2 x MTU` (the
    /// wire's round trip, the switch's pipeline, one packet `u` has just
    /// started and one partly counted); XOFF leaves that headroom inside
    /// the link's buffer (`buffer - headroom`, at least one MTU); XON is
    /// two MTUs below XOFF.
    pub(super) fn set_thresholds(
        &mut self,
        config: PfcConfig,
        bandwidth_bytes_per_s: f64,
        latency_ps: u64,
        forward_latency_ps: u64,
        mtu_bytes: u64,
        buffer_bytes: u64,
    ) {
        let in_flight_ps = latency_ps
            .saturating_mul(2)
            .saturating_add(forward_latency_ps);
        let in_flight = (bandwidth_bytes_per_s * in_flight_ps as f64 / 1e12).ceil() as u64;
        let headroom = config
            .headroom_bytes
            .unwrap_or_else(|| in_flight.saturating_add(mtu_bytes.saturating_mul(2)));
        let xoff = config
            .xoff_bytes
            .unwrap_or_else(|| buffer_bytes.saturating_sub(headroom).max(mtu_bytes));
        let xon = config
            .xon_bytes
            .unwrap_or_else(|| xoff.saturating_sub(mtu_bytes.saturating_mul(2)));
        self.headroom_bytes = headroom;
        self.xoff_bytes = xoff;
        self.xon_bytes = xon.min(xoff.saturating_sub(1));
    }
}
