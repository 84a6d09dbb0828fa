//! The packet-level network model: messages cut into packets that cross
//! egress ports store-and-forward, with finite buffers and lossless,
//! credit-based hop-by-hop flow control.
//!
//! ```text
//!   source GPU u                 switch v                         GPU w
//!   flow A: m1 m2 --.
//!   flow B: m3    --+--> port u->v ==wire==> transit FIFO --> port v->w ==wire==> w
//!   transit FIFO  --'    (one packet        of port v->w      (one packet
//!   (if u forwards)       at a time)        (buffer_bytes)     at a time)
//!                              ^                  |
//!                              '---- credit ------'
//!          room in v->w's buffer: reserved when a packet starts on u->v,
//!          released when it has been serialised on v->w
//! ```
//!
//! # Packets
//! A message is cut into packets of at most its route's MTU
//! ([`path_mtu`]), full packets first; a message of 0 bytes is one empty
//! packet. Packets are cut lazily at the source, one when the first link
//! takes it, so a 1 GiB message never exists as a quarter million packets.
//!
//! # Ports
//! Each link direction `l = u -> v` is an egress port of `u` with a FIFO
//! of transit packets, a buffer of `buffer_bytes` and a wire that carries
//! one packet at a time: serialization (`bytes / bandwidth`), then
//! [`hop_latency_ps`](super::path::hop_latency_ps) (propagation, plus
//! `v`'s forwarding latency unless `v` is the destination) until the
//! packet is at `v`. Serialization is
//! rounded per busy period, not per packet: a port keeps the bytes and
//! picoseconds of its current busy period, a packet of `p` bytes takes
//! `duration(total + p) - duration(total)`, and the total resets when the
//! wire goes idle. A message alone on one link thus arrives exactly
//! `duration(bytes) + latency` after it is sent.
//!
//! # Injection
//! At its source, a message waits in its flow's FIFO (a flow is the
//! [`Transfer::flow`] id: one source and destination rank); a flow's next
//! message starts once the previous one's last packet has been cut. The
//! first link serves the flows that have a message, round-robin, one
//! packet at a time, as a NIC serves its queue pairs. When the port's
//! vertex also forwards (the GPUs of a ring or torus), transit packets and
//! local packets alternate, packet by packet, when both wait.
//!
//! # Credit
//! A packet may start on `l = u -> v` only if `v` is its destination, or
//! `v` is an endpoint, or the next link on its route `l' = v -> x` has room
//! in its buffer for it. The room is reserved when the packet starts on
//! `l` and released when it has been serialised on `l'`. A port whose
//! chosen packet gets no credit waits for it (head-of-line blocking, as
//! in InfiniBand) as a waiter on `l'`; freed room goes to waiters in the
//! order they began waiting, which shares a congested port fairly between
//! its upstream ports. A port admits a newcomer only when no one waits,
//! and an empty buffer admits any packet (a buffer smaller than one packet
//! slows traffic down instead of stopping it).
//!
//! An endpoint that forwards (a GPU relaying ring traffic) stages transit
//! packets in its own memory: its buffer is treated as unbounded, which
//! also keeps rings and tori free of credit deadlock (a cycle of full
//! buffers needs every buffer on the cycle to be bounded). Its ports still
//! count the bytes they hold, so their `max_queue` may exceed
//! `buffer_bytes`. Switches and NICs have the bounded buffers; the
//! switch fabrics of the presets (trees, leaf-spine, fat-trees) route up
//! then down, which leaves no cycle of credit dependencies between them.
//! (A topology whose switch routes do form such a cycle could deadlock
//! here, as the lossless hardware would.)
//!
//! # Link changes
//! [`PacketNetwork::schedule_changes`] takes [`LinkChange`]s (link
//! faults); each takes effect at its time, on one link direction:
//!
//! - From then on the port serialises each packet it starts at nominal
//!   bandwidth times `bandwidth_factor`. A packet already on the wire
//!   finishes at the rate it started with (store and forward). A new
//!   rate starts a new rounding period (see *Ports*), so the packets of a
//!   busy period at one rate take exactly `duration(bytes)` at that rate.
//! - A factor of 0 takes the link down: the port starts no packet (not
//!   even an empty one) until a later change gives it a positive factor.
//!   Its packet on the wire, if any, still completes and arrives. Packets
//!   wait in its transit FIFO and its injection round; upstream ports keep
//!   filling its buffer, then wait for credit, so backpressure spreads
//!   upstream as it always does. Nothing is dropped. A port that was
//!   waiting for credit when its link went down leaves the waiters of the
//!   next link (so it holds no one else up) and chooses again when it is
//!   restored. A restored port resumes at once if it has work.
//! - The counters keep their meaning: `busy_ps` sums serialization times
//!   (a down link is not busy), `bytes`, `units` and `max_queue` are as
//!   before.
//!
//! A change at time 0 applies at once, before any traffic; the others are
//! events, which fire before the events at the same time scheduled after
//! them (so call `schedule_changes` before the run starts: a packet then
//! starting at a change's time gets the new rate). Changes of one link at
//! one time apply in the order given; the last one holds.
//!
//! Nothing is dropped: every link is treated as lossless. (A lossy port
//! would drop where this one waits for credit, in [`PacketNetwork`]'s
//! `try_start`; drops, PFC and retransmission are not modelled yet.)
//!
//! # Delivery and counters
//! Packets of a message follow one route through FIFO queues, so they
//! arrive in order: when the last one arrives the message is delivered.
//! Each port counts the bytes and packets it carried, its serialization
//! time (`busy_ps`) and the most bytes ever reserved in its buffer
//! (`max_queue`); with sampling, every change of those reserved bytes is
//! recorded as a [`LinkSample`].

mod change;
#[cfg(test)]
mod fault_tests;
mod port;
mod table;
#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use algorithms::Time;
use topologies::{LinkId, Route, Topology};

use self::port::{Port, Source};
use self::table::Table;
use super::path::path_mtu;
use super::{LinkChange, LinkSample, LinkUsage, NetEvent, OutOfTime, Transfer};
use crate::event::{EventKind, EventQueue, MessageId};

/// "No message": the end of a flow's list.
const NONE: u32 = u32::MAX;

/// An event of the packet-level model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// A link direction has finished serialising its packet.
    LinkFree {
        /// The link direction (`LinkId::index`).
        link: u32,
    },
    /// A packet has reached the far end of its current hop.
    Arrive {
        /// The packet.
        packet: u32,
    },
    /// A scheduled link change takes effect.
    Change {
        /// Its index among the changes given to
        /// [`PacketNetwork::schedule_changes`], in the order given.
        index: u32,
    },
}

/// A message being sent.
#[derive(Debug)]
struct Message {
    /// The world's id, reported on delivery.
    id: MessageId,
    route: Route,
    bytes: u64,
    /// Bytes already cut into packets.
    cut_bytes: u64,
    mtu_bytes: u64,
    /// The next message of the same flow, or [`NONE`].
    next: u32,
}

/// The messages of one flow not yet fully cut, as a list through
/// [`Message::next`]; the head is the one being cut.
#[derive(Debug)]
struct Flow {
    key: u64,
    head: u32,
    tail: u32,
}

/// A packet in flight.
#[derive(Debug)]
struct Packet {
    message: u32,
    /// The index in the route of the link it is crossing or waiting for.
    hop: usize,
    bytes: u64,
    /// Whether it is its message's last packet.
    last: bool,
}

/// The packet-level model of one run.
#[derive(Debug)]
pub struct PacketNetwork {
    topology: Arc<Topology>,
    ports: Vec<Port>,
    usage: Vec<LinkUsage>,
    messages: Table<Message>,
    flows: Table<Flow>,
    /// Flow key to flow record, for the flows with a message not yet
    /// fully cut (looked up once per message, never iterated).
    flow_ids: HashMap<u64, u32>,
    packets: Table<Packet>,
    sample_links: bool,
    samples: Vec<LinkSample>,
    /// Every link change scheduled, addressed by [`PacketEvent::Change`].
    changes: Vec<LinkChange>,
}

impl PacketNetwork {
    /// A model of `topology`; with `sample_links` it records every change
    /// of a link's backlog for the trace.
    pub fn new(topology: Arc<Topology>, sample_links: bool) -> PacketNetwork {
        let ports: Vec<Port> = topology
            .link_ids()
            .map(|l| Port::new(&topology, l))
            .collect();
        PacketNetwork {
            usage: vec![LinkUsage::default(); ports.len()],
            ports,
            topology,
            messages: Table::default(),
            flows: Table::default(),
            flow_ids: HashMap::default(),
            packets: Table::default(),
            sample_links,
            samples: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Starts sending a message at `now`. A message with an empty route
    /// (a rank sending to itself) arrives at `now`, outside any flow.
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
        } = transfer;
        let Some(&first) = route.first() else {
            let message = self.messages.insert(Message {
                id,
                route,
                bytes,
                cut_bytes: bytes,
                mtu_bytes: 1,
                next: NONE,
            });
            let packet = self.packets.insert(Packet {
                message,
                hop: 0,
                bytes,
                last: true,
            });
            queue.schedule(
                now,
                EventKind::Net(NetEvent::Packet(PacketEvent::Arrive { packet })),
            );
            return Ok(());
        };
        let mtu_bytes = path_mtu(&self.topology, &route);
        let message = self.messages.insert(Message {
            id,
            route,
            bytes,
            cut_bytes: 0,
            mtu_bytes,
            next: NONE,
        });
        if let Some(&flow) = self.flow_ids.get(&key) {
            let tail = self.flows[flow].tail;
            self.messages[tail].next = message;
            self.flows[flow].tail = message;
            return Ok(());
        }
        let flow = self.flows.insert(Flow {
            key,
            head: message,
            tail: message,
        });
        self.flow_ids.insert(key, flow);
        self.ports[first.index()].flows.push_back(flow);
        self.try_start(first.index(), now, queue)
    }

    /// Applies one of this model's events at `now`, pushing the messages
    /// that have fully arrived onto `delivered`.
    pub fn handle(
        &mut self,
        now: Time,
        event: PacketEvent,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        match event {
            PacketEvent::LinkFree { link } => self.link_free(link as usize, now, queue),
            PacketEvent::Arrive { packet } => self.arrive(packet, now, queue, delivered),
            PacketEvent::Change { index } => self.apply_change(index, now, queue),
        }
    }

    /// Counters per link direction, indexed by `LinkId::index`.
    pub fn usage(&self) -> &[LinkUsage] {
        &self.usage
    }

    /// The backlog samples recorded so far (empty unless sampling).
    pub fn take_samples(&mut self) -> Vec<LinkSample> {
        std::mem::take(&mut self.samples)
    }

    /// The topology it models.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Messages not yet delivered.
    pub fn messages_in_flight(&self) -> usize {
        self.messages.len()
    }

    /// A cycle of ports each waiting for buffer room on the next, if the
    /// waits form one: the buffer-dependency cycle of a credit deadlock,
    /// written from its lowest link id. Each blocked port waits on exactly
    /// one port, so following those waits from every port finds any cycle.
    pub fn credit_cycle(&self) -> Option<Vec<LinkId>> {
        let n = self.ports.len();
        let mut waits_on: Vec<Option<usize>> = vec![None; n];
        for (link, port) in self.ports.iter().enumerate() {
            for &waiter in &port.waiters {
                waits_on[waiter as usize] = Some(link);
            }
        }
        // 0 unvisited, 1 on the current walk, 2 done.
        let mut state = vec![0u8; n];
        for start in 0..n {
            let mut walk = Vec::new();
            let mut at = Some(start);
            while let Some(p) = at {
                match state[p] {
                    0 => {
                        state[p] = 1;
                        walk.push(p);
                        at = waits_on[p];
                    }
                    1 => {
                        let from = walk.iter().position(|&q| q == p).expect("on the walk");
                        let mut cycle: Vec<usize> = walk[from..].to_vec();
                        let lowest = (0..cycle.len())
                            .min_by_key(|&i| cycle[i])
                            .expect("a cycle is not empty");
                        cycle.rotate_left(lowest);
                        return Some(cycle.into_iter().map(LinkId::new).collect());
                    }
                    _ => break,
                }
            }
            for p in walk {
                state[p] = 2;
            }
        }
        None
    }

    /// Port `link` has serialised its packet: release its buffer room,
    /// hand the room to waiting upstream ports, then send the next packet.
    fn link_free(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        port.busy = false;
        let released = std::mem::take(&mut port.on_wire_transit_bytes);
        if released > 0 {
            self.set_reserved(link, self.ports[link].reserved_bytes - released, now);
            self.grant(link, now, queue)?;
        }
        self.try_start(link, now, queue)
    }

    /// A packet has crossed its hop: delivered if that was the last one,
    /// otherwise queued at the next port.
    fn arrive(
        &mut self,
        packet: u32,
        now: Time,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let p = &mut self.packets[packet];
        let message = p.message;
        let hop = p.hop + 1;
        let route = &self.messages[message].route;
        if hop >= route.len() {
            let last = p.last;
            self.packets.remove(packet);
            if last {
                delivered.push(self.messages.remove(message).id);
            }
            return Ok(());
        }
        let next = route[hop].index();
        p.hop = hop;
        self.ports[next].transit.push_back(packet);
        self.try_start(next, now, queue)
    }

    /// Offers the free room of port `link`'s buffer to its waiters, first
    /// come first served, starting each one that now fits.
    fn grant(&mut self, link: usize, now: Time, queue: &mut EventQueue) -> Result<(), OutOfTime> {
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
            self.set_reserved(
                link,
                self.ports[link].reserved_bytes.saturating_add(bytes),
                now,
            );
            self.begin(waiter, source, bytes, now, queue)?;
        }
        Ok(())
    }

    /// Sends port `link`'s next packet if its wire is free, it is not
    /// waiting for credit, and it has one whose credit is available.
    fn try_start(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let port = &mut self.ports[link];
        if port.busy || port.blocked.is_some() {
            return Ok(());
        }
        if port.down {
            // Its work waits for a change that restores the link.
            port.go_idle();
            return Ok(());
        }
        let Some(source) = port.choose() else {
            port.go_idle();
            return Ok(());
        };
        let (bytes, next) = self.candidate(link, source);
        if let Some(next) = next {
            let down = &self.ports[next];
            if down.credited && !(down.waiters.is_empty() && down.fits(bytes)) {
                // A lossy port would drop here instead of waiting.
                self.ports[next].waiters.push_back(link as u32);
                let port = &mut self.ports[link];
                port.blocked = Some(source);
                port.go_idle();
                return Ok(());
            }
            self.set_reserved(
                next,
                self.ports[next].reserved_bytes.saturating_add(bytes),
                now,
            );
        }
        self.begin(link, source, bytes, now, queue)
    }

    /// The size of the packet port `link` would send from `source`, and
    /// the next link of its route (whose buffer it needs), if any.
    fn candidate(&self, link: usize, source: Source) -> (u64, Option<usize>) {
        let port = &self.ports[link];
        let (message, hop, bytes) = match source {
            Source::Transit => {
                let p = &self.packets[*port.transit.front().expect("chosen queue is not empty")];
                (p.message, p.hop, p.bytes)
            }
            Source::Local => {
                let flow = *port.flows.front().expect("chosen queue is not empty");
                let head = self.flows[flow].head;
                let m = &self.messages[head];
                (head, 0, (m.bytes - m.cut_bytes).min(m.mtu_bytes))
            }
        };
        let next = self.messages[message].route.get(hop + 1).map(|l| l.index());
        (bytes, next)
    }

    /// Puts the packet from `source` (of `bytes`, its credit already
    /// reserved) on port `link`'s wire and schedules its end and arrival.
    fn begin(
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
            Source::Local => self.cut(link, bytes),
        };
        let port = &mut self.ports[link];
        let ser_ps = port.serialize(bytes);
        port.busy = true;
        port.local_next = source == Source::Transit;
        port.on_wire_transit_bytes = if source == Source::Transit { bytes } else { 0 };
        let usage = &mut self.usage[link];
        usage.bytes = usage.bytes.saturating_add(bytes);
        usage.units += 1;
        usage.busy_ps = usage.busy_ps.saturating_add(ser_ps);

        // `path::hop_latency_ps`, from the port's copy of the parameters.
        let p = &self.packets[packet];
        let last_hop = p.hop + 1 == self.messages[p.message].route.len();
        let port = &self.ports[link];
        let hop_ps = if last_hop {
            port.latency_ps
        } else {
            port.latency_ps.saturating_add(port.forward_latency_ps)
        };
        let free_at = now.checked_plus_ps(ser_ps).ok_or(OutOfTime)?;
        let arrive_at = free_at.checked_plus_ps(hop_ps).ok_or(OutOfTime)?;
        let link_id = u32::try_from(link).expect("link ids fit in u32");
        queue.schedule(
            free_at,
            EventKind::Net(NetEvent::Packet(PacketEvent::LinkFree { link: link_id })),
        );
        queue.schedule(
            arrive_at,
            EventKind::Net(NetEvent::Packet(PacketEvent::Arrive { packet })),
        );
        match kick {
            Some(other) => self.try_start(other, now, queue),
            None => Ok(()),
        }
    }

    /// Cuts the next packet (of `bytes`) of the flow at the front of port
    /// `link`'s injection round and moves the round on. Returns the packet
    /// and, when the flow's next message leaves by another port, that port.
    fn cut(&mut self, link: usize, bytes: u64) -> (u32, Option<usize>) {
        let flow = self.ports[link]
            .flows
            .pop_front()
            .expect("chosen queue is not empty");
        let message = self.flows[flow].head;
        let m = &mut self.messages[message];
        m.cut_bytes += bytes;
        let last = m.cut_bytes == m.bytes;
        let next = m.next;
        let packet = self.packets.insert(Packet {
            message,
            hop: 0,
            bytes,
            last,
        });
        if !last {
            self.ports[link].flows.push_back(flow);
            return (packet, None);
        }
        if next == NONE {
            let key = self.flows.remove(flow).key;
            self.flow_ids.remove(&key);
            return (packet, None);
        }
        self.flows[flow].head = next;
        let first = self.messages[next].route[0].index();
        self.ports[first].flows.push_back(flow);
        (packet, (first != link).then_some(first))
    }

    /// Sets the bytes reserved in port `link`'s buffer, updating its
    /// high-water mark and recording a sample.
    fn set_reserved(&mut self, link: usize, bytes: u64, now: Time) {
        self.ports[link].reserved_bytes = bytes;
        let usage = &mut self.usage[link];
        usage.max_queue = usage.max_queue.max(bytes);
        if self.sample_links {
            super::record_sample(
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
