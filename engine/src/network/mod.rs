//! Network models: how messages cross a [`Topology`].
//!
//! The world hands each message to its model as a [`Transfer`] along a
//! route (from [`topologies::Router`]); the model schedules its own events
//! ([`NetEvent`]) and reports when each message has fully arrived.
//!
//! - [`packet`]: packet-level; messages cut into MTU packets, finite egress
//!   buffers, credit-based (lossless) hop-by-hop flow control.
//! - [`flow`]: flow-level; each message is a flow with a max-min fair
//!   share of every link on its route, recomputed when flows start or end.
//! - [`path`]: route arithmetic both share (path MTU, uncontended latency).
//!
//! Both models keep per-link-direction [`LinkUsage`] counters, indexed by
//! [`LinkId::index`].

pub mod flow;
pub mod packet;
pub mod path;
pub mod timeline;

use std::sync::{Arc, Mutex};

use algorithms::{Rank, Time};
use rustc_hash::FxHashMap as HashMap;
use topologies::{LinkId, LinkSpec, Rotation, Route, Router, Topology, VertexId};

use crate::event::{EventQueue, MessageId};
use crate::fold::RankAction;
use crate::links::IdealLinks;
use crate::nccl::{HopClass, NcclSystem, machine};

/// A message handed to a network model.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// The world's id of the message, reported back on arrival.
    pub message: MessageId,
    /// Payload size in bytes.
    pub bytes: u64,
    /// The link directions it crosses, source first (never empty).
    pub route: Route,
    /// Messages of one flow are sent one after another, in order.
    pub flow: u64,
    /// The route crossed once, for the delivery latency, when `route`
    /// lists links several times for their weight (a folded flow-level
    /// run's shared links, see [`crate::fold`]); `None`: `route` itself.
    pub path: Option<Route>,
}

/// An event of a network model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// Of the packet-level model.
    Packet(packet::PacketEvent),
    /// Of the flow-level model.
    Flow(flow::FlowEvent),
}

/// A scheduled change of one link direction's state (a link fault): its
/// bandwidth and its packet loss from then on. Each change gives the whole
/// state, so the change that ends a fault restores the nominal one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkChange {
    /// When it takes effect.
    pub time: Time,
    /// Which link direction.
    pub link: LinkId,
    /// Its bandwidth from then on, as a fraction of its nominal bandwidth:
    /// 0 takes the link down, 1 restores it, 0.25 degrades it to a quarter.
    pub bandwidth_factor: f64,
    /// Probability in `[0, 1]` that a packet crossing it from then on is
    /// lost on the wire (packet model only; network links only).
    pub loss_rate: f64,
    /// Probability in `[0, 1]` that a packet crossing it from then on
    /// arrives corrupted; the receiver's CRC check drops it.
    pub corruption_rate: f64,
}

impl LinkChange {
    /// A change of bandwidth only (no loss): `factor` of nominal from `time`.
    pub fn bandwidth(time: Time, link: LinkId, factor: f64) -> LinkChange {
        LinkChange {
            time,
            link,
            bandwidth_factor: factor,
            loss_rate: 0.0,
            corruption_rate: 0.0,
        }
    }
}

pub use packet::{TcpConfig, TransportKind};

/// The RDMA reliable transport's parameters, as NCCL users set them
/// (flows over InfiniBand and RoCE; plain Ethernet's flows use
/// [`TcpConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportConfig {
    /// `NCCL_IB_TIMEOUT`: the retransmission timeout is
    /// 4.096 us x 2^`ib_timeout` (1..=31; NCCL's default 18, about 1.07 s).
    pub ib_timeout: u8,
    /// `NCCL_IB_RETRY_CNT`: retries without progress before the transport
    /// fails (0..=7; NCCL's default 7).
    pub ib_retry_cnt: u8,
}

impl Default for TransportConfig {
    /// NCCL's defaults (`NCCL_IB_TIMEOUT=18`, `NCCL_IB_RETRY_CNT=7`).
    fn default() -> Self {
        TransportConfig {
            ib_timeout: 18,
            ib_retry_cnt: 7,
        }
    }
}

impl TransportConfig {
    /// The retransmission timeout in ps: 4.096 us x 2^`ib_timeout`.
    pub fn rto_ps(self) -> u64 {
        4_096_000u64 << self.ib_timeout.min(31)
    }
}

/// Priority flow control thresholds of the lossless (RoCE) links, per
/// ingress port; `None` takes the default derived from each link (see
/// [`packet`], *PFC*).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcConfig {
    /// Bytes held from one ingress at which the switch sends PAUSE.
    pub xoff_bytes: Option<u64>,
    /// Bytes at or below which it sends RESUME (below `xoff_bytes`).
    pub xon_bytes: Option<u64>,
    /// Room above `xoff_bytes` for what is still in flight when PAUSE
    /// takes effect; a packet arriving beyond it is dropped.
    pub headroom_bytes: Option<u64>,
}

/// The transport (RDMA or TCP) between two ranks gave up: its retry
/// budget ran out without progress. Its messages are never delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportTimeout {
    /// The sending rank.
    pub src: Rank,
    /// The receiving rank.
    pub dst: Rank,
    /// Which transport gave up.
    pub transport: TransportKind,
    /// The world's ids of the messages it gave up on.
    pub messages: Vec<MessageId>,
    /// When.
    pub at: Time,
    /// Retries made without progress (`NCCL_IB_RETRY_CNT` for RDMA,
    /// `tcp_retries2` retransmission timeouts for TCP).
    pub retries: u16,
    /// The last packet of the pair lost: on which link, how, when.
    pub last_loss: Option<(String, packet::Loss, Time)>,
    /// The link where a packet of the pair still waits, if one does.
    pub held_at: Option<String>,
}

impl TransportTimeout {
    /// What gave up, in words: "RDMA transport from rank 1 to rank 2 gave
    /// up at 4.2 ms after 7 retries without progress (NCCL_IB_RETRY_CNT)".
    pub fn summary(&self) -> String {
        format!(
            "{} transport from rank {} to rank {} gave up at {} after {} retries without \
             progress ({})",
            self.transport.name(),
            self.src,
            self.dst,
            self.at,
            self.retries,
            self.transport.retry_limit()
        )
    }

    /// Where the blame lies, in words: the last loss, or where packets
    /// wait.
    pub fn cause(&self) -> String {
        match (&self.last_loss, &self.held_at) {
            (Some((link, loss, at)), _) => {
                format!("last packet lost on link {link} ({}) at {at}", loss.name())
            }
            (None, Some(link)) => format!("no packet lost; its packets wait at link {link}"),
            (None, None) => "no packet lost or waiting".to_string(),
        }
    }
}

/// Something would have happened after the end of virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfTime;

/// Counters of one link direction over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkUsage {
    /// Payload bytes carried.
    pub bytes: u64,
    /// Packets carried (packet model) or flows carried (flow model).
    pub units: u64,
    /// Time the link spent transmitting, in ps (packet model: the sum of
    /// serialization times; flow model: time with at least one flow).
    pub busy_ps: u64,
    /// Largest backlog seen: bytes waiting in the egress buffer (packet
    /// model) or flows sharing the link at once (flow model).
    pub max_queue: u64,
    /// Packets lost on the wire (random loss; packet model).
    pub lost: u64,
    /// Packets that arrived corrupted and were dropped by the CRC check.
    pub corrupted: u64,
    /// Packets dropped for want of room: a full buffer behind a lossy
    /// link, or past the PFC headroom of a lossless one.
    pub overflow_drops: u64,
    /// Retransmitted packets the link carried.
    pub retransmitted: u64,
    /// PFC PAUSE frames the link's receiver sent its sender.
    pub pause_frames: u64,
    /// Time the link's sender spent paused by PFC, in ps.
    pub paused_ps: u64,
}

/// A change of a link's backlog, for the trace's per-link counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSample {
    /// When.
    pub time: Time,
    /// Which link direction.
    pub link: LinkId,
    /// The new backlog (same unit as [`LinkUsage::max_queue`]).
    pub queue: u64,
}

/// The most link samples one run records; a trace of a bigger run stops
/// sampling there (and says so) rather than exhausting memory.
pub const LINK_SAMPLES_MAX: usize = 1 << 20;

/// Appends `sample`, replacing the previous one when it is for the same
/// link at the same time (only the last value at an instant matters), and
/// dropping it once more than [`LINK_SAMPLES_MAX`] are kept (the one
/// extra tells the trace it was truncated).
pub(crate) fn record_sample(samples: &mut Vec<LinkSample>, sample: LinkSample) {
    if let Some(last) = samples.last_mut()
        && last.link == sample.link
        && last.time == sample.time
    {
        last.queue = sample.queue;
        return;
    }
    if samples.len() <= LINK_SAMPLES_MAX {
        samples.push(sample);
    }
}

/// The flow a message from `src` to `dst` belongs to, among `world_size`
/// ranks: one flow per ordered rank pair. Its id also salts the ECMP hash,
/// so all messages of a pair take one route.
pub fn flow_id(src: Rank, dst: Rank, world_size: usize) -> u64 {
    (src as u64) * (world_size as u64) + dst as u64
}

/// The flow of an in-network reduction's legs between `member` and
/// `switch` (`up`: towards the switch), among `world_size` ranks: above
/// every rank pair's flow and every framed channel's, one per member,
/// switch and direction, so a member's legs go one after another. Its
/// remainder modulo `world_size²` names the member as both ends (for
/// transport failures).
pub fn leg_flow(member: Rank, switch: VertexId, up: bool, world_size: usize) -> u64 {
    let n = world_size as u64;
    let above = (1u64 << 17) + 2 * switch.index() as u64 + u64::from(up);
    above * n * n + flow_id(member, member, world_size)
}

/// Which network a run simulates.
#[derive(Clone, Debug)]
pub enum NetworkConfig {
    /// One dedicated full-duplex link per rank pair (see [`crate::links`]).
    Ideal(LinkSpec),
    /// A hardware topology at packet or flow level.
    Topology(TopologyConfig),
}

/// A hardware topology, where the ranks sit in it, and how to model it.
#[derive(Clone, Debug)]
pub struct TopologyConfig {
    /// The hardware graph.
    pub topology: Arc<Topology>,
    /// `placement[rank]` is the vertex the rank runs on (at least as many
    /// entries as ranks; every pair already checked to be connected).
    pub placement: Arc<[VertexId]>,
    /// Packet- or flow-level.
    pub level: ModelLevel,
    /// Routes (ECMP salted by the scenario's seed), shared by every run of
    /// a study so each shortest-path tree is computed once.
    pub router: Arc<Mutex<Router>>,
    /// Scheduled link faults, in time order (applied in every run).
    pub changes: Arc<[LinkChange]>,
    /// The RDMA transport of messages that cross InfiniBand or RoCE
    /// links.
    pub transport: TransportConfig,
    /// The TCP-like transport of messages that cross plain Ethernet
    /// links.
    pub tcp: TcpConfig,
    /// PFC thresholds of the RoCE links.
    pub pfc: PfcConfig,
    /// Seeds the per-link random streams of packet loss and corruption.
    pub loss_seed: u64,
    /// When set, the model records each link's traffic per time bin of
    /// this many ps (see [`timeline`]).
    pub timeline_bin_ps: Option<u64>,
    /// Symmetric routes: when set, the route between ranks
    /// `(s + k·shift, d + k·shift)` is the route of `(s, d)` (`s <
    /// shift`) moved `k` steps by the rotation, so every rotated copy of
    /// a flow takes the rotated path (see [`topologies::rotation`]).
    pub rotation: Option<Arc<Rotation>>,
    /// A folded run's link map: each link direction's orbit
    /// representative, on which the model puts its traffic (set by
    /// [`crate::fold::fold`] with the rotation's checked orbits).
    pub folded_links: Option<Arc<[LinkId]>>,
    /// A folded flow-level run's weights: how many rotated copies of a
    /// flow cross each link direction per crossing of its orbit (`None`
    /// when every link moves with every step: all 1).
    pub folded_weights: Option<Arc<[u32]>>,
    /// Flow level: a message that takes over its pair's route from the
    /// flow that just ended inherits its rate without a recomputation
    /// (`true`, the default; exact, see
    /// [`flow`'s Successors](flow#successors)); `false` recomputes every
    /// change, the reference the tests compare it with.
    pub flow_successors_inherit: bool,
}

impl TopologyConfig {
    /// A config for `topology` with ranks on `placement`, ECMP salted by
    /// `seed`.
    pub fn new(
        topology: Arc<Topology>,
        placement: Arc<[VertexId]>,
        level: ModelLevel,
        seed: u64,
    ) -> TopologyConfig {
        let router = Router::new(Arc::clone(&topology), seed);
        TopologyConfig::with_router(topology, placement, level, router)
    }

    /// The same, with a router already built over `topology` (and maybe
    /// warmed up by validation).
    pub fn with_router(
        topology: Arc<Topology>,
        placement: Arc<[VertexId]>,
        level: ModelLevel,
        router: Router,
    ) -> TopologyConfig {
        TopologyConfig {
            topology,
            placement,
            level,
            router: Arc::new(Mutex::new(router)),
            changes: Arc::new([]),
            transport: TransportConfig::default(),
            tcp: TcpConfig::default(),
            pfc: PfcConfig::default(),
            loss_seed: 0,
            timeline_bin_ps: None,
            rotation: None,
            folded_links: None,
            folded_weights: None,
            flow_successors_inherit: true,
        }
    }
}

/// The granularity of a topology model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelLevel {
    /// [`packet`]: every MTU packet through every egress queue.
    Packet,
    /// [`flow`]: max-min fair bandwidth shares of whole messages.
    Flow,
}

impl ModelLevel {
    /// The scenario name.
    pub fn name(self) -> &'static str {
        match self {
            ModelLevel::Packet => "packet",
            ModelLevel::Flow => "flow",
        }
    }
}

/// What happened to a message handed to the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// It arrives at this time (known at once: the ideal model, or a
    /// message to oneself).
    ArrivesAt(Time),
    /// The model will report its arrival from one of its events.
    InFlight,
}

/// The network of one run: the ideal links or a topology model with its
/// router.
#[derive(Debug)]
pub(crate) enum Network {
    Ideal(Box<IdealLinks>),
    Packet(Box<Routed<packet::PacketNetwork>>),
    Flow(Box<Routed<flow::FlowNetwork>>),
}

/// A topology model with the routes and placement it needs.
#[derive(Debug)]
pub(crate) struct Routed<M> {
    model: M,
    router: Arc<Mutex<Router>>,
    placement: Arc<[VertexId]>,
    world_size: usize,
    /// Symmetric routes (see [`TopologyConfig::rotation`]).
    rotation: Option<Arc<Rotation>>,
    /// A folded run's orbit representatives (see
    /// [`TopologyConfig::folded_links`]).
    folded_links: Option<Arc<[LinkId]>>,
    /// A folded run's link weights (see
    /// [`TopologyConfig::folded_weights`]).
    folded_weights: Option<Arc<[u32]>>,
    /// Rotated or folded routes by flow (with the route crossed once when
    /// weights repeat links), so each is built once; only looked up,
    /// never iterated.
    moved_routes: HashMap<u64, (Route, Option<Route>)>,
    /// The NCCL model, whose channels pin inter-node traffic to NICs.
    nccl: Option<Arc<NcclSystem>>,
    /// Each framed flow's route, hop class and idle latency (by flow id,
    /// channel included), built once; only looked up. With weights, the
    /// route crossed once beside it (as in `moved_routes`).
    framed_routes: HashMap<u64, (Route, Hop, Option<Route>)>,
    /// A rotation that permutes ranks (see [`Rotation::permuting`]) as a
    /// rank action, its NCCL channel turn attached when the channels turn
    /// with it: routes, framed ones too, are then moved copies of their
    /// orbit representative's.
    turn: Option<RankAction>,
    /// The rotation is a shift that NCCL's channels move with (see
    /// [`shifts_channels`]): framed routes are moved copies too.
    shifts_channels: bool,
}

/// The rank action of a rotation that permutes ranks (`None` for a
/// shift), turning NCCL's channels too when `nccl`'s plan turns with it.
fn turn_of(rotation: Option<&Arc<Rotation>>, nccl: Option<&Arc<NcclSystem>>) -> Option<RankAction> {
    let rotation = rotation?;
    let action = RankAction::permutation(rotation.rank_images()?).ok()?;
    let channels = nccl.and_then(|n| crate::fold::nccl_channel_turn(n, rotation).ok());
    match channels {
        Some(c) => action.clone().with_channels(c).ok().or(Some(action)),
        None => Some(action),
    }
}

/// Whether `rotation` is a shift that `nccl`'s channels move with (each
/// channel's NICs and their proxies on every node moved, see
/// [`crate::fold::nccl_nics_shift`]): framed routes are then moved copies
/// of their sender's representative's on the same channel.
fn shifts_channels(rotation: Option<&Arc<Rotation>>, nccl: Option<&Arc<NcclSystem>>) -> bool {
    match (rotation, nccl) {
        (Some(rotation), Some(nccl)) => {
            rotation.rank_images().is_none() && crate::fold::nccl_nics_shift(nccl, rotation).is_ok()
        }
        _ => false,
    }
}

/// What NCCL's per-hop latency needs to know of a message's route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// NVLink, PCI or network.
    pub class: HopClass,
    /// The route's latency when idle, without serialisation, ps.
    pub idle_ps: u64,
}

impl Network {
    /// The network `config` describes for `world_size` ranks; with
    /// `sample_links` a topology model records link backlogs for traces;
    /// with `nccl`, framed messages of a channel cross nodes through the
    /// channel's NICs.
    pub fn new(
        config: &NetworkConfig,
        world_size: usize,
        sample_links: bool,
        nccl: Option<Arc<NcclSystem>>,
    ) -> Network {
        match config {
            NetworkConfig::Ideal(spec) => Network::Ideal(Box::new(IdealLinks::new(*spec))),
            NetworkConfig::Topology(t) => {
                let router = Arc::clone(&t.router);
                let placement = Arc::clone(&t.placement);
                let topology = Arc::clone(&t.topology);
                match t.level {
                    ModelLevel::Packet => Network::Packet(Box::new(Routed {
                        model: packet::PacketNetwork::new(topology, sample_links)
                            .with_transport(t.transport)
                            .with_tcp(t.tcp)
                            .with_pfc(t.pfc)
                            .with_loss_seed(t.loss_seed)
                            .with_timeline(t.timeline_bin_ps),
                        router,
                        placement,
                        world_size,
                        rotation: t.rotation.clone(),
                        folded_links: t.folded_links.clone(),
                        folded_weights: t.folded_weights.clone(),
                        moved_routes: HashMap::default(),
                        nccl: nccl.clone(),
                        framed_routes: HashMap::default(),
                        turn: turn_of(t.rotation.as_ref(), nccl.as_ref()),
                        shifts_channels: shifts_channels(t.rotation.as_ref(), nccl.as_ref()),
                    })),
                    ModelLevel::Flow => Network::Flow(Box::new(Routed {
                        model: flow::FlowNetwork::new(topology, sample_links)
                            .with_timeline(t.timeline_bin_ps)
                            .with_successors_inheriting(t.flow_successors_inherit),
                        router,
                        placement,
                        world_size,
                        rotation: t.rotation.clone(),
                        folded_links: t.folded_links.clone(),
                        folded_weights: t.folded_weights.clone(),
                        moved_routes: HashMap::default(),
                        nccl: nccl.clone(),
                        framed_routes: HashMap::default(),
                        turn: turn_of(t.rotation.as_ref(), nccl.as_ref()),
                        shifts_channels: shifts_channels(t.rotation.as_ref(), nccl.as_ref()),
                    })),
                }
            }
        }
    }

    /// Sends message `message` of `bytes` from `src` to `dst` at `now`;
    /// a framed message names its NCCL channel, and gets its hop's facts
    /// back (for NCCL's per-hop latency; `None` on the ideal links or to
    /// oneself).
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        now: Time,
        message: MessageId,
        src: Rank,
        dst: Rank,
        bytes: u64,
        channel: Option<u16>,
        queue: &mut EventQueue,
    ) -> Result<(Sent, Option<Hop>), OutOfTime> {
        match self {
            Network::Ideal(links) => links
                .transmit(now, src, dst, bytes)
                .map(|at| (Sent::ArrivesAt(at), None))
                .ok_or(OutOfTime),
            Network::Packet(r) => {
                let Some((t, hop)) = r.transfer(message, src, dst, bytes, channel) else {
                    return Ok((Sent::ArrivesAt(now), None));
                };
                r.model.start(now, t, queue).map(|()| (Sent::InFlight, hop))
            }
            Network::Flow(r) => {
                let Some((t, hop)) = r.transfer(message, src, dst, bytes, channel) else {
                    return Ok((Sent::ArrivesAt(now), None));
                };
                r.model.start(now, t, queue).map(|()| (Sent::InFlight, hop))
            }
        }
    }

    /// Sends message `message` of `bytes` between rank `member` and the
    /// reducing switch `switch`, towards it when `up` (a leg of an
    /// in-network reduction, on its own flow, see [`leg_flow`]): along the
    /// router's route on a topology, on the member's own link to the
    /// switch on the ideal links.
    #[allow(clippy::too_many_arguments)]
    pub fn send_leg(
        &mut self,
        now: Time,
        message: MessageId,
        member: Rank,
        switch: VertexId,
        up: bool,
        bytes: u64,
        queue: &mut EventQueue,
    ) -> Result<Sent, OutOfTime> {
        match self {
            Network::Ideal(links) => links
                .transmit_leg(now, member, up, bytes)
                .map(Sent::ArrivesAt)
                .ok_or(OutOfTime),
            Network::Packet(r) => {
                let t = r.leg_transfer(message, member, switch, up, bytes);
                r.model.start(now, t, queue).map(|()| Sent::InFlight)
            }
            Network::Flow(r) => {
                let t = r.leg_transfer(message, member, switch, up, bytes);
                r.model.start(now, t, queue).map(|()| Sent::InFlight)
            }
        }
    }

    /// The switch that reduces in the network for `group` (see
    /// [`crate::in_network`]), or why there is none, naming the ranks.
    pub fn reducing_switch(&self, group: &[Rank]) -> Result<VertexId, String> {
        match self {
            // The ideal links' one switch (see [`crate::links`]).
            Network::Ideal(_) => Ok(VertexId::new(0)),
            Network::Packet(r) => r.reducing_switch(group),
            Network::Flow(r) => r.reducing_switch(group),
        }
    }

    /// The forwarding latency of vertex `v`, ps (0 on the ideal links).
    pub fn forward_latency_ps(&self, v: VertexId) -> u64 {
        match self {
            Network::Ideal(_) => 0,
            Network::Packet(r) => r.forward_latency_ps(v),
            Network::Flow(r) => r.forward_latency_ps(v),
        }
    }

    /// Schedules the config's link faults (none on ideal links, which
    /// validation only allows on topologies).
    pub fn schedule_changes(
        &mut self,
        changes: &[LinkChange],
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        match self {
            Network::Ideal(_) => Ok(()),
            Network::Packet(r) => r.model.schedule_changes(changes, queue),
            Network::Flow(r) => r.model.schedule_changes(changes, queue),
        }
    }

    /// Applies a network event, pushing arrived messages onto `delivered`.
    pub fn handle(
        &mut self,
        now: Time,
        event: NetEvent,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        match (self, event) {
            (Network::Packet(r), NetEvent::Packet(e)) => r.model.handle(now, e, queue, delivered),
            (Network::Flow(r), NetEvent::Flow(e)) => r.model.handle(now, e, queue, delivered),
            _ => unreachable!("a model only schedules its own events"),
        }
    }

    /// Per-link-direction counters of a topology model at `now` (`None`
    /// for the ideal links).
    pub fn usage(&self, now: Time) -> Option<Vec<LinkUsage>> {
        match self {
            Network::Ideal(_) => None,
            Network::Packet(r) => Some(r.unfold(r.model.usage_at(now))),
            Network::Flow(r) => Some(r.unfold(r.model.usage().to_vec())),
        }
    }

    /// The buffer-dependency cycle of a stuck network, by link name, each
    /// with why it cannot send (packet model only; empty if none).
    pub fn buffer_cycle(&self) -> Vec<(String, packet::Stall)> {
        match self {
            Network::Packet(r) => r
                .model
                .buffer_cycle()
                .map(|c| {
                    c.iter()
                        .map(|&(l, stall)| (r.model.topology().link_name(l), stall))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The transport failures since the last call (packet model only).
    pub fn take_failures(&mut self) -> Vec<TransportTimeout> {
        let Network::Packet(r) = self else {
            return Vec::new();
        };
        if !r.model.has_failures() {
            // The common case, checked before anything is built: this runs
            // after every network event.
            return Vec::new();
        }
        let failures = r.model.take_failures();
        let n = r.world_size as u64;
        let topology = r.model.topology();
        failures
            .into_iter()
            .map(|f| {
                let name = |l: LinkId| topology.link_name(l);
                // A framed flow's id carries its channel above n^2.
                let pair = f.flow % (n * n);
                TransportTimeout {
                    src: (pair / n) as Rank,
                    dst: (pair % n) as Rank,
                    transport: f.transport,
                    messages: f.messages,
                    at: f.at,
                    retries: f.retries,
                    last_loss: f.last_loss.map(|(l, loss, at)| (name(l), loss, at)),
                    held_at: f.held_at.map(name),
                }
            })
            .collect()
    }

    /// Number of link directions that carried anything.
    pub fn links_used(&self) -> u64 {
        let used = |u: &[LinkUsage]| u.iter().filter(|l| l.units > 0).count() as u64;
        match self {
            Network::Ideal(links) => links.stats().links_used,
            Network::Packet(r) => used(r.model.usage()),
            Network::Flow(r) => used(r.model.usage()),
        }
    }

    /// The link traffic per time bin, if the config asked for it.
    pub fn take_timeline(&mut self) -> Option<timeline::LinkTimeline> {
        match self {
            Network::Ideal(_) => None,
            Network::Packet(r) => r.model.take_timeline().map(|t| r.unfold_timeline(t)),
            Network::Flow(r) => r.model.take_timeline().map(|t| r.unfold_timeline(t)),
        }
    }

    /// The link backlog samples recorded so far.
    pub fn take_samples(&mut self) -> Vec<LinkSample> {
        match self {
            Network::Ideal(_) => Vec::new(),
            Network::Packet(r) => r.model.take_samples(),
            Network::Flow(r) => r.model.take_samples(),
        }
    }
}

impl<M> Routed<M> {
    /// Per-link counters as the full run would have them: in a folded
    /// run every link direction gets its orbit representative's (the
    /// traffic each member carries), otherwise `usage` itself.
    fn unfold(&self, usage: Vec<LinkUsage>) -> Vec<LinkUsage> {
        match &self.folded_links {
            Some(canonical) => canonical.iter().map(|c| usage[c.index()]).collect(),
            None => usage,
        }
    }

    /// The link timeline as the full run would have it (see
    /// [`Routed::unfold`]).
    fn unfold_timeline(&self, timeline: timeline::LinkTimeline) -> timeline::LinkTimeline {
        match &self.folded_links {
            Some(canonical) => timeline.unfold(canonical),
            None => timeline,
        }
    }

    /// The transfer of an in-network reduction's leg between `member`
    /// and `switch`.
    fn leg_transfer(
        &self,
        message: MessageId,
        member: Rank,
        switch: VertexId,
        up: bool,
        bytes: u64,
    ) -> Transfer {
        let at = self.placement[member];
        let (a, b) = if up { (at, switch) } else { (switch, at) };
        let flow = leg_flow(member, switch, up, self.world_size);
        Transfer {
            message,
            bytes,
            route: self.route(a, b, flow),
            flow,
            path: None,
        }
    }

    /// The forwarding latency of vertex `v`, ps.
    fn forward_latency_ps(&self, v: VertexId) -> u64 {
        let router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        router.topology().vertex(v).forward_latency_ps
    }

    /// See [`Network::reducing_switch`].
    fn reducing_switch(&self, group: &[Rank]) -> Result<VertexId, String> {
        let mut router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        let topology = Arc::clone(router.topology());
        let mut best: Option<(usize, VertexId)> = None;
        for v in topology.vertex_ids() {
            if !topology.reduces_in_network(v) {
                continue;
            }
            let nvswitch = topology.vertex(v).kind == topologies::VertexKind::NvSwitch;
            let mut farthest = 0;
            let serves = group.iter().all(|&m| {
                let flow = leg_flow(m, v, true, self.world_size);
                match router.route(self.placement[m], v, flow) {
                    Ok(route) => {
                        farthest = farthest.max(route.len());
                        !nvswitch
                            || route.iter().all(|&l| {
                                matches!(topology.link(l).kind, topologies::LinkKind::NvLink { .. })
                            })
                    }
                    Err(_) => false,
                }
            });
            if serves && best.is_none_or(|(d, _)| farthest < d) {
                best = Some((farthest, v));
            }
        }
        best.map(|(_, v)| v).ok_or_else(|| {
            format!(
                "{}: no switch that reduces serves ranks {group:?} (an NVSwitch serves the \
                 GPUs it reaches over NVLink alone; InfiniBand switches reduce with \
                 sharp = true)",
                algorithms::in_network::NO_SWITCH_REASON
            )
        })
    }

    /// The router's route from `a` to `b` for `flow`.
    fn route(&self, a: VertexId, b: VertexId, flow: u64) -> Route {
        self.router
            .lock()
            .expect("a run never panics while routing")
            .route(a, b, flow)
            .expect("every pair of placed ranks was checked to be connected")
    }

    /// The symmetric route from `src` to `dst`: the route of the pair
    /// rotated back to a source below the shift, moved forward again by
    /// the rotation, or in a folded run put on the orbit representatives;
    /// with weights, each representative listed as many times as its
    /// weight, and the route crossed once beside it (for the latency).
    fn moved_route(&self, rotation: &Rotation, src: Rank, dst: Rank) -> (Route, Option<Route>) {
        if let Some(turn) = &self.turn {
            let (orbit, k) = turn.position(src);
            let (s0, d0) = (turn.representative(orbit), turn.apply_inverse(dst, k));
            let n = turn.ranks();
            let base = self.route(self.placement[s0], self.placement[d0], flow_id(s0, d0, n));
            return self.placed(rotation, &base, k);
        }
        // Ranks wrap around the rotation's ranks (the scenario's), which a
        // collective on fewer ranks still numbers the same way.
        let (n, shift) = (rotation.ranks(), rotation.shift());
        let k = src / shift;
        let (s0, d0) = (src - k * shift, (dst + n - k * shift) % n);
        let base = self.route(self.placement[s0], self.placement[d0], flow_id(s0, d0, n));
        self.placed(rotation, &base, k)
    }

    /// `base` moved `k` steps by `rotation`, or in a folded run put on
    /// the orbit representatives (with weights, each listed as many times
    /// as its weight, and the route crossed once beside it).
    fn placed(&self, rotation: &Rotation, base: &[LinkId], k: usize) -> (Route, Option<Route>) {
        let Some(canonical) = &self.folded_links else {
            return (
                base.iter().map(|&l| rotation.link_power(l, k)).collect(),
                None,
            );
        };
        let once: Route = base.iter().map(|l| canonical[l.index()]).collect();
        match &self.folded_weights {
            Some(weights) => {
                let weighed = base
                    .iter()
                    .flat_map(|l| {
                        std::iter::repeat_n(canonical[l.index()], weights[l.index()] as usize)
                    })
                    .collect();
                (weighed, Some(once))
            }
            None => (once, None),
        }
    }

    /// The transfer for a message between two ranks, with a framed
    /// message's hop facts, or `None` for a message to oneself (it
    /// crosses no link).
    fn transfer(
        &mut self,
        message: MessageId,
        src: Rank,
        dst: Rank,
        bytes: u64,
        channel: Option<u16>,
    ) -> Option<(Transfer, Option<Hop>)> {
        let (a, b) = (self.placement[src], self.placement[dst]);
        if a == b {
            return None;
        }
        let flow = flow_id(src, dst, self.world_size);
        if let Some(channel) = channel {
            let n = self.world_size as u64;
            let framed = flow + (u64::from(channel) + 1) * n * n;
            let (route, hop, path) = match self.framed_routes.get(&framed) {
                Some(known) => known.clone(),
                None => {
                    let built = self.turned_framed_route(src, dst, channel, flow);
                    self.framed_routes.insert(framed, built.clone());
                    built
                }
            };
            let transfer = Transfer {
                path,
                message,
                bytes,
                route,
                flow: framed,
            };
            return Some((transfer, Some(hop)));
        }
        let (route, path) = match &self.rotation {
            None => (self.route(a, b, flow), None),
            Some(rotation) => match self.moved_routes.get(&flow) {
                Some(moved) => moved.clone(),
                None => {
                    let rotation = Arc::clone(rotation);
                    let moved = self.moved_route(&rotation, src, dst);
                    self.moved_routes.insert(flow, moved.clone());
                    moved
                }
            },
        };
        Some((
            Transfer {
                path,
                message,
                bytes,
                route,
                flow,
            },
            None,
        ))
    }

    /// The framed route of [`Self::framed_route`], or, when the rotation
    /// turns NCCL's channels with the ranks (or is a shift they move
    /// with, channels kept), the route of the message turned back to its
    /// sender's orbit representative moved forward again (in a folded
    /// run: on the orbit representatives), so that every turned copy of a
    /// message takes the turned route; without NCCL's plan, the pair's
    /// moved route. With weights, the route crossed once comes beside it.
    fn turned_framed_route(
        &self,
        src: Rank,
        dst: Rank,
        channel: u16,
        flow: u64,
    ) -> (Route, Hop, Option<Route>) {
        if self.nccl.is_none()
            && let Some(rotation) = &self.rotation
        {
            // Without NCCL's plan a framed message takes its pair's route,
            // moved by the rotation like any other message's.
            let rotation = Arc::clone(rotation);
            let (route, path) = self.moved_route(&rotation, src, dst);
            let hop = self.hop_of(path.as_deref().unwrap_or(&route));
            return (route, hop, path);
        }
        if self.shifts_channels
            && let Some(rotation) = &self.rotation
        {
            // A shift keeps the channel: the sender's representative's
            // message on it, moved forward.
            let (n, shift) = (rotation.ranks(), rotation.shift());
            let k = src / shift;
            let (s0, d0) = (src - k * shift, (dst + n - k * shift) % n);
            let (base, hop) = self.framed_route(s0, d0, channel, flow_id(s0, d0, n));
            let (route, path) = self.placed(rotation, &base, k);
            return (route, hop, path);
        }
        let (Some(turn), Some(rotation)) = (&self.turn, &self.rotation) else {
            let (route, hop) = self.framed_route(src, dst, channel, flow);
            return (route, hop, None);
        };
        if !turn.turns_channels() {
            let (route, hop) = self.framed_route(src, dst, channel, flow);
            return (route, hop, None);
        }
        let (orbit, k) = turn.position(src);
        let (s0, d0) = (turn.representative(orbit), turn.apply_inverse(dst, k));
        let c0 = turn.channel(usize::from(channel), turn.order() - k % turn.order());
        let c0 = u16::try_from(c0).expect("a channel turn keeps channels in range");
        let (base, hop) = self.framed_route(s0, d0, c0, flow_id(s0, d0, self.world_size));
        let (route, path) = self.placed(rotation, &base, k);
        (route, hop, path)
    }

    /// The route of channel `channel` from `src` to `dst` and its hop
    /// facts: across nodes through the channel's NIC on each side (a GPU
    /// that does not reach its NIC through PCIe alone goes through the
    /// NIC's own GPU over NVLink first: NCCL's PXN); otherwise the
    /// router's route.
    fn framed_route(&self, src: Rank, dst: Rank, channel: u16, flow: u64) -> (Route, Hop) {
        let (a, b) = (self.placement[src], self.placement[dst]);
        let pinned = self.nccl.as_ref().and_then(|nccl| {
            let (nic_a, nic_b) = nccl.nics(src, dst, channel)?;
            let mut router = self
                .router
                .lock()
                .expect("a run never panics while routing");
            let topology = Arc::clone(router.topology());
            let mut out = machine::route(&mut router, a, nic_a)?;
            let far = |r: &[LinkId]| {
                machine::path_type(&topology, r) > machine::PathType::Pxb
                    || r.iter().any(|&l| topology.link(l).kind.is_network())
            };
            if far(&out)
                && let Some(proxy) = nccl.proxy(nic_a).filter(|&p| p != a)
            {
                let hop = machine::route(&mut router, a, proxy)?;
                let rest = machine::route(&mut router, proxy, nic_a)?;
                out = hop.iter().chain(rest.iter()).copied().collect();
            }
            let across = machine::route(&mut router, nic_a, nic_b)?;
            let mut into = machine::route(&mut router, nic_b, b)?;
            // A NIC never reaches a far GPU of its node back through the
            // network: through the PCIe switches, else over the NVLink of
            // the GPU next to it.
            let local = |r: &[LinkId]| {
                machine::path_type(&topology, r) <= machine::PathType::Pxb
                    && !r.iter().any(|&l| topology.link(l).kind.is_network())
            };
            if !local(&into)
                && let Some(proxy) = nccl.proxy(nic_b).filter(|&p| p != b)
            {
                let first = machine::route(&mut router, nic_b, proxy)?;
                let hop = machine::route(&mut router, proxy, b)?;
                into = first.iter().chain(hop.iter()).copied().collect();
            }
            let whole: Route = out
                .iter()
                .chain(across.iter())
                .chain(into.iter())
                .copied()
                .collect();
            Some(whole)
        });
        let route = pinned.unwrap_or_else(|| self.route(a, b, flow));
        let hop = self.hop_of(&route);
        (route, hop)
    }

    /// The hop facts of `route`.
    fn hop_of(&self, route: &[LinkId]) -> Hop {
        let router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        let topology = router.topology();
        let kinds = || route.iter().map(|&l| topology.link(l).kind);
        let class = if kinds().any(|k| k.is_network()) {
            HopClass::Net
        } else if kinds().all(|k| matches!(k, topologies::LinkKind::NvLink { .. })) {
            HopClass::NvLink
        } else {
            HopClass::Pci
        };
        Hop {
            class,
            idle_ps: path::idle_latency_ps(topology, route, 0),
        }
    }
}
