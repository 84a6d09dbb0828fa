//! [`ChannelKey`] and [`Choice`]: the channels messages travel in, and the
//! transitions the checker chooses between.

use std::fmt;

use algorithms::Rank;

use crate::spec::Buffering;

/// A channel: the messages from `src` to `dst` with one tag, delivered in
/// the order they were sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelKey {
    /// The sender.
    pub src: Rank,
    /// The receiver.
    pub dst: Rank,
    /// The tag.
    pub tag: u64,
}

impl fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{} tag {}", self.src, self.dst, self.tag)
    }
}

/// One transition the checker may choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// Let `rank` start call `call` (programs whose calls are concurrent:
    /// the order in which a rank's threads or streams issue them).
    Start {
        /// The rank.
        rank: Rank,
        /// The call's index in the scenario.
        call: usize,
    },
    /// Deliver the oldest message of the channel to its oldest matching
    /// receive.
    Deliver(ChannelKey),
    /// Lose the oldest message of the channel in flight.
    Drop(ChannelKey),
    /// Stop a rank where it is.
    Crash(Rank),
    /// Fail the oldest receive `rank` posted on the channel with a timeout.
    Timeout(ChannelKey),
    /// Tell `to` that `from` has stopped: its receives from `from` that no
    /// message can satisfy fail, and so do its sends to `from`.
    Notify {
        /// The rank that stopped.
        from: Rank,
        /// The rank that learns it.
        to: Rank,
    },
}

impl Choice {
    /// The rank this transition changes first (its receiver), and the
    /// other rank it may change (the sender, under bounded buffering), for
    /// traces and PCT priorities. The partial-order reduction uses the
    /// precise [`Effect`](super::Effect)s instead.
    pub fn affected(self, buffering: Buffering) -> (Rank, Option<Rank>) {
        match self {
            // Under bounded buffering, a delivery may complete a send or
            // free the slot a blocked send waits for.
            Choice::Deliver(k) if buffering.is_bounded() => (k.dst, Some(k.src)),
            Choice::Deliver(k) => (k.dst, None),
            Choice::Drop(k) => (k.dst, Some(k.src)),
            Choice::Crash(r) => (r, None),
            Choice::Start { rank, .. } => (rank, None),
            Choice::Timeout(k) => (k.dst, None),
            Choice::Notify { to, .. } => (to, None),
        }
    }

    /// Whether this is a fault (a drop, crash or timeout).
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Choice::Drop(_) | Choice::Crash(_) | Choice::Timeout(_)
        )
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Deliver(k) => write!(f, "deliver {k}"),
            Choice::Drop(k) => write!(f, "drop {k}"),
            Choice::Crash(r) => write!(f, "crash {r}"),
            Choice::Start { rank, call } => write!(f, "start {rank} call {call}"),
            Choice::Timeout(k) => write!(f, "timeout {k}"),
            Choice::Notify { from, to } => write!(f, "notify {from}->{to}"),
        }
    }
}
