//! Tests of the TCP-like transport of plain Ethernet against the RDMA
//! transport of RoCE: which flows get which, an incast on a leaf-spine
//! (lossless under PFC, lossy and recovered without a timeout on plain
//! Ethernet), and the recovery times a loss costs (one to three round
//! trips for a loss followed by three packets, one 200 ms timeout for a
//! lost tail, timeouts doubling, the give-up after `tcp_retries2`), and
//! the receiver's NAKs (duplicate ACKs, lost retransmissions).

use std::sync::Arc;

use algorithms::Time;
use topologies::presets::{LeafSpine, leaf_spine};
use topologies::{Link, LinkId, LinkKind, Router, Topology, Vertex, VertexId, VertexKind};

use super::tcp::{TCP_RTO_MIN_PS, TcpConfig};
use super::tests::{Driver, KIB, MIB, Send, gpu, send};
use super::{PacketEvent, PacketNetwork, TransportFailure, TransportKind};
use crate::event::{EventKind, EventQueue};
use crate::network::path::{idle_delivery_ps, idle_latency_ps};
use crate::network::{LinkChange, LinkUsage, NetEvent, Transfer};

/// One millisecond, in ps.
const MS: u64 = 1_000_000_000;

fn kind_link(kind: &str) -> Link {
    LinkKind::parse(kind).unwrap().defaults()
}

/// `h0 -> s -> h2` over links of `kind` (and `h1 -> s`, unused): the
/// topology and the two links of the route.
fn line(kind: &str) -> (Arc<Topology>, [LinkId; 2]) {
    let mut t = Topology::new();
    let h: Vec<VertexId> = (0..3).map(|i| gpu(&mut t, &format!("h{i}"))).collect();
    let s = t
        .add_vertex(Vertex::with_default_latency("s", VertexKind::Leaf))
        .unwrap();
    let l = kind_link(kind);
    let (a, _) = t.add_link(h[0], s, l).unwrap();
    t.add_link(h[1], s, l).unwrap();
    let (_, c) = t.add_link(h[2], s, l).unwrap();
    (Arc::new(t), [a, c])
}

/// What a run produced.
struct Outcome {
    delivered_ps: Vec<Option<u64>>,
    usage: Vec<LinkUsage>,
    failures: Vec<TransportFailure>,
}

/// Runs until no event is left (timers included).
fn run(net: PacketNetwork, sends: &[Send], changes: &[LinkChange]) -> Outcome {
    let mut d = Driver::with_net(net, sends, changes).unwrap();
    d.run_until(u64::MAX).unwrap();
    let Driver { mut net, at, .. } = d;
    super::stress_tests::assert_drained(&net, 0);
    Outcome {
        delivered_ps: at,
        usage: net.usage().to_vec(),
        failures: net.take_failures(),
    }
}

fn total(u: &[LinkUsage], f: impl Fn(&LinkUsage) -> u64) -> u64 {
    u.iter().map(f).sum()
}

fn makespan(o: &Outcome) -> u64 {
    o.delivered_ps
        .iter()
        .map(|t| t.expect("every message is delivered"))
        .max()
        .unwrap()
}

/// `link` loses every packet that reaches its far end from `from_ps` to
/// `until_ps` (forever if `None`).
fn blackout(link: LinkId, from_ps: u64, until_ps: Option<u64>) -> Vec<LinkChange> {
    let on = LinkChange {
        loss_rate: 1.0,
        ..LinkChange::bandwidth(Time(from_ps), link, 1.0)
    };
    let off = until_ps.map(|t| LinkChange::bandwidth(Time(t), link, 1.0));
    std::iter::once(on).chain(off).collect()
}

/// Eight hosts on a leaf-spine of `nic` links (four per leaf, two
/// spines); hosts 1..8 each send `bytes` to host 0 over the router's
/// routes.
fn incast(nic: &str, bytes: u64) -> (PacketNetwork, Vec<Send>) {
    let params = LeafSpine {
        hosts: 8,
        hosts_per_leaf: 4,
        spines: 2,
        nic: LinkKind::parse(nic).unwrap(),
        oversubscription: 1.0,
    };
    let t = Arc::new(leaf_spine(&params).unwrap());
    let mut router = Router::new(Arc::clone(&t), 0);
    let host = |h: usize| t.find(&format!("host{h}")).unwrap();
    let sends = (1..8)
        .map(|h| {
            let route = router.route(host(h), host(0), h as u64).unwrap();
            send(bytes, &route, h as u64)
        })
        .collect();
    (PacketNetwork::new(t, false), sends)
}

#[test]
fn an_incast_on_a_roce_leaf_spine_with_pfc_drops_nothing() {
    let (net, sends) = incast("roce400", 2 * MIB);
    let o = run(net, &sends, &[]);
    assert!(o.failures.is_empty());
    assert_eq!(total(&o.usage, |u| u.overflow_drops), 0);
    assert_eq!(total(&o.usage, |u| u.lost), 0);
    assert_eq!(total(&o.usage, |u| u.retransmitted), 0);
    // PFC held the senders back instead.
    assert!(total(&o.usage, |u| u.pause_frames) > 0);
    // Far from any timeout: 14 MiB into one host take milliseconds.
    assert!(makespan(&o) < 5 * MS, "{}", makespan(&o));
}

#[test]
fn the_same_incast_on_plain_ethernet_drops_and_recovers_without_a_timeout() {
    let (roce, sends) = incast("roce400", 2 * MIB);
    let lossless = makespan(&run(roce, &sends, &[]));
    let (net, sends) = incast("ethernet400", 2 * MIB);
    let o = run(net, &sends, &[]);
    assert!(o.failures.is_empty(), "{:?}", o.failures);
    assert!(total(&o.usage, |u| u.overflow_drops) > 0);
    assert!(total(&o.usage, |u| u.retransmitted) > 0);
    assert_eq!(total(&o.usage, |u| u.pause_frames), 0);
    // Fast retransmits (and lost retransmissions found by later packets)
    // recover every drop: the incast takes about as long as under PFC,
    // far less than the 200 ms minimum timeout.
    let m = makespan(&o);
    assert!(m < 2 * lossless, "{m} vs {lossless} lossless");
}

/// One message of `bytes` over `h0 -> s -> h2`, with the changes
/// `changes` makes for `s -> h2` and the network `net` makes.
fn one_message(
    kind: &str,
    bytes: u64,
    changes: impl FnOnce(LinkId) -> Vec<LinkChange>,
    net: impl FnOnce(PacketNetwork) -> PacketNetwork,
) -> Outcome {
    let (t, [a, c]) = line(kind);
    let sends = [send(bytes, &[a, c], 0)];
    run(net(PacketNetwork::new(t, false)), &sends, &changes(c))
}

/// Ten packets of 1500 B (the last 836 B): one initial window, sent back
/// to back, so packet `k` reaches `h2` at the idle delivery time of
/// `1500 (k + 1)` bytes.
const TEN_PACKETS: u64 = 14 * KIB;

/// When packet `k` (of 1500 B) of a back-to-back burst reaches `h2`.
fn arrival_ps(t: &Topology, route: &[LinkId], k: u64) -> u64 {
    idle_delivery_ps(t, route, (1500 * (k + 1)).min(TEN_PACKETS))
}

/// Loses packet `k` of [`TEN_PACKETS`] on `s -> h2` (a window of 10 ns
/// around its arrival: packets arrive 120 ns apart) and returns the
/// message's delivery time, with the clean run's.
fn lose_packet(kind: &str, k: u64) -> (u64, u64) {
    let (t, [a, c]) = line(kind);
    let at = arrival_ps(&t, &[a, c], k);
    let clean = one_message(kind, TEN_PACKETS, |_| Vec::new(), |n| n);
    let lossy = one_message(
        kind,
        TEN_PACKETS,
        |c| blackout(c, at - 5_000, Some(at + 5_000)),
        |n| n,
    );
    assert_eq!(
        total(&lossy.usage, |u| u.lost),
        1,
        "exactly packet {k} lost"
    );
    assert!(lossy.failures.is_empty());
    (makespan(&clean), makespan(&lossy))
}

/// The idle round trip of `h0 -> s -> h2`: a full packet there, its ACK
/// back.
fn round_trip_ps(kind: &str) -> u64 {
    let (t, route) = line(kind);
    idle_delivery_ps(&t, &route, 1500) + idle_latency_ps(&t, &route, 0)
}

#[test]
fn a_loss_followed_by_three_packets_costs_about_a_round_trip() {
    // Packet 5 is lost; 6, 7 and 8 are the three duplicate ACKs: the
    // sender hears of the gap one ACK latency after 8 arrives and sends
    // 5 again (then the rest, within its halved window).
    let (clean, lossy) = lose_packet("ethernet100", 5);
    let rtt = round_trip_ps("ethernet100");
    let cost = lossy - clean;
    assert!(
        (rtt..3 * rtt).contains(&cost),
        "cost {cost} ps, round trip {rtt} ps"
    );
}

#[test]
fn a_loss_with_fewer_than_three_packets_after_it_waits_for_the_200_ms_timeout() {
    // Packet 6 has three packets after it (fast retransmit), packets 7
    // and 8 two and one, and the last packet none: those wait for the
    // timeout.
    let rtt = round_trip_ps("ethernet100");
    let (clean, lossy) = lose_packet("ethernet100", 6);
    assert!(lossy - clean < 3 * rtt, "{clean} -> {lossy}");
    for k in [7, 8, 9] {
        let (clean, lossy) = lose_packet("ethernet100", k);
        let cost = lossy - clean;
        assert!(
            (TCP_RTO_MIN_PS..TCP_RTO_MIN_PS + 3 * rtt).contains(&cost),
            "packet {k}: cost {cost} ps"
        );
    }
}

#[test]
fn a_lost_tail_costs_tcps_200_ms_on_ethernet_and_the_rdma_timeout_on_roce() {
    // The same lost last packet, on RoCE: NCCL_IB_TIMEOUT 18, 1.07 s.
    let (clean, lossy) = lose_packet("ethernet100", 9);
    let tcp_cost = lossy - clean;
    // RoCE's 4 KiB MTU makes 14 KiB four packets; lose the last.
    let (t, [a, c]) = line("roce100");
    let at = idle_delivery_ps(&t, &[a, c], TEN_PACKETS);
    let roce = one_message(
        "roce100",
        TEN_PACKETS,
        |c| blackout(c, at - 5_000, Some(at + 5_000)),
        |n| n,
    );
    let rdma_cost = makespan(&roce) - at;
    let rdma_rto = crate::network::TransportConfig::default().rto_ps();
    let rtt = round_trip_ps("ethernet100");
    assert!((TCP_RTO_MIN_PS..TCP_RTO_MIN_PS + 3 * rtt).contains(&tcp_cost));
    assert!((rdma_rto..rdma_rto + 3 * rtt).contains(&rdma_cost));
}

#[test]
fn timeouts_without_progress_double() {
    // One packet, lost until 700 ms: sent at 0, again at 200 ms (the
    // timeout doubles to 400 ms), at 600 ms (800 ms), and at 1.4 s it
    // gets through.
    let o = one_message(
        "ethernet100",
        KIB,
        |c| blackout(c, 0, Some(700 * MS)),
        |n| n,
    );
    let (t, route) = line("ethernet100");
    assert_eq!(makespan(&o), 1400 * MS + idle_delivery_ps(&t, &route, KIB));
    assert_eq!(o.usage[route[0].index()].retransmitted, 3);
}

#[test]
fn tcp_gives_up_after_tcp_retries2_timeouts_924_6_s_after_the_first_send() {
    let o = one_message("ethernet100", KIB, |c| blackout(c, 0, None), |n| n);
    let [f] = o.failures.as_slice() else {
        panic!("one failure: {:?}", o.failures)
    };
    assert_eq!(f.transport, TransportKind::Tcp);
    assert_eq!(f.retries, 15);
    // ip-sysctl.rst's "hypothetical timeout of 924.6 seconds".
    assert_eq!(f.at, Time(924_600 * MS));
    assert_eq!(o.delivered_ps, vec![None]);

    // Settings shorten it: 1 ms minimum, 2 retries: 1 + 2 + 4 ms.
    let tcp = TcpConfig {
        rto_min_ps: MS,
        retries2: 2,
        ..TcpConfig::default()
    };
    let o = one_message(
        "ethernet100",
        KIB,
        |c| blackout(c, 0, None),
        |n| n.with_tcp(tcp),
    );
    assert_eq!((o.failures[0].at, o.failures[0].retries), (Time(7 * MS), 2));
}

#[test]
fn a_route_that_crosses_plain_ethernet_uses_tcp_and_one_over_roce_rdma() {
    // h0 -roce-> s -ethernet-> h1: TCP; h0 -roce-> s -roce-> h2: RDMA.
    let mut t = Topology::new();
    let h: Vec<VertexId> = (0..3).map(|i| gpu(&mut t, &format!("h{i}"))).collect();
    let s = t
        .add_vertex(Vertex::with_default_latency("s", VertexKind::Leaf))
        .unwrap();
    let (a, _) = t.add_link(h[0], s, kind_link("roce100")).unwrap();
    let (_, b) = t.add_link(h[1], s, kind_link("ethernet100")).unwrap();
    let (_, c) = t.add_link(h[2], s, kind_link("roce100")).unwrap();
    let sends = [send(KIB, &[a, b], 0), send(KIB, &[a, c], 1)];
    let net = PacketNetwork::new(Arc::new(t), false);
    // Both far ends lose everything: each transport gives up its way.
    let mut changes = blackout(b, 0, None);
    changes.extend(blackout(c, 0, None));
    let o = run(net, &sends, &changes);
    let kinds: Vec<(u64, TransportKind)> =
        o.failures.iter().map(|f| (f.flow, f.transport)).collect();
    assert_eq!(
        kinds,
        [(1, TransportKind::Rdma), (0, TransportKind::Tcp)],
        "RDMA gives up after 8 x 1.07 s, TCP after 924.6 s"
    );
}

/// Feeds packets `(psn, epoch)` of one 14 KiB message's flow straight to
/// its receiver over links of `kind`, and returns the indices of those
/// that drew a NAK.
fn naks(kind: &str, packets: &[(u64, u16)]) -> Vec<usize> {
    let (t, route) = line(kind);
    let mut net = PacketNetwork::new(t, false);
    let mut queue = EventQueue::new();
    let transfer = Transfer {
        message: 0,
        bytes: TEN_PACKETS,
        route: route.to_vec().into(),
        flow: 0,
        path: None,
    };
    net.start(Time::ZERO, transfer, &mut queue).unwrap();
    let flow = net.flow_ids[&0];
    let mut drew = Vec::new();
    for (i, &(psn, epoch)) in packets.iter().enumerate() {
        let mut q = EventQueue::new();
        net.transport_accepts(flow, psn, epoch, Time::ZERO, &mut q)
            .unwrap();
        while let Some(e) = q.pop() {
            if let EventKind::Net(NetEvent::Packet(PacketEvent::Nak { .. })) = e.kind {
                drew.push(i);
            }
        }
    }
    drew
}

#[test]
fn a_tcp_receiver_naks_at_the_third_packet_past_a_gap_and_again_if_the_retransmission_is_lost() {
    // Packets 0..4 arrive, 5 is lost, 6..9 arrive (epoch 0): the NAK at
    // 8, the third past the gap. The sender goes back (epoch 1); its 5 is
    // lost again, and 6, 7, 8 of epoch 1 arrive: they were sent after
    // the go-back, so the retransmission is lost: a second NAK at the
    // third of them. (A flow's packets cross one route through FIFO
    // queues: none of epoch 0 arrives after one of epoch 1.)
    let mut packets: Vec<(u64, u16)> = (0..5).map(|p| (p, 0)).collect();
    packets.extend((6..10).map(|p| (p, 0)));
    packets.extend([(6, 1), (7, 1), (8, 1)]);
    assert_eq!(naks("ethernet100", &packets), [7, 11]);
    // RDMA NAKs at the first packet past the gap, and only once.
    assert_eq!(naks("roce100", &packets), [5]);
}

#[test]
fn epochs_compare_across_their_wrap() {
    use super::transport::later_epoch;
    assert!(later_epoch(1, 0) && !later_epoch(0, 1) && !later_epoch(7, 7));
    assert!(later_epoch(0, u16::MAX) && !later_epoch(u16::MAX, 0));
}
