//! The TCP-like transport of the flows that cross plain Ethernet: its
//! rules and parameters, with Linux's defaults and where each comes from.
//!
//! NCCL reaches peers over plain (lossy, no PFC) Ethernet through its
//! socket transport (`NCCL_NET=Socket`, or when no RDMA device is
//! found): kernel TCP connections. Such a flow recovers its losses as
//! Linux TCP does, on TCP's timescales, not with the RDMA NIC's timer.
//! The model keeps the go-back-N machinery of the RDMA transport (the
//! module docs of [`super`], *Reliable transport*) and changes what
//! follows.
//!
//! # Loss recovery
//! - **Fast retransmit** (RFC 5681, section 3.2): a receiver answers each
//!   out-of-order segment with a duplicate ACK, and the sender resends
//!   the missing segment on the third ([`TCP_FASTRETRANS_THRESH`]). Here
//!   the receiver's one NAK per gap is that third duplicate ACK: it is
//!   sent when the third packet past the gap arrives, and reaches the
//!   sender one idle route latency later. A loss with fewer than three
//!   packets after it (a lost tail) waits for the timeout.
//! - **Lost retransmissions** (RACK, RFC 8985, on by default in Linux,
//!   which detects them among other losses): a retransmission is lost
//!   when packets sent after it are delivered. Each go-back starts a new epoch that the flow's packets
//!   carry; a receiver waiting for its NAK to be answered that sees
//!   packets of a later epoch past the gap (a flow's packets never
//!   overtake each other) counts a new gap and NAKs again at the third.
//! - **Retransmission timeout** (RFC 6298): with the route's idle round
//!   trip `R` (an MTU packet there, its ACK back) as the first and only
//!   sample, section 2.2 gives `SRTT = R`, `RTTVAR = R/2` and
//!   `RTO = SRTT + max(G, 4 RTTVAR) = 3R` (the clock granularity `G` is
//!   one picosecond here), raised to the minimum of section 2.4, which
//!   Linux sets to [`TCP_RTO_MIN_PS`] = 200 ms rather than the RFC's 1 s:
//!   `RTO = max(rto_min, 3R)`, 200 ms on any datacenter route (Linux's
//!   estimator gives `SRTT + max(rto_min, 4 RTTVAR)`, within one round
//!   trip of it). The timer restarts when new data is acknowledged
//!   (section 5.3).
//! - **Backoff** (section 5.5): each expiry without progress doubles the
//!   timeout, up to [`TCP_RTO_MAX_PS`] = 120 s; an acknowledgement of new
//!   data brings it back to the computed RTO (section 5.7).
//! - **Giving up**: after [`TCP_RETRIES2`] = 15 timeouts without
//!   progress, the connection is dropped at the next expiry. Linux's
//!   `tcp_retries2` counts the same way for a connection whose RTO is at
//!   its minimum: 15 gives "a hypothetical timeout of 924.6 seconds"
//!   (`Documentation/networking/ip-sysctl.rst`), 0.2 s x (2^0 + ... + 2^9)
//!   = 204.6 s before the timeout reaches 120 s, then six expiries of
//!   120 s; [`TcpConfig::give_up_after_ps`] computes it. Fast
//!   retransmits do not count, as in Linux, where only the retransmission
//!   timer does (the RDMA transport counts both, as `NCCL_IB_RETRY_CNT`
//!   does).
//!
//! # Congestion control
//! Without it, every sender of an incast sends at line rate, the switch
//! port (or a NIC whose PCIe link is slower than its wire) drops most of
//! what arrives, go-back-N resends it into the same full buffer, and the
//! retransmissions are lost in turn: an 8-node plain-Ethernet fat-tree's
//! 16 MiB allreduce took a second of 200 ms timeouts so. So each
//! connection has RFC 5681's congestion window, in packets ([`Window`]):
//! an initial window of [`TCP_INIT_CWND`] = 10 (RFC 6928; Linux's
//! `TCP_INIT_CWND`), slow start below `ssthresh` (one packet more per
//! ACK), congestion avoidance above it (one more per window of ACKs),
//! `ssthresh = max(in_flight / 2, 2)` at a loss, the window falling to
//! `ssthresh` at a fast retransmit (once per window of data, as NewReno,
//! RFC 6582) and to one packet at a timeout. The receiver acknowledges
//! every packet it accepts (an ACK event, one idle route latency back);
//! the sender sends only while fewer than `cwnd` packets are
//! unacknowledged.
//!
//! # What is left out
//! Linux's default congestion control is CUBIC (RFC 9438), not Reno's
//! linear growth; the window is per flow record, so a pair whose messages
//! all arrived starts its next burst from the initial window (Linux keeps
//! the window over the short idle times between a collective's steps);
//! there are no selective acknowledgements (RFC 2018) and no out-of-order
//! queue at the receiver (a Linux receiver keeps the segments past a
//! hole and the sender resends only the hole; here the receiver discards
//! them and the sender goes back N, as for RDMA), no tail loss probe
//! (RACK-TLP's TLP, RFC 8985: it recovers a lost tail within a few
//! milliseconds instead of one timeout), no fast-recovery window
//! inflation, no delayed ACKs and no per-message cost of the socket path.
//!
//! The constants' sources are Linux's `include/net/tcp.h` (`TCP_RTO_MIN`,
//! `TCP_RTO_MAX`, `TCP_RETR2`, `TCP_FASTRETRANS_THRESH`,
//! `TCP_INIT_CWND`) and `Documentation/networking/ip-sysctl.rst`
//! (`tcp_retries2`, `tcp_reordering`, `tcp_rto_min_us`,
//! `tcp_rto_max_ms`), and the RFCs named; no code is taken from any.

/// Linux's `TCP_RTO_MIN` (`include/net/tcp.h`: `HZ/5`, 200 ms), the
/// default of the `tcp_rto_min_us` sysctl (200000), in ps.
pub const TCP_RTO_MIN_PS: u64 = 200_000_000_000;

/// Linux's `TCP_RTO_MAX` (`include/net/tcp.h`: `120*HZ`, 120 s), the
/// default of the `tcp_rto_max_ms` sysctl (120000), in ps.
pub const TCP_RTO_MAX_PS: u64 = 120_000_000_000_000;

/// Linux's `tcp_retries2` default (`TCP_RETR2` in `include/net/tcp.h`;
/// `Documentation/networking/ip-sysctl.rst`): retransmission timeouts
/// without progress before the connection is dropped.
pub const TCP_RETRIES2: u8 = 15;

/// Duplicate ACKs that trigger a fast retransmit: RFC 5681's three,
/// Linux's `TCP_FASTRETRANS_THRESH` (`include/net/tcp.h`), the default of
/// the `tcp_reordering` sysctl.
pub const TCP_FASTRETRANS_THRESH: u8 = 3;

/// The parameters of the TCP-like transport (see the module docs), as a
/// Linux administrator sets them; [`TcpConfig::default`] is Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The smallest retransmission timeout, in ps (`tcp_rto_min_us`).
    pub rto_min_ps: u64,
    /// The largest backed-off retransmission timeout, in ps
    /// (`tcp_rto_max_ms`).
    pub rto_max_ps: u64,
    /// Retransmission timeouts without progress before the transport
    /// gives up (`tcp_retries2`).
    pub retries2: u8,
}

impl Default for TcpConfig {
    /// Linux's defaults: 200 ms, 120 s, 15 retries.
    fn default() -> Self {
        TcpConfig {
            rto_min_ps: TCP_RTO_MIN_PS,
            rto_max_ps: TCP_RTO_MAX_PS,
            retries2: TCP_RETRIES2,
        }
    }
}

impl TcpConfig {
    /// The retransmission timeout of a route whose idle round trip is
    /// `rtt_ps`: `max(rto_min, 3 x rtt)` (RFC 6298 from one sample, see
    /// the module docs), at most `rto_max`.
    pub fn rto_ps(self, rtt_ps: u64) -> u64 {
        rtt_ps
            .saturating_mul(3)
            .max(self.rto_min_ps)
            .min(self.rto_max_ps)
    }

    /// The timeout after one more expiry: doubled, at most `rto_max`
    /// (RFC 6298, section 5.5).
    pub fn backed_off_ps(self, rto_ps: u64) -> u64 {
        back_off(rto_ps, self.rto_max_ps)
    }

    /// How long a flow whose every packet is lost lives, from its first
    /// transmission to the expiry at which it gives up, for a route whose
    /// timeout is `rto_ps`: `retries2 + 1` expiries, each backed off.
    /// With Linux's defaults and a 200 ms RTO, 924.6 s.
    pub fn give_up_after_ps(self, rto_ps: u64) -> u64 {
        let mut total = 0u64;
        let mut rto = rto_ps;
        for _ in 0..=self.retries2 {
            total = total.saturating_add(rto);
            rto = self.backed_off_ps(rto);
        }
        total
    }
}

/// `rto_ps` after one more expiry: doubled, at most `max_ps` (but never
/// below `rto_ps` itself); the one backoff rule of the live transport and
/// of [`TcpConfig::backed_off_ps`].
pub(super) fn back_off(rto_ps: u64, max_ps: u64) -> u64 {
    rto_ps.saturating_mul(2).min(max_ps.max(rto_ps))
}

/// RFC 6928's initial window, Linux's `TCP_INIT_CWND`
/// (`include/net/tcp.h`): 10 segments.
pub const TCP_INIT_CWND: u32 = 10;

/// The congestion window of one connection, in packets (segments), by
/// RFC 5681's rules (see the module docs, *Congestion control*), and the
/// acknowledgements its sender has heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Window {
    /// `cwnd`: packets the sender may have unacknowledged.
    cwnd: u32,
    /// `ssthresh`: below it the window grows by one packet per ACK (slow
    /// start), at or above it by one per window of ACKs (congestion
    /// avoidance).
    ssthresh: u32,
    /// ACKs counted towards the next increase in congestion avoidance.
    acks_in_window: u32,
    /// The sender's cumulative acknowledgement (`SND.UNA`): the packets
    /// it has heard acknowledged. The receiver accepts packets only in
    /// order and acknowledges each, so it counts ACKs.
    acked: u64,
    /// NewReno's `recover` (RFC 6582, section 3.2): the sequence number
    /// sent last when the window was last cut; a loss found before the
    /// ACKs pass it belongs to the same episode and cuts nothing more.
    recover: u64,
}

impl Default for Window {
    /// A new connection's: [`TCP_INIT_CWND`] packets, `ssthresh`
    /// "arbitrarily high" (RFC 5681, section 3.1).
    fn default() -> Self {
        Window {
            cwnd: TCP_INIT_CWND,
            ssthresh: u32::MAX,
            acks_in_window: 0,
            acked: 0,
            recover: 0,
        }
    }
}

impl Window {
    /// Packets sent below sequence number `next` and not yet heard
    /// acknowledged.
    pub(super) fn in_flight(self, next: u64) -> u64 {
        next.saturating_sub(self.acked)
    }

    /// Whether a sender whose next packet is `next` may send it.
    pub(super) fn allows(self, next: u64) -> bool {
        self.in_flight(next) < u64::from(self.cwnd)
    }

    /// An ACK of one new packet: slow start adds a packet per ACK
    /// (RFC 5681, section 3.1, equation 2), congestion avoidance a packet
    /// per window of ACKs (equation 3, counted as Linux's
    /// `tcp_cong_avoid_ai` counts).
    pub(super) fn on_ack(&mut self) {
        self.acked += 1;
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.saturating_add(1);
            return;
        }
        self.acks_in_window += 1;
        if self.acks_in_window >= self.cwnd {
            self.acks_in_window = 0;
            self.cwnd = self.cwnd.saturating_add(1);
        }
    }

    /// A loss detected by a NAK (the third duplicate ACK) when the next
    /// packet to send was `next` and the highest ever sent `sent - 1`:
    /// `ssthresh = max(in_flight / 2, 2)` (equation 4) and the window
    /// falls to it (fast recovery's window once the retransmission is
    /// acknowledged, section 3.2 step 6); nothing if the loss is of an
    /// episode already answered (NewReno).
    pub(super) fn on_fast_retransmit(&mut self, next: u64, sent: u64) {
        if self.acked < self.recover {
            return;
        }
        self.recover = sent;
        self.ssthresh = half(self.in_flight(next));
        self.cwnd = self.ssthresh;
        self.acks_in_window = 0;
    }

    /// A retransmission timeout, the same arguments: `ssthresh` as for a
    /// fast retransmit, the window down to one packet (the loss window,
    /// section 3.1), a new recovery episode (RFC 6582, section 3.2 step 4).
    pub(super) fn on_timeout(&mut self, next: u64, sent: u64) {
        self.recover = sent;
        self.ssthresh = half(self.in_flight(next));
        self.cwnd = 1;
        self.acks_in_window = 0;
    }
}

/// `max(in_flight / 2, 2)` packets, RFC 5681's equation 4.
fn half(in_flight: u64) -> u32 {
    u32::try_from(in_flight / 2).unwrap_or(u32::MAX).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linuxs_defaults_give_its_documented_timeout() {
        let c = TcpConfig::default();
        // ip-sysctl.rst: "The default value of 15 yields a hypothetical
        // timeout of 924.6 seconds".
        assert_eq!(
            c.give_up_after_ps(TCP_RTO_MIN_PS),
            924_600_000_000_000,
            "924.6 s"
        );
        // RFC 1122's 100 s: tcp_retries2 = 8 (ip-sysctl.rst).
        let eight = TcpConfig { retries2: 8, ..c };
        assert_eq!(eight.give_up_after_ps(TCP_RTO_MIN_PS), 102_200_000_000_000);
    }

    #[test]
    fn the_window_starts_slow_then_grows_by_one_per_window_and_halves_on_loss() {
        let mut w = Window::default();
        assert!(w.allows(9) && !w.allows(10));
        // Slow start: one packet per ACK, so the window doubles per round.
        for _ in 0..10 {
            w.on_ack();
        }
        assert_eq!((w.cwnd, w.acked), (20, 10));
        assert!(w.allows(29) && !w.allows(30));
        // A NAK with 30 sent, 20 in flight: ssthresh 10, the window 10.
        w.on_fast_retransmit(30, 30);
        assert_eq!((w.cwnd, w.ssthresh), (10, 10));
        // Another loss before the ACKs reach 30 is the same episode.
        w.on_fast_retransmit(30, 30);
        assert_eq!((w.cwnd, w.ssthresh), (10, 10));
        // Congestion avoidance: one packet per 10 ACKs.
        for _ in 0..9 {
            w.on_ack();
        }
        assert_eq!(w.cwnd, 10);
        w.on_ack();
        assert_eq!((w.cwnd, w.acked), (11, 20));
        // A timeout with 3 in flight: one packet, ssthresh half of what
        // was in flight, at least two.
        w.on_timeout(23, 30);
        assert_eq!((w.cwnd, w.ssthresh), (1, 2));
        assert!(w.allows(20) && !w.allows(21));
    }

    #[test]
    fn the_timeout_is_the_minimum_on_short_routes_and_three_round_trips_on_long_ones() {
        let c = TcpConfig::default();
        assert_eq!(c.rto_ps(5_000_000), TCP_RTO_MIN_PS);
        assert_eq!(c.rto_ps(100_000_000_000), 300_000_000_000);
        assert_eq!(c.rto_ps(u64::MAX), TCP_RTO_MAX_PS);
        // Backoff doubles up to the maximum and stays there.
        assert_eq!(c.backed_off_ps(TCP_RTO_MIN_PS), 400_000_000_000);
        assert_eq!(c.backed_off_ps(100_000_000_000_000), TCP_RTO_MAX_PS);
        assert_eq!(c.backed_off_ps(TCP_RTO_MAX_PS), TCP_RTO_MAX_PS);
    }
}
