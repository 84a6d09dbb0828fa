//! The records the packet model keeps in its tables: the messages being
//! sent, the flows they belong to and the packets in flight (see the
//! module docs of [`super`], *Packets* and *Injection*).

use topologies::Route;

use super::transport::Transport;
use crate::event::MessageId;

/// A message being sent.
#[derive(Debug)]
pub(super) struct Message {
    /// The world's id, reported on delivery.
    pub(super) id: MessageId,
    pub(super) route: Route,
    pub(super) bytes: u64,
    /// Bytes already cut into packets (in the current pass: a
    /// retransmission starts it again).
    pub(super) cut_bytes: u64,
    pub(super) mtu_bytes: u64,
    /// The next message of the same flow, or [`NONE`](super::NONE).
    pub(super) next: u32,
    /// Its flow, or [`NONE`](super::NONE) for a message to oneself.
    pub(super) flow: u32,
    /// The sequence number of its first packet within its flow.
    pub(super) first_psn: u64,
    /// Its packets alive in the network (the record outlives delivery
    /// until they are gone: a stale retransmitted copy may still travel).
    pub(super) live_packets: u32,
    /// Delivered, or given up with its failed flow.
    pub(super) done: bool,
}

impl Message {
    /// How many packets it is cut into (an empty message is one).
    pub(super) fn packets(&self) -> u64 {
        self.bytes.div_ceil(self.mtu_bytes).max(1)
    }

    /// The sequence number of its next packet to cut.
    pub(super) fn next_psn(&self) -> u64 {
        self.first_psn + self.cut_bytes / self.mtu_bytes
    }
}

/// The messages of one source-destination flow not yet delivered, as a
/// list `oldest -> ... -> tail` through [`Message::next`], with a cursor
/// `head` at the one being cut ([`NONE`](super::NONE) when all are cut).
/// A flow is in its first link's injection round exactly when `head` is
/// not [`NONE`](super::NONE).
#[derive(Debug)]
pub(super) struct Flow {
    pub(super) key: u64,
    /// Distinguishes this flow from others that reuse its id later.
    pub(super) serial: u32,
    /// The first link of its route (all its messages share the route).
    pub(super) first_link: u32,
    pub(super) oldest: u32,
    pub(super) head: u32,
    pub(super) tail: u32,
    /// The sequence number after its last message's last packet.
    pub(super) psn_end: u64,
    /// One past the highest sequence number ever cut (a packet below it
    /// is a retransmission).
    pub(super) psn_sent: u64,
    /// The reliable transport (RDMA or TCP), for a flow that crosses
    /// network links or a lossy link.
    pub(super) transport: Option<Box<Transport>>,
    /// Whether it has packets to cut but waits out of its injection round
    /// for ACKs to open its TCP window (see `window.rs`).
    pub(super) parked: bool,
    /// How many times the sender went back N, modulo 2^16: its packets
    /// carry it, so that a TCP receiver knows a packet was sent after the
    /// go-back that answered its NAK.
    pub(super) epoch: u16,
}

/// A packet in flight.
#[derive(Debug)]
pub(super) struct Packet {
    pub(super) message: u32,
    /// The index in the route of the link it is crossing or waiting for.
    pub(super) hop: u32,
    /// That link, `route[hop]` ([`NONE`](super::NONE) for a message to
    /// oneself), and its neighbours on the route, `route[hop - 1]` and
    /// `route[hop + 1]` (or [`NONE`](super::NONE)): kept here so that a
    /// hop reads its message's route once, not at every look.
    pub(super) link: u32,
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) bytes: u64,
    /// Whether it is its message's last packet.
    pub(super) last: bool,
    /// Its sequence number within its flow.
    pub(super) psn: u64,
    /// Whether it is a retransmitted copy.
    pub(super) retransmit: bool,
    /// Its flow's [`Flow::epoch`] when it was cut.
    pub(super) epoch: u16,
}
