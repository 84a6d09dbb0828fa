//! The reliable transports of the packet model: go-back-N over the flows
//! that cross network links, as an RDMA queue pair (InfiniBand, RoCE) or
//! as a TCP connection (plain Ethernet, [`super::tcp`]); see the module
//! docs of [`super`], *Reliable transport*.

use algorithms::Time;
use topologies::{Link, LinkId, LinkKind};

use super::port::Loss;
use super::tcp::{TCP_FASTRETRANS_THRESH, TcpConfig, Window};
use super::{NONE, PacketEvent, PacketNetwork};
use crate::event::{EventQueue, MessageId};
use crate::network::{OutOfTime, TransportConfig};

/// Which reliable transport carries a flow, chosen by the kinds of the
/// links its route crosses ([`TransportKind::of_link`]; the strictest
/// wins: TCP over RDMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TransportKind {
    /// An RDMA reliable-connected queue pair (NCCL's IB transport, over
    /// InfiniBand or RoCE): a NAK at the first packet past a gap, the
    /// timeout 4.096 us x 2^`NCCL_IB_TIMEOUT`, `NCCL_IB_RETRY_CNT`
    /// retries (NAKs and timeouts alike) without progress.
    Rdma,
    /// A TCP connection (NCCL's socket transport, over plain Ethernet):
    /// fast retransmit at the third duplicate ACK, Linux's 200 ms minimum
    /// timeout with exponential backoff, `tcp_retries2` timeouts without
    /// progress ([`TcpConfig`]).
    Tcp,
}

impl TransportKind {
    /// The transport a flow crossing `link` needs at least: TCP over plain
    /// Ethernet (whatever its flow control), RDMA over InfiniBand and
    /// RoCE and over any other link declared lossy (a scenario may make
    /// an on-board link drop), none over a lossless on-board link.
    pub fn of_link(link: &Link) -> Option<TransportKind> {
        match link.kind {
            LinkKind::Ethernet { .. } => Some(TransportKind::Tcp),
            LinkKind::InfiniBand(_) | LinkKind::Roce { .. } => Some(TransportKind::Rdma),
            _ => (!link.lossless).then_some(TransportKind::Rdma),
        }
    }

    /// Its name in reports: "RDMA" or "TCP".
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Rdma => "RDMA",
            TransportKind::Tcp => "TCP",
        }
    }

    /// The setting that bounds its retries without progress, for reports.
    pub fn retry_limit(self) -> &'static str {
        match self {
            TransportKind::Rdma => "NCCL_IB_RETRY_CNT",
            TransportKind::Tcp => "tcp_retries2",
        }
    }
}

/// Why a flow goes back to the first packet its receiver expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    /// A NAK (RDMA's sequence error, TCP's third duplicate ACK).
    Nak,
    /// The retransmission timer expired without progress.
    Timeout,
}

/// The transport state of one flow (a queue pair or a connection): the
/// receiver's expected sequence number and the sender's timer and retry
/// count.
#[derive(Debug)]
pub(super) struct Transport {
    /// RDMA or TCP.
    kind: TransportKind,
    /// The next sequence number the receiver accepts.
    expected_psn: u64,
    /// Whether the receiver has sent a NAK for the current gap (it sends
    /// one per gap, then waits for the missing packet).
    nak_pending: bool,
    /// Packets past the current gap the receiver has seen (TCP's
    /// duplicate ACKs), up to the NAK's threshold.
    past_gap: u8,
    /// Packets past a gap that make the receiver send its NAK: 1 for
    /// RDMA, [`TCP_FASTRETRANS_THRESH`] for TCP.
    nak_threshold: u8,
    /// The sender's epoch (see [`super::Flow::epoch`]) of the packet that
    /// drew the current gap's NAK.
    nak_epoch: u16,
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
    /// The retransmission timeout without backoff.
    base_rto_ps: u64,
    /// The current timeout: the base, or for TCP the base doubled at
    /// each expiry since the last progress, up to `max_rto_ps`.
    rto_ps: u64,
    /// The largest backed-off timeout (TCP; the base for RDMA).
    max_rto_ps: u64,
    /// Retries since the last progress.
    retries: u16,
    /// The retries allowed without progress; one more fails the flow.
    budget: u16,
    /// The last packet of the flow lost: where, how, when.
    last_loss: Option<(usize, Loss, Time)>,
    /// TCP's congestion window and the ACKs it has heard (`None` for
    /// RDMA, which sends at line rate and hears no ACKs here).
    pub(super) window: Option<Window>,
}

/// A flow whose transport gave up: `NCCL_IB_RETRY_CNT` retries (RDMA) or
/// `tcp_retries2` retransmission timeouts (TCP) passed without progress.
/// Its messages are never delivered.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportFailure {
    /// The flow's key ([`crate::network::Transfer::flow`]).
    pub flow: u64,
    /// Which transport gave up.
    pub transport: TransportKind,
    /// The world's ids of its undelivered messages.
    pub messages: Vec<MessageId>,
    /// When it gave up.
    pub at: Time,
    /// Retries made without progress (for TCP, retransmission timeouts).
    pub retries: u16,
    /// The last loss of the flow, if any: the link, how, when.
    pub last_loss: Option<(LinkId, Loss, Time)>,
    /// Where the first packet it still waits for sits, if it is in the
    /// network (behind a link that is down or paused).
    pub held_at: Option<LinkId>,
}

impl Transport {
    /// A fresh RDMA queue pair whose acknowledgements take `ack_ps` to
    /// return.
    pub(super) fn rdma(ack_ps: u64, config: TransportConfig) -> Transport {
        let rto_ps = config.rto_ps();
        Transport::new(
            TransportKind::Rdma,
            ack_ps,
            1,
            rto_ps,
            rto_ps,
            config.ib_retry_cnt,
        )
    }

    /// A fresh TCP connection whose acknowledgements take `ack_ps` to
    /// return, over a route whose idle round trip is `rtt_ps`.
    pub(super) fn tcp(ack_ps: u64, rtt_ps: u64, config: TcpConfig) -> Transport {
        Transport {
            window: Some(Window::default()),
            ..Transport::new(
                TransportKind::Tcp,
                ack_ps,
                TCP_FASTRETRANS_THRESH,
                config.rto_ps(rtt_ps),
                config.rto_max_ps,
                config.retries2,
            )
        }
    }

    fn new(
        kind: TransportKind,
        ack_ps: u64,
        nak_threshold: u8,
        rto_ps: u64,
        max_rto_ps: u64,
        budget: u8,
    ) -> Transport {
        Transport {
            kind,
            expected_psn: 0,
            nak_pending: false,
            past_gap: 0,
            nak_threshold,
            nak_epoch: 0,
            progress_at: Time::ZERO,
            nak_at: Time::ZERO,
            ack_ps,
            timer_armed: false,
            timer_psn: 0,
            base_rto_ps: rto_ps,
            rto_ps,
            max_rto_ps: max_rto_ps.max(rto_ps),
            retries: 0,
            budget: u16::from(budget),
            last_loss: None,
            window: None,
        }
    }

    /// Records that a packet of the flow was lost on `link`.
    pub(super) fn note_loss(&mut self, link: usize, loss: Loss, now: Time) {
        self.last_loss = Some((link, loss, now));
    }

    /// Whether the receiver progressed since the timer started; if so,
    /// the retry count starts again and the timeout loses its backoff.
    fn progressed(&mut self) -> bool {
        if self.expected_psn > self.timer_psn {
            self.timer_psn = self.expected_psn;
            self.retries = 0;
            self.rto_ps = self.base_rto_ps;
            true
        } else {
            false
        }
    }

    /// Counts one retry: every one for RDMA, timeouts only for TCP (whose
    /// timeouts also back off). Whether the budget still allows it.
    fn count(&mut self, why: Retry) -> bool {
        let counted = match self.kind {
            TransportKind::Rdma => true,
            TransportKind::Tcp => why == Retry::Timeout,
        };
        if !counted {
            return true;
        }
        if self.kind == TransportKind::Tcp {
            self.rto_ps = super::tcp::back_off(self.rto_ps, self.max_rto_ps);
        }
        self.retries = self.retries.saturating_add(1);
        self.retries <= self.budget
    }
}

/// Whether epoch `a` is after epoch `b`, in serial-number arithmetic
/// (RFC 1982): a flow's epochs wrap at 2^16, and the ones in flight at
/// once are far fewer than 2^15 apart.
pub(super) fn later_epoch(a: u16, b: u16) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 15
}

impl PacketNetwork {
    /// The receiver's verdict on packet `psn` of `flow`, cut in the
    /// sender's epoch `epoch`: accepted (in order), or discarded, sending
    /// a NAK once per gap when the gap's threshold of packets past it
    /// have arrived. A TCP receiver also sends one more when packets sent
    /// after the go-back that answered its NAK arrive past the gap: the
    /// retransmission was lost (RACK's lost-retransmission detection,
    /// RFC 8985; an RDMA receiver waits for the timer).
    pub(super) fn transport_accepts(
        &mut self,
        flow: u32,
        psn: u64,
        epoch: u16,
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
            t.past_gap = 0;
            t.progress_at = now;
            if t.window.is_some() {
                // TCP acknowledges each packet; the ACK clocks the window.
                let at = now.checked_plus_ps(t.ack_ps).ok_or(OutOfTime)?;
                self.schedule(at, PacketEvent::Ack { flow, serial }, queue)?;
            }
            return Ok(true);
        }
        if psn > t.expected_psn
            && t.nak_pending
            && t.kind == TransportKind::Tcp
            && later_epoch(epoch, t.nak_epoch)
        {
            // Sent after the sender went back for the gap, yet past it.
            t.nak_pending = false;
            t.past_gap = 0;
        }
        if psn > t.expected_psn && !t.nak_pending {
            t.past_gap += 1;
            if t.past_gap < t.nak_threshold {
                return Ok(false);
            }
            t.nak_pending = true;
            t.nak_epoch = epoch;
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
        let at = now.checked_plus_ps(t.rto_ps).ok_or(OutOfTime)?;
        self.schedule(at, PacketEvent::Timer { flow, serial }, queue)
    }

    /// The live flow `flow` if it still has serial `serial`.
    pub(super) fn flow_with_serial(&self, flow: u32, serial: u32) -> bool {
        self.flows.get(flow).is_some_and(|f| f.serial == serial)
    }

    /// `flow`'s timer expires: nothing outstanding disarms it; progress
    /// since it started, or a NAK since it was set, restarts it from the
    /// last acknowledgement or NAK; else
    /// the sender goes back to the first unacknowledged packet, or gives
    /// up after its budget of retries (`NCCL_IB_RETRY_CNT`,
    /// `tcp_retries2`). In a network where nothing
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
            let rto = t.rto_ps;
            Some(t.nak_at).filter(|&at| at.checked_plus_ps(rto).is_some_and(|end| end > now))
        };
        if let Some(restart) = restart {
            let at = restart.checked_plus_ps(t.rto_ps).ok_or(OutOfTime)?.max(now);
            t.timer_armed = true;
            return self.schedule(at, PacketEvent::Timer { flow, serial }, queue);
        }
        if self.pending_activity == 0 && self.held(flow) && self.buffer_cycle().is_some() {
            return Ok(());
        }
        self.retry(flow, Retry::Timeout, now, queue)
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
        self.retry(flow, Retry::Nak, now, queue)
    }

    /// One retry of `flow` (a timeout or a NAK): counted against the
    /// budget as its transport counts; within it, go back N and restart
    /// the timer (backed off after a TCP timeout).
    fn retry(
        &mut self,
        flow: u32,
        why: Retry,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let (next, sent) = (self.cut_psn(flow), self.flows[flow].psn_sent);
        let t = self.flows[flow]
            .transport
            .as_mut()
            .expect("a transport flow");
        if let Some(w) = &mut t.window {
            match why {
                Retry::Nak => w.on_fast_retransmit(next, sent),
                Retry::Timeout => w.on_timeout(next, sent),
            }
        }
        if !t.count(why) {
            return self.fail(flow, now, queue);
        }
        let to = t.expected_psn;
        self.go_back(flow, to, now, queue)?;
        self.arm_timer(flow, now, queue)
    }

    /// The sequence number of `flow`'s next packet to cut.
    pub(super) fn cut_psn(&self, flow: u32) -> u64 {
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
        let out_of_round = f.head == NONE || f.parked;
        f.head = target;
        f.epoch = f.epoch.wrapping_add(1);
        if out_of_round {
            // Going back may have opened a waiting TCP flow's window.
            self.enter_round(flow, now, queue)?;
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
            transport: t.kind,
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
