//! Scheduled link changes (faults) of the packet model: see the
//! module docs of [`super`], *Link changes*.

use algorithms::Time;

use super::{PacketEvent, PacketNetwork};
use crate::event::EventQueue;
use crate::network::{LinkChange, OutOfTime};

impl PacketNetwork {
    /// Schedules `changes` of link bandwidth (see the module docs): each
    /// one at time 0 applies at once, every other one becomes an event.
    /// Every `bandwidth_factor` must be finite and at least 0 (the caller
    /// validates them; a NaN is taken as 0) and every link one of this
    /// topology's (it panics otherwise, as for a route's links). May be
    /// called more than once.
    pub fn schedule_changes(
        &mut self,
        changes: &[LinkChange],
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        for change in changes {
            assert!(
                change.link.index() < self.ports.len(),
                "a link change names a link of the model's topology"
            );
            let index = u32::try_from(self.changes.len()).expect("fewer than 2^32 link changes");
            self.changes.push(*change);
            if change.time == Time(0) {
                self.apply_change(index, Time(0), queue)?;
            } else {
                self.schedule(change.time, PacketEvent::Change { index }, queue)?;
            }
        }
        Ok(())
    }

    /// Applies link change `index` at `now`: sets the port's rate and
    /// loss; taking it down withdraws it from any wait for credit, bringing it back up
    /// restarts it.
    pub(super) fn apply_change(
        &mut self,
        index: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let change = self.changes[index as usize];
        let link = change.link.index();
        let seed = self.loss_seed;
        self.ports[link]
            .loss
            .set(change.loss_rate, change.corruption_rate, seed, link);
        self.hot[link].may_lose = self.ports[link].loss.may_lose();
        let was_down = self.ports[link].down;
        self.ports[link].set_bandwidth_factor(change.bandwidth_factor);
        match (was_down, self.ports[link].down) {
            (false, true) => self.withdraw(link, now, queue),
            (true, false) => self.try_start(link, now, queue),
            _ => Ok(()),
        }
    }

    /// Port `link` has gone down: if it was waiting for credit, it leaves
    /// the waiters of the next link, whose room may now go to the others.
    pub(super) fn withdraw(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let Some(source) = self.ports[link].blocked.take() else {
            return Ok(());
        };
        let (_, next) = self.candidate(link, source);
        let next = next.expect("a blocked port waits for its packet's next link");
        let waiters = &mut self.ports[next].waiters;
        let at = waiters
            .iter()
            .position(|&w| w as usize == link)
            .expect("a blocked port is among its next link's waiters");
        waiters.remove(at);
        self.grant(next, now, queue)
    }
}
