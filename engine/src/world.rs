//! The shared state of one simulated run: the clock, the event queue, the
//! links, messages in flight, mailboxes of arrived messages, and what every
//! rank is waiting for.
//!
//! Ranks reach the world through their [`crate::SimFabric`]; the executor
//! pops events and applies them here. Waiting futures leave a [`Waker`];
//! applying an event wakes exactly the futures it may complete.
//!
//! This file holds the state, its construction and the application of an
//! event; `messages.rs` sends and delivers messages, `waits.rs` keeps what
//! ranks wait for (receives, compute, timers, the sync point), `report.rs`
//! what a run leaves for its report; `compute.rs`, `config.rs` and
//! `in_network.rs` are the compute engines, the configuration and the
//! switches' reductions.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use std::task::Waker;

use algorithms::{Payload, Rank, Shape, Tag, Time};

use crate::event::{EventKind, EventQueue, MessageId};
use crate::in_network::{InNetwork, Leg};
use crate::links::LinkStats;
use crate::network::flow::FlowEvent;
use crate::network::packet::PacketEvent;
use crate::network::{NetEvent, Network, NetworkConfig, TransportTimeout};
use crate::slab::Slab;
use crate::trace::{Span, SpanKind, TraceLog};

mod compute;
mod config;
mod in_network;
mod messages;
mod report;
mod waits;

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
}
