//! The shared state of one simulated run: the clock, the event queue, the
//! links, messages in flight, mailboxes of arrived messages, and what every
//! rank is waiting for.
//!
//! Ranks reach the world through their [`crate::SimFabric`]; the executor
//! pops events and applies them here. Waiting futures leave a [`Waker`];
//! applying an event wakes exactly the futures it may complete.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use std::task::Waker;

use algorithms::nccl::Framing;
use algorithms::{Payload, Rank, Shape, Tag, Time};

use crate::deadlock::StuckMessage;
use crate::event::{EventKind, EventQueue, MessageId};
use crate::in_network::{InNetwork, Leg};
use crate::links::LinkStats;
use crate::network::flow::FlowEvent;
use crate::network::packet::PacketEvent;
use crate::network::packet::Stall;
use crate::network::{
    LinkUsage, NetEvent, Network, NetworkConfig, SendFailure, Sent, TransportTimeout,
};
use crate::slab::Slab;
use crate::trace::{Span, SpanKind, TraceLog};

mod compute;
mod config;
mod in_network;

pub use config::{RankFaults, WorldConfig};

/// A message on its way.
#[derive(Debug)]
struct Message {
    src: Rank,
    dst: Rank,
    tag: Tag,
    payload: Payload,
    sent_at: Time,
    /// Latency still to add once the network has delivered it (NCCL's
    /// per-hop latency beyond the links'; a reducing switch's forwarding
    /// latency), ps.
    extra_ps: u64,
    /// Whether the receiver's software has handled it (with a receive
    /// overhead, see [`World::deliver`]).
    handled: bool,
    /// Set for a leg of an in-network reduction (see
    /// [`crate::in_network`]); `dst` is then the member.
    leg: Option<Box<Leg>>,
}

/// A receive that is waiting for a message.
#[derive(Debug)]
pub(crate) struct Wait {
    pub from: Rank,
    pub tag: Tag,
    pub expect: Shape,
    pub waker: Waker,
    /// Set when a message that may match arrived (or the pair's
    /// transport failed) since the receive last looked: until then its
    /// polls need not look in the mailbox.
    signalled: bool,
}

/// A rank's pending receive as its list holds it: what a delivery
/// matches, small so that the list is quick to scan.
#[derive(Clone, Copy, Debug)]
struct Pending {
    from: Rank,
    tag: Tag,
    /// The receive's entry in [`World::waits`].
    id: u32,
}

/// Counters of one run of the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Events popped from the queue.
    pub events: u64,
    /// Message traffic (self-sends excluded).
    pub links: LinkStats,
}

/// Arrived messages keyed by `(receiver, sender, tag)`, in arrival order.
type Mailbox = HashMap<(Rank, Rank, Tag), VecDeque<Payload>>;

/// The state of one simulated run.
#[derive(Debug)]
pub(crate) struct World {
    pub config: WorldConfig,
    pub now: Time,
    pub queue: EventQueue,
    network: Network,
    traffic: LinkStats,
    /// Messages a network event just delivered (reused buffer).
    delivered: Vec<MessageId>,
    /// What the trace records, when asked for.
    pub trace: Option<TraceLog>,
    in_flight: Slab<Message>,
    /// Looked up by key only; never iterated.
    mailbox: Mailbox,
    /// Emptied queues kept for reuse, so delivery does not allocate.
    spare_queues: Vec<VecDeque<Payload>>,
    /// Pending receives, by id.
    waits: Slab<Wait>,
    /// Each rank's pending receives (by slot), in the order they were
    /// posted.
    pending: Vec<Vec<Pending>>,
    timers: Slab<Waker>,
    /// Each rank's compute engine (by slot).
    compute: compute::ComputeEngines,
    /// The ideal links' per-message receive overhead, ps (0: none).
    receive_overhead_ps: u64,
    /// When each rank's software is done with the last message it
    /// received (with a receive overhead).
    receive_free_at: Vec<Time>,
    pub events: u64,
    /// Set when something would have happened after the end of virtual
    /// time (2^64 ps); the run then stops and reports it.
    pub out_of_time: bool,
    /// The first message refused because its route cannot be moved by the
    /// topology's partial rotation: its sender and why (naming the link);
    /// the run then stops and reports it.
    pub refused: Option<(Rank, String)>,
    /// The synchronisation point between calls (see [`crate::SimFabric::sync_all`]).
    pub sync: SyncPoint,
    /// When the current call started and when its watchdog fires.
    pub watchdog: Option<(Time, Time)>,
    /// Ranks whose crash time has just come; the executor stops them.
    pub crashing: Vec<Rank>,
    /// When a message last arrived or last moved in the network (link
    /// changes and transport timers do not count: one that restores
    /// nothing changes nothing).
    pub last_activity: Time,
    /// Rank pairs whose transport gave up, keyed by `(receiver, sender)`:
    /// the receiver's receives from the sender fail with a timeout.
    broken: HashMap<(Rank, Rank), TransportTimeout>,
    /// Every transport failure of the run, in the order they happened.
    pub transport_timeouts: Vec<TransportTimeout>,
    /// The in-network reductions under way (and every group's switch).
    pub in_network: InNetwork,
    /// The in-network multicasts under way.
    pub multicasts: InNetwork,
    /// Results on their way down from a switch, sent at the end of the
    /// instant they were made in (see the `in_network` module).
    pub(crate) pending_down: Vec<in_network::PendingDown>,
}

/// A zero-cost synchronisation of every rank: the simulator's own, outside
/// the modelled network, used to start the calls of a study together.
#[derive(Debug, Default)]
pub(crate) struct SyncPoint {
    /// Completed synchronisations so far.
    pub generation: u64,
    /// Ranks waiting in the current one.
    pub waiting: Vec<(Rank, Waker)>,
}

impl World {
    pub fn new(config: WorldConfig) -> World {
        let n = config.simulated_ranks();
        let mut world = World {
            network: Network::new(
                &config.network,
                config.world_size,
                config.trace,
                config.nccl.clone(),
            ),
            traffic: LinkStats::default(),
            delivered: Vec::new(),
            trace: config.trace.then(TraceLog::default),
            now: Time::ZERO,
            queue: EventQueue::new(),
            in_flight: Slab::default(),
            mailbox: HashMap::default(),
            spare_queues: Vec::new(),
            waits: Slab::default(),
            pending: (0..n).map(|_| Vec::new()).collect(),
            timers: Slab::default(),
            compute: compute::ComputeEngines::new(n),
            receive_overhead_ps: match &config.network {
                NetworkConfig::Ideal(link) => link.receive_overhead_ps,
                NetworkConfig::Topology(_) => 0,
            },
            receive_free_at: vec![Time::ZERO; n],
            config,
            events: 0,
            out_of_time: false,
            refused: None,
            sync: SyncPoint::default(),
            watchdog: None,
            crashing: Vec::new(),
            last_activity: Time::ZERO,
            broken: HashMap::default(),
            transport_timeouts: Vec::new(),
            in_network: InNetwork::default(),
            multicasts: InNetwork::default(),
            pending_down: Vec::new(),
        };
        if world.config.fold.is_some() {
            world.in_network = InNetwork::folded();
            world.multicasts = InNetwork::folded();
        }
        for &(rank, at) in &world.config.faults.crashes.clone() {
            if at == Time::ZERO {
                // Before any rank runs: the executor stops it at once.
                world.apply(EventKind::Crash { rank });
                world.events -= 1; // not an event of the queue
            } else {
                world.queue.schedule(at, EventKind::Crash { rank });
            }
        }
        if let NetworkConfig::Topology(t) = &world.config.network {
            let changes = Arc::clone(&t.changes);
            if world
                .network
                .schedule_changes(&changes, &mut world.queue)
                .is_err()
            {
                world.out_of_time = true;
            }
        }
        world
    }

    /// Puts a message on the link and schedules its delivery. A delivery
    /// past the end of virtual time is not scheduled; the run is marked as
    /// having run out of time instead. An error (the sender's to report)
    /// when the message's route cannot be moved by the topology's partial
    /// rotation (see [`crate::fold`]): the message is not sent.
    pub fn send(&mut self, src: Rank, dst: Rank, tag: Tag, payload: Payload) -> Result<(), String> {
        self.send_with(src, dst, tag, payload, None)
    }

    /// [`World::send`] of a message framed by an NCCL protocol: the
    /// network carries its wire bytes on its channel's route, and its
    /// delivery waits NCCL's per-hop latency beyond the links' own.
    pub fn send_framed(
        &mut self,
        src: Rank,
        dst: Rank,
        tag: Tag,
        payload: Payload,
        f: Framing,
    ) -> Result<(), String> {
        self.send_with(src, dst, tag, payload, Some(f))
    }

    fn send_with(
        &mut self,
        src: Rank,
        dst: Rank,
        tag: Tag,
        payload: Payload,
        framing: Option<Framing>,
    ) -> Result<(), String> {
        let payload_bytes = payload.shape().bytes();
        let bytes = framing.map_or(payload_bytes, |f| f.protocol.wire_bytes(payload_bytes));
        let message = self.in_flight.insert(Message {
            src,
            dst,
            tag,
            payload,
            sent_at: self.now,
            extra_ps: 0,
            handled: false,
            leg: None,
        });
        if src != dst {
            self.traffic.messages += 1;
            self.traffic.bytes += bytes;
        }
        if self.broken.contains_key(&self.receiver_view(src, dst)) {
            // The pair's transport has failed: nothing more gets through,
            // and the receiver's receives fail.
            self.in_flight.remove(message);
            return Ok(());
        }
        let channel = framing.map(|f| f.channel);
        let sent = self
            .network
            .send(self.now, message, src, dst, bytes, channel, &mut self.queue);
        if let (Ok((_, Some(hop))), Some(f), Some(nccl)) = (&sent, framing, &self.config.nccl) {
            let extra = nccl.hop_extra_ps(f, hop.class, hop.idle_ps);
            if let Some(m) = self.in_flight.get_mut(message) {
                m.extra_ps = extra;
            }
        }
        match sent {
            Ok((Sent::ArrivesAt(at), _)) => self.queue.schedule(at, EventKind::Deliver { message }),
            Ok((Sent::InFlight, _)) => {}
            Err(SendFailure::OutOfTime) => self.out_of_time = true,
            Err(SendFailure::Refused(why)) => {
                self.in_flight.remove(message);
                if self.refused.is_none() {
                    self.refused = Some((src, why.clone()));
                }
                return Err(why);
            }
        }
        Ok(())
    }

    /// Takes the oldest arrived message from `src` to `dst` with `tag`.
    pub fn take_message(&mut self, dst: Rank, src: Rank, tag: Tag) -> Option<Payload> {
        let key = (dst, src, tag);
        let queue = self.mailbox.get_mut(&key)?;
        let payload = queue.pop_front();
        if queue.is_empty() {
            let emptied = self.mailbox.remove(&key).expect("entry was just found");
            self.spare_queues.push(emptied);
        }
        payload
    }

    /// Records a waiting receive, or refreshes the waker of receive `id`
    /// (which has just looked in the mailbox: its signal is cleared), and
    /// returns its id.
    pub fn register_wait(
        &mut self,
        rank: Rank,
        id: Option<u32>,
        from: Rank,
        tag: Tag,
        expect: Shape,
        waker: &Waker,
    ) -> u32 {
        if let Some(id) = id
            && let Some(w) = self.waits.get_mut(id)
        {
            w.signalled = false;
            if !w.waker.will_wake(waker) {
                w.waker = waker.clone();
            }
            return id;
        }
        let id = self.waits.insert(Wait {
            from,
            tag,
            expect,
            waker: waker.clone(),
            signalled: false,
        });
        let slot = self.config.slot_of(rank);
        self.pending[slot].push(Pending { from, tag, id });
        id
    }

    /// Whether receive `id` has nothing new to look at: no message that
    /// may match arrived, nor did its pair's transport fail, since it last
    /// looked. Its waker is refreshed then.
    pub fn wait_unchanged(&mut self, id: u32, waker: &Waker) -> bool {
        match self.waits.get_mut(id) {
            Some(w) if !w.signalled => {
                if !w.waker.will_wake(waker) {
                    w.waker = waker.clone();
                }
                true
            }
            _ => false,
        }
    }

    /// Forgets a waiting receive (it completed or was dropped).
    pub fn remove_wait(&mut self, rank: Rank, id: u32) {
        if self.waits.remove(id).is_some() {
            let slot = self.config.slot_of(rank);
            let list = &mut self.pending[slot];
            if let Some(at) = list.iter().position(|p| p.id == id) {
                list.remove(at);
            }
        }
    }

    /// The pending receives of the rank at `slot`, in the order they
    /// were posted.
    pub fn waits_of(&self, slot: usize) -> impl Iterator<Item = &Wait> {
        self.pending[slot]
            .iter()
            .filter_map(|p| self.waits.get(p.id))
    }

    /// Signals and wakes the pending receives of the rank at `slot` from
    /// `from` (with `tag`, or any tag), in the order they were posted.
    fn signal_waits(&mut self, slot: usize, from: Rank, tag: Option<Tag>) {
        for p in &self.pending[slot] {
            if p.from == from && tag.is_none_or(|t| p.tag == t) {
                let w = self
                    .waits
                    .get_mut(p.id)
                    .expect("a pending receive has its wait");
                w.signalled = true;
                w.waker.wake_by_ref();
            }
        }
    }

    /// Reserves the rank's compute engine for `work_ps` (more than 0),
    /// posted now by NCCL channel `channel` if the work names one, and
    /// returns its ticket ([`Self::compute_done`] says when it is done), or
    /// `None` (marking the run out of time) if that is past the end of
    /// virtual time. Work on one rank runs one piece at a time, in the
    /// order it was posted, but work posted at the same instant in
    /// channel order (see the `compute` module).
    pub fn reserve_compute(
        &mut self,
        rank: Rank,
        work_ps: u64,
        channel: Option<u16>,
    ) -> Option<u32> {
        let slot = self.config.slot_of(rank);
        let ticket = self.compute.reserve(slot, self.now, work_ps, channel);
        if ticket.is_none() {
            self.out_of_time = true;
        }
        ticket
    }

    /// When the work of compute ticket `ticket` is done, as known now (a
    /// later reduction posted at the same instant by a lower channel moves
    /// it back).
    pub fn compute_done(&self, ticket: u32) -> Time {
        self.compute.done(ticket)
    }

    /// The future of compute ticket `ticket` is done with it (finished or
    /// dropped).
    pub fn release_compute(&mut self, ticket: u32) {
        self.compute.release(ticket);
    }

    /// Schedules a wake-up of `waker` at `at`.
    pub fn schedule_timer(&mut self, rank: Rank, at: Time, waker: &Waker) {
        let timer = self.timers.insert(waker.clone());
        self.queue
            .schedule(at, EventKind::ComputeDone { rank, timer });
    }

    /// Applies one event whose time has come.
    pub fn apply(&mut self, kind: EventKind) {
        self.events += 1;
        match kind {
            EventKind::Deliver { message } => self.deliver(message),
            EventKind::Crash { rank } => {
                self.crashing.push(rank);
                if let Some(trace) = &mut self.trace {
                    trace.push_span(Span {
                        rank,
                        kind: SpanKind::Crash,
                        peer: None,
                        bytes: 0,
                        start: self.now,
                        end: self.now,
                    });
                }
            }
            EventKind::ComputeDone { timer, .. } => {
                if let Some(waker) = self.timers.remove(timer) {
                    waker.wake();
                }
            }
            EventKind::Net(event) => {
                let change = matches!(
                    event,
                    NetEvent::Packet(PacketEvent::Change { .. } | PacketEvent::Timer { .. })
                        | NetEvent::Flow(FlowEvent::Change { .. })
                );
                if !change {
                    self.last_activity = self.now;
                }
                let mut delivered = std::mem::take(&mut self.delivered);
                let handled = self
                    .network
                    .handle(self.now, event, &mut self.queue, &mut delivered);
                if handled.is_err() {
                    self.out_of_time = true;
                }
                for message in delivered.drain(..) {
                    self.deliver(message);
                }
                self.delivered = delivered;
                for failure in self.network.take_failures() {
                    self.transport_failed(failure);
                }
            }
        }
    }

    /// A message has fully arrived: it joins its receiver's mailbox and
    /// wakes the receives that may match it. With a receive overhead
    /// ([`topologies::LinkSpec::receive_overhead_ps`]) a point-to-point
    /// message between two ranks first waits for the receiver's software,
    /// which handles one message at a time in arrival order.
    fn deliver(&mut self, message: MessageId) {
        if let Some(m) = self.in_flight.get_mut(message)
            && m.extra_ps > 0
        {
            // NCCL's per-hop latency: the receiver sees it this much later.
            let extra = std::mem::take(&mut m.extra_ps);
            match self.now.checked_plus_ps(extra) {
                Some(at) => self.queue.schedule(at, EventKind::Deliver { message }),
                None => self.out_of_time = true,
            }
            return;
        }
        if self.receive_overhead_ps > 0
            && let Some(m) = self.in_flight.get_mut(message)
            && !m.handled
            && m.leg.is_none()
            && m.src != m.dst
        {
            // The receiver's software handles its messages one at a time
            // in arrival order; a receive sees each once it is handled.
            m.handled = true;
            let (src, dst) = (m.src, m.dst);
            let (dst, _) = self.receiver_view(src, dst);
            let start = self.now.max(self.receive_free_at[dst]);
            match start.checked_plus_ps(self.receive_overhead_ps) {
                Some(at) => {
                    self.receive_free_at[dst] = at;
                    self.queue.schedule(at, EventKind::Deliver { message });
                }
                None => self.out_of_time = true,
            }
            return;
        }
        let m = self
            .in_flight
            .remove(message)
            .expect("a delivery names a message in flight");
        self.last_activity = self.now;
        if let Some(leg) = m.leg {
            self.leg_arrived(m.dst, *leg, m.payload);
            return;
        }
        if let Some(trace) = &mut self.trace {
            trace.push_span(Span {
                rank: m.src,
                kind: SpanKind::Send,
                peer: Some(m.dst),
                bytes: m.payload.shape().bytes(),
                start: m.sent_at,
                end: self.now,
            });
        }
        let (dst, src, tag) = self.tagged_receiver_view(m.src, m.dst, m.tag);
        let key = (dst, src, tag);
        let spare = &mut self.spare_queues;
        self.mailbox
            .entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push_back(m.payload);
        self.signal_waits(self.config.slot_of(dst), src, Some(tag));
    }

    /// Who receives a message from `src` to `dst`, and from whom it seems
    /// to come: `(dst, src)` itself, or in a folded run the representative
    /// of `dst`'s orbit and `src` moved back by as many steps
    /// ([`crate::fold::RankAction::receiver_view`]; by a shift: the message rank
    /// `dst - k·shift` gets from `src - k·shift`).
    fn receiver_view(&self, src: Rank, dst: Rank) -> (Rank, Rank) {
        match &self.config.fold {
            None => (dst, src),
            Some(action) => {
                let (dst, src, _) = action.receiver_view(src, dst);
                (dst, src)
            }
        }
    }

    /// [`Self::receiver_view`] with the message's tag as the receiver
    /// sees it: a channel tag's channel turned back with the ranks when
    /// the fold turns channels ([`crate::fold::RankAction::tag_back`]).
    fn tagged_receiver_view(&self, src: Rank, dst: Rank, tag: Tag) -> (Rank, Rank, Tag) {
        match &self.config.fold {
            None => (dst, src, tag),
            Some(action) => {
                let (dst, src, k) = action.receiver_view(src, dst);
                (dst, src, action.tag_back(tag, k))
            }
        }
    }

    /// The transport from `f.src` to `f.dst` gave up: its messages are
    /// gone, and the receiver's receives from the sender now fail.
    fn transport_failed(&mut self, f: TransportTimeout) {
        for &message in &f.messages {
            self.in_flight.remove(message);
        }
        if let Some(trace) = &mut self.trace {
            trace.push_span(Span {
                rank: f.dst,
                kind: SpanKind::TransportTimeout,
                peer: Some(f.src),
                bytes: 0,
                start: self.now,
                end: self.now,
            });
        }
        let (dst, src) = self.receiver_view(f.src, f.dst);
        self.signal_waits(self.config.slot_of(dst), src, None);
        self.transport_timeouts.push(f.clone());
        self.broken.insert((dst, src), f);
    }

    /// The transport failure that stops `rank` hearing from `from`, if
    /// the pair's transport gave up.
    pub fn broken(&self, rank: Rank, from: Rank) -> Option<&TransportTimeout> {
        self.broken.get(&(rank, from))
    }

    /// Rank `rank` arrives at the synchronisation point: returns the
    /// generation it waits for the end of, releasing everyone if it is the
    /// last to arrive (then the returned generation is already over).
    pub fn arrive_at_sync(&mut self, rank: Rank, waker: &Waker) -> u64 {
        let generation = self.sync.generation;
        self.sync.waiting.push((rank, waker.clone()));
        if self.sync.waiting.len() == self.config.simulated_ranks() {
            self.sync.generation += 1;
            // A call starts now: arm its watchdog.
            let now = self.now;
            self.watchdog = self
                .config
                .call_timeout_ps
                .and_then(|t| now.checked_plus_ps(t))
                .map(|deadline| (now, deadline));
            for (_, w) in self.sync.waiting.drain(..) {
                w.wake();
            }
        }
        generation
    }

    /// Counters so far.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            events: self.events,
            links: LinkStats {
                links_used: self.network.links_used(),
                ..self.traffic
            },
        }
    }

    /// The cycle of link directions each waiting on the next (a credit
    /// or PFC deadlock), by name; empty if there is none.
    pub fn buffer_cycle(&self) -> Vec<(String, Stall)> {
        self.network.buffer_cycle()
    }

    /// The link directions that are down now (scheduled faults), by name.
    pub fn down_links(&self) -> Vec<String> {
        let NetworkConfig::Topology(t) = &self.config.network else {
            return Vec::new();
        };
        let mut factor = vec![1.0f64; t.topology.link_direction_count()];
        for c in t.changes.iter().filter(|c| c.time <= self.now) {
            factor[c.link.index()] = c.bandwidth_factor;
        }
        t.topology
            .link_ids()
            .filter(|l| factor[l.index()] == 0.0)
            .map(|l| t.topology.link_name(l))
            .collect()
    }

    /// The messages sent and not yet delivered, in slot order.
    pub fn undelivered(&self) -> Vec<StuckMessage> {
        self.in_flight
            .iter()
            .map(|m| StuckMessage {
                src: m.src,
                dst: m.dst,
                bytes: m.payload.shape().bytes(),
            })
            .collect()
    }

    /// Per-link-direction counters of a topology model, with pauses still
    /// in force counted up to `until`.
    pub fn link_usage(&self, until: Time) -> Option<Vec<LinkUsage>> {
        self.network.usage(until)
    }

    /// Takes the link traffic per time bin, if the network recorded it.
    pub fn take_timeline(&mut self) -> Option<crate::network::timeline::LinkTimeline> {
        self.network.take_timeline()
    }

    /// Takes the trace recorded so far, with the network's link samples.
    pub fn take_trace(&mut self) -> Option<TraceLog> {
        let mut trace = self.trace.take()?;
        trace.links = self.network.take_samples();
        if let NetworkConfig::Topology(t) = &self.config.network {
            let now = self.now;
            trace.link_changes = t
                .changes
                .iter()
                .filter(|c| c.time <= now)
                .copied()
                .collect();
        }
        if trace.links.len() > crate::network::LINK_SAMPLES_MAX {
            trace.links.truncate(crate::network::LINK_SAMPLES_MAX);
            trace.truncated = true;
        }
        Some(trace)
    }
}
