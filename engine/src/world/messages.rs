//! Messages in one run's world: sent onto the network, delivered into
//! their receiver's mailbox (after NCCL's per-hop latency and the
//! receiver's software overhead, and as a folded run's receiver sees
//! them), taken by receives; and a pair's transport giving up.

use algorithms::nccl::Framing;
use algorithms::{Payload, Rank, Tag};

use super::{Message, World};
use crate::event::{EventKind, MessageId};
use crate::network::{SendFailure, Sent, TransportTimeout};
use crate::trace::{Span, SpanKind};

impl World {
    /// Puts a message on the link and schedules its delivery. A delivery
    /// past the end of virtual time is not scheduled; the run is marked as
    /// having run out of time instead. An error (the sender's to report)
    /// when the message's route cannot be moved by the topology's partial
    /// rotation (see [`crate::fold`]): the message is not sent.
    pub fn send(&mut self, src: Rank, dst: Rank, tag: Tag, payload: Payload) -> Result<(), String> {
        self.send_with(src, dst, tag, payload, None)
    }

    /// [`World::send`] of a message framed by an NCCL protocol: the
    /// network carries its wire bytes on its channel's route, and its
    /// delivery waits NCCL's per-hop latency beyond the links' own.
    pub fn send_framed(
        &mut self,
        src: Rank,
        dst: Rank,
        tag: Tag,
        payload: Payload,
        f: Framing,
    ) -> Result<(), String> {
        self.send_with(src, dst, tag, payload, Some(f))
    }

    fn send_with(
        &mut self,
        src: Rank,
        dst: Rank,
        tag: Tag,
        payload: Payload,
        framing: Option<Framing>,
    ) -> Result<(), String> {
        let payload_bytes = payload.shape().bytes();
        let bytes = framing.map_or(payload_bytes, |f| f.protocol.wire_bytes(payload_bytes));
        let message = self.in_flight.insert(Message {
            src,
            dst,
            tag,
            payload,
            sent_at: self.now,
            extra_ps: 0,
            handled: false,
            leg: None,
        });
        if src != dst {
            self.traffic.messages += 1;
            self.traffic.bytes += bytes;
        }
        if self.broken.contains_key(&self.receiver_view(src, dst)) {
            // The pair's transport has failed: nothing more gets through,
            // and the receiver's receives fail.
            self.in_flight.remove(message);
            return Ok(());
        }
        let channel = framing.map(|f| f.channel);
        let sent = self
            .network
            .send(self.now, message, src, dst, bytes, channel, &mut self.queue);
        if let (Ok((_, Some(hop))), Some(f), Some(nccl)) = (&sent, framing, &self.config.nccl) {
            let extra = nccl.hop_extra_ps(f, hop.class, hop.idle_ps);
            if let Some(m) = self.in_flight.get_mut(message) {
                m.extra_ps = extra;
            }
        }
        match sent {
            Ok((Sent::ArrivesAt(at), _)) => self.queue.schedule(at, EventKind::Deliver { message }),
            Ok((Sent::InFlight, _)) => {}
            Err(SendFailure::OutOfTime) => self.out_of_time = true,
            Err(SendFailure::Refused(why)) => {
                self.in_flight.remove(message);
                if self.refused.is_none() {
                    self.refused = Some((src, why.clone()));
                }
                return Err(why);
            }
        }
        Ok(())
    }

    /// Takes the oldest arrived message from `src` to `dst` with `tag`.
    pub fn take_message(&mut self, dst: Rank, src: Rank, tag: Tag) -> Option<Payload> {
        let key = (dst, src, tag);
        let queue = self.mailbox.get_mut(&key)?;
        let payload = queue.pop_front();
        if queue.is_empty() {
            let emptied = self.mailbox.remove(&key).expect("entry was just found");
            self.spare_queues.push(emptied);
        }
        payload
    }

    /// A message has fully arrived: it joins its receiver's mailbox and
    /// wakes the receives that may match it. With a receive overhead
    /// ([`topologies::LinkSpec::receive_overhead_ps`]) a point-to-point
    /// message between two ranks first waits for the receiver's software,
    /// which handles one message at a time in arrival order.
    pub(super) fn deliver(&mut self, message: MessageId) {
        if let Some(m) = self.in_flight.get_mut(message)
            && m.extra_ps > 0
        {
            // NCCL's per-hop latency: the receiver sees it this much later.
            let extra = std::mem::take(&mut m.extra_ps);
            match self.now.checked_plus_ps(extra) {
                Some(at) => self.queue.schedule(at, EventKind::Deliver { message }),
                None => self.out_of_time = true,
            }
            return;
        }
        if self.receive_overhead_ps > 0
            && let Some(m) = self.in_flight.get_mut(message)
            && !m.handled
            && m.leg.is_none()
            && m.src != m.dst
        {
            // The receiver's software handles its messages one at a time
            // in arrival order; a receive sees each once it is handled.
            m.handled = true;
            let (src, dst) = (m.src, m.dst);
            let (dst, _) = self.receiver_view(src, dst);
            let start = self.now.max(self.receive_free_at[dst]);
            match start.checked_plus_ps(self.receive_overhead_ps) {
                Some(at) => {
                    self.receive_free_at[dst] = at;
                    self.queue.schedule(at, EventKind::Deliver { message });
                }
                None => self.out_of_time = true,
            }
            return;
        }
        let m = self
            .in_flight
            .remove(message)
            .expect("a delivery names a message in flight");
        self.last_activity = self.now;
        if let Some(leg) = m.leg {
            self.leg_arrived(m.dst, *leg, m.payload);
            return;
        }
        if let Some(trace) = &mut self.trace {
            trace.push_span(Span {
                rank: m.src,
                kind: SpanKind::Send,
                peer: Some(m.dst),
                bytes: m.payload.shape().bytes(),
                start: m.sent_at,
                end: self.now,
            });
        }
        let (dst, src, tag) = self.tagged_receiver_view(m.src, m.dst, m.tag);
        let key = (dst, src, tag);
        let spare = &mut self.spare_queues;
        self.mailbox
            .entry(key)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push_back(m.payload);
        self.signal_waits(self.config.slot_of(dst), src, Some(tag));
    }

    /// Who receives a message from `src` to `dst`, and from whom it seems
    /// to come: `(dst, src)` itself, or in a folded run the representative
    /// of `dst`'s orbit and `src` moved back by as many steps
    /// ([`crate::fold::RankAction::receiver_view`]; by a shift: the message rank
    /// `dst - k·shift` gets from `src - k·shift`).
    fn receiver_view(&self, src: Rank, dst: Rank) -> (Rank, Rank) {
        match &self.config.fold {
            None => (dst, src),
            Some(action) => {
                let (dst, src, _) = action.receiver_view(src, dst);
                (dst, src)
            }
        }
    }

    /// [`Self::receiver_view`] with the message's tag as the receiver
    /// sees it: a channel tag's channel turned back with the ranks when
    /// the fold turns channels ([`crate::fold::RankAction::tag_back`]).
    fn tagged_receiver_view(&self, src: Rank, dst: Rank, tag: Tag) -> (Rank, Rank, Tag) {
        match &self.config.fold {
            None => (dst, src, tag),
            Some(action) => {
                let (dst, src, k) = action.receiver_view(src, dst);
                (dst, src, action.tag_back(tag, k))
            }
        }
    }

    /// The transport from `f.src` to `f.dst` gave up: its messages are
    /// gone, and the receiver's receives from the sender now fail.
    pub(super) fn transport_failed(&mut self, f: TransportTimeout) {
        for &message in &f.messages {
            self.in_flight.remove(message);
        }
        if let Some(trace) = &mut self.trace {
            trace.push_span(Span {
                rank: f.dst,
                kind: SpanKind::TransportTimeout,
                peer: Some(f.src),
                bytes: 0,
                start: self.now,
                end: self.now,
            });
        }
        let (dst, src) = self.receiver_view(f.src, f.dst);
        self.signal_waits(self.config.slot_of(dst), src, None);
        self.transport_timeouts.push(f.clone());
        self.broken.insert((dst, src), f);
    }

    /// The transport failure that stops `rank` hearing from `from`, if
    /// the pair's transport gave up.
    pub fn broken(&self, rank: Rank, from: Rank) -> Option<&TransportTimeout> {
        self.broken.get(&(rank, from))
    }
}
