//! The packet-level network model: messages cut into packets that cross
//! egress ports store-and-forward, with finite buffers; credit-based flow
//! control (InfiniBand, NVLink, PCIe), priority flow control (RoCE) or
//! none (Ethernet); random loss and corruption; and go-back-N reliable
//! transports for the flows that cross network links: RDMA over
//! InfiniBand and RoCE, TCP-like over plain Ethernet.
//!
//! ```text
//!   source GPU u                 switch v                         GPU w
//!   flow A: m1 m2 --.
//!   flow B: m3    --+--> port u->v ==wire==> transit FIFO --> port v->w ==wire==> w
//!   transit FIFO  --'    (one packet        of port v->w      (one packet
//!   (if u forwards)       at a time)        (buffer_bytes)     at a time)
//!                              ^                  |
//!                              '---- credit ------'
//!          room in v->w's buffer: reserved when a packet starts on u->v,
//!          released when it has been serialised on v->w
//! ```
//!
//! # Packets
//! A message is cut into packets of at most its route's MTU
//! ([`path_mtu`](super::path::path_mtu)), full packets first; a message
//! of 0 bytes is one empty packet. Packets are cut lazily at the source,
//! one when the first link takes it, so a 1 GiB message never exists as a
//! quarter million packets.
//!
//! # Ports
//! Each link direction `l = u -> v` is an egress port of `u` with a FIFO
//! of transit packets, a buffer of `buffer_bytes` and a wire that carries
//! one packet at a time: serialization (`bytes / bandwidth`), then
//! [`hop_latency_ps`](super::path::hop_latency_ps) (propagation, plus
//! `v`'s forwarding latency unless `v` is the destination) until the
//! packet is at `v`. Serialization is
//! rounded per busy period, not per packet: a port keeps the bytes and
//! picoseconds of its current busy period, a packet of `p` bytes takes
//! `duration(total + p) - duration(total)`, and the total resets when the
//! wire goes idle. A message alone on one link thus arrives exactly
//! `duration(bytes) + latency` after it is sent.
//!
//! # Injection
//! At its source, a message waits in its flow's FIFO (a flow is the
//! [`Transfer::flow`](super::Transfer::flow) id: one source and
//! destination rank); a flow's next message starts once the previous
//! one's last packet has been cut. The first link serves the flows that
//! have a message, round-robin, one packet at a time, as a NIC serves its
//! queue pairs. When the port's
//! vertex also forwards (the GPUs of a ring or torus), transit packets and
//! local packets alternate, packet by packet, when both wait.
//!
//! # Flow control
//! How a hop `l = u -> v` keeps `v`'s buffers from overflowing depends on
//! the link ([`topologies::Link::lossless`] and its kind):
//!
//! - **Credit** (InfiniBand, NVLink, PCIe, UPI): see *Credit* below; a
//!   packet never finds a full buffer, nothing is dropped.
//! - **PFC** (lossless Ethernet: RoCE): `u` sends unless paused; see
//!   *PFC* below.
//! - **None** (plain Ethernet, or any link with `lossless = false`): `u`
//!   sends; a packet that arrives to find the next port's buffer full is
//!   dropped there (tail drop), counted as an overflow drop of that port.
//!   On plain Ethernet the TCP-like transport's congestion windows, not
//!   the links, bound what the senders put into the network.
//!
//! # Credit
//! A packet may start on a credit link `l = u -> v` only if `v` is its
//! destination, or `v` is an endpoint, or the next link on its route
//! `l' = v -> x` has room in its buffer for it. The room is reserved when
//! the packet starts on `l` and released when it has been serialised on
//! `l'`. A port whose chosen packet gets no credit waits for it
//! (head-of-line blocking, as in InfiniBand) as a waiter on `l'`; freed
//! room goes to waiters in the order they began waiting, which shares a
//! congested port fairly between its upstream ports. A port admits a
//! newcomer only when no one waits, and an empty buffer admits any packet
//! (a buffer smaller than one packet slows traffic down instead of
//! stopping it). The buffer is the egress port's, as in an output-queued
//! switch: the room a credit stands for is where the packet will wait.
//!
//! An endpoint that forwards (a GPU relaying ring traffic) stages transit
//! packets in its own memory: its buffer is treated as unbounded, which
//! also keeps rings and tori free of credit deadlock (a cycle of full
//! buffers needs every buffer on the cycle to be bounded). Its ports still
//! count the bytes they hold, so their `max_queue` may exceed
//! `buffer_bytes`. Switches and NICs have the bounded buffers; the
//! switch fabrics of the presets (trees, leaf-spine, fat-trees) route up
//! then down, which leaves no cycle of credit dependencies between them.
//! (A topology whose switch routes do form such a cycle deadlocks here,
//! as the lossless hardware would: see *Deadlock* below.)
//!
//! # PFC
//! Priority flow control (IEEE 802.1Qbb) on a RoCE link `l = u -> v`, for
//! the one lossless priority that carries all collective traffic (as
//! NCCL uses one traffic class, `NCCL_IB_TC`). `v` counts the bytes it
//! holds that arrived over `l` (its ingress count: from a packet's
//! arrival until it has been serialised on its next link). When the
//! count reaches XOFF, `v` sends a PAUSE frame; when it falls back to
//! XON, a RESUME. A PFC frame is a MAC control frame that goes ahead of
//! queued data, so it reaches `u` one link latency later; `u` then
//! finishes the packet on its wire and starts no other until RESUME
//! arrives (all its traffic on `l` waits, whatever its destination: PFC's
//! head-of-line blocking). Pauses spread upstream: a paused port's queue
//! grows, which fills the ingress count of the link that feeds it, which
//! pauses the port before it. A packet that arrives when the count would
//! pass XOFF plus the headroom is dropped (an overflow drop of `l`):
//! with enough headroom this never happens. The thresholds are per
//! ingress port and default, for each link, to a headroom of
//! `bandwidth x (2 x latency + v's forwarding latency) + 2 x MTU` (what
//! can still arrive once PAUSE is sent: the round trip, the switch
//! pipeline, a packet `u` has just started and one partly counted), XOFF
//! at the link's buffer less that headroom, XON two MTUs below XOFF;
//! [`PacketNetwork::with_pfc`] overrides them. Counters per link: PAUSE
//! frames `v` sent (`pause_frames`) and the time `u` spent paused
//! (`paused_ps`). An endpoint that forwards is not PFC-accounted (it
//! stages packets in memory).
//!
//! # Loss and corruption
//! A link direction may lose packets at random ([`LinkChange::loss_rate`])
//! or corrupt them ([`LinkChange::corruption_rate`]); a corrupted packet
//! is dropped by the receiver's CRC check (as RoCE's ICRC or Ethernet's
//! FCS), so it is lost too, but counted apart. Each link draws from its
//! own ChaCha8 stream, seeded by [`PacketNetwork::with_loss_seed`] and the
//! link's id: one uniform draw per packet crossing while a rate is
//! positive, none otherwise, so a rate of 0 changes nothing and a seed
//! fixes every drop. A packet lost on a credit link gives its reserved
//! room back when it would have arrived.
//!
//! # Reliable transport
//! A flow whose route crosses a network link (InfiniBand, RoCE,
//! Ethernet), or a link of any kind declared lossy (`lossless = false`,
//! which may tail-drop), has a reliable transport, chosen by the kinds of
//! the links it crosses ([`TransportKind::of_link`]), as NCCL chooses its
//! network plugin by the NIC:
//!
//! | route crosses | transport | NCCL's | NAK (loss signal) | timeout | gives up after |
//! |---|---|---|---|---|---|
//! | InfiniBand or RoCE (or a lossy on-board link) | RDMA | IB verbs, a reliable-connected queue pair | at the first packet past a gap | 4.096 us x 2^`NCCL_IB_TIMEOUT` (1.07 s) | `NCCL_IB_RETRY_CNT` (7) NAKs or timeouts without progress |
//! | plain Ethernet (`ethernet<g>`; wins over RDMA on a mixed route) | TCP-like ([`TcpConfig`], `packet/tcp.rs`) | sockets, a kernel TCP connection | at the third packet past a gap (three duplicate ACKs), again if packets sent after the go-back arrive past it | `max(200 ms, 3 x idle round trip)`, doubled per expiry up to 120 s | `tcp_retries2` (15) timeouts without progress: 924.6 s |
//!
//! Both go back N, as RDMA NICs do. A flow's packets carry consecutive
//! sequence numbers (PSNs) across its messages. The receiver accepts
//! only the PSN it expects; a later one is discarded and counted past
//! the gap, and at the transport's threshold the receiver sends a NAK,
//! once per gap; a duplicate is discarded. ACKs and NAKs are small
//! control packets: they take the route's idle latency back and are not
//! queued or lost. An RDMA sender's ACKs are not modelled as events (its
//! timer reads the receiver's progress when it expires); a TCP sender's
//! are, one per packet accepted, because they clock its congestion
//! window (RFC 5681 slow start and congestion avoidance, halved at a
//! NAK, one packet after a timeout): a TCP flow whose window is full
//! waits out of its injection round until an ACK opens it
//! (`packet/window.rs`).
//! The sender's retransmission timer runs while packets are
//! unacknowledged, restarting at each acknowledgement and at each NAK
//! (which acknowledges what came before its gap). A NAK or an expiry
//! without progress is a retry: the sender goes back to the first
//! packet the receiver expects and sends everything from there again
//! (packets still in the network are discarded as they arrive). RDMA
//! counts every retry against `NCCL_IB_RETRY_CNT`; TCP counts only its
//! timeouts against `tcp_retries2` and doubles the timeout at each,
//! back to the base at progress. Past its budget the transport gives up:
//! the flow's messages are dropped and reported as a
//! [`TransportFailure`] naming the flow, its transport, the last link
//! that lost one of its packets and where its packets wait. A flow that
//! crosses only lossless on-board links (NVLink, PCIe) never loses a
//! packet and has no transport.
//!
//! # Deadlock
//! When nothing in the network can move, the links may wait on each other
//! in a cycle: a link waits for credit in the next link's buffer, or is
//! paused while packets that came over it wait for a paused next link.
//! [`PacketNetwork::buffer_cycle`] finds such a cycle of the
//! buffer-dependency graph. A transport timer that expires with no
//! event pending in the network and such a cycle present, for a flow
//! that cannot move (a packet of it waits in a queue, or its first port
//! is paused, waiting for credit or down), does not retry (no
//! retransmission can help) and is not rearmed, so the run ends with
//! the network stuck and the cycle reported, as a credit deadlock or a
//! PFC deadlock, instead of as a transport timeout. A flow whose packets
//! were all lost and whose first port is free retries as usual: its
//! route may not cross the cycle.
//!
//! # Link changes
//! [`PacketNetwork::schedule_changes`] takes [`LinkChange`]s (link
//! faults); each takes effect at its time, on one link direction:
//!
//! - From then on the port serialises each packet it starts at nominal
//!   bandwidth times `bandwidth_factor`. A packet already on the wire
//!   finishes at the rate it started with (store and forward). A new
//!   rate starts a new rounding period (see *Ports*), so the packets of a
//!   busy period at one rate take exactly `duration(bytes)` at that rate.
//! - A factor of 0 takes the link down: the port starts no packet (not
//!   even an empty one) until a later change gives it a positive factor.
//!   Its packet on the wire, if any, still completes and arrives. Packets
//!   wait in its transit FIFO and its injection round; upstream ports keep
//!   filling its buffer, then wait for credit, so backpressure spreads
//!   upstream as it always does. Nothing is dropped. A port that was
//!   waiting for credit when its link went down leaves the waiters of the
//!   next link (so it holds no one else up) and chooses again when it is
//!   restored. A restored port resumes at once if it has work.
//! - The counters keep their meaning: `busy_ps` sums serialization times
//!   (a down link is not busy), `bytes`, `units` and `max_queue` are as
//!   before.
//!
//! A change at time 0 applies at once, before any traffic; the others are
//! events, which fire before the events at the same time scheduled after
//! them (so call `schedule_changes` before the run starts: a packet then
//! starting at a change's time gets the new rate). Changes of one link at
//! one time apply in the order given; the last one holds.
//!
//! A change also sets the link's loss and corruption rates from then on
//! (see *Loss and corruption*). A link that is down drops nothing: what
//! waits for it stays queued.
//!
//! # Delivery and counters
//! Packets of a message follow one route through FIFO queues, so they
//! arrive in order: when the last one arrives the message is delivered.
//! Each port counts the bytes and packets it carried, its serialization
//! time (`busy_ps`) and the most bytes ever reserved in its buffer
//! (`max_queue`); with sampling, every change of those reserved bytes is
//! recorded as a [`LinkSample`].

mod arrive;
mod change;
mod cycle;
#[cfg(test)]
mod fault_tests;
mod inject;
#[cfg(test)]
mod loss_tests;
mod pfc;
mod port;
mod records;
mod send;
#[cfg(test)]
mod stress_tests;
mod table;
mod tcp;
#[cfg(test)]
mod tcp_tests;
#[cfg(test)]
mod tests;
mod transport;
mod window;
mod wire;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use algorithms::Time;
use topologies::{LinkId, Route, Topology};

use self::port::{Control, Port};
use self::records::{Flow, Message, Packet};
use self::table::Table;
use super::timeline::LinkTimeline;
use super::{LinkChange, LinkSample, LinkUsage, NetEvent, OutOfTime, PfcConfig, TransportConfig};
use crate::event::{EventKind, EventQueue, MessageId};

pub use self::cycle::{BufferCycle, Stall};
pub use self::port::Loss;
pub use self::tcp::{
    TCP_FASTRETRANS_THRESH, TCP_RETRIES2, TCP_RTO_MAX_PS, TCP_RTO_MIN_PS, TcpConfig,
};
pub use self::transport::{TransportFailure, TransportKind};

/// "None": the end of a list, no flow, no link.
const NONE: u32 = u32::MAX;

/// An event of the packet-level model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// A link direction has finished serialising its packet.
    LinkFree {
        /// The link direction (`LinkId::index`).
        link: u32,
    },
    /// A packet has reached the far end of its current hop.
    Arrive {
        /// The packet.
        packet: u32,
    },
    /// A scheduled link change takes effect.
    Change {
        /// Its index among the changes given to
        /// [`PacketNetwork::schedule_changes`], in the order given.
        index: u32,
    },
    /// A PFC PAUSE frame for a link direction reaches its sender.
    Pause {
        /// The link direction.
        link: u32,
    },
    /// A PFC RESUME frame for a link direction reaches its sender.
    Resume {
        /// The link direction.
        link: u32,
    },
    /// A NAK (sequence error) reaches a flow's sender.
    Nak {
        /// The flow.
        flow: u32,
        /// The flow's serial, so a NAK for a flow since ended is ignored.
        serial: u32,
    },
    /// A TCP ACK of one packet reaches a flow's sender.
    Ack {
        /// The flow.
        flow: u32,
        /// The flow's serial.
        serial: u32,
    },
    /// A flow's retransmission timer expires.
    Timer {
        /// The flow.
        flow: u32,
        /// The flow's serial.
        serial: u32,
    },
}

/// A link id kept as `u32` ([`NONE`]: no link) as an index.
#[inline]
fn link_index(link: u32) -> Option<usize> {
    (link != NONE).then_some(link as usize)
}

/// `route[hop]` as a `u32`, or [`NONE`] past its end.
#[inline]
fn route_link(route: &Route, hop: u32) -> u32 {
    route.get(hop as usize).map_or(NONE, |l| {
        u32::try_from(l.index()).expect("link ids fit in u32")
    })
}

/// The facts about a link direction that every hop reads, copied out of
/// its [`Port`] into a dense table that stays in cache.
#[derive(Clone, Copy, Debug)]
struct LinkHot {
    /// [`Port::control`].
    control: Control,
    /// [`Port::credited`].
    credited: bool,
    /// Whether its loss or corruption rate is positive (see
    /// [`port::LinkLoss::may_lose`]).
    may_lose: bool,
}

/// The packet-level model of one run.
#[derive(Debug)]
pub struct PacketNetwork {
    topology: Arc<Topology>,
    ports: Vec<Port>,
    /// Per link direction, what hops read of its port.
    hot: Vec<LinkHot>,
    usage: Vec<LinkUsage>,
    messages: Table<Message>,
    flows: Table<Flow>,
    /// Flow key to flow record, for the flows with a message not yet
    /// delivered (looked up once per message, never iterated).
    flow_ids: HashMap<u64, u32>,
    next_serial: u32,
    packets: Table<Packet>,
    sample_links: bool,
    samples: Vec<LinkSample>,
    /// Every link change scheduled, addressed by [`PacketEvent::Change`].
    changes: Vec<LinkChange>,
    transport: TransportConfig,
    tcp: TcpConfig,
    loss_seed: u64,
    /// Events scheduled and not yet handled, timers excepted: zero means
    /// nothing in the network can move until a sender retransmits.
    pending_activity: u64,
    /// Flows whose transport gave up, not yet taken by the world.
    failures: Vec<TransportFailure>,
    /// Link traffic per time bin, when asked for.
    timeline: Option<LinkTimeline>,
}

impl PacketNetwork {
    /// A model of `topology`; with `sample_links` it records every change
    /// of a link's backlog for the trace. Its transport and PFC use the
    /// defaults until set.
    pub fn new(topology: Arc<Topology>, sample_links: bool) -> PacketNetwork {
        let ports: Vec<Port> = topology
            .link_ids()
            .map(|l| Port::new(&topology, l))
            .collect();
        PacketNetwork {
            usage: vec![LinkUsage::default(); ports.len()],
            hot: ports
                .iter()
                .map(|p| LinkHot {
                    control: p.control,
                    credited: p.credited,
                    may_lose: p.loss.may_lose(),
                })
                .collect(),
            ports,
            topology,
            messages: Table::default(),
            flows: Table::default(),
            flow_ids: HashMap::default(),
            next_serial: 0,
            packets: Table::default(),
            sample_links,
            samples: Vec::new(),
            changes: Vec::new(),
            transport: TransportConfig::default(),
            tcp: TcpConfig::default(),
            loss_seed: 0,
            pending_activity: 0,
            failures: Vec::new(),
            timeline: None,
        }
    }

    /// The same, recording each link's traffic per bin of `bin_ps` (none
    /// if `None`).
    pub fn with_timeline(mut self, bin_ps: Option<u64>) -> PacketNetwork {
        self.timeline = bin_ps.map(|b| LinkTimeline::new(self.ports.len(), b));
        self
    }

    /// The link traffic per time bin recorded so far, if asked for.
    pub fn take_timeline(&mut self) -> Option<LinkTimeline> {
        self.timeline.take()
    }

    /// The same with the RDMA transport's parameters (flows over
    /// InfiniBand and RoCE).
    pub fn with_transport(mut self, transport: TransportConfig) -> PacketNetwork {
        self.transport = transport;
        self
    }

    /// The same with the TCP-like transport's parameters (flows over
    /// plain Ethernet).
    pub fn with_tcp(mut self, tcp: TcpConfig) -> PacketNetwork {
        self.tcp = tcp;
        self
    }

    /// The same with PFC thresholds for every PFC link (see [`PfcConfig`]).
    pub fn with_pfc(mut self, config: PfcConfig) -> PacketNetwork {
        for (i, port) in self.ports.iter_mut().enumerate() {
            let id = LinkId::new(i);
            let link = self.topology.link(id);
            let (_, v) = self.topology.ends(id);
            port.pfc.set_thresholds(
                config,
                link.bandwidth_bytes_per_s,
                link.latency_ps,
                self.topology.vertex(v).forward_latency_ps,
                link.mtu_bytes,
                link.buffer_bytes,
            );
        }
        self
    }

    /// The same with `seed` for the per-link streams of random loss.
    pub fn with_loss_seed(mut self, seed: u64) -> PacketNetwork {
        self.loss_seed = seed;
        self
    }

    /// Applies one of this model's events at `now`, pushing the messages
    /// that have fully arrived onto `delivered`.
    pub fn handle(
        &mut self,
        now: Time,
        event: PacketEvent,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        if !matches!(event, PacketEvent::Timer { .. }) {
            self.pending_activity -= 1;
        }
        match event {
            PacketEvent::LinkFree { link } => self.link_free(link as usize, now, queue),
            PacketEvent::Arrive { packet } => self.arrive(packet, now, queue, delivered),
            PacketEvent::Change { index } => self.apply_change(index, now, queue),
            PacketEvent::Pause { link } => {
                self.pause_arrives(link as usize, now);
                Ok(())
            }
            PacketEvent::Resume { link } => self.resume_arrives(link as usize, now, queue),
            PacketEvent::Nak { flow, serial } => self.nak_arrives(flow, serial, now, queue),
            PacketEvent::Ack { flow, serial } => self.ack_arrives(flow, serial, now, queue),
            PacketEvent::Timer { flow, serial } => self.timer_expires(flow, serial, now, queue),
        }
    }

    /// Counters per link direction, indexed by `LinkId::index`; a pause
    /// still in force is counted up to `now`.
    pub fn usage_at(&self, now: Time) -> Vec<LinkUsage> {
        let mut usage = self.usage.clone();
        for (u, port) in usage.iter_mut().zip(&self.ports) {
            if port.pfc.paused {
                let open = now.as_ps().saturating_sub(port.pfc.paused_since.as_ps());
                u.paused_ps = u.paused_ps.saturating_add(open);
            }
        }
        usage
    }

    /// Counters per link direction, indexed by `LinkId::index` (pauses
    /// still in force not counted).
    pub fn usage(&self) -> &[LinkUsage] {
        &self.usage
    }

    /// The backlog samples recorded so far (empty unless sampling).
    pub fn take_samples(&mut self) -> Vec<LinkSample> {
        std::mem::take(&mut self.samples)
    }

    /// Whether a transport failure waits to be taken.
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty()
    }

    /// The transport failures since the last call.
    pub fn take_failures(&mut self) -> Vec<TransportFailure> {
        std::mem::take(&mut self.failures)
    }

    /// The topology it models.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Messages not yet delivered.
    pub fn messages_in_flight(&self) -> usize {
        self.messages.len()
    }

    /// Schedules one of this model's events, counting it as activity
    /// unless it is a timer.
    fn schedule(
        &mut self,
        at: Time,
        event: PacketEvent,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if !matches!(event, PacketEvent::Timer { .. }) {
            self.pending_activity += 1;
        }
        queue.schedule(at, EventKind::Net(NetEvent::Packet(event)));
        Ok(())
    }
}
