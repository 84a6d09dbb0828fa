//! The RDMA reliable transport of the packet model: go-back-N over the
//! flows that cross network links (see the module docs of [`super`],
//! *Reliable transport*).

use algorithms::Time;
use topologies::LinkId;

use super::port::Loss;
use super::{NONE, PacketEvent, PacketNetwork};
use crate::event::{EventQueue, MessageId};
use crate::network::OutOfTime;

/// The transport state of one flow (a queue pair): the receiver's
/// expected sequence number and the sender's timer and retry count.
#[derive(Debug)]
pub(super) struct Transport {
    /// The next sequence number the receiver accepts.
    expected_psn: u64,
    /// Whether the receiver has sent a NAK for the current gap (it sends
    /// one per gap, then waits for the missing packet).
    nak_pending: bool,
    /// When the receiver last accepted a packet.
    progress_at: Time,
    /// When a NAK last reached the sender: a response, which restarts
    /// the timer as an acknowledgement does.
    nak_at: Time,
    /// How long an ACK or NAK takes back to the sender (the route's idle
    /// latency: control packets are small and not queued here).
    ack_ps: u64,
    /// Whether a timer event is outstanding.
    timer_armed: bool,
    /// `expected_psn` when the timer was last (re)started.
    timer_psn: u64,
    /// Retries since the last progress.
    retries: u8,
    /// The last packet of the flow lost: where, how, when.
    last_loss: Option<(usize, Loss, Time)>,
}

/// A flow whose transport gave up: `NCCL_IB_RETRY_CNT` retries passed
/// without progress. Its messages are never delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportFailure {
    /// The flow's key ([`crate::network::Transfer::flow`]).
    pub flow: u64,
    /// The world's ids of its undelivered messages.
    pub messages: Vec<MessageId>,
    /// When it gave up.
    pub at: Time,
    /// Retries made without progress.
    pub retries: u8,
    /// The last loss of the flow, if any: the link, how, when.
    pub last_loss: Option<(LinkId, Loss, Time)>,
    /// Where the first packet it still waits for sits, if it is in the
    /// network (behind a link that is down or paused).
    pub held_at: Option<LinkId>,
}

impl Transport {
    /// A fresh flow whose acknowledgements take `ack_ps` to return.
    pub(super) fn new(ack_ps: u64) -> Transport {
        Transport {
            expected_psn: 0,
            nak_pending: false,
            progress_at: Time::ZERO,
            nak_at: Time::ZERO,
            ack_ps,
            timer_armed: false,
            timer_psn: 0,
            retries: 0,
            last_loss: None,
        }
    }

    /// Records that a packet of the flow was lost on `link`.
    pub(super) fn note_loss(&mut self, link: usize, loss: Loss, now: Time) {
        self.last_loss = Some((link, loss, now));
    }

    /// Whether the receiver progressed since the timer started; if so,
    /// the retry count starts again.
    fn progressed(&mut self) -> bool {
        if self.expected_psn > self.timer_psn {
            self.timer_psn = self.expected_psn;
            self.retries = 0;
            true
        } else {
            false
        }
    }
}

impl PacketNetwork {
    /// The receiver's verdict on packet `psn` of `flow`: accepted (in
    /// order), or discarded, sending a NAK on the first gap.
    pub(super) fn transport_accepts(
        &mut self,
        flow: u32,
        psn: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<bool, OutOfTime> {
        let f = &mut self.flows[flow];
        let serial = f.serial;
        let Some(t) = f.transport.as_mut() else {
            return Ok(true);
        };
        if psn == t.expected_psn {
            t.expected_psn += 1;
            t.nak_pending = false;
            t.progress_at = now;
            return Ok(true);
        }
        if psn > t.expected_psn && !t.nak_pending {
            t.nak_pending = true;
            let at = now.checked_plus_ps(t.ack_ps).ok_or(OutOfTime)?;
            self.schedule(at, PacketEvent::Nak { flow, serial }, queue)?;
        }
        Ok(false)
    }

    /// Starts `flow`'s retransmission timer if it has a transport and
    /// the timer is not running.
    pub(super) fn arm_timer(
        &mut self,
        flow: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let f = &mut self.flows[flow];
        let serial = f.serial;
        let Some(t) = f.transport.as_mut() else {
            return Ok(());
        };
        if t.timer_armed {
            return Ok(());
        }
        t.timer_armed = true;
        t.timer_psn = t.expected_psn;
        let at = now
            .checked_plus_ps(self.transport.rto_ps())
            .ok_or(OutOfTime)?;
        self.schedule(at, PacketEvent::Timer { flow, serial }, queue)
    }

    /// The live flow `flow` if it still has serial `serial`.
    fn flow_with_serial(&self, flow: u32, serial: u32) -> bool {
        self.flows.get(flow).is_some_and(|f| f.serial == serial)
    }

    /// `flow`'s timer expires: nothing outstanding disarms it; progress
    /// since it started, or a NAK since it was set, restarts it from the
    /// last acknowledgement or NAK; else
    /// the sender goes back to the first unacknowledged packet, or gives
    /// up after `NCCL_IB_RETRY_CNT` retries. In a network where nothing
    /// moves and buffers wait on each other in a cycle, a flow held there
    /// stops instead: no retry can help, and the run ends reporting the
    /// deadlock.
    pub(super) fn timer_expires(
        &mut self,
        flow: u32,
        serial: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if !self.flow_with_serial(flow, serial) {
            return Ok(());
        }
        let rto = self.transport.rto_ps();
        let cut_psn = self.cut_psn(flow);
        let f = &mut self.flows[flow];
        let t = f
            .transport
            .as_mut()
            .expect("only transport flows arm timers");
        t.timer_armed = false;
        if t.expected_psn >= cut_psn {
            return Ok(());
        }
        // The timer restarts at the last acknowledgement's arrival, or at
        // a NAK's (which took the progress it reported).
        let restart = if t.progressed() {
            let acked = t.progress_at.checked_plus_ps(t.ack_ps).ok_or(OutOfTime)?;
            Some(acked.max(t.nak_at))
        } else {
            Some(t.nak_at).filter(|&at| at.checked_plus_ps(rto).is_some_and(|end| end > now))
        };
        if let Some(restart) = restart {
            let at = restart.checked_plus_ps(rto).ok_or(OutOfTime)?.max(now);
            t.timer_armed = true;
            return self.schedule(at, PacketEvent::Timer { flow, serial }, queue);
        }
        if self.pending_activity == 0 && self.held(flow) && self.buffer_cycle().is_some() {
            return Ok(());
        }
        self.retry(flow, now, queue)
    }

    /// Whether `flow` cannot move in a network where nothing moves: a
    /// packet of it waits in a queue (a copy sent again would wait behind
    /// it), or its first port cannot send. A flow whose packets were all
    /// lost and whose first port is free may still get through.
    fn held(&self, flow: u32) -> bool {
        let port = &self.ports[self.flows[flow].first_link as usize];
        port.down || port.pfc.paused || port.blocked.is_some() || self.held_at(flow).is_some()
    }

    /// A NAK reaches `flow`'s sender: it acknowledges what came before
    /// the gap (the timer restarts), and the sender goes back to the
    /// missing packet.
    pub(super) fn nak_arrives(
        &mut self,
        flow: u32,
        serial: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if !self.flow_with_serial(flow, serial) {
            return Ok(());
        }
        let t = self.flows[flow]
            .transport
            .as_mut()
            .expect("a NAK is for a transport flow");
        t.progressed();
        t.nak_at = now;
        self.retry(flow, now, queue)
    }

    /// One retry of `flow` (a timeout or a NAK): counted against the
    /// budget; within it, go back N and restart the timer.
    fn retry(&mut self, flow: u32, now: Time, queue: &mut EventQueue) -> Result<(), OutOfTime> {
        let budget = self.transport.ib_retry_cnt;
        let t = self.flows[flow]
            .transport
            .as_mut()
            .expect("a transport flow");
        t.retries = t.retries.saturating_add(1);
        if t.retries > budget {
            return self.fail(flow, now, queue);
        }
        let to = t.expected_psn;
        self.go_back(flow, to, now, queue)?;
        self.arm_timer(flow, now, queue)
    }

    /// The sequence number of `flow`'s next packet to cut.
    fn cut_psn(&self, flow: u32) -> u64 {
        let f = &self.flows[flow];
        if f.head == NONE {
            f.psn_end
        } else {
            self.messages[f.head].next_psn()
        }
    }

    /// Go-back-N: `flow`'s next packet to cut becomes `psn` (the first
    /// the receiver still expects), and every later one is cut again.
    fn go_back(
        &mut self,
        flow: u32,
        psn: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if psn >= self.cut_psn(flow) {
            return Ok(());
        }
        let mut m = self.flows[flow].oldest;
        let mut target = NONE;
        while m != NONE {
            let message = &mut self.messages[m];
            let first = message.first_psn;
            if target == NONE && psn < first + message.packets() {
                target = m;
                message.cut_bytes = (psn - first) * message.mtu_bytes;
            } else if target != NONE {
                message.cut_bytes = 0;
            }
            m = message.next;
        }
        debug_assert_ne!(
            target, NONE,
            "the expected packet is of an undelivered message"
        );
        let f = &mut self.flows[flow];
        let idle = f.head == NONE;
        f.head = target;
        if idle {
            let first = f.first_link as usize;
            self.ports[first].flows.push_back(flow);
            self.try_start(first, now, queue)?;
        }
        Ok(())
    }

    /// `flow`'s transport gives up: it leaves its port's round, its
    /// undelivered messages are dropped and reported as a failure.
    fn fail(&mut self, flow: u32, now: Time, queue: &mut EventQueue) -> Result<(), OutOfTime> {
        let first = self.flows[flow].first_link as usize;
        if self.flows[flow].head != NONE {
            self.leave_round(flow, now, queue)?;
        }
        let held_at = self.held_at(flow);
        let f = self.flows.remove(flow);
        self.flow_ids.remove(&f.key);
        let t = f.transport.expect("a transport flow");
        let mut messages = Vec::new();
        let mut m = f.oldest;
        while m != NONE {
            let message = &mut self.messages[m];
            messages.push(message.id);
            message.done = true;
            let next = message.next;
            if message.live_packets == 0 {
                self.messages.remove(m);
            }
            m = next;
        }
        self.failures.push(TransportFailure {
            flow: f.key,
            messages,
            at: now,
            retries: t.retries.saturating_sub(1),
            last_loss: t.last_loss.map(|(l, loss, at)| (LinkId::new(l), loss, at)),
            held_at,
        });
        self.try_start(first, now, queue)
    }

    /// The link where a packet of `flow` waits (the first found in link
    /// order), if one does.
    fn held_at(&self, flow: u32) -> Option<LinkId> {
        self.ports.iter().enumerate().find_map(|(l, port)| {
            port.transit
                .iter()
                .any(|&p| {
                    let m = &self.messages[self.packets[p].message];
                    m.flow == flow && !m.done
                })
                .then(|| LinkId::new(l))
        })
    }
}
