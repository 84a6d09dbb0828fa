//! `Outbox`: sends that never hold up a rank's receives.
//!
//! A rank that awaits its sends before its next receive can deadlock
//! under rendezvous buffering (a send completes only once the peer has
//! posted the matching receive) even when the same program is
//! deadlock-free with eager sends: two ranks each wait for the other to
//! take a send before posting the receive that would take it. An
//! algorithm that queues its sends in an `Outbox` instead keeps them in
//! flight while it receives and computes, and waits for them only where
//! it chooses (at the end of the call).
//!
//! Sends are grouped in lanes, one per destination and tag, each sending
//! its messages one after another, so same-pair same-tag messages keep
//! their order; different lanes progress independently. A send waits
//! only for the earlier sends of its lane, which its receiver must take
//! first anyway, so a rank blocks only on its own receives: a program that
//! cannot deadlock with unbounded eager sends cannot deadlock under
//! rendezvous or bounded buffering either.
//!
//! Sends start in the order they were queued, each as soon as its lane is
//! free: on a fabric whose sends complete at once (the simulator) every
//! send starts where the rank first waits after queueing it, in queue
//! order, exactly as if the rank had sent them one after another there.
//!
//! # Lanes told to the fabric
//! The outbox tells its fabric ([`Fabric::branching`]) when it opens and
//! closes, which lane it polls or starts a send on
//! ([`Branching::LaneEnter`]), when the rank's own flow (the *main
//! flow*, which queues the sends) waits for the lanes (a flush pending,
//! [`Branching::LanesAwaited`]), and when it observes them: a flush that
//! found every send complete, or a send's failure handed to the main flow
//! ([`Branching::LanesSeen`]). Nothing else of a lane reaches the main
//! flow: a successful completion only lets the lane start its next queued
//! send, and the main flow never waits for one but in a flush. The model
//! checker uses this to treat each lane as a unit of its search, so a
//! lane's send completions commute with the main flow's receives (see the
//! checker's `world::lanes`). Fabrics that do not listen (the default) are
//! told only of the opening. Contract: the `start` function only starts
//! the fabric's send (it shares no state with the flow, such as a log of
//! which sends completed), which the checker cannot see.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use futures_util::future::{Fuse, FusedFuture, FutureExt};

use crate::branches::Branching;
use crate::fabric::{Fabric, FabricError, Rank, Tag};
use crate::payload::Payload;

/// One destination and tag: at most one send in flight.
struct Lane<S> {
    to: Rank,
    tag: Tag,
    sending: Pin<Box<Fuse<S>>>,
}

/// Queued and in-flight sends of one rank; `S` is the fabric's send
/// future (made by the `start` function handed to each method).
pub struct Outbox<'f, F: Fabric + ?Sized, S> {
    /// The fabric told of the lanes, if it listens.
    fabric: Option<&'f F>,
    lanes: Vec<Lane<S>>,
    queued: VecDeque<(Rank, Tag, Payload)>,
    /// Whether the fabric was last told that the main flow waits for the
    /// lanes (a flush pending).
    awaited: bool,
}

impl<'f, F: Fabric + ?Sized, S: Future<Output = Result<(), FabricError>>> Outbox<'f, F, S> {
    /// An empty outbox of a rank on `fabric`.
    pub fn new(fabric: &'f F) -> Self {
        let listens = fabric.branching(Branching::LanesOpen).is_some();
        Outbox {
            fabric: listens.then_some(fabric),
            lanes: Vec::new(),
            queued: VecDeque::new(),
            awaited: false,
        }
    }

    /// Tells a listening fabric of `event`.
    fn tell(&self, event: Branching) {
        if let Some(fabric) = self.fabric {
            fabric.branching(event);
        }
    }

    /// Tells a listening fabric whether the main flow now waits for the
    /// lanes, if that changed.
    fn awaiting(&mut self, waiting: bool) {
        if self.awaited != waiting {
            self.awaited = waiting;
            self.tell(Branching::LanesAwaited { waiting });
        }
    }

    /// Queues a send; it starts when the rank next drives the outbox.
    pub fn push(&mut self, to: Rank, tag: Tag, payload: Payload) {
        self.queued.push_back((to, tag, payload));
    }

    /// Drives every send: starts queued ones whose lane is free, in queue
    /// order, and polls those in flight, each inside its lane (told to the
    /// fabric). Ready once nothing is left (or on the first failed send).
    fn poll_sends(
        &mut self,
        cx: &mut Context<'_>,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Poll<Result<(), FabricError>> {
        loop {
            for i in 0..self.lanes.len() {
                if self.lanes[i].sending.is_terminated() {
                    continue;
                }
                self.tell(Branching::LaneEnter { lane: i });
                let polled = self.lanes[i].sending.as_mut().poll(cx);
                self.tell(Branching::LaneLeave);
                if let Poll::Ready(result) = polled {
                    result?;
                }
            }
            let mut started = false;
            let mut kept = VecDeque::with_capacity(0);
            while let Some((to, tag, payload)) = self.queued.pop_front() {
                let lane = self.lane(to, tag);
                if self.lanes[lane].sending.is_terminated() {
                    self.tell(Branching::LaneEnter { lane });
                    let sending = &mut self.lanes[lane].sending;
                    sending.set(start(to, tag, payload).fuse());
                    let polled = sending.as_mut().poll(cx);
                    self.tell(Branching::LaneLeave);
                    if let Poll::Ready(result) = polled {
                        result?;
                    }
                    started = true;
                } else {
                    kept.push_back((to, tag, payload));
                }
            }
            self.queued = kept;
            if !started {
                break;
            }
        }
        if self.queued.is_empty() && self.lanes.iter().all(|l| l.sending.is_terminated()) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    /// The index of the lane of `to` and `tag`, made if new.
    fn lane(&mut self, to: Rank, tag: Tag) -> usize {
        if let Some(i) = self.lanes.iter().position(|l| l.to == to && l.tag == tag) {
            return i;
        }
        self.lanes.push(Lane {
            to,
            tag,
            sending: Box::pin(Fuse::terminated()),
        });
        self.lanes.len() - 1
    }

    /// Awaits `other` (a receive) while driving the sends, which may still
    /// be in flight when it returns; a failed send's error comes first.
    pub async fn alongside<T>(
        &mut self,
        other: impl Future<Output = T>,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Result<T, FabricError> {
        let mut other = pin!(other);
        poll_fn(|cx| {
            self.awaiting(false);
            if let Poll::Ready(Err(e)) = self.poll_sends(cx, start) {
                self.tell(Branching::LanesSeen { all_done: false });
                return Poll::Ready(Err(e));
            }
            other.as_mut().poll(cx).map(Ok)
        })
        .await
    }

    /// Awaits every queued and in-flight send.
    pub async fn flush(
        &mut self,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Result<(), FabricError> {
        poll_fn(|cx| {
            let polled = self.poll_sends(cx, start);
            match &polled {
                Poll::Ready(result) => {
                    self.awaiting(false);
                    let all_done = result.is_ok();
                    self.tell(Branching::LanesSeen { all_done });
                }
                Poll::Pending => self.awaiting(true),
            }
            polled
        })
        .await
    }
}

impl<F: Fabric + ?Sized, S> Drop for Outbox<'_, F, S> {
    fn drop(&mut self) {
        if let Some(fabric) = self.fabric {
            fabric.branching(Branching::LanesClose);
        }
    }
}
