//! Direct receives: a receive of shared memory that takes its message as
//! progress pulls it out of the peer's slots, without the
//! [`Mailbox`](crate::mailbox::Mailbox)'s queues, lock and waiters.
//!
//! A small call's cost is mostly bookkeeping, and the mailbox's is the
//! largest part: a receive that finds nothing registers a waiter (a lock,
//! a map insert, a clock read), the delivery queues the message and wakes
//! it (a lock, a map insert and remove), and the second poll takes it (a
//! lock, a map remove). A direct receive instead records what it waits for
//! in the rank's [`Direct`] (one at a time), pulls its peer once, and waits
//! for progress to hand it the message ([`ShmFabric::arrive`]); nothing is
//! locked or allocated.
//!
//! It is only a shortcut: whenever it cannot be sure to return exactly
//! what the mailbox would, the receive falls back to the mailbox
//! ([`Direct::Cancelled`]), which then decides as before. That is when the
//! mailbox already holds a message (an older one of the same key could be
//! among them) or a receive waits there (it may wait for the same key, and
//! must not wait behind a message held for a receive not polled yet), the
//! rank has failed, its message arrives but is not the
//! plain match (another call of the same sequence number, another shape:
//! the mailbox's errors), a peer probe ran (the mailbox knows failed
//! peers), or it has waited [`DIRECT_IDLE_ROUNDS`] idle rounds (the
//! mailbox's receive timeout and the heartbeat checks only see the
//! receives registered there). A receive dropped before it completed
//! hands a message it was given back to the mailbox, so nothing is lost
//! either; so does one that has not taken its message yet when another
//! receive begins (progress pulls nothing more until it is taken, which
//! the other must not wait for) or the next call begins (the mailbox
//! then judges it, as it would have). A rank that failed fails a direct
//! receive even after its message arrived, as the mailbox does.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use super::fabric::ShmFabric;
use crate::call::CallId;
use crate::mailbox::Recv;

/// Idle progress rounds a direct receive waits before it moves to the
/// mailbox (whose receive timeout then counts); microseconds when
/// spinning, far below any timeout.
pub(super) const DIRECT_IDLE_ROUNDS: u32 = 1024;

/// What a direct receive waits for.
pub(super) struct Wanted {
    /// The receive's number (which receive the state belongs to).
    id: u64,
    src: Rank,
    tag: Tag,
    call: CallId,
    expect: Shape,
    /// Idle progress rounds since it began waiting.
    idle: u32,
}

/// The rank's direct receive, if one is under way.
#[derive(Default)]
pub(super) enum Direct {
    /// None.
    #[default]
    Idle,
    /// Receive `Wanted::id` waits for its message.
    Waiting(Wanted),
    /// The message of the receive `.0` waited for has arrived.
    Got(Wanted, Payload),
    /// Receive `.0` must ask the mailbox instead.
    Cancelled(u64),
}

/// The rank's direct-receive state and the waker of its receive.
#[derive(Default)]
pub(super) struct DirectSlot {
    pub(super) state: Direct,
    /// The receive's waker, kept between receives (the executor's, the
    /// same call after call: no clone per receive).
    waker: Option<Waker>,
    /// The last receive number handed out.
    next_id: u64,
}

impl DirectSlot {
    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake_by_ref();
        }
    }
}

impl ShmFabric {
    /// Hands a message that progress pulled out of `src`'s slots or ring
    /// to the direct receive waiting for it, else to the mailbox (a direct
    /// receive of the same key then moves to the mailbox).
    pub(super) fn arrive(&self, src: Rank, tag: Tag, call: CallId, payload: Payload) {
        let mut d = self.direct.borrow_mut();
        if let Direct::Waiting(w) = &d.state
            && w.src == src
            && w.tag == tag
            && w.call.seq == call.seq
        {
            let id = w.id;
            let plain = w.call == call
                && w.expect == payload.shape()
                && !self.mailbox.holds_messages()
                && !self.mailbox.has_waiters()
                && !self.mailbox.has_fatal();
            d.wake();
            if plain {
                if let Direct::Waiting(w) = std::mem::take(&mut d.state) {
                    d.state = Direct::Got(w, payload);
                }
                return;
            }
            d.state = Direct::Cancelled(id);
        }
        drop(d);
        self.mailbox_now().deliver(src, tag, call, payload);
    }

    /// Whether a direct receive was handed its message and has not taken
    /// it yet.
    #[inline]
    pub(super) fn direct_got(&self) -> bool {
        matches!(self.direct.borrow().state, Direct::Got(..))
    }

    /// Hands a message that a direct receive was given but has not taken
    /// yet back to the mailbox, where that receive (moved there) finds it
    /// first of its key. Called when another receive begins (progress
    /// pulls nothing while a direct receive holds its message, so the
    /// other receive would wait for a poll that may never come) and when
    /// the next call begins (the mailbox then reports the message as never
    /// received).
    pub(super) fn hand_back(&self) {
        let mut d = self.direct.borrow_mut();
        if !matches!(d.state, Direct::Got(..)) {
            return;
        }
        if let Direct::Got(w, payload) = std::mem::take(&mut d.state) {
            d.state = Direct::Cancelled(w.id);
            d.wake();
            drop(d);
            self.mailbox_now().deliver(w.src, w.tag, w.call, payload);
        }
    }

    /// Moves a waiting direct receive to the mailbox (a probe ran, the rank
    /// failed, or it waited long enough); with `idle`, only after
    /// [`DIRECT_IDLE_ROUNDS`] idle rounds.
    pub(super) fn cancel_direct(&self, idle: bool) {
        let mut d = self.direct.borrow_mut();
        if let Direct::Waiting(w) = &mut d.state {
            if idle {
                w.idle += 1;
                if w.idle < DIRECT_IDLE_ROUNDS {
                    return;
                }
            }
            d.state = Direct::Cancelled(w.id);
            d.wake();
        }
    }

    /// Starts a direct receive of `(src, tag)` of the current call, or
    /// `None` if it must go through the mailbox.
    fn begin_direct(&self, src: Rank, tag: Tag, expect: Shape, cx: &Context<'_>) -> Option<u64> {
        let mut d = self.direct.borrow_mut();
        if src == self.rank
            || src >= self.world
            || self.mailbox.holds_messages()
            || self.mailbox.has_waiters()
            || self.mailbox.has_fatal()
            // Another receive's (two receives joined).
            || !matches!(d.state, Direct::Idle)
        {
            // The mailbox's receive, where a message another direct
            // receive was given but has not taken goes too.
            drop(d);
            self.hand_back();
            return None;
        }
        d.next_id += 1;
        let id = d.next_id;
        d.state = Direct::Waiting(Wanted {
            id,
            src,
            tag,
            call: self.call.get(),
            expect,
            idle: 0,
        });
        if !d.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            d.waker = Some(cx.waker().clone());
        }
        Some(id)
    }

    /// Polls direct receive `id`: `Some` when it is done (its message),
    /// `None` when it must go to the mailbox (which also returns a failure
    /// of this rank, even one after its message arrived). With `pull`, pulls its peer first. A receive still waiting
    /// is woken through `cx`'s waker from now on (a future may be polled
    /// from another context than the one it began in).
    fn poll_direct(
        &self,
        id: u64,
        src: Rank,
        pull: bool,
        cx: &Context<'_>,
    ) -> Option<Poll<Payload>> {
        if pull {
            let mut inc = self.inc.borrow_mut();
            match self.pull(src, &mut inc[src]) {
                Ok(true) => self.health.borrow_mut().busy(),
                Ok(false) => {}
                Err(e) => {
                    drop(inc);
                    self.fail_with(e);
                }
            }
        }
        let mut d = self.direct.borrow_mut();
        match std::mem::take(&mut d.state) {
            Direct::Got(w, payload) if w.id == id => {
                // A failed rank's receives all fail, as the mailbox's.
                (!self.mailbox.has_fatal()).then_some(Poll::Ready(payload))
            }
            Direct::Waiting(w) if w.id == id => {
                if self.mailbox.has_fatal() {
                    return None;
                }
                d.state = Direct::Waiting(w);
                if !d.waker.as_ref().is_some_and(|k| k.will_wake(cx.waker())) {
                    d.waker = Some(cx.waker().clone());
                }
                Some(Poll::Pending)
            }
            Direct::Cancelled(mine) if mine == id => None,
            other => {
                // Not this receive's (cannot happen: a receive's state is
                // only replaced by itself): the mailbox decides.
                d.state = other;
                None
            }
        }
    }

    /// Ends direct receive `id` without a result (its future dropped):
    /// a message it was given goes back to the mailbox.
    fn drop_direct(&self, id: u64) {
        let mut d = self.direct.borrow_mut();
        let mine = match &d.state {
            Direct::Waiting(w) | Direct::Got(w, _) => w.id == id,
            Direct::Cancelled(m) => *m == id,
            Direct::Idle => false,
        };
        if !mine {
            return;
        }
        if let Direct::Got(w, payload) = std::mem::take(&mut d.state) {
            drop(d);
            self.mailbox_now().deliver(w.src, w.tag, w.call, payload);
        }
    }
}

/// A receive of [`ShmFabric`]: direct while it can, else the mailbox's.
pub(super) enum DirectRecv<'a> {
    /// Not polled yet (`id` 0), or direct receive `id` under way.
    Direct {
        fabric: &'a ShmFabric,
        id: u64,
        src: Rank,
        tag: Tag,
        expect: Shape,
    },
    /// The mailbox's receive.
    Mailbox(Recv<'a>),
    /// Completed.
    Done,
}

impl<'a> DirectRecv<'a> {
    /// A receive of the next message from `src` with `tag`, of `expect`.
    pub(super) fn new(fabric: &'a ShmFabric, src: Rank, tag: Tag, expect: Shape) -> Self {
        DirectRecv::Direct {
            fabric,
            id: 0,
            src,
            tag,
            expect,
        }
    }
}

impl Future for DirectRecv<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let DirectRecv::Direct {
            fabric,
            id,
            src,
            tag,
            expect,
        } = this
        {
            let (fabric, src, tag, expect) = (*fabric, *src, *tag, *expect);
            let first = *id == 0;
            if first {
                *id = fabric.begin_direct(src, tag, expect, cx).unwrap_or(0);
            }
            let polled = match *id {
                0 => None,
                id => fabric.poll_direct(id, src, first, cx),
            };
            match polled {
                Some(Poll::Ready(p)) => {
                    *this = DirectRecv::Done;
                    return Poll::Ready(Ok(p));
                }
                Some(Poll::Pending) => return Poll::Pending,
                None => *this = DirectRecv::Mailbox(fabric.mailbox_now().recv(src, tag, expect)),
            }
        }
        match this {
            DirectRecv::Mailbox(recv) => {
                let out = Pin::new(recv).poll(cx);
                if out.is_ready() {
                    *this = DirectRecv::Done;
                }
                out
            }
            _ => panic!("a receive polled after it completed"),
        }
    }
}

impl Drop for DirectRecv<'_> {
    fn drop(&mut self) {
        if let DirectRecv::Direct { fabric, id, .. } = self
            && *id != 0
        {
            fabric.drop_direct(*id);
        }
    }
}
