//! What ranks wait for in one run's world: pending receives (signalled
//! and woken when a message may match), compute tickets and timers, and
//! the zero-cost synchronisation point that starts a call.

use std::task::Waker;

use algorithms::{Rank, Shape, Tag, Time};

use super::{Pending, Wait, World};
use crate::event::EventKind;

impl World {
    /// Records a waiting receive, or refreshes the waker of receive `id`
    /// (which has just looked in the mailbox: its signal is cleared), and
    /// returns its id.
    pub fn register_wait(
        &mut self,
        rank: Rank,
        id: Option<u32>,
        from: Rank,
        tag: Tag,
        expect: Shape,
        waker: &Waker,
    ) -> u32 {
        if let Some(id) = id
            && let Some(w) = self.waits.get_mut(id)
        {
            w.signalled = false;
            if !w.waker.will_wake(waker) {
                w.waker = waker.clone();
            }
            return id;
        }
        let id = self.waits.insert(Wait {
            from,
            tag,
            expect,
            waker: waker.clone(),
            signalled: false,
        });
        let slot = self.config.slot_of(rank);
        self.pending[slot].push(Pending { from, tag, id });
        id
    }

    /// Whether receive `id` has nothing new to look at: no message that
    /// may match arrived, nor did its pair's transport fail, since it last
    /// looked. Its waker is refreshed then.
    pub fn wait_unchanged(&mut self, id: u32, waker: &Waker) -> bool {
        match self.waits.get_mut(id) {
            Some(w) if !w.signalled => {
                if !w.waker.will_wake(waker) {
                    w.waker = waker.clone();
                }
                true
            }
            _ => false,
        }
    }

    /// Forgets a waiting receive (it completed or was dropped).
    pub fn remove_wait(&mut self, rank: Rank, id: u32) {
        if self.waits.remove(id).is_some() {
            let slot = self.config.slot_of(rank);
            let list = &mut self.pending[slot];
            if let Some(at) = list.iter().position(|p| p.id == id) {
                list.remove(at);
            }
        }
    }

    /// The pending receives of the rank at `slot`, in the order they
    /// were posted.
    pub fn waits_of(&self, slot: usize) -> impl Iterator<Item = &Wait> {
        self.pending[slot]
            .iter()
            .filter_map(|p| self.waits.get(p.id))
    }

    /// Signals and wakes the pending receives of the rank at `slot` from
    /// `from` (with `tag`, or any tag), in the order they were posted.
    pub(super) fn signal_waits(&mut self, slot: usize, from: Rank, tag: Option<Tag>) {
        for p in &self.pending[slot] {
            if p.from == from && tag.is_none_or(|t| p.tag == t) {
                let w = self
                    .waits
                    .get_mut(p.id)
                    .expect("a pending receive has its wait");
                w.signalled = true;
                w.waker.wake_by_ref();
            }
        }
    }

    /// Reserves the rank's compute engine for `work_ps` (more than 0),
    /// posted now by NCCL channel `channel` if the work names one, and
    /// returns its ticket ([`Self::compute_done`] says when it is done), or
    /// `None` (marking the run out of time) if that is past the end of
    /// virtual time. Work on one rank runs one piece at a time, in the
    /// order it was posted, but work posted at the same instant in
    /// channel order (see the `compute` module).
    pub fn reserve_compute(
        &mut self,
        rank: Rank,
        work_ps: u64,
        channel: Option<u16>,
    ) -> Option<u32> {
        let slot = self.config.slot_of(rank);
        let ticket = self.compute.reserve(slot, self.now, work_ps, channel);
        if ticket.is_none() {
            self.out_of_time = true;
        }
        ticket
    }

    /// When the work of compute ticket `ticket` is done, as known now (a
    /// later reduction posted at the same instant by a lower channel moves
    /// it back).
    pub fn compute_done(&self, ticket: u32) -> Time {
        self.compute.done(ticket)
    }

    /// The future of compute ticket `ticket` is done with it (finished or
    /// dropped).
    pub fn release_compute(&mut self, ticket: u32) {
        self.compute.release(ticket);
    }

    /// Schedules a wake-up of `waker` at `at`.
    pub fn schedule_timer(&mut self, rank: Rank, at: Time, waker: &Waker) {
        let timer = self.timers.insert(waker.clone());
        self.queue
            .schedule(at, EventKind::ComputeDone { rank, timer });
    }

    /// Rank `rank` arrives at the synchronisation point: returns the
    /// generation it waits for the end of, releasing everyone if it is the
    /// last to arrive (then the returned generation is already over).
    pub fn arrive_at_sync(&mut self, rank: Rank, waker: &Waker) -> u64 {
        let generation = self.sync.generation;
        self.sync.waiting.push((rank, waker.clone()));
        if self.sync.waiting.len() == self.config.simulated_ranks() {
            self.sync.generation += 1;
            // A call starts now: arm its watchdog.
            let now = self.now;
            self.watchdog = self
                .config
                .call_timeout_ps
                .and_then(|t| now.checked_plus_ps(t))
                .map(|deadline| (now, deadline));
            for (_, w) in self.sync.waiting.drain(..) {
                w.wake();
            }
        }
        generation
    }
}
