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

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use futures_util::future::{Fuse, FusedFuture, FutureExt};

use crate::fabric::{FabricError, Rank, Tag};
use crate::payload::Payload;

/// One destination and tag: at most one send in flight.
struct Lane<S> {
    to: Rank,
    tag: Tag,
    sending: Pin<Box<Fuse<S>>>,
}

/// Queued and in-flight sends of one rank; `S` is the fabric's send
/// future (made by the `start` function handed to each method).
pub(crate) struct Outbox<S> {
    lanes: Vec<Lane<S>>,
    queued: VecDeque<(Rank, Tag, Payload)>,
}

impl<S: Future<Output = Result<(), FabricError>>> Outbox<S> {
    /// An empty outbox.
    pub(crate) fn new() -> Self {
        Outbox {
            lanes: Vec::new(),
            queued: VecDeque::new(),
        }
    }

    /// Queues a send; it starts when the rank next drives the outbox.
    pub(crate) fn push(&mut self, to: Rank, tag: Tag, payload: Payload) {
        self.queued.push_back((to, tag, payload));
    }

    /// Drives every send: starts queued ones whose lane is free, in queue
    /// order, and polls those in flight. Ready once nothing is left (or on
    /// the first failed send).
    fn poll_sends(
        &mut self,
        cx: &mut Context<'_>,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Poll<Result<(), FabricError>> {
        loop {
            for lane in &mut self.lanes {
                if !lane.sending.is_terminated()
                    && let Poll::Ready(result) = lane.sending.as_mut().poll(cx)
                {
                    result?;
                }
            }
            let mut started = false;
            let mut kept = VecDeque::with_capacity(0);
            while let Some((to, tag, payload)) = self.queued.pop_front() {
                let lane = self.lane(to, tag);
                if self.lanes[lane].sending.is_terminated() {
                    let sending = &mut self.lanes[lane].sending;
                    sending.set(start(to, tag, payload).fuse());
                    if let Poll::Ready(result) = sending.as_mut().poll(cx) {
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
    pub(crate) async fn alongside<T>(
        &mut self,
        other: impl Future<Output = T>,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Result<T, FabricError> {
        let mut other = pin!(other);
        poll_fn(|cx| {
            if let Poll::Ready(Err(e)) = self.poll_sends(cx, start) {
                return Poll::Ready(Err(e));
            }
            other.as_mut().poll(cx).map(Ok)
        })
        .await
    }

    /// Awaits every queued and in-flight send.
    pub(crate) async fn flush(
        &mut self,
        start: &impl Fn(Rank, Tag, Payload) -> S,
    ) -> Result<(), FabricError> {
        poll_fn(|cx| self.poll_sends(cx, start)).await
    }
}
