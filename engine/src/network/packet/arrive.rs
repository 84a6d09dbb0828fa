//! What happens when a packet reaches the end of a hop (see the module
//! docs of [`super`], *Loss and corruption*, *Flow control* and
//! *Delivery and counters*): lost on the wire or dropped for want of
//! room, queued at its next port, or received at its destination, where
//! its message may be delivered and leave its flow.

use algorithms::Time;

use super::port::{Control, Loss};
use super::{NONE, PacketNetwork, link_index, route_link};
use crate::event::{EventQueue, MessageId};
use crate::network::OutOfTime;

impl PacketNetwork {
    /// A packet has crossed its hop: lost on the wire, delivered, dropped
    /// for want of room, or queued at the next port.
    pub(super) fn arrive(
        &mut self,
        packet: u32,
        now: Time,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let p = &self.packets[packet];
        let (message, bytes) = (p.message, p.bytes);
        let crossed = link_index(p.link);
        let next = link_index(p.next);
        if let Some(l) = crossed
            && self.hot[l].may_lose
            && let Some(loss) = self.ports[l].loss.draw()
        {
            if let Some(next) = next
                && self.hot[l].control == Control::Credit
            {
                // Its room downstream was reserved when it started.
                self.set_reserved(next, self.ports[next].reserved_bytes - bytes, now);
                self.grant(next, now, queue)?;
            }
            return self.lose(packet, l, loss, now);
        }
        let Some(next) = next else {
            return self.receive(packet, now, queue, delivered);
        };
        let l = crossed.expect("a packet with a next hop crossed one");
        if self.hot[next].credited {
            match self.hot[l].control {
                Control::Credit => {}
                Control::Pfc => {
                    if !self.admit_ingress(l, bytes, now, queue)? {
                        return self.lose(packet, l, Loss::Overflow, now);
                    }
                    self.reserve(next, bytes, now);
                }
                Control::Lossy => {
                    if !self.ports[next].fits(bytes) {
                        return self.lose(packet, next, Loss::Overflow, now);
                    }
                    self.reserve(next, bytes, now);
                }
            }
        } else if self.hot[l].control != Control::Credit {
            // An endpoint relays through its own memory: counted, never full.
            self.reserve(next, bytes, now);
        }
        let p = &mut self.packets[packet];
        p.hop += 1;
        p.next = route_link(&self.messages[message].route, p.hop + 1);
        p.prev = p.link;
        p.link = next as u32;
        self.ports[next].transit.push_back(packet);
        self.try_start(next, now, queue)
    }

    /// A packet that did not arrive: counted against link `link`, its
    /// flow's transport told, the packet gone.
    pub(super) fn lose(
        &mut self,
        packet: u32,
        link: usize,
        loss: Loss,
        now: Time,
    ) -> Result<(), OutOfTime> {
        let usage = &mut self.usage[link];
        match loss {
            Loss::Wire => usage.lost += 1,
            Loss::Corrupted => usage.corrupted += 1,
            Loss::Overflow => usage.overflow_drops += 1,
        }
        let message = self.packets.remove(packet).message;
        let m = &self.messages[message];
        if !m.done {
            let flow = m.flow;
            match self.flows[flow].transport.as_mut() {
                Some(t) => t.note_loss(link, loss, now),
                None => debug_assert!(false, "only flows over lossy or network links lose packets"),
            }
        }
        self.release_packet_of(message);
        Ok(())
    }

    /// One packet of `message` has left the network: frees the message
    /// once it is done and has none left.
    pub(super) fn release_packet_of(&mut self, message: u32) {
        let m = &mut self.messages[message];
        m.live_packets -= 1;
        if m.done && m.live_packets == 0 {
            self.messages.remove(message);
        }
    }

    /// A packet has reached its destination: accepted in order, or
    /// discarded by the transport (a duplicate or out of sequence).
    pub(super) fn receive(
        &mut self,
        packet: u32,
        now: Time,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let p = self.packets.remove(packet);
        let message = p.message;
        let m = &self.messages[message];
        let (done, flow) = (m.done, m.flow);
        let mut accept = !done;
        if !done && flow != NONE {
            accept = self.transport_accepts(flow, p.psn, p.epoch, now, queue)?;
        }
        if accept && p.last {
            self.messages[message].done = true;
            delivered.push(self.messages[message].id);
            if flow != NONE {
                self.pop_delivered(flow, message, now, queue)?;
            }
        }
        self.release_packet_of(message);
        Ok(())
    }

    /// `message`, the oldest of `flow`, is delivered: it leaves the list,
    /// and the flow ends when nothing of it is left to deliver. If a
    /// retry was cutting it again (its first copies got through after
    /// all), the sender moves on to the next message: the receiver's
    /// acknowledgement tells it the rest is not needed.
    pub(super) fn pop_delivered(
        &mut self,
        flow: u32,
        message: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let next = self.messages[message].next;
        let f = &mut self.flows[flow];
        debug_assert_eq!(f.oldest, message, "a flow delivers in order");
        f.oldest = next;
        if f.head == message {
            if next == NONE {
                let first = f.first_link as usize;
                self.leave_round(flow, now, queue)?;
                self.flows[flow].head = NONE;
                self.try_start(first, now, queue)?;
            } else {
                // Not cut in this pass yet (a go-back cut it from 0).
                debug_assert_eq!(self.messages[next].cut_bytes, 0);
                self.flows[flow].head = next;
            }
        }
        let f = &self.flows[flow];
        if f.oldest == NONE {
            debug_assert_eq!(f.head, NONE, "an undelivered message remains");
            let key = self.flows.remove(flow).key;
            self.flow_ids.remove(&key);
        }
        Ok(())
    }
}
