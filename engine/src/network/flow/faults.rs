//! Scheduled link changes (faults) of the flow-level model: the code
//! behind [`FlowNetwork::schedule_changes`], whose semantics the parent
//! module's "Link faults" section describes, and the busy-time
//! bookkeeping they make depend on rates.

use algorithms::Time;
use topologies::LinkId;

use super::{FlowEvent, FlowNetwork, LinkState, net};
use crate::event::EventQueue;
use crate::network::{LinkChange, LinkUsage, OutOfTime};

impl FlowNetwork {
    /// Schedules `changes` (see
    /// [Link faults](crate::network::flow#link-faults)): one `Change`
    /// event each at its time, which must not be before the current time
    /// of the run. Can be called several times; changes at equal times
    /// apply in the order they were scheduled.
    ///
    /// Never fails today (every `Time` can be scheduled); the `Result`
    /// leaves room for checks of the times.
    pub fn schedule_changes(
        &mut self,
        changes: &[LinkChange],
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        for &change in changes {
            let index = u32::try_from(self.changes.len()).expect("fewer than 2^32 link changes");
            self.changes.push(change);
            queue.schedule(change.time, net(FlowEvent::Change { index }));
        }
        Ok(())
    }

    /// Applies scheduled change `index`: sets the link's capacity and, if
    /// flows cross it, has them recomputed at `now`.
    pub(super) fn change(&mut self, now: Time, index: u32, queue: &mut EventQueue) {
        let LinkChange {
            link,
            bandwidth_factor,
            ..
        } = self.changes[index as usize];
        let factor = if bandwidth_factor.is_finite() && bandwidth_factor >= 0.0 {
            bandwidth_factor
        } else {
            0.0
        };
        let Some(state) = self.links.get_mut(link.index()) else {
            return; // Not a link of this topology: nothing crosses it.
        };
        state.capacity_bytes_per_s = self.nominal[link.index()] * factor;
        if !state.flows.is_empty() {
            self.mark_dirty(now, &[link], queue);
        }
    }
}

/// The busy-time bookkeeping, borrowed apart from the flow table.
pub(super) struct Busy<'a> {
    pub(super) links: &'a mut [LinkState],
    pub(super) usage: &'a mut [LinkUsage],
}

impl Busy<'_> {
    /// A flow over `route` starts (`up`) or stops sending at a positive
    /// rate at `now`: links becoming busy remember when, links becoming
    /// idle add the busy time.
    pub(super) fn count(self, now: Time, route: &[LinkId], up: bool) {
        for l in route {
            let i = l.index();
            let link = &mut self.links[i];
            if up {
                link.sending += 1;
                if link.sending == 1 {
                    link.busy_since = now;
                }
            } else {
                link.sending -= 1;
                if link.sending == 0 {
                    self.usage[i].busy_ps += now.0 - link.busy_since.0;
                }
            }
        }
    }
}
