//! A pair's messages in the flow-level model: stored in slots, started
//! one after another, finished (a successor inheriting its predecessor's
//! rate, a departure that changes no other rate; see the parent module's
//! "Successors" and "Departures"), completed and delivered in order, and
//! the per-link counters as flows join and leave.

use algorithms::Time;
use topologies::LinkId;

use super::faults::Busy;
use super::{FlowEvent, FlowNetwork, NONE, Slot, net};
use crate::event::{EventQueue, MessageId};
use crate::network::{LinkSample, OutOfTime, Transfer};

impl FlowNetwork {
    /// Stores a message in a free slot, keeping the slot's version.
    pub(super) fn alloc(&mut self, transfer: &Transfer) -> u32 {
        let fresh = |version| Slot {
            message: transfer.message,
            bytes: transfer.bytes,
            route: transfer.route.clone(),
            path: transfer.path.clone(),
            pair: transfer.flow,
            next: NONE,
            active: false,
            remaining_bytes: transfer.bytes as f64,
            rate_bytes_per_s: 0.0,
            allocated: false,
            updated: Time::ZERO,
            version,
        };
        match self.free.pop() {
            Some(id) => {
                let slot = &mut self.slots[id as usize];
                *slot = fresh(slot.version);
                id
            }
            None => {
                self.slots.push(fresh(0));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 messages in flight")
            }
        }
    }

    /// Starts the pair's oldest message; messages that need no bandwidth
    /// complete at once and the next one starts.
    ///
    /// With `inherit`, the head is the successor of a flow that just
    /// ended on the same route at that rate (checked by the caller) and
    /// inherits it (see [Successors](super#successors)).
    pub(super) fn activate_head(
        &mut self,
        now: Time,
        pair: u64,
        queue: &mut EventQueue,
        mut delivered: Option<&mut Vec<MessageId>>,
        inherit: Option<f64>,
    ) -> Result<(), OutOfTime> {
        loop {
            let head = self.pairs[&pair].head;
            if head == NONE {
                return Ok(());
            }
            let slot = &mut self.slots[head as usize];
            if slot.bytes > 0 && !slot.route.is_empty() {
                slot.active = true;
                slot.allocated = false;
                slot.updated = now;
                let route = slot.route.clone();
                for &l in route.iter() {
                    self.links[l.index()].flows.push(head);
                    self.link_changed(now, l, true);
                }
                match inherit {
                    Some(rate) => self.inherited.push((head, rate)),
                    None => self.mark_dirty(now, &route, queue),
                }
                return Ok(());
            }
            self.complete(now, head, queue, delivered.as_deref_mut())?;
        }
    }

    /// The active flow `flow` has sent its last byte.
    pub(super) fn finish(
        &mut self,
        now: Time,
        flow: u32,
        queue: &mut EventQueue,
        mut delivered: Option<&mut Vec<MessageId>>,
    ) -> Result<(), OutOfTime> {
        let slot = &mut self.slots[flow as usize];
        slot.active = false;
        if let Some(t) = &mut self.timeline {
            for l in slot.route.iter() {
                t.add(l.index(), slot.updated, now, slot.remaining_bytes);
            }
        }
        slot.remaining_bytes = 0.0;
        let (bytes, route) = (slot.bytes, slot.route.clone());
        let rate = slot.rate_bytes_per_s;
        if rate > 0.0 {
            slot.rate_bytes_per_s = 0.0;
            let busy = Busy {
                links: &mut self.links,
                usage: &mut self.usage,
            };
            busy.count(now, &route, false);
        }
        for &l in route.iter() {
            let list = &mut self.links[l.index()].flows;
            let at = list
                .iter()
                .position(|&f| f == flow)
                .expect("an active flow is listed on its links");
            list.swap_remove(at);
            let usage = &mut self.usage[l.index()];
            usage.bytes = usage.bytes.saturating_add(bytes);
            usage.units += 1;
            self.link_changed(now, l, false);
        }
        let inherit = self.successor_inherits(flow, rate).then_some(rate);
        if inherit.is_some() {
            // Nothing to recompute, but the instant's recomputation (which
            // schedules the successor's finish) keeps its place.
            self.request_reallocation(now, queue);
        } else if self.departure_changes_nothing(flow, rate, &route) {
            // No rate depends on it; the recomputation keeps its place
            // all the same.
            self.departures_unmarked += 1;
            self.request_reallocation(now, queue);
        } else {
            self.mark_dirty(now, &route, queue);
        }
        let pair = self.slots[flow as usize].pair;
        self.complete(now, flow, queue, delivered.as_deref_mut())?;
        self.activate_head(now, pair, queue, delivered, inherit)
    }

    /// Whether the next message of `flow`'s pair that needs bandwidth
    /// (those before it need none and complete at once) takes over its
    /// links as they are: it crosses exactly the same route, and `flow`
    /// had a positive `rate` (see [Successors](super#successors)).
    fn successor_inherits(&self, flow: u32, rate: f64) -> bool {
        if !self.successors_inherit || rate <= 0.0 {
            return false;
        }
        let route = &self.slots[flow as usize].route;
        let mut next = self.slots[flow as usize].next;
        while next != NONE {
            let slot = &self.slots[next as usize];
            if slot.bytes > 0 && !slot.route.is_empty() {
                return slot.route[..] == route[..];
            }
            next = slot.next;
        }
        false
    }

    /// Whether the active flow `flow`, which had `rate` and crossed
    /// `route` and has just left its links' lists, leaves every other
    /// flow's max-min rate as it is (see [Departures](super#departures)):
    /// `rate` is positive and its max-min rate, and every flow still on
    /// its links has its max-min rate, below `rate`, none of them having
    /// changed since the latest recomputation.
    fn departure_changes_nothing(&self, flow: u32, rate: f64, route: &[LinkId]) -> bool {
        if !self.successors_inherit || rate <= 0.0 || !self.slots[flow as usize].allocated {
            return false;
        }
        route.iter().all(|l| {
            let link = &self.links[l.index()];
            !self.is_dirty[l.index()]
                && link.flows.iter().all(|&g| {
                    let other = &self.slots[g as usize];
                    other.allocated && other.rate_bytes_per_s < rate
                })
        })
    }

    /// Delivers the pair's head message `id` (its bytes are sent), frees
    /// its slot and unlinks it from its pair.
    fn complete(
        &mut self,
        now: Time,
        id: u32,
        queue: &mut EventQueue,
        delivered: Option<&mut Vec<MessageId>>,
    ) -> Result<(), OutOfTime> {
        let slot = &mut self.slots[id as usize];
        let path = slot.path.as_ref().unwrap_or(&slot.route);
        let latency_ps = if path.is_empty() {
            0
        } else {
            self.paths.idle_latency_ps(path, slot.bytes)
        };
        slot.path = None;
        let (message, next, pair_key) = (slot.message, slot.next, slot.pair);
        slot.route = self.no_route.clone();
        self.free.push(id);
        let pair = self
            .pairs
            .get_mut(&pair_key)
            .expect("a message's pair exists");
        pair.head = next;
        if next == NONE {
            pair.tail = NONE;
        }
        let own = now.checked_plus_ps(latency_ps).ok_or(OutOfTime)?;
        let previous = pair.last_delivery;
        let at = previous.map_or(own, |p| p.max(own));
        pair.last_delivery = Some(at);
        // Pushing directly is only safe when no earlier message of the
        // pair still waits for its own `Deliver` event at this time.
        match delivered {
            Some(out) if at == now && previous.is_none_or(|p| p < now) => out.push(message),
            _ => queue.schedule(at, net(FlowEvent::Deliver { message })),
        }
        Ok(())
    }

    /// Updates link `l`'s counters after one flow joined it (`joined`) or
    /// left it.
    fn link_changed(&mut self, now: Time, l: LinkId, joined: bool) {
        let i = l.index();
        let flows = self.links[i].flows.len() as u64;
        let usage = &mut self.usage[i];
        if joined {
            usage.max_queue = usage.max_queue.max(flows);
        }
        if self.sample_links {
            crate::network::record_sample(
                &mut self.samples,
                LinkSample {
                    time: now,
                    link: l,
                    queue: flows,
                },
            );
        }
    }
}
