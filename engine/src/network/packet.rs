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
//! ([`path_mtu`]), full packets first; a message of 0 bytes is one empty
//! packet. Packets are cut lazily at the source, one when the first link
//! takes it, so a 1 GiB message never exists as a quarter million packets.
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
//! [`Transfer::flow`] id: one source and destination rank); a flow's next
//! message starts once the previous one's last packet has been cut. The
//! first link serves the flows that have a message, round-robin, one
//! packet at a time, as a NIC serves its queue pairs. When the port's
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

mod change;
mod cycle;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod loss_tests;
mod pfc;
mod port;
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

use self::port::{Control, Port, Source};
use self::table::Table;
use self::transport::Transport;
use super::path::{idle_delivery_ps, idle_latency_ps, path_mtu};
use super::timeline::LinkTimeline;
use super::{
    LinkChange, LinkSample, LinkUsage, NetEvent, OutOfTime, PfcConfig, Transfer, TransportConfig,
};
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

/// A message being sent.
#[derive(Debug)]
struct Message {
    /// The world's id, reported on delivery.
    id: MessageId,
    route: Route,
    bytes: u64,
    /// Bytes already cut into packets (in the current pass: a
    /// retransmission starts it again).
    cut_bytes: u64,
    mtu_bytes: u64,
    /// The next message of the same flow, or [`NONE`].
    next: u32,
    /// Its flow, or [`NONE`] for a message to oneself.
    flow: u32,
    /// The sequence number of its first packet within its flow.
    first_psn: u64,
    /// Its packets alive in the network (the record outlives delivery
    /// until they are gone: a stale retransmitted copy may still travel).
    live_packets: u32,
    /// Delivered, or given up with its failed flow.
    done: bool,
}

impl Message {
    /// How many packets it is cut into (an empty message is one).
    fn packets(&self) -> u64 {
        self.bytes.div_ceil(self.mtu_bytes).max(1)
    }

    /// The sequence number of its next packet to cut.
    fn next_psn(&self) -> u64 {
        self.first_psn + self.cut_bytes / self.mtu_bytes
    }
}

/// The messages of one source-destination flow not yet delivered, as a
/// list `oldest -> ... -> tail` through [`Message::next`], with a cursor
/// `head` at the one being cut ([`NONE`] when all are cut). A flow is in
/// its first link's injection round exactly when `head` is not [`NONE`].
#[derive(Debug)]
struct Flow {
    key: u64,
    /// Distinguishes this flow from others that reuse its id later.
    serial: u32,
    /// The first link of its route (all its messages share the route).
    first_link: u32,
    oldest: u32,
    head: u32,
    tail: u32,
    /// The sequence number after its last message's last packet.
    psn_end: u64,
    /// One past the highest sequence number ever cut (a packet below it
    /// is a retransmission).
    psn_sent: u64,
    /// The reliable transport (RDMA or TCP), for a flow that crosses
    /// network links or a lossy link.
    transport: Option<Box<Transport>>,
    /// Whether it has packets to cut but waits out of its injection round
    /// for ACKs to open its TCP window (see `window.rs`).
    parked: bool,
    /// How many times the sender went back N, modulo 2^16: its packets
    /// carry it, so that a TCP receiver knows a packet was sent after the
    /// go-back that answered its NAK.
    epoch: u16,
}

/// A packet in flight.
#[derive(Debug)]
struct Packet {
    message: u32,
    /// The index in the route of the link it is crossing or waiting for.
    hop: u32,
    /// That link, `route[hop]` ([`NONE`] for a message to oneself), and
    /// its neighbours on the route, `route[hop - 1]` and `route[hop + 1]`
    /// (or [`NONE`]): kept here so that a hop reads its message's route
    /// once, not at every look.
    link: u32,
    prev: u32,
    next: u32,
    bytes: u64,
    /// Whether it is its message's last packet.
    last: bool,
    /// Its sequence number within its flow.
    psn: u64,
    /// Whether it is a retransmitted copy.
    retransmit: bool,
    /// Its flow's [`Flow::epoch`] when it was cut.
    epoch: u16,
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

    /// Starts sending a message at `now`. A message with an empty route
    /// (a rank sending to itself) arrives at `now`, outside any flow.
    /// Every message of one flow must take the same route.
    pub fn start(
        &mut self,
        now: Time,
        transfer: Transfer,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let Transfer {
            message: id,
            bytes,
            route,
            flow: key,
            path: _,
        } = transfer;
        let Some(&first) = route.first() else {
            let message = self.messages.insert(Message {
                id,
                route,
                bytes,
                cut_bytes: bytes,
                mtu_bytes: 1,
                next: NONE,
                flow: NONE,
                first_psn: 0,
                live_packets: 1,
                done: false,
            });
            let packet = self.packets.insert(Packet {
                message,
                hop: 0,
                link: NONE,
                prev: NONE,
                next: NONE,
                bytes,
                last: true,
                psn: 0,
                retransmit: false,
                epoch: 0,
            });
            return self.schedule(now, PacketEvent::Arrive { packet }, queue);
        };
        let mtu_bytes = path_mtu(&self.topology, &route);
        let flow = match self.flow_ids.get(&key) {
            Some(&flow) => flow,
            None => {
                let transport = self.transport_for(&route, mtu_bytes);
                let serial = self.next_serial;
                self.next_serial = self.next_serial.wrapping_add(1);
                let flow = self.flows.insert(Flow {
                    key,
                    serial,
                    first_link: u32::try_from(first.index()).expect("link ids fit in u32"),
                    oldest: NONE,
                    head: NONE,
                    tail: NONE,
                    psn_end: 0,
                    psn_sent: 0,
                    transport,
                    parked: false,
                    epoch: 0,
                });
                self.flow_ids.insert(key, flow);
                flow
            }
        };
        debug_assert_eq!(
            self.flows[flow].first_link as usize,
            first.index(),
            "the messages of a flow share its route"
        );
        let first_psn = self.flows[flow].psn_end;
        let message = self.messages.insert(Message {
            id,
            route,
            bytes,
            cut_bytes: 0,
            mtu_bytes,
            next: NONE,
            flow,
            first_psn,
            live_packets: 0,
            done: false,
        });
        let packets = self.messages[message].packets();
        let f = &mut self.flows[flow];
        f.psn_end += packets;
        if f.tail == NONE {
            f.oldest = message;
        } else {
            let tail = f.tail;
            self.messages[tail].next = message;
        }
        let f = &mut self.flows[flow];
        f.tail = message;
        if f.head != NONE {
            return Ok(());
        }
        f.head = message;
        self.enter_round(flow, now, queue)
    }

    /// The transport of a new flow along `route` (decided once per flow:
    /// its route is fixed). Network links may lose packets, and so may a
    /// link of any kind declared lossy: a flow over either needs one, TCP
    /// if it crosses plain Ethernet, else RDMA ([`TransportKind::of_link`]).
    fn transport_for(&self, route: &Route, mtu_bytes: u64) -> Option<Box<Transport>> {
        let kind = route
            .iter()
            .filter_map(|l| self.ports[l.index()].transport)
            .max()?;
        let ack_ps = idle_latency_ps(&self.topology, route, 0);
        Some(Box::new(match kind {
            TransportKind::Rdma => Transport::rdma(ack_ps, self.transport),
            TransportKind::Tcp => {
                // An MTU packet there on the idle route, its ACK back.
                let rtt_ps =
                    idle_delivery_ps(&self.topology, route, mtu_bytes).saturating_add(ack_ps);
                Transport::tcp(ack_ps, rtt_ps, self.tcp)
            }
        }))
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

    /// Port `link` has serialised its packet: release its buffer room
    /// (and its PFC ingress count), hand the room to waiting upstream
    /// ports, then send the next packet.
    fn link_free(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        port.busy = false;
        let released = std::mem::take(&mut port.on_wire_transit_bytes);
        let ingress = std::mem::replace(&mut port.on_wire_ingress, NONE);
        if ingress != NONE {
            self.release_ingress(ingress as usize, released, now, queue)?;
        }
        if released > 0 {
            self.set_reserved(link, self.ports[link].reserved_bytes - released, now);
            self.grant(link, now, queue)?;
        }
        self.try_start(link, now, queue)
    }

    /// A packet has crossed its hop: lost on the wire, delivered, dropped
    /// for want of room, or queued at the next port.
    fn arrive(
        &mut self,
        packet: u32,
        now: Time,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let p = &self.packets[packet];
        let (message, bytes) = (p.message, p.bytes);
        let crossed = link_index(p.link);
        let next = link_index(p.next);
        if let Some(l) = crossed
            && self.hot[l].may_lose
            && let Some(loss) = self.ports[l].loss.draw()
        {
            if let Some(next) = next
                && self.hot[l].control == Control::Credit
            {
                // Its room downstream was reserved when it started.
                self.set_reserved(next, self.ports[next].reserved_bytes - bytes, now);
                self.grant(next, now, queue)?;
            }
            return self.lose(packet, l, loss, now);
        }
        let Some(next) = next else {
            return self.receive(packet, now, queue, delivered);
        };
        let l = crossed.expect("a packet with a next hop crossed one");
        if self.hot[next].credited {
            match self.hot[l].control {
                Control::Credit => {}
                Control::Pfc => {
                    if !self.admit_ingress(l, bytes, now, queue)? {
                        return self.lose(packet, l, Loss::Overflow, now);
                    }
                    self.reserve(next, bytes, now);
                }
                Control::Lossy => {
                    if !self.ports[next].fits(bytes) {
                        return self.lose(packet, next, Loss::Overflow, now);
                    }
                    self.reserve(next, bytes, now);
                }
            }
        } else if self.hot[l].control != Control::Credit {
            // An endpoint relays through its own memory: counted, never full.
            self.reserve(next, bytes, now);
        }
        let p = &mut self.packets[packet];
        p.hop += 1;
        p.next = route_link(&self.messages[message].route, p.hop + 1);
        p.prev = p.link;
        p.link = next as u32;
        self.ports[next].transit.push_back(packet);
        self.try_start(next, now, queue)
    }

    /// A packet that did not arrive: counted against link `link`, its
    /// flow's transport told, the packet gone.
    fn lose(&mut self, packet: u32, link: usize, loss: Loss, now: Time) -> Result<(), OutOfTime> {
        let usage = &mut self.usage[link];
        match loss {
            Loss::Wire => usage.lost += 1,
            Loss::Corrupted => usage.corrupted += 1,
            Loss::Overflow => usage.overflow_drops += 1,
        }
        let message = self.packets.remove(packet).message;
        let m = &self.messages[message];
        if !m.done {
            let flow = m.flow;
            match self.flows[flow].transport.as_mut() {
                Some(t) => t.note_loss(link, loss, now),
                None => debug_assert!(false, "only flows over lossy or network links lose packets"),
            }
        }
        self.release_packet_of(message);
        Ok(())
    }

    /// One packet of `message` has left the network: frees the message
    /// once it is done and has none left.
    fn release_packet_of(&mut self, message: u32) {
        let m = &mut self.messages[message];
        m.live_packets -= 1;
        if m.done && m.live_packets == 0 {
            self.messages.remove(message);
        }
    }

    /// A packet has reached its destination: accepted in order, or
    /// discarded by the transport (a duplicate or out of sequence).
    fn receive(
        &mut self,
        packet: u32,
        now: Time,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let p = self.packets.remove(packet);
        let message = p.message;
        let m = &self.messages[message];
        let (done, flow) = (m.done, m.flow);
        let mut accept = !done;
        if !done && flow != NONE {
            accept = self.transport_accepts(flow, p.psn, p.epoch, now, queue)?;
        }
        if accept && p.last {
            self.messages[message].done = true;
            delivered.push(self.messages[message].id);
            if flow != NONE {
                self.pop_delivered(flow, message, now, queue)?;
            }
        }
        self.release_packet_of(message);
        Ok(())
    }

    /// `message`, the oldest of `flow`, is delivered: it leaves the list,
    /// and the flow ends when nothing of it is left to deliver. If a
    /// retry was cutting it again (its first copies got through after
    /// all), the sender moves on to the next message: the receiver's
    /// acknowledgement tells it the rest is not needed.
    fn pop_delivered(
        &mut self,
        flow: u32,
        message: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let next = self.messages[message].next;
        let f = &mut self.flows[flow];
        debug_assert_eq!(f.oldest, message, "a flow delivers in order");
        f.oldest = next;
        if f.head == message {
            if next == NONE {
                let first = f.first_link as usize;
                self.leave_round(flow, now, queue)?;
                self.flows[flow].head = NONE;
                self.try_start(first, now, queue)?;
            } else {
                // Not cut in this pass yet (a go-back cut it from 0).
                debug_assert_eq!(self.messages[next].cut_bytes, 0);
                self.flows[flow].head = next;
            }
        }
        let f = &self.flows[flow];
        if f.oldest == NONE {
            debug_assert_eq!(f.head, NONE, "an undelivered message remains");
            let key = self.flows.remove(flow).key;
            self.flow_ids.remove(&key);
        }
        Ok(())
    }

    /// Takes `flow` out of its first link's injection round; if that
    /// port was waiting for credit for the flow's packet, it stops
    /// waiting (the caller lets the port choose again).
    fn leave_round(
        &mut self,
        flow: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if std::mem::take(&mut self.flows[flow].parked) {
            // Waiting for its window, it was not in the round.
            return Ok(());
        }
        let first = self.flows[flow].first_link as usize;
        let port = &self.ports[first];
        if port.blocked == Some(Source::Local) && port.flows.front() == Some(&flow) {
            self.withdraw(first, now, queue)?;
        }
        let flows = &mut self.ports[first].flows;
        let at = flows.iter().position(|&f| f == flow).expect("in its round");
        flows.remove(at);
        Ok(())
    }

    /// Offers the free room of port `link`'s buffer to its waiters, first
    /// come first served, starting each one that now fits.
    fn grant(&mut self, link: usize, now: Time, queue: &mut EventQueue) -> Result<(), OutOfTime> {
        while let Some(&waiter) = self.ports[link].waiters.front() {
            let waiter = waiter as usize;
            let source = self.ports[waiter]
                .blocked
                .expect("a waiter is blocked until granted");
            let (bytes, next) = self.candidate(waiter, source);
            debug_assert_eq!(
                next,
                Some(link),
                "a waiter waits for its packet's next link"
            );
            if !self.ports[link].fits(bytes) {
                break;
            }
            self.ports[link].waiters.pop_front();
            self.ports[waiter].blocked = None;
            self.reserve(link, bytes, now);
            self.begin(waiter, source, bytes, now, queue)?;
        }
        Ok(())
    }

    /// Sends port `link`'s next packet if its wire is free, it may send
    /// (not down, not paused, not waiting for credit), and it has one
    /// whose credit is available.
    fn try_start(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        if port.busy || port.blocked.is_some() {
            return Ok(());
        }
        if port.down || port.pfc.paused {
            // Its work waits for a link change or a RESUME.
            port.go_idle();
            return Ok(());
        }
        let Some(source) = port.choose() else {
            port.go_idle();
            return Ok(());
        };
        let (bytes, next) = self.candidate(link, source);
        if let Some(next) = next
            && self.hot[link].control == Control::Credit
        {
            let down = &self.ports[next];
            if self.hot[next].credited && !(down.waiters.is_empty() && down.fits(bytes)) {
                self.ports[next].waiters.push_back(link as u32);
                let port = &mut self.ports[link];
                port.blocked = Some(source);
                port.go_idle();
                return Ok(());
            }
            self.reserve(next, bytes, now);
        }
        self.begin(link, source, bytes, now, queue)
    }

    /// The size of the packet port `link` would send from `source`, and
    /// the next link of its route (whose buffer it needs), if any.
    fn candidate(&self, link: usize, source: Source) -> (u64, Option<usize>) {
        let port = &self.ports[link];
        match source {
            Source::Transit => {
                let p = &self.packets[*port.transit.front().expect("chosen queue is not empty")];
                (p.bytes, link_index(p.next))
            }
            Source::Local => {
                let flow = *port.flows.front().expect("chosen queue is not empty");
                let m = &self.messages[self.flows[flow].head];
                let bytes = (m.bytes - m.cut_bytes).min(m.mtu_bytes);
                (bytes, m.route.get(1).map(|l| l.index()))
            }
        }
    }

    /// Puts the packet from `source` (of `bytes`, its credit already
    /// reserved) on port `link`'s wire and schedules its end and arrival.
    fn begin(
        &mut self,
        link: usize,
        source: Source,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let (packet, kick) = match source {
            Source::Transit => {
                let packet = self.ports[link]
                    .transit
                    .pop_front()
                    .expect("chosen queue is not empty");
                (packet, None)
            }
            Source::Local => self.cut(link, bytes, now, queue)?,
        };
        let p = &self.packets[packet];
        debug_assert_eq!(p.link as usize, link, "a packet starts on its hop's link");
        let last_hop = p.next == NONE;
        // The PFC ingress count the packet leaves once serialised here.
        let ingress = match source {
            Source::Transit if self.hot[link].credited => {
                let prev = p.prev as usize;
                (self.hot[prev].control == Control::Pfc).then_some(prev as u32)
            }
            _ => None,
        };
        let retransmit = p.retransmit;
        let port = &mut self.ports[link];
        let ser_ps = port.serialize(bytes);
        port.busy = true;
        port.local_next = source == Source::Transit;
        port.on_wire_transit_bytes = if source == Source::Transit { bytes } else { 0 };
        port.on_wire_ingress = ingress.unwrap_or(NONE);
        let usage = &mut self.usage[link];
        usage.bytes = usage.bytes.saturating_add(bytes);
        usage.units += 1;
        usage.busy_ps = usage.busy_ps.saturating_add(ser_ps);
        if retransmit {
            usage.retransmitted += 1;
        }

        // `path::hop_latency_ps`, from the port's copy of the parameters.
        let port = &self.ports[link];
        let hop_ps = if last_hop {
            port.latency_ps
        } else {
            port.latency_ps.saturating_add(port.forward_latency_ps)
        };
        let free_at = now.checked_plus_ps(ser_ps).ok_or(OutOfTime)?;
        let arrive_at = free_at.checked_plus_ps(hop_ps).ok_or(OutOfTime)?;
        if let Some(t) = &mut self.timeline {
            t.add(link, now, free_at, bytes as f64);
        }
        let link_id = u32::try_from(link).expect("link ids fit in u32");
        self.schedule(free_at, PacketEvent::LinkFree { link: link_id }, queue)?;
        self.schedule(arrive_at, PacketEvent::Arrive { packet }, queue)?;
        match kick {
            Some(other) => self.try_start(other, now, queue),
            None => Ok(()),
        }
    }

    /// Cuts the next packet (of `bytes`) of the flow at the front of port
    /// `link`'s injection round and moves the round on. Returns the packet
    /// and, when the flow's next message leaves by another port, that port.
    fn cut(
        &mut self,
        link: usize,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(u32, Option<usize>), OutOfTime> {
        let flow = self.ports[link]
            .flows
            .pop_front()
            .expect("chosen queue is not empty");
        let message = self.flows[flow].head;
        let m = &mut self.messages[message];
        let (first_link, second_link) = (route_link(&m.route, 0), route_link(&m.route, 1));
        let psn = m.next_psn();
        m.cut_bytes += bytes;
        m.live_packets += 1;
        let last = m.cut_bytes == m.bytes;
        let next = m.next;
        let f = &mut self.flows[flow];
        let retransmit = psn < f.psn_sent;
        f.psn_sent = f.psn_sent.max(psn + 1);
        let epoch = f.epoch;
        let packet = self.packets.insert(Packet {
            message,
            hop: 0,
            link: first_link,
            prev: NONE,
            next: second_link,
            bytes,
            last,
            psn,
            retransmit,
            epoch,
        });
        self.arm_timer(flow, now, queue)?;
        if !last {
            self.rejoin(flow, link, psn + 1);
            return Ok((packet, None));
        }
        self.flows[flow].head = next;
        if next == NONE {
            return Ok((packet, None));
        }
        let first = self.messages[next].route[0].index();
        let joined = self.rejoin(flow, first, psn + 1);
        Ok((packet, (joined && first != link).then_some(first)))
    }

    /// Adds `bytes` to what port `link`'s buffer holds.
    fn reserve(&mut self, link: usize, bytes: u64, now: Time) {
        self.set_reserved(
            link,
            self.ports[link].reserved_bytes.saturating_add(bytes),
            now,
        );
    }

    /// Sets the bytes reserved in port `link`'s buffer, updating its
    /// high-water mark and recording a sample.
    fn set_reserved(&mut self, link: usize, bytes: u64, now: Time) {
        self.ports[link].reserved_bytes = bytes;
        let usage = &mut self.usage[link];
        usage.max_queue = usage.max_queue.max(bytes);
        if self.sample_links {
            super::record_sample(
                &mut self.samples,
                LinkSample {
                    time: now,
                    link: LinkId::new(link),
                    queue: bytes,
                },
            );
        }
    }
}
