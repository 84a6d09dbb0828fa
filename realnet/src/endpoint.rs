//! [`Endpoint`]: what a real fabric offers beyond [`Fabric`].
//!
//! A driver (the `sim bench` command, the tests) runs a collective on any
//! endpoint the same way: [`Endpoint::begin_call`] before each call, the
//! call's future through [`Endpoint::block_on`], and [`Endpoint::finish`]
//! at the end so that peers can tell a rank that finished from one that died.

use std::future::Future;
use std::time::Instant;

use algorithms::{DType, Fabric, FabricError, Payload, Rank, Time};

use crate::call::CallId;
use crate::executor::{self, IdlePolicy};
use crate::heartbeat::PeerSilence;
use crate::mailbox::Mailbox;

/// A real transport's fabric for one rank.
pub trait Endpoint: Fabric {
    /// The rank's mailbox, where arrived messages and failures land.
    fn mailbox(&self) -> &Mailbox;

    /// Drives the transport once (moves bytes, checks peers); returns
    /// whether anything moved.
    fn progress(&self) -> bool;

    /// How the executor waits when nothing moves.
    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy::default()
    }

    /// The largest pipeline chunk worth using on this transport when
    /// `slots` chunks may be in flight per connection, if it has a limit:
    /// the bench and `sim run --fabric` cap the tuner's chunk at it (a
    /// chunk the user names is used as named). The tuner chooses for the
    /// simulator's links, which have no caches; a transport whose receiver
    /// holds the chunks it has read ahead until the algorithm combines
    /// them does best when those stay in cache. `None`: no limit.
    fn chunk_bytes_max(&self, slots: usize) -> Option<u64> {
        let _ = slots;
        None
    }

    /// What the transport's heartbeats say about the peers, for a receive
    /// that has waited past the timeout (see [`crate::heartbeat`]); a
    /// transport without heartbeats says [`PeerSilence::Unknown`].
    fn peer_silence(&self) -> PeerSilence {
        PeerSilence::Unknown
    }

    /// Starts collective call `call` (see [`CallId`]); every message sent
    /// from now on carries it.
    fn begin_call(&self, call: CallId) -> Result<(), FabricError>;

    /// Runs `fut` (a collective on this endpoint) to completion, driving
    /// the transport and failing receives that wait past the timeout.
    fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        // Reading the clock costs more than a round of polling shared
        // memory, so timeouts are checked every `EXPIRE_EVERY` idle rounds.
        const EXPIRE_EVERY: u32 = 64;
        let mut idle_rounds = 0u32;
        executor::block_on(
            fut,
            || {
                if self.progress() {
                    return true;
                }
                idle_rounds = idle_rounds.wrapping_add(1);
                idle_rounds.is_multiple_of(EXPIRE_EVERY)
                    && self
                        .mailbox()
                        .expire_with(Instant::now(), || self.peer_silence())
            },
            self.idle_policy(),
        )
    }

    /// Flushes what this rank sent, tells its peers it is done and waits
    /// (up to the timeout) until they are done too, so that no peer
    /// mistakes its exit for a crash.
    fn finish(&self) -> Result<(), FabricError>;
}

/// The time since `start` in integer picoseconds, every real fabric's
/// [`Fabric::now`].
pub fn time_since(start: Instant) -> Time {
    Time(
        u64::try_from(start.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_mul(1000),
    )
}

/// Refuses to send a payload of symbols ([`DType::Sym`]): a symbol is an id
/// in the sending thread's interner and means nothing in another thread
/// or process. Every real fabric's [`Fabric::send`] calls this first, so no
/// wire format has to encode one.
pub fn refuse_symbols(rank: Rank, to: Rank, payload: &Payload) -> Result<(), FabricError> {
    if payload.shape().dtype != DType::Sym {
        return Ok(());
    }
    Err(FabricError::Transport {
        rank,
        reason: format!(
            "cannot send {} to rank {to}: symbolic elements are ids in the sending thread's \
             interner and mean nothing in another thread or process; run symbolic collectives \
             on one thread (the simulator or the model checker)",
            payload.shape()
        ),
    })
}
