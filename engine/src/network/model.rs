//! The network of one run as the world drives it: [`Network`], the ideal
//! links or a topology model, and [`Routed`], a topology model with its
//! router, placement, and the routes a folded or NCCL run builds once and
//! reuses (its route building is in `routes.rs`).

use std::sync::{Arc, Mutex};

use algorithms::{Rank, Time};
use rustc_hash::FxHashMap as HashMap;
use topologies::{LinkId, Rotation, Route, Router, VertexId};

use super::{
    LinkChange, LinkSample, LinkUsage, ModelLevel, NetEvent, NetworkConfig, OutOfTime, Sent,
    TopologyConfig, TransportTimeout, flow, packet, timeline,
};
use crate::event::{EventQueue, MessageId};
use crate::fold::RankAction;
use crate::links::IdealLinks;
use crate::nccl::{HopClass, NcclSystem};

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
    pub(super) model: M,
    pub(super) router: Arc<Mutex<Router>>,
    pub(super) placement: Arc<[VertexId]>,
    pub(super) world_size: usize,
    /// Symmetric routes (see
    /// [`TopologyConfig::rotation`](super::TopologyConfig::rotation)).
    pub(super) rotation: Option<Arc<Rotation>>,
    /// A folded run's orbit representatives (see
    /// [`TopologyConfig::folded_links`](super::TopologyConfig::folded_links)).
    pub(super) folded_links: Option<Arc<[LinkId]>>,
    /// A folded run's link weights (see
    /// [`TopologyConfig::folded_weights`](super::TopologyConfig::folded_weights)).
    pub(super) folded_weights: Option<Arc<[u32]>>,
    /// Rotated or folded routes by flow (with the route crossed once when
    /// weights repeat links), so each is built once; only looked up,
    /// never iterated.
    pub(super) moved_routes: HashMap<u64, (Route, Option<Route>)>,
    /// The flow of each in-network call's legs between a member and its
    /// switch, one way, by `(member, switch, up, tag)`: numbered from
    /// `1 << 63` in the order first used (only a name: the route is the
    /// pair's, [`leg_flow`](super::leg_flow)); only looked up.
    pub(super) leg_flows: HashMap<(Rank, VertexId, bool, algorithms::Tag), u64>,
    /// The route of the legs between a member and its switch, one way,
    /// by `(member, switch, up)`, as placed (with the route crossed once
    /// when weights repeat links), built once: every leg of the pair
    /// takes it; only looked up.
    pub(super) leg_routes: HashMap<(Rank, VertexId, bool), (Route, Option<Route>)>,
    /// The NCCL model, whose channels pin inter-node traffic to NICs.
    pub(super) nccl: Option<Arc<NcclSystem>>,
    /// Each framed flow's route, hop class and idle latency (by flow id,
    /// channel included), built once; only looked up. With weights, the
    /// route crossed once beside it (as in `moved_routes`).
    pub(super) framed_routes: HashMap<u64, (Route, Hop, Option<Route>)>,
    /// A rotation that permutes ranks (see [`Rotation::permuting`]) as a
    /// rank action, its NCCL channel turn attached when the channels turn
    /// with it: routes, framed ones too, are then moved copies of their
    /// orbit representative's.
    pub(super) turn: Option<RankAction>,
    /// The rotation is a shift that NCCL's channels move with (see
    /// [`shifts_channels`]): framed routes are moved copies too.
    pub(super) shifts_channels: bool,
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

/// Why [`Network::send`] did not send a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendFailure {
    /// Its delivery would fall past the end of virtual time.
    OutOfTime,
    /// Its route crosses a link the topology's rotation does not carry
    /// (a partial rotation, see [`Rotation::carries`]): the sentence says
    /// which ranks and which link.
    Refused(String),
}

/// What NCCL's per-hop latency needs to know of a message's route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// NVLink, PCI or network.
    pub class: HopClass,
    /// The route's latency when idle, without serialisation, ps.
    pub idle_ps: u64,
}

impl<M> Routed<M> {
    /// `model` with the routing state of topology `t` for `world_size`
    /// ranks (and NCCL's channels, if any) around it.
    fn around(
        model: M,
        t: &TopologyConfig,
        world_size: usize,
        nccl: &Option<Arc<NcclSystem>>,
    ) -> Routed<M> {
        Routed {
            model,
            router: Arc::clone(&t.router),
            placement: Arc::clone(&t.placement),
            world_size,
            rotation: t.rotation.clone(),
            folded_links: t.folded_links.clone(),
            folded_weights: t.folded_weights.clone(),
            moved_routes: HashMap::default(),
            leg_flows: HashMap::default(),
            leg_routes: HashMap::default(),
            nccl: nccl.clone(),
            framed_routes: HashMap::default(),
            turn: turn_of(t.rotation.as_ref(), nccl.as_ref()),
            shifts_channels: shifts_channels(t.rotation.as_ref(), nccl.as_ref()),
        }
    }
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
                let topology = Arc::clone(&t.topology);
                match t.level {
                    ModelLevel::Packet => Network::Packet(Box::new(Routed::around(
                        packet::PacketNetwork::new(topology, sample_links)
                            .with_transport(t.transport)
                            .with_tcp(t.tcp)
                            .with_pfc(t.pfc)
                            .with_loss_seed(t.loss_seed)
                            .with_timeline(t.timeline_bin_ps),
                        t,
                        world_size,
                        &nccl,
                    ))),
                    ModelLevel::Flow => Network::Flow(Box::new(Routed::around(
                        flow::FlowNetwork::new(topology, sample_links)
                            .with_timeline(t.timeline_bin_ps)
                            .with_successors_inheriting(t.flow_successors_inherit),
                        t,
                        world_size,
                        &nccl,
                    ))),
                }
            }
        }
    }

    /// Sends message `message` of `bytes` from `src` to `dst` at `now`;
    /// a framed message names its NCCL channel, and gets its hop's facts
    /// back (for NCCL's per-hop latency; `None` on the ideal links or to
    /// oneself). Refused when its route cannot be moved by the topology's
    /// rotation ([`SendFailure::Refused`]).
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
    ) -> Result<(Sent, Option<Hop>), SendFailure> {
        match self {
            Network::Ideal(links) => links
                .transmit(now, src, dst, bytes)
                .map(|at| (Sent::ArrivesAt(at), None))
                .ok_or(SendFailure::OutOfTime),
            Network::Packet(r) => {
                let Some((t, hop)) = r
                    .transfer(message, src, dst, bytes, channel)
                    .map_err(SendFailure::Refused)?
                else {
                    return Ok((Sent::ArrivesAt(now), None));
                };
                r.model
                    .start(now, t, queue)
                    .map(|()| (Sent::InFlight, hop))
                    .map_err(|OutOfTime| SendFailure::OutOfTime)
            }
            Network::Flow(r) => {
                let Some((t, hop)) = r
                    .transfer(message, src, dst, bytes, channel)
                    .map_err(SendFailure::Refused)?
                else {
                    return Ok((Sent::ArrivesAt(now), None));
                };
                r.model
                    .start(now, t, queue)
                    .map(|()| (Sent::InFlight, hop))
                    .map_err(|OutOfTime| SendFailure::OutOfTime)
            }
        }
    }

    /// Sends message `message` of `bytes` between rank `member` and the
    /// reducing switch `switch`, towards it when `up` (a leg of an
    /// in-network reduction, on its own flow, see
    /// [`leg_flow`](super::leg_flow)): along the router's route on a
    /// topology, on the member's own link to the switch on the ideal links.
    #[allow(clippy::too_many_arguments)]
    pub fn send_leg(
        &mut self,
        now: Time,
        message: MessageId,
        member: Rank,
        switch: VertexId,
        up: bool,
        tag: algorithms::Tag,
        bytes: u64,
        queue: &mut EventQueue,
    ) -> Result<Sent, SendFailure> {
        match self {
            Network::Ideal(links) => links
                .transmit_leg(now, member, up, bytes)
                .map(Sent::ArrivesAt)
                .ok_or(SendFailure::OutOfTime),
            Network::Packet(r) => {
                let t = r
                    .leg_transfer(message, member, switch, up, tag, bytes)
                    .map_err(SendFailure::Refused)?;
                r.model
                    .start(now, t, queue)
                    .map(|()| Sent::InFlight)
                    .map_err(|OutOfTime| SendFailure::OutOfTime)
            }
            Network::Flow(r) => {
                let t = r
                    .leg_transfer(message, member, switch, up, tag, bytes)
                    .map_err(SendFailure::Refused)?;
                r.model
                    .start(now, t, queue)
                    .map(|()| Sent::InFlight)
                    .map_err(|OutOfTime| SendFailure::OutOfTime)
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
