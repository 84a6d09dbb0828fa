//! [`Mailbox`]: where arrived messages wait for the receive that matches them.
//!
//! A transport hands every message it receives to [`Mailbox::deliver`] with
//! its source, tag and [`CallId`]; a receive takes the oldest message with
//! its own `(source, tag)` of the rank's current call. Messages of a later
//! call (a fast peer already in the next collective) wait in their own queue.
//! The mailbox is also where failures land: a peer that died or hung
//! ([`Mailbox::fail_peer`]), an error that ends the rank
//! ([`Mailbox::fail_all`]), a message of a collective different from the
//! rank's own (caught in [`Mailbox::deliver`]), and receives that waited
//! longer than the timeout ([`Mailbox::expire`]). Every receive waiting on
//! the failed peer then returns the error instead of hanging.
//!
//! It is thread-safe so that a transport's reader threads can deliver while
//! the rank's executor polls receives.

use std::collections::{BTreeMap, VecDeque};

use crate::sorted_map::SortedMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use crate::call::CallId;
use crate::heartbeat::{PeerSilence, stopped_responding};

/// A receive's key: source rank, tag and call sequence number.
type Key = (Rank, Tag, u64);

/// A receive that found nothing yet: who to wake and since when it waits.
struct Waiter {
    /// The first receive's waker; `None`: the mailbox's kept waker
    /// ([`Inner::kept`]), as nearly always (no clone to make and drop).
    first: Option<Waker>,
    /// Other receives of the same key.
    more: Vec<Waker>,
    since: Instant,
}

impl Waiter {
    /// Wakes the receives; `kept` is the mailbox's kept waker.
    fn wake(self, kept: Option<&Waker>) {
        match (self.first, kept) {
            (Some(w), _) => w.wake(),
            (None, Some(k)) => k.wake_by_ref(),
            (None, None) => {}
        }
        self.more.into_iter().for_each(Waker::wake);
    }

    /// Whether `w` is already woken by this waiter (`kept`: the mailbox's
    /// kept waker).
    fn wakes(&self, w: &Waker, kept: Option<&Waker>) -> bool {
        let first = self.first.as_ref().or(kept);
        first.is_some_and(|f| f.will_wake(w)) || self.more.iter().any(|m| m.will_wake(w))
    }
}

/// Messages of one key, oldest first.
type Queue = VecDeque<(CallId, Payload)>;

/// Emptied queues kept for the next keys (their allocation reused).
const SPARE_QUEUES: usize = 16;

#[derive(Default)]
struct Inner {
    call: Option<CallId>,
    queues: SortedMap<Key, Queue>,
    spare: Vec<Queue>,
    waiters: SortedMap<Key, Waiter>,
    /// The waker of the last receive that had to wait: a rank's executor
    /// polls every receive with the same waker, call after call, so a
    /// waiter refers to this one instead of cloning its own.
    kept: Option<Waker>,
    failed_peers: BTreeMap<Rank, FabricError>,
    fatal: Option<FabricError>,
}

/// Arrived messages of one rank, matched to its receives.
pub struct Mailbox {
    rank: Rank,
    world_size: usize,
    timeout: Duration,
    inner: Mutex<Inner>,
    /// Whether `inner.fatal` is set: read without the lock by the
    /// transports' progress loops, which ask on every idle round.
    has_fatal: AtomicBool,
    /// Whether `inner.queues` holds a message: read without the lock by
    /// shared memory's direct receives, which the mailbox must not hold
    /// an older message for.
    holds: AtomicBool,
    /// Whether `inner.waiters` holds a receive: read without the lock by
    /// shared memory's direct receives, which must not take a message
    /// such a receive waits for, nor hold progress up while one waits.
    waits: AtomicBool,
}

impl Mailbox {
    /// An empty mailbox for `rank` of `world_size`, whose receives fail
    /// after waiting `timeout` without progress from their peer.
    pub fn new(rank: Rank, world_size: usize, timeout: Duration) -> Mailbox {
        Mailbox {
            rank,
            world_size,
            timeout,
            inner: Mutex::new(Inner::default()),
            has_fatal: AtomicBool::new(false),
            holds: AtomicBool::new(false),
            waits: AtomicBool::new(false),
        }
    }

    /// The rank this mailbox belongs to.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks in the job.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// How long a receive may wait without progress from its peer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent maps behind
        // (every update is a single insert or remove), so keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rank's current call, if a call has begun.
    pub fn call(&self) -> Option<CallId> {
        self.lock().call
    }

    /// Starts collective call `call`: receives now match its messages.
    /// Fails (and fails every later receive) if a message of an earlier
    /// call was never received, or one of this call's sequence number
    /// already arrived for a different collective.
    pub fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        let mut inner = self.lock();
        if let Some(e) = &inner.fatal {
            return Err(e.clone());
        }
        let mut problem = None;
        for ((src, tag, seq), queue) in inner.queues.iter() {
            let Some((theirs, _)) = queue.front() else {
                continue;
            };
            if *seq < call.seq {
                problem = Some(format!(
                    "a message from rank {src} with tag {tag} of call #{seq} was never received \
                     (rank {src} and this rank disagree on the collectives called)"
                ));
                break;
            }
            if *seq == call.seq && !theirs.same_kind(call) {
                problem = Some(Self::different(*src, *theirs, call));
                break;
            }
        }
        inner.call = Some(call);
        if let Some(reason) = problem {
            let err = FabricError::Transport {
                rank: self.rank,
                reason,
            };
            self.set_fatal(&mut inner, err.clone());
            return Err(err);
        }
        Ok(())
    }

    /// Hands an arrived message to the mailbox. A message of the current
    /// call's sequence number but another collective or algorithm, or of
    /// an earlier call, is a protocol error that fails the rank.
    pub fn deliver(&self, src: Rank, tag: Tag, call: CallId, payload: Payload) {
        let mut inner = self.lock();
        if inner.fatal.is_some() {
            return;
        }
        if let Some(mine) = inner.call {
            let reason = if call.seq == mine.seq && !call.same_kind(mine) {
                Some(Self::different(src, call, mine))
            } else if call.seq < mine.seq {
                Some(format!(
                    "rank {src} sent a message (tag {tag}) of {call} after this rank moved \
                     on to {mine}: the ranks disagree on the collectives called"
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                let err = FabricError::Transport {
                    rank: self.rank,
                    reason,
                };
                self.set_fatal(&mut inner, err);
                return;
            }
        }
        let key = (src, tag, call.seq);
        let Inner { queues, spare, .. } = &mut *inner;
        queues
            .get_or_insert_with(key, || spare.pop().unwrap_or_default())
            .push_back((call, payload));
        self.holds.store(true, Ordering::Release);
        if let Some(w) = inner.waiters.remove(&key) {
            w.wake(inner.kept.as_ref());
            self.waits
                .store(!inner.waiters.is_empty(), Ordering::Release);
        }
    }

    /// Wakes the receives waiting for the next message from `src` with
    /// `tag` of `call` without handing them one: a transport copied that
    /// message straight into the buffer of the receive it was for, which
    /// completes; the others register again when polled.
    pub fn wake_waiters(&self, src: Rank, tag: Tag, call: CallId) {
        let mut inner = self.lock();
        if let Some(w) = inner.waiters.remove(&(src, tag, call.seq)) {
            w.wake(inner.kept.as_ref());
            self.waits
                .store(!inner.waiters.is_empty(), Ordering::Release);
        }
    }

    /// The error for a message of `theirs` from `src` while this rank is in `mine`.
    fn different(src: Rank, theirs: CallId, mine: CallId) -> String {
        format!(
            "rank {src} is in {theirs} while this rank is in {mine}: the ranks called different collectives"
        )
    }

    /// Notes progress from `peer` (part of a large message arrived), so
    /// receives waiting on it restart their timeout.
    pub fn touch(&self, peer: Rank) {
        let now = Instant::now();
        let mut inner = self.lock();
        for ((src, _, _), w) in inner.waiters.iter_mut() {
            if *src == peer {
                w.since = now;
            }
        }
    }

    /// Records that `peer` failed: every receive from it, waiting now or
    /// later, returns `err` (messages it sent before failing are still
    /// received first).
    pub fn fail_peer(&self, peer: Rank, err: FabricError) {
        let mut inner = self.lock();
        inner.failed_peers.entry(peer).or_insert(err);
        let keys: Vec<Key> = inner
            .waiters
            .keys()
            .filter(|(src, _, _)| *src == peer)
            .copied()
            .collect();
        for key in keys {
            if let Some(w) = inner.waiters.remove(&key) {
                w.wake(inner.kept.as_ref());
            }
        }
        self.waits
            .store(!inner.waiters.is_empty(), Ordering::Release);
    }

    /// Records an error that ends this rank: every receive returns it.
    pub fn fail_all(&self, err: FabricError) {
        let mut inner = self.lock();
        self.set_fatal(&mut inner, err);
    }

    fn set_fatal(&self, inner: &mut Inner, err: FabricError) {
        inner.fatal.get_or_insert(err);
        self.has_fatal.store(true, Ordering::Release);
        let Inner { waiters, kept, .. } = inner;
        for (_, w) in waiters.drain() {
            w.wake(kept.as_ref());
        }
        self.waits.store(false, Ordering::Release);
    }

    /// The error that ended this rank, if any.
    #[inline]
    pub fn fatal(&self) -> Option<FabricError> {
        if !self.has_fatal() {
            return None;
        }
        self.fatal_locked()
    }

    /// [`Mailbox::fatal`] once the flag says there is one (out of line:
    /// the callers on every send inline only the flag's load).
    #[cold]
    fn fatal_locked(&self) -> Option<FabricError> {
        self.lock().fatal.clone()
    }

    /// Whether an error ended this rank: [`Mailbox::fatal`] without the
    /// error (one atomic load, for a transport's polling loop).
    #[inline]
    pub fn has_fatal(&self) -> bool {
        self.has_fatal.load(Ordering::Acquire)
    }

    /// Whether a message waits in the mailbox for its receive (one atomic
    /// load).
    #[inline]
    pub fn holds_messages(&self) -> bool {
        self.holds.load(Ordering::Acquire)
    }

    /// Whether a receive waits in the mailbox for its message (one atomic
    /// load; a receive dropped while it waited counts until a message of
    /// its key arrives or the rank fails).
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.waits.load(Ordering::Acquire)
    }

    /// The failure recorded for `peer`, if any.
    pub fn peer_failure(&self, peer: Rank) -> Option<FabricError> {
        self.lock().failed_peers.get(&peer).cloned()
    }

    /// Fails the peers of receives that have waited longer than the
    /// timeout at `now`, naming what they waited for. Returns whether any
    /// receive was failed. For a transport without heartbeats; see
    /// [`Mailbox::expire_with`].
    pub fn expire(&self, now: Instant) -> bool {
        self.expire_with(now, || PeerSilence::Unknown)
    }

    /// [`Mailbox::expire`] for a transport with heartbeats: when a receive
    /// has waited past the timeout, `silence` says which peer (if any) has
    /// been silent, and that peer is named as the cause, failing the rank,
    /// whoever the receive waited for. If every peer was heard recently,
    /// the receive waits one silence threshold longer before its peer is
    /// reported as alive but silent (see [`crate::heartbeat`]).
    pub fn expire_with(&self, now: Instant, silence: impl FnOnce() -> PeerSilence) -> bool {
        let expired: Vec<(Key, Duration)> = {
            let inner = self.lock();
            let waited = |w: &Waiter| now.saturating_duration_since(w.since);
            // Nearly always none: say so without building a vector.
            if !inner.waiters.iter().any(|(_, w)| waited(w) > self.timeout) {
                return false;
            }
            inner
                .waiters
                .iter()
                .map(|(k, w)| (*k, waited(w)))
                .filter(|(_, waited)| *waited > self.timeout)
                .collect()
        };
        let Some(&((src, tag, seq), waited)) = expired.first() else {
            return false;
        };
        let secs = |d: Duration| d.as_secs_f64();
        match silence() {
            PeerSilence::Silent { peer, silent } => {
                let mut reason = stopped_responding(peer, silent);
                if peer != src {
                    reason.push_str(&format!(
                        "; this rank waited {:.1} s for rank {src}'s message with tag {tag} of call #{seq}, and rank {src} is alive",
                        secs(waited)
                    ));
                }
                self.fail_all(FabricError::Timeout {
                    rank: self.rank,
                    peer,
                    reason,
                });
                true
            }
            PeerSilence::AllHeard { threshold } => {
                let mut any = false;
                for ((src, tag, seq), waited) in expired {
                    if waited <= self.timeout + threshold {
                        continue;
                    }
                    any = true;
                    let err = FabricError::Timeout {
                        rank: self.rank,
                        peer: src,
                        reason: format!(
                            "no message with tag {tag} of call #{seq} within {:.1} s, though rank {src} is alive \
                             (heard from within {:.1} s): it waits for another rank, or the ranks disagree on what to send",
                            secs(waited),
                            secs(threshold)
                        ),
                    };
                    self.fail_peer(src, err);
                }
                any
            }
            PeerSilence::Unknown => {
                for ((src, tag, seq), _) in &expired {
                    let err = FabricError::Timeout {
                        rank: self.rank,
                        peer: *src,
                        reason: format!(
                            "no message with tag {tag} of call #{seq} within {:.1} s (rank {src} is dead or hung)",
                            secs(self.timeout)
                        ),
                    };
                    self.fail_peer(*src, err);
                }
                true
            }
        }
    }

    /// What this rank's receives wait for, one line each, for reports.
    pub fn waiting(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .waiters
            .keys()
            .map(|(src, tag, seq)| format!("rank {src}, tag {tag}, call #{seq}"))
            .collect()
    }

    /// Polls for the message a receive of `expect` from `src` with `tag`
    /// wants, registering `cx`'s waker if it has not arrived.
    pub fn poll_recv(
        &self,
        src: Rank,
        tag: Tag,
        expect: Shape,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Payload, FabricError>> {
        if src >= self.world_size {
            return Poll::Ready(Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: src,
                world_size: self.world_size,
            }));
        }
        let mut inner = self.lock();
        if let Some(e) = &inner.fatal {
            return Poll::Ready(Err(e.clone()));
        }
        let seq = inner.call.map_or(0, |c| c.seq);
        let key = (src, tag, seq);
        if let Some(queue) = inner.queues.get_mut(&key)
            && let Some((_, payload)) = queue.pop_front()
        {
            if queue.is_empty()
                && let Some(q) = inner.queues.remove(&key)
                && inner.spare.len() < SPARE_QUEUES
            {
                inner.spare.push(q);
            }
            self.holds
                .store(!inner.queues.is_empty(), Ordering::Release);
            if payload.shape() != expect {
                return Poll::Ready(Err(FabricError::ShapeMismatch {
                    rank: self.rank,
                    from: src,
                    tag,
                    expected: expect,
                    got: payload.shape(),
                }));
            }
            return Poll::Ready(Ok(payload));
        }
        if let Some(e) = inner.failed_peers.get(&src) {
            return Poll::Ready(Err(e.clone()));
        }
        let Inner { waiters, kept, .. } = &mut *inner;
        if let Some(waiter) = waiters.get_mut(&key) {
            if !waiter.wakes(cx.waker(), kept.as_ref()) {
                waiter.more.push(cx.waker().clone());
            }
        } else {
            if !kept.as_ref().is_some_and(|k| k.will_wake(cx.waker())) {
                // Another waker than the kept one (another executor, or the
                // first wait): the waiters that refer to the kept waker get
                // their own copy of it before it is replaced.
                let old = kept.replace(cx.waker().clone());
                for (_, w) in waiters.iter_mut() {
                    if w.first.is_none() {
                        w.first = old.clone();
                    }
                }
            }
            waiters.get_or_insert_with(key, || Waiter {
                first: None,
                more: Vec::new(),
                since: Instant::now(),
            });
            self.waits.store(true, Ordering::Release);
        }
        Poll::Pending
    }

    /// A future that receives the next message from `src` with `tag` of
    /// the current call.
    pub fn recv(&self, src: Rank, tag: Tag, expect: Shape) -> Recv<'_> {
        Recv {
            mailbox: self,
            src,
            tag,
            expect,
        }
    }
}

/// The future of [`Mailbox::recv`].
pub struct Recv<'a> {
    mailbox: &'a Mailbox,
    src: Rank,
    tag: Tag,
    expect: Shape,
}

impl Future for Recv<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.mailbox.poll_recv(this.src, this.tag, this.expect, cx)
    }
}

#[cfg(test)]
mod tests;
