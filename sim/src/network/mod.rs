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

use algorithms::Time;
use topologies::{LinkId, Route};

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
}

/// An event of a network model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// Of the packet-level model.
    Packet(packet::PacketEvent),
    /// Of the flow-level model.
    Flow(flow::FlowEvent),
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
