//! Injection at the source (see the module docs of [`super`], *Packets*
//! and *Injection*): a message joins its flow (a new flow gets its
//! reliable transport), a flow joins and leaves its first link's
//! injection round, and packets are cut lazily, one when the first link
//! takes it.

use algorithms::Time;
use topologies::Route;

use super::port::Source;
use super::records::{Flow, Message, Packet};
use super::transport::{Transport, TransportKind};
use super::{NONE, PacketEvent, PacketNetwork, route_link};
use crate::event::EventQueue;
use crate::network::path::{idle_delivery_ps, idle_latency_ps, path_mtu};
use crate::network::{OutOfTime, Transfer};

impl PacketNetwork {
    /// Starts sending a message at `now`. A message with an empty route
    /// (a rank sending to itself) arrives at `now`, outside any flow.
    /// Every message of one flow must take the same route.
    pub fn start(
        &mut self,
        now: Time,
        transfer: Transfer,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let Transfer {
            message: id,
            bytes,
            route,
            flow: key,
            path: _,
        } = transfer;
        let Some(&first) = route.first() else {
            let message = self.messages.insert(Message {
                id,
                route,
                bytes,
                cut_bytes: bytes,
                mtu_bytes: 1,
                next: NONE,
                flow: NONE,
                first_psn: 0,
                live_packets: 1,
                done: false,
            });
            let packet = self.packets.insert(Packet {
                message,
                hop: 0,
                link: NONE,
                prev: NONE,
                next: NONE,
                bytes,
                last: true,
                psn: 0,
                retransmit: false,
                epoch: 0,
            });
            return self.schedule(now, PacketEvent::Arrive { packet }, queue);
        };
        let mtu_bytes = path_mtu(&self.topology, &route);
        let flow = match self.flow_ids.get(&key) {
            Some(&flow) => flow,
            None => {
                let transport = self.transport_for(&route, mtu_bytes);
                let serial = self.next_serial;
                self.next_serial = self.next_serial.wrapping_add(1);
                let flow = self.flows.insert(Flow {
                    key,
                    serial,
                    first_link: u32::try_from(first.index()).expect("link ids fit in u32"),
                    oldest: NONE,
                    head: NONE,
                    tail: NONE,
                    psn_end: 0,
                    psn_sent: 0,
                    transport,
                    parked: false,
                    epoch: 0,
                });
                self.flow_ids.insert(key, flow);
                flow
            }
        };
        debug_assert_eq!(
            self.flows[flow].first_link as usize,
            first.index(),
            "the messages of a flow share its route"
        );
        let first_psn = self.flows[flow].psn_end;
        let message = self.messages.insert(Message {
            id,
            route,
            bytes,
            cut_bytes: 0,
            mtu_bytes,
            next: NONE,
            flow,
            first_psn,
            live_packets: 0,
            done: false,
        });
        let packets = self.messages[message].packets();
        let f = &mut self.flows[flow];
        f.psn_end += packets;
        if f.tail == NONE {
            f.oldest = message;
        } else {
            let tail = f.tail;
            self.messages[tail].next = message;
        }
        let f = &mut self.flows[flow];
        f.tail = message;
        if f.head != NONE {
            return Ok(());
        }
        f.head = message;
        self.enter_round(flow, now, queue)
    }

    /// The transport of a new flow along `route` (decided once per flow:
    /// its route is fixed). Network links may lose packets, and so may a
    /// link of any kind declared lossy: a flow over either needs one, TCP
    /// if it crosses plain Ethernet, else RDMA ([`TransportKind::of_link`]).
    pub(super) fn transport_for(&self, route: &Route, mtu_bytes: u64) -> Option<Box<Transport>> {
        let kind = route
            .iter()
            .filter_map(|l| self.ports[l.index()].transport)
            .max()?;
        let ack_ps = idle_latency_ps(&self.topology, route, 0);
        Some(Box::new(match kind {
            TransportKind::Rdma => Transport::rdma(ack_ps, self.transport),
            TransportKind::Tcp => {
                // An MTU packet there on the idle route, its ACK back.
                let rtt_ps =
                    idle_delivery_ps(&self.topology, route, mtu_bytes).saturating_add(ack_ps);
                Transport::tcp(ack_ps, rtt_ps, self.tcp)
            }
        }))
    }

    /// Takes `flow` out of its first link's injection round; if that
    /// port was waiting for credit for the flow's packet, it stops
    /// waiting (the caller lets the port choose again).
    pub(super) fn leave_round(
        &mut self,
        flow: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if std::mem::take(&mut self.flows[flow].parked) {
            // Waiting for its window, it was not in the round.
            return Ok(());
        }
        let first = self.flows[flow].first_link as usize;
        let port = &self.ports[first];
        if port.blocked == Some(Source::Local) && port.flows.front() == Some(&flow) {
            self.withdraw(first, now, queue)?;
        }
        let flows = &mut self.ports[first].flows;
        let at = flows.iter().position(|&f| f == flow).expect("in its round");
        flows.remove(at);
        Ok(())
    }

    /// Cuts the next packet (of `bytes`) of the flow at the front of port
    /// `link`'s injection round and moves the round on. Returns the packet
    /// and, when the flow's next message leaves by another port, that port.
    pub(super) fn cut(
        &mut self,
        link: usize,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(u32, Option<usize>), OutOfTime> {
        let flow = self.ports[link]
            .flows
            .pop_front()
            .expect("chosen queue is not empty");
        let message = self.flows[flow].head;
        let m = &mut self.messages[message];
        let (first_link, second_link) = (route_link(&m.route, 0), route_link(&m.route, 1));
        let psn = m.next_psn();
        m.cut_bytes += bytes;
        m.live_packets += 1;
        let last = m.cut_bytes == m.bytes;
        let next = m.next;
        let f = &mut self.flows[flow];
        let retransmit = psn < f.psn_sent;
        f.psn_sent = f.psn_sent.max(psn + 1);
        let epoch = f.epoch;
        let packet = self.packets.insert(Packet {
            message,
            hop: 0,
            link: first_link,
            prev: NONE,
            next: second_link,
            bytes,
            last,
            psn,
            retransmit,
            epoch,
        });
        self.arm_timer(flow, now, queue)?;
        if !last {
            self.rejoin(flow, link, psn + 1);
            return Ok((packet, None));
        }
        self.flows[flow].head = next;
        if next == NONE {
            return Ok((packet, None));
        }
        let first = self.messages[next].route[0].index();
        let joined = self.rejoin(flow, first, psn + 1);
        Ok((packet, (joined && first != link).then_some(first)))
    }
}
