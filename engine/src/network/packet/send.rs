//! Serving an egress port (see the module docs of [`super`], *Ports*,
//! *Injection* and *Credit*): choosing its next packet, waiting for and
//! granting credit in the next link's buffer, putting the packet on the
//! wire, and the buffer accounting behind `max_queue` and the samples.

use algorithms::Time;
use topologies::LinkId;

use super::port::{Control, Source};
use super::{NONE, PacketEvent, PacketNetwork, link_index};
use crate::event::EventQueue;
use crate::network::{LinkSample, OutOfTime};

impl PacketNetwork {
    /// Port `link` has serialised its packet: release its buffer room
    /// (and its PFC ingress count), hand the room to waiting upstream
    /// ports, then send the next packet.
    pub(super) fn link_free(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        port.busy = false;
        let released = std::mem::take(&mut port.on_wire_transit_bytes);
        let ingress = std::mem::replace(&mut port.on_wire_ingress, NONE);
        if ingress != NONE {
            self.release_ingress(ingress as usize, released, now, queue)?;
        }
        if released > 0 {
            self.set_reserved(link, self.ports[link].reserved_bytes - released, now);
            self.grant(link, now, queue)?;
        }
        self.try_start(link, now, queue)
    }

    /// Offers the free room of port `link`'s buffer to its waiters, first
    /// come first served, starting each one that now fits.
    pub(super) fn grant(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        while let Some(&waiter) = self.ports[link].waiters.front() {
            let waiter = waiter as usize;
            let source = self.ports[waiter]
                .blocked
                .expect("a waiter is blocked until granted");
            let (bytes, next) = self.candidate(waiter, source);
            debug_assert_eq!(
                next,
                Some(link),
                "a waiter waits for its packet's next link"
            );
            if !self.ports[link].fits(bytes) {
                break;
            }
            self.ports[link].waiters.pop_front();
            self.ports[waiter].blocked = None;
            self.reserve(link, bytes, now);
            self.begin(waiter, source, bytes, now, queue)?;
        }
        Ok(())
    }

    /// Sends port `link`'s next packet if its wire is free, it may send
    /// (not down, not paused, not waiting for credit), and it has one
    /// whose credit is available.
    pub(super) fn try_start(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        if port.busy || port.blocked.is_some() {
            return Ok(());
        }
        if port.down || port.pfc.paused {
            // Its work waits for a link change or a RESUME.
            port.go_idle();
            return Ok(());
        }
        let Some(source) = port.choose() else {
            port.go_idle();
            return Ok(());
        };
        let (bytes, next) = self.candidate(link, source);
        if let Some(next) = next
            && self.hot[link].control == Control::Credit
        {
            let down = &self.ports[next];
            if self.hot[next].credited && !(down.waiters.is_empty() && down.fits(bytes)) {
                self.ports[next].waiters.push_back(link as u32);
                let port = &mut self.ports[link];
                port.blocked = Some(source);
                port.go_idle();
                return Ok(());
            }
            self.reserve(next, bytes, now);
        }
        self.begin(link, source, bytes, now, queue)
    }

    /// The size of the packet port `link` would send from `source`, and
    /// the next link of its route (whose buffer it needs), if any.
    pub(super) fn candidate(&self, link: usize, source: Source) -> (u64, Option<usize>) {
        let port = &self.ports[link];
        match source {
            Source::Transit => {
                let p = &self.packets[*port.transit.front().expect("chosen queue is not empty")];
                (p.bytes, link_index(p.next))
            }
            Source::Local => {
                let flow = *port.flows.front().expect("chosen queue is not empty");
                let m = &self.messages[self.flows[flow].head];
                let bytes = (m.bytes - m.cut_bytes).min(m.mtu_bytes);
                (bytes, m.route.get(1).map(|l| l.index()))
            }
        }
    }

    /// Puts the packet from `source` (of `bytes`, its credit already
    /// reserved) on port `link`'s wire and schedules its end and arrival.
    pub(super) fn begin(
        &mut self,
        link: usize,
        source: Source,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let (packet, kick) = match source {
            Source::Transit => {
                let packet = self.ports[link]
                    .transit
                    .pop_front()
                    .expect("chosen queue is not empty");
                (packet, None)
            }
            Source::Local => self.cut(link, bytes, now, queue)?,
        };
        let p = &self.packets[packet];
        debug_assert_eq!(p.link as usize, link, "a packet starts on its hop's link");
        let last_hop = p.next == NONE;
        // The PFC ingress count the packet leaves once serialised here.
        let ingress = match source {
            Source::Transit if self.hot[link].credited => {
                let prev = p.prev as usize;
                (self.hot[prev].control == Control::Pfc).then_some(prev as u32)
            }
            _ => None,
        };
        let retransmit = p.retransmit;
        let port = &mut self.ports[link];
        let ser_ps = port.serialize(bytes);
        port.busy = true;
        port.local_next = source == Source::Transit;
        port.on_wire_transit_bytes = if source == Source::Transit { bytes } else { 0 };
        port.on_wire_ingress = ingress.unwrap_or(NONE);
        let usage = &mut self.usage[link];
        usage.bytes = usage.bytes.saturating_add(bytes);
        usage.units += 1;
        usage.busy_ps = usage.busy_ps.saturating_add(ser_ps);
        if retransmit {
            usage.retransmitted += 1;
        }

        // `path::hop_latency_ps`, from the port's copy of the parameters.
        let port = &self.ports[link];
        let hop_ps = if last_hop {
            port.latency_ps
        } else {
            port.latency_ps.saturating_add(port.forward_latency_ps)
        };
        let free_at = now.checked_plus_ps(ser_ps).ok_or(OutOfTime)?;
        let arrive_at = free_at.checked_plus_ps(hop_ps).ok_or(OutOfTime)?;
        if let Some(t) = &mut self.timeline {
            t.add(link, now, free_at, bytes as f64);
        }
        let link_id = u32::try_from(link).expect("link ids fit in u32");
        self.schedule(free_at, PacketEvent::LinkFree { link: link_id }, queue)?;
        self.schedule(arrive_at, PacketEvent::Arrive { packet }, queue)?;
        match kick {
            Some(other) => self.try_start(other, now, queue),
            None => Ok(()),
        }
    }

    /// Adds `bytes` to what port `link`'s buffer holds.
    pub(super) fn reserve(&mut self, link: usize, bytes: u64, now: Time) {
        self.set_reserved(
            link,
            self.ports[link].reserved_bytes.saturating_add(bytes),
            now,
        );
    }

    /// Sets the bytes reserved in port `link`'s buffer, updating its
    /// high-water mark and recording a sample.
    pub(super) fn set_reserved(&mut self, link: usize, bytes: u64, now: Time) {
        self.ports[link].reserved_bytes = bytes;
        let usage = &mut self.usage[link];
        usage.max_queue = usage.max_queue.max(bytes);
        if self.sample_links {
            crate::network::record_sample(
                &mut self.samples,
                LinkSample {
                    time: now,
                    link: LinkId::new(link),
                    queue: bytes,
                },
            );
        }
    }
}
