//! Rate recomputation of the flow-level model: links marked dirty, one
//! batched `Reallocate` per instant, max-min rates for the flows the dirty
//! links reach, and the `Finish` events of the flows whose rate changed
//! (see the parent module's "Model" and "Successors").

use algorithms::Time;
use topologies::LinkId;

use super::faults::Busy;
use super::{FlowEvent, FlowNetwork, net};
use crate::event::EventQueue;
use crate::network::OutOfTime;

impl FlowNetwork {
    /// Records that the flows on `route` changed; one recomputation per
    /// instant handles them all.
    pub(super) fn mark_dirty(&mut self, now: Time, route: &[LinkId], queue: &mut EventQueue) {
        for l in route {
            self.is_dirty[l.index()] = true;
            self.dirty.push(l.index() as u32);
        }
        self.request_reallocation(now, queue);
    }

    /// Schedules the one recomputation of this instant, if not yet done.
    pub(super) fn request_reallocation(&mut self, now: Time, queue: &mut EventQueue) {
        if !self.reallocate_pending {
            self.reallocate_pending = true;
            queue.schedule(now, net(FlowEvent::Reallocate));
        }
    }

    /// Recomputes the rates of the flows connected to the dirty links and
    /// reschedules those whose rate changed.
    pub(super) fn reallocate(
        &mut self,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let mut timeline = self.timeline.take();
        self.reallocate_pending = false;
        self.reallocations += 1;
        let slots = &self.slots;
        if self.dirty.is_empty() {
            self.rates.clear();
        } else {
            self.allocator.allocate(
                &self.dirty,
                &self.links,
                |f| &slots[f as usize].route[..],
                &mut self.rates,
            );
        }
        for &l in &self.dirty {
            self.is_dirty[l as usize] = false;
        }
        self.dirty.clear();
        // Successors the recomputation did not reach keep their
        // predecessor's rate, which their component still has.
        let mut inherited = std::mem::take(&mut self.inherited);
        if !self.rates.is_empty() {
            inherited.retain(|&(f, _)| !self.allocator.reached(f));
        }
        self.rates.append(&mut inherited);
        self.inherited = inherited;
        for &(flow, rate) in &self.rates {
            let slot = &mut self.slots[flow as usize];
            slot.allocated = true;
            if rate == slot.rate_bytes_per_s {
                continue;
            }
            if (rate > 0.0) != (slot.rate_bytes_per_s > 0.0) {
                let busy = Busy {
                    links: &mut self.links,
                    usage: &mut self.usage,
                };
                busy.count(now, &slot.route, rate > 0.0);
            }
            let elapsed_ps = now.0 - slot.updated.0;
            if elapsed_ps > 0 {
                let sent = slot.rate_bytes_per_s * elapsed_ps as f64 / 1e12;
                let sent = sent.min(slot.remaining_bytes);
                slot.remaining_bytes -= sent;
                if let Some(t) = &mut timeline {
                    for l in slot.route.iter() {
                        t.add(l.index(), slot.updated, now, sent);
                    }
                }
            }
            slot.updated = now;
            slot.rate_bytes_per_s = rate;
            slot.version = slot.version.wrapping_add(1);
            if rate <= 0.0 && slot.remaining_bytes > 0.0 {
                // Stuck behind a down link: no finish in sight.
                queue.cancel_keyed(flow);
            } else {
                let at = now
                    .checked_plus_ps(finish_in_ps(slot.remaining_bytes, rate))
                    .ok_or(OutOfTime)?;
                let version = slot.version;
                queue.schedule_keyed(flow, at, net(FlowEvent::Finish { flow, version }));
            }
        }
        self.timeline = timeline;
        Ok(())
    }
}

/// Time to send `remaining` bytes at `rate` bytes per second, rounded up.
/// Whole byte counts go through [`topologies::duration_ps`], so that an
/// idle flow takes exactly as long as the other models say.
fn finish_in_ps(remaining_bytes: f64, rate_bytes_per_s: f64) -> u64 {
    if remaining_bytes <= 0.0 {
        0
    } else if remaining_bytes.fract() == 0.0 && remaining_bytes < u64::MAX as f64 {
        topologies::duration_ps(remaining_bytes as u64, rate_bytes_per_s)
    } else {
        (remaining_bytes * 1e12 / rate_bytes_per_s)
            .ceil()
            .min(u64::MAX as f64) as u64
    }
}
