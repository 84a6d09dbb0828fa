//! [`Shared`]: what a [`TcpFabric`](super::TcpFabric)'s reader threads
//! share with its rank: the mailbox, the byes, the first peer death, when
//! each peer was last heard from and the buffer pool.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use algorithms::{FabricError, Rank};

use super::handshake::Refusals;
use crate::mailbox::Mailbox;
use crate::pool::BufferPool;

/// What the reader threads share with the rank.
pub(crate) struct Shared {
    pub(super) mailbox: Mailbox,
    /// Which peers said bye.
    pub(super) byes: Mutex<Vec<bool>>,
    /// Signalled when a bye or a failure arrives.
    pub(super) changed: Condvar,
    /// Set when the fabric is dropped: readers stop without reporting.
    pub(super) closing: AtomicBool,
    /// Set when a peer died; [`Shared::dead`] says which.
    pub(super) any_dead: AtomicBool,
    /// The first peer that died, and how.
    pub(super) dead: Mutex<Option<FabricError>>,
    pub(super) refusals: Arc<Refusals>,
    /// When the rank connected: the origin of `heard`.
    pub(super) epoch: Instant,
    /// Per peer: when it was last heard from, in nanoseconds since `epoch`.
    pub(super) heard: Vec<AtomicU64>,
    /// Message memory done with (payloads written, received payloads
    /// combined), for the reader threads' next receives and the rank's
    /// next sends (see [`crate::pool`]).
    pub(super) pool: Mutex<BufferPool>,
}

impl Shared {
    /// The pool, whatever a panicking thread left (it holds only buffers).
    pub(super) fn pool(&self) -> MutexGuard<'_, BufferPool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that `peer` was heard from just now.
    pub(super) fn heard(&self, peer: Rank) {
        let ns = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.heard[peer].store(ns, Ordering::Relaxed);
    }

    /// How long nothing was heard from `peer`, at `now`.
    pub(super) fn silent_for(&self, peer: Rank, now: Instant) -> Duration {
        let last = self.epoch + Duration::from_nanos(self.heard[peer].load(Ordering::Relaxed));
        now.saturating_duration_since(last)
    }

    /// Which peers said bye, whatever a panicking thread left.
    pub(super) fn byes(&self) -> MutexGuard<'_, Vec<bool>> {
        self.byes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `peer`'s bye and wakes whoever waits for byes.
    pub(super) fn said_bye(&self, peer: Rank) {
        self.byes()[peer] = true;
        self.changed.notify_all();
    }

    /// `peer`'s connection ended without a bye or broke: receives from it
    /// fail at once (after the messages it sent before), and the rank
    /// fails as soon as it waits for anything else (see
    /// [`Endpoint::progress`](crate::endpoint::Endpoint::progress)).
    pub(super) fn died(&self, peer: Rank, err: FabricError) {
        // A peer that leaves after another died most likely left because
        // of it: receives from it report the first death, the cause.
        let first = self
            .dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(err)
            .clone();
        self.mailbox.fail_peer(peer, first);
        self.any_dead.store(true, Ordering::Release);
        let _guard = self.byes();
        self.changed.notify_all();
    }

    /// The first peer death, if any.
    pub(super) fn dead(&self) -> Option<FabricError> {
        if !self.any_dead.load(Ordering::Acquire) {
            return None;
        }
        self.dead.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `peer` sent something that cannot be trusted, or could not be
    /// written to: every receive fails with `err` at once.
    pub(super) fn fail(&self, peer: Rank, err: FabricError) {
        // The rank's error first, so that no receive woken by the peer's
        // failure finds the rank still healthy.
        self.mailbox.fail_all(err.clone());
        self.mailbox.fail_peer(peer, err);
        let _guard = self.byes();
        self.changed.notify_all();
    }
}
