//! The futures of [`SimFabric`] that wait in virtual time: a reserved
//! reduction on the rank's compute engine, the zero-cost synchronisation
//! point of `sync_all`, and a sleep.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::Time;

use super::SimFabric;

/// Waits for a reserved reduction ([`World::reserve_compute`](crate::world::World::reserve_compute)) to be
/// done and returns when it was: woken at the finish its ticket names,
/// which a reduction posted later at the same instant may move back.
pub(super) struct Computing<'a> {
    pub(super) fabric: &'a SimFabric,
    /// Its ticket, until it is done.
    pub(super) ticket: Option<u32>,
    /// The finish its timer is set for.
    pub(super) armed_for: Option<Time>,
}

impl Future for Computing<'_> {
    type Output = Time;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Time> {
        let ticket = self.ticket.expect("polled after it returned");
        let mut world = self.fabric.world.borrow_mut();
        let done = world.compute_done(ticket);
        if world.now >= done {
            world.release_compute(ticket);
            drop(world);
            self.ticket = None;
            return Poll::Ready(done);
        }
        if self.armed_for != Some(done) {
            world.schedule_timer(self.fabric.rank, done, cx.waker());
            drop(world);
            self.armed_for = Some(done);
        }
        Poll::Pending
    }
}

impl Drop for Computing<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket
            && let Ok(mut world) = self.fabric.world.try_borrow_mut()
        {
            world.release_compute(ticket);
        }
    }
}

/// Waits at the synchronisation point until every rank has arrived.
pub(super) struct SyncAll<'a> {
    pub(super) fabric: &'a SimFabric,
    pub(super) generation: Option<u64>,
}

impl Future for SyncAll<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut world = self.fabric.world.borrow_mut();
        let generation = match self.generation {
            Some(g) => g,
            None => {
                let g = world.arrive_at_sync(self.fabric.rank, cx.waker());
                drop(world);
                self.generation = Some(g);
                return self.poll(cx);
            }
        };
        if world.sync.generation > generation {
            Poll::Ready(())
        } else {
            if let Some(entry) = world
                .sync
                .waiting
                .iter_mut()
                .find(|(r, _)| *r == self.fabric.rank)
            {
                entry.1 = cx.waker().clone();
            }
            Poll::Pending
        }
    }
}

/// Waits until virtual time `until`.
pub(super) struct Sleep<'a> {
    pub(super) fabric: &'a SimFabric,
    pub(super) until: Time,
    pub(super) armed: bool,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut world = self.fabric.world.borrow_mut();
        if world.now >= self.until {
            return Poll::Ready(());
        }
        if !self.armed {
            world.schedule_timer(self.fabric.rank, self.until, cx.waker());
            drop(world);
            self.armed = true;
        }
        Poll::Pending
    }
}
