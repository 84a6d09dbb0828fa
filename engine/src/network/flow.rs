//! The flow-level network model.
//!
//! This file holds the model's state, events and entry points; a pair's
//! messages (started, finished, delivered) are in `pairs.rs`, the batched
//! rate recomputation in `rates.rs`, max-min filling in `maxmin.rs` and
//! scheduled link changes in `faults.rs`.
//!
//! # Model
//! - **A message is a flow** of its `bytes` along its route. Messages of one
//!   [`Transfer::flow`] (a rank pair) are sent one after another: only the
//!   oldest unfinished one is active, and the next starts when it has sent
//!   its last byte (the packet model's rule too: different pairs share the
//!   links, messages of one pair go in order).
//! - **Active flows share bandwidth max-min fairly** (progressive filling,
//!   in the private `maxmin` module): a flow's rate is limited by its most
//!   contended link, and what it cannot use there goes to the others.
//! - **Rates change only when flows start or end or a link's capacity
//!   changes** (see [Link faults](#link-faults)), and in batches: each of
//!   these marks the links it touches dirty and schedules one `Reallocate`
//!   event at the current time. Events at equal time fire in scheduling
//!   order, so every send the ranks make at this instant (before that event
//!   is popped) shares one recomputation. The recomputation only visits the
//!   flows connected to the dirty links through shared links: separate
//!   components have independent allocations. Its cost is
//!   `O(E log E)` for `E` the (flow, link) incidences of that component.
//! - **Progress.** Each flow keeps its remaining bytes, its rate and when
//!   they were last brought up to date. When its rate changes, the
//!   remaining bytes are advanced to now and its `Finish` event is moved
//!   to `ceil(remaining / rate)` ps later: a keyed event of the queue, one
//!   per flow, moved in place ([`EventQueue::schedule_keyed`]), so that no
//!   outdated finish waits in the queue (a recomputation moves the
//!   finishes of its whole component: left in the queue, the outdated ones
//!   outnumbered the real ones ten to one in a 128 MiB `nccl_tree`
//!   allreduce on 512 GPUs, and their heap was most of the run's time).
//!   The version number is kept as a check. Flows whose rate did not
//!   change keep their event. A flow whose new rate is 0 has its `Finish`
//!   cancelled until a later recomputation gives it a positive rate.
//! - **Delivery.** A message whose last byte has left is delivered
//!   [`idle_latency_ps`](super::path::idle_latency_ps) later (propagation, forwarding and the pipeline
//!   fill of a packet, see [`super::path`]), but never before the previous
//!   message of its pair: messages of a pair arrive in order. On an idle
//!   route a message therefore arrives exactly
//!   [`idle_delivery_ps`](super::path::idle_delivery_ps) after it was
//!   started (`duration_ps(bytes, bottleneck) + idle latency`, rounded
//!   like [`topologies::duration_ps`]).
//! - **Zero-byte messages** need no bandwidth: when their turn in the pair
//!   comes they are delivered after the idle latency.
//!
//! # Successors
//! A pipelined collective sends chunk after chunk on each pair: when a
//! flow ends, the pair's next message often starts at once on exactly the
//! same route. The links then carry the same multiset of routes as
//! before, and max-min filling depends on nothing else (a flow's rate is
//! the level at which the first of its links saturates; links saturate in
//! the order of their shares, ties by link id, and each freeze subtracts
//! the same level whichever flow it is; the flow ids and list orders only
//! name the flows), so every rate stays the same to the bit and the
//! successor's is its predecessor's. Such a successor therefore *inherits*
//! the rate and marks no link dirty: the instant's `Reallocate` still
//! fires where it would have (so the batching of the instant is
//! unchanged), skips the filling when nothing else changed, and schedules
//! the successor's `Finish` as the recomputation would have. When other
//! changes of the instant reach the successor's component, the filling
//! computes its rate as always; one it does not reach had no other
//! change (an ended or started flow marks its own links, which belong to
//! every component it touched), so the inherited rate is its max-min
//! rate. Only the order in which finishes at one and the same picosecond
//! are queued can differ from recomputing everything; the tests compare
//! both ways (`FlowNetwork::with_successors_inheriting(false)`) on random
//! instances and on tree allreduces, times and counters equal to the
//! picosecond and the byte.
//!
//! # Departures
//! A flow `f` that ends at rate `r > 0` without a successor is taken off
//! its links, and its links are normally marked dirty. They are not when
//! every flow left on them has, as of the latest recomputation, a max-min
//! rate below `r` (and none of them, nor the links, changed since): then
//! no other flow's rate changes, to the bit. Progressive filling
//! saturates links in the order of their shares and levels never fall,
//! so the flows below `r` froze at levels below `r` in steps that never
//! touched `f`'s links (a link of `f` that saturated would have frozen
//! `f` too); without `f` those links' shares are only larger (one
//! crossing fewer, the same capacity left), so the same steps come first
//! with the same arithmetic. At level `r` nothing of `f`'s links is left
//! unfrozen but `f`: the step that froze `f` subtracted from links no
//! one else could still use, and its level equals the share of the next
//! step, which the filling takes in both cases (a link's capacity left
//! depends only on the rates of the flows frozen on it, subtracted in
//! rising order). A flow that started, or whose links changed, in the
//! same instant is not yet allocated, and keeps `f`'s links dirty. The
//! instant's `Reallocate` still fires where it would have. The test
//! that compares the model with a filling of every flow after each
//! recomputation covers it. Folded `nccl_tree` on the 512-GPU fat-tree
//! (1 GiB) ends 65 286 flows this way, beside 305 872 recomputations.
//!
//! # Link faults
//! [`FlowNetwork::schedule_changes`] schedules [`LinkChange`]s, one `Change`
//! event each, before the run (or at least not before the current time).
//! - **From a change's time on**, the link direction's capacity is its
//!   nominal bandwidth times `bandwidth_factor`; the latest change wins
//!   (changes at equal times apply in the order they were scheduled).
//!   The factor is expected finite and `>= 0` (the caller validates);
//!   anything else (NaN, negative, infinite) counts as 0. Factors above 1
//!   are allowed; a factor so small that a finish would fall past the end
//!   of virtual time makes the run fail with [`OutOfTime`].
//! - **Reallocation.** A change marks the link dirty like a start or end:
//!   the flows of its component are recomputed in the same batched
//!   `Reallocate`, at the change's time. Each flow whose rate changes first
//!   has its remaining bytes advanced to that time at its old rate, then
//!   gets its new `Finish` (rounded up as above, from the fractional
//!   remaining bytes: e.g. 1 B/ps halved to 0.5 B/ps with 6000 B left takes
//!   exactly 12000 ps more). A change on a link without flows only sets its
//!   capacity.
//! - **A link down (factor 0)** gives every flow crossing it rate 0, and
//!   such a flow takes nothing from its other links (max-min with a
//!   zero-capacity link, see the `maxmin` module). A flow at rate 0 has no
//!   `Finish` scheduled; when a later change gives it a positive rate it
//!   resumes with the bytes it had left, so a lone flow delayed by an
//!   outage of `d` ps finishes exactly `d` ps later (to the rounding
//!   above). A flow whose last byte is due at the very instant of a change
//!   still finishes then (the change's own recomputation comes after).
//! - **Delivery latency** ([`idle_latency_ps`](super::path::idle_latency_ps)) is unchanged by faults: it
//!   is added once the last byte has left, as always.
//!
//! # Counters
//! [`LinkUsage`] per link direction: `bytes` and `units` (flows) are added
//! when a flow finishes; `busy_ps` is the time with at least one active
//! flow crossing it at a positive rate (so a down link, or a link whose
//! only flows are stuck behind a down link elsewhere, is not busy; the
//! time is added when the link stops being busy, so a link still busy at
//! the end of a run counts up to its last such change); `max_queue` is the
//! most flows active on it at once (stuck or not). With sampling, a
//! [`LinkSample`] of the number of active flows is recorded whenever it
//! changes.

mod faults;
mod maxmin;
mod pairs;
mod rates;
#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use algorithms::Time;
use topologies::{Route, Topology};

use super::path::PathTable;
use super::timeline::LinkTimeline;
use super::{LinkChange, LinkSample, LinkUsage, NetEvent, OutOfTime, Transfer};
use crate::event::{EventKind, EventQueue, MessageId};
use maxmin::MaxMin;

/// An event of the flow-level model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// Recompute the rates of the flows connected to the dirty links.
    Reallocate,
    /// A flow sends its last byte, unless its version has changed since.
    Finish {
        /// The flow (its slot in the model's table).
        flow: u32,
        /// The flow's version when this event was scheduled.
        version: u32,
    },
    /// A message arrives.
    Deliver {
        /// The world's id of the message.
        message: MessageId,
    },
    /// A scheduled link change takes effect.
    Change {
        /// Its position among the changes scheduled so far.
        index: u32,
    },
}

/// No slot: the end of a pair's list.
const NONE: u32 = u32::MAX;

/// A message waiting or flowing; while active, also the flow.
#[derive(Debug)]
struct Slot {
    message: MessageId,
    bytes: u64,
    route: Route,
    /// The route crossed once, when `route` repeats links for weight
    /// ([`Transfer::path`]).
    path: Option<Route>,
    /// The pair (`Transfer::flow`) it belongs to.
    pair: u64,
    /// The next message of the same pair.
    next: u32,
    /// Whether it is the pair's active flow (its links list it).
    active: bool,
    /// Bytes not yet sent as of `updated`.
    remaining_bytes: f64,
    /// Current rate in bytes per second (0 until first allocated).
    rate_bytes_per_s: f64,
    /// Whether `rate_bytes_per_s` is its max-min rate as of the latest
    /// recomputation (false from its start until the next one).
    allocated: bool,
    /// When `remaining_bytes` was last brought up to date.
    updated: Time,
    /// Bumped at every rescheduling; kept across slot reuse so that an
    /// outdated `Finish` never matches a later occupant.
    version: u32,
}

/// A link direction's state, kept in one place so that a flow crossing it
/// touches one cache line or two rather than one per table.
#[derive(Clone, Debug)]
struct LinkState {
    /// The active flows crossing it.
    flows: Vec<u32>,
    /// Current bandwidth (nominal times the latest change's factor),
    /// bytes per second.
    capacity_bytes_per_s: f64,
    /// Crossings by active flows at a positive rate; the link is busy
    /// while this is not 0.
    sending: u32,
    /// When it last became busy.
    busy_since: Time,
}

impl maxmin::Capacity for LinkState {
    fn flows(&self) -> &[u32] {
        &self.flows
    }

    fn capacity_bytes_per_s(&self) -> f64 {
        self.capacity_bytes_per_s
    }
}

/// The messages of one pair, oldest first.
#[derive(Clone, Copy, Debug)]
struct Pair {
    head: u32,
    tail: u32,
    /// When its latest message arrives (or arrived).
    last_delivery: Option<Time>,
}

/// The flow-level model of one run.
#[derive(Debug)]
pub struct FlowNetwork {
    /// The topology's link parameters, for the delivery latencies.
    paths: PathTable,
    /// Nominal bandwidth per link direction, bytes per second.
    nominal: Vec<f64>,
    /// The scheduled link changes, by `FlowEvent::Change::index`.
    changes: Vec<LinkChange>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Pairs by `Transfer::flow`; only looked up, never iterated. Kept
    /// for the whole run (their last delivery time orders the next), so
    /// this grows with the number of distinct pairs, not of messages.
    pairs: HashMap<u64, Pair>,
    /// Per link direction, what the hot path reads and writes, together.
    links: Vec<LinkState>,
    /// Links whose flows changed since the last recomputation (may repeat).
    dirty: Vec<u32>,
    /// Per link direction: whether it is in `dirty`.
    is_dirty: Vec<bool>,
    reallocate_pending: bool,
    allocator: MaxMin,
    /// Scratch: the latest allocation.
    rates: Vec<(u32, f64)>,
    /// Whether a message that takes over its pair's route from the flow
    /// that just ended skips the recomputation (see [Successors]).
    ///
    /// [Successors]: self#successors
    successors_inherit: bool,
    /// Flows started as successors since the last recomputation, with
    /// the rate they inherit, in the order they started.
    inherited: Vec<(u32, f64)>,
    /// Flows that ended without marking their links dirty, as no other
    /// flow's rate depends on them (see [Departures]).
    ///
    /// [Departures]: self#departures
    departures_unmarked: u64,
    /// A shared empty route for free slots.
    no_route: Route,
    usage: Vec<LinkUsage>,
    sample_links: bool,
    /// Link traffic per time bin, when asked for.
    timeline: Option<LinkTimeline>,
    samples: Vec<LinkSample>,
    reallocations: u64,
}

impl FlowNetwork {
    /// A model of `topology`; with `sample_links` it records every change
    /// of a link's backlog for the trace.
    pub fn new(topology: Arc<Topology>, sample_links: bool) -> FlowNetwork {
        let links = topology.link_direction_count();
        let nominal: Vec<f64> = topology
            .link_ids()
            .map(|l| topology.link(l).bandwidth_bytes_per_s)
            .collect();
        FlowNetwork {
            paths: PathTable::new(&topology),
            links: nominal
                .iter()
                .map(|&capacity_bytes_per_s| LinkState {
                    flows: Vec::new(),
                    capacity_bytes_per_s,
                    sending: 0,
                    busy_since: Time::ZERO,
                })
                .collect(),
            nominal,
            changes: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            pairs: HashMap::default(),
            dirty: Vec::new(),
            is_dirty: vec![false; links],
            reallocate_pending: false,
            allocator: MaxMin::new(links),
            rates: Vec::new(),
            successors_inherit: true,
            inherited: Vec::new(),
            departures_unmarked: 0,
            no_route: Arc::from(Vec::new()),
            usage: vec![LinkUsage::default(); links],
            sample_links,
            timeline: None,
            samples: Vec::new(),
            reallocations: 0,
        }
    }

    /// Starts sending a message at `now`.
    pub fn start(
        &mut self,
        now: Time,
        transfer: Transfer,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let slot = self.alloc(&transfer);
        let pair = self.pairs.entry(transfer.flow).or_insert(Pair {
            head: NONE,
            tail: NONE,
            last_delivery: None,
        });
        if pair.head == NONE {
            pair.head = slot;
            pair.tail = slot;
            self.activate_head(now, transfer.flow, queue, None, None)
        } else {
            let tail = pair.tail;
            pair.tail = slot;
            self.slots[tail as usize].next = slot;
            Ok(())
        }
    }

    /// Applies one of this model's events at `now`, pushing the messages
    /// that have fully arrived onto `delivered`.
    pub fn handle(
        &mut self,
        now: Time,
        event: FlowEvent,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        match event {
            FlowEvent::Reallocate => self.reallocate(now, queue),
            FlowEvent::Finish { flow, version } => {
                let current = self
                    .slots
                    .get(flow as usize)
                    .is_some_and(|s| s.active && s.version == version);
                if current {
                    self.finish(now, flow, queue, Some(delivered))
                } else {
                    Ok(()) // Outdated: the flow was rescheduled or is gone.
                }
            }
            FlowEvent::Deliver { message } => {
                delivered.push(message);
                Ok(())
            }
            FlowEvent::Change { index } => {
                self.change(now, index, queue);
                Ok(())
            }
        }
    }

    /// Counters per link direction, indexed by `LinkId::index`.
    pub fn usage(&self) -> &[LinkUsage] {
        &self.usage
    }

    /// The same, recording each link's traffic per bin of `bin_ps` (none
    /// if `None`).
    pub fn with_timeline(mut self, bin_ps: Option<u64>) -> FlowNetwork {
        self.timeline = bin_ps.map(|b| LinkTimeline::new(self.usage.len(), b));
        self
    }

    /// The same, with successors inheriting their predecessor's rate
    /// (`true`, the default) or every flow change recomputed (`false`,
    /// the reference the shortcut is tested against; see
    /// [Successors](self#successors)).
    pub fn with_successors_inheriting(mut self, on: bool) -> FlowNetwork {
        self.successors_inherit = on;
        self
    }

    /// The link traffic per time bin recorded so far, if asked for.
    pub fn take_timeline(&mut self) -> Option<LinkTimeline> {
        self.timeline.take()
    }

    /// The backlog samples recorded so far (empty unless sampling).
    pub fn take_samples(&mut self) -> Vec<LinkSample> {
        std::mem::take(&mut self.samples)
    }

    /// Number of rate recomputations so far.
    pub fn reallocations(&self) -> u64 {
        self.reallocations
    }

    /// Flows that ended without a recomputation of their links, since no
    /// other flow's rate depended on them (see [Departures](self#departures)).
    pub fn departures_unmarked(&self) -> u64 {
        self.departures_unmarked
    }

    /// (flow, link) incidences the rate recomputations visited so far.
    pub fn reallocation_work(&self) -> u64 {
        self.allocator.work()
    }
}

/// Wraps a flow event for the queue.
fn net(event: FlowEvent) -> EventKind {
    EventKind::Net(NetEvent::Flow(event))
}
