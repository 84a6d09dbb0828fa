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
mod model;
pub mod packet;
pub mod path;
mod routes;
pub(crate) use routes::channel_route;
pub mod timeline;

use std::sync::{Arc, Mutex};

use algorithms::{Rank, Time};
use topologies::{LinkId, LinkSpec, Rotation, Route, Router, Topology, VertexId};

use crate::event::MessageId;

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

pub use model::Hop;
pub(crate) use model::{Network, SendFailure};
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
