//! Tests of loss, corruption, drops, PFC and the RDMA transport of the
//! packet model, on small hand-built RoCE and Ethernet topologies.

use std::sync::Arc;

use algorithms::Time;
use topologies::{Link, LinkId, LinkKind, Topology, Vertex, VertexId, VertexKind};

use super::tests::{Driver, MIB, Send, gpu, send};
use super::{Loss, PacketNetwork, Stall, TransportFailure};
use crate::network::{LinkChange, LinkUsage, PfcConfig, TransportConfig};

const KIB: u64 = 1 << 10;

fn kind_link(kind: &str) -> Link {
    LinkKind::parse(kind).unwrap().defaults()
}

fn leaf(t: &mut Topology, name: &str) -> VertexId {
    t.add_vertex(Vertex::with_default_latency(name, VertexKind::Leaf))
        .unwrap()
}

/// Two senders and a receiver on one switch: `[h0->s, h1->s, s->h2]`.
fn incast(l: Link) -> (Arc<Topology>, [LinkId; 3]) {
    let mut t = Topology::new();
    let h: Vec<VertexId> = (0..3).map(|i| gpu(&mut t, &format!("h{i}"))).collect();
    let s = leaf(&mut t, "s");
    let (a, _) = t.add_link(h[0], s, l).unwrap();
    let (b, _) = t.add_link(h[1], s, l).unwrap();
    let (_, c) = t.add_link(h[2], s, l).unwrap();
    (Arc::new(t), [a, b, c])
}

/// What a run produced, delivered or not.
struct Outcome {
    delivered_ps: Vec<Option<u64>>,
    usage: Vec<LinkUsage>,
    failures: Vec<TransportFailure>,
    net: PacketNetwork,
}

/// Runs until no event is left (timers included), collecting failures.
fn run(net: PacketNetwork, sends: &[Send], changes: &[LinkChange]) -> Outcome {
    let mut d = Driver::with_net(net, sends, changes).unwrap();
    d.run_until(u64::MAX).unwrap();
    let Driver { mut net, at, .. } = d;
    Outcome {
        delivered_ps: at,
        usage: net.usage().to_vec(),
        failures: net.take_failures(),
        net,
    }
}

fn loss(link: LinkId, loss_rate: f64, corruption_rate: f64) -> LinkChange {
    LinkChange {
        loss_rate,
        corruption_rate,
        ..LinkChange::bandwidth(Time(0), link, 1.0)
    }
}

fn fast_timeout() -> TransportConfig {
    // 4.096 us x 2^8 = 1.05 ms: short enough that timeouts do not swamp
    // the comparisons below, far above any round trip here.
    TransportConfig {
        ib_timeout: 8,
        ib_retry_cnt: 7,
    }
}

fn total(u: &[LinkUsage], f: impl Fn(&LinkUsage) -> u64) -> u64 {
    u.iter().map(f).sum()
}

#[test]
fn zero_loss_reproduces_the_lossless_run_exactly() {
    let (t, [a, b, c]) = incast(kind_link("roce100"));
    let sends = [send(4 * MIB, &[a, c], 0), send(4 * MIB, &[b, c], 1)];
    let plain = run(PacketNetwork::new(t.clone(), true), &sends, &[]);
    let zero = run(
        PacketNetwork::new(t.clone(), true).with_loss_seed(9),
        &sends,
        &[loss(a, 0.0, 0.0), loss(c, 0.0, 0.0)],
    );
    assert!(plain.delivered_ps.iter().all(Option::is_some));
    assert_eq!(plain.delivered_ps, zero.delivered_ps);
    assert_eq!(plain.usage, zero.usage);
    assert_eq!(total(&plain.usage, |u| u.retransmitted), 0);
}

/// One 2 MiB message after another over `h0 -> s -> h2`, the switch's
/// outgoing link losing `rate` of its packets.
fn lossy_run(rate: f64, seed: u64) -> Outcome {
    let (t, [a, _, c]) = incast(kind_link("roce100"));
    let sends: Vec<Send> = (0..4).map(|_| send(2 * MIB, &[a, c], 0)).collect();
    let net = PacketNetwork::new(t, false)
        .with_transport(fast_timeout())
        .with_loss_seed(seed);
    run(net, &sends, &[loss(c, rate, 0.0)])
}

fn makespan(o: &Outcome) -> u64 {
    o.delivered_ps
        .iter()
        .map(|t| t.expect("every message is delivered"))
        .max()
        .unwrap()
}

#[test]
fn lost_packets_are_retransmitted_deterministically_and_cost_time() {
    let clean = lossy_run(0.0, 1);
    let light = lossy_run(0.002, 1);
    let heavy = lossy_run(0.02, 1);
    for o in [&light, &heavy] {
        assert!(o.failures.is_empty());
        assert!(total(&o.usage, |u| u.lost) > 0);
        assert!(total(&o.usage, |u| u.retransmitted) > 0);
        assert_eq!(total(&o.usage, |u| u.corrupted), 0);
        assert_eq!(o.net.messages_in_flight(), 0);
    }
    assert!(makespan(&clean) < makespan(&light));
    assert!(makespan(&light) < makespan(&heavy));
    // Go-back-N resends more than it lost: the packets after a gap too.
    let lost = total(&heavy.usage, |u| u.lost);
    assert!(total(&heavy.usage, |u| u.retransmitted) > lost);
    // The same seed, the same drops and times; another seed, others.
    let again = lossy_run(0.02, 1);
    assert_eq!(heavy.delivered_ps, again.delivered_ps);
    assert_eq!(heavy.usage, again.usage);
    let other = lossy_run(0.02, 2);
    assert_ne!(
        (heavy.delivered_ps, heavy.usage),
        (other.delivered_ps, other.usage)
    );
}

#[test]
fn corrupted_packets_are_counted_apart_and_recovered() {
    let (t, [a, _, c]) = incast(kind_link("roce100"));
    let sends = [send(MIB, &[a, c], 0)];
    let net = PacketNetwork::new(t, false).with_transport(fast_timeout());
    let o = run(net, &sends, &[loss(c, 0.0, 0.02)]);
    assert!(o.delivered_ps[0].is_some());
    assert!(o.usage[c.index()].corrupted > 0);
    assert_eq!(o.usage[c.index()].lost, 0);
}

#[test]
fn past_the_retry_budget_the_flow_fails_and_names_the_link() {
    let (t, [a, _, c]) = incast(kind_link("roce100"));
    let sends = [send(64 * KIB, &[a, c], 7)];
    let transport = TransportConfig {
        ib_timeout: 10,
        ib_retry_cnt: 3,
    };
    let net = PacketNetwork::new(t, false).with_transport(transport);
    let o = run(net, &sends, &[loss(c, 1.0, 0.0)]);
    assert_eq!(o.delivered_ps, vec![None]);
    let [f] = o.failures.as_slice() else {
        panic!("one failure: {:?}", o.failures)
    };
    assert_eq!((f.flow, f.retries, &f.messages[..]), (7, 3, &[0][..]));
    // Armed at the first packet (time 0); retried at 1, 2 and 3 RTOs;
    // given up at the fourth.
    assert_eq!(f.at, Time(4 * transport.rto_ps()));
    let (link, how, _) = f.last_loss.unwrap();
    assert_eq!((link, how), (c, Loss::Wire));
    // Nothing is left behind: no message, no flow, no packet.
    assert_eq!(o.net.messages_in_flight(), 0);
    assert_eq!(o.net.flows.len(), 0);
    assert_eq!(o.net.packets.len(), 0);
}

/// Two 4 MiB messages into one 100 GbE port (2:1 incast) with XOFF at
/// 32 KiB and the given headroom.
fn incast_run(headroom_bytes: Option<u64>) -> Outcome {
    let (t, [a, b, c]) = incast(kind_link("roce100"));
    let sends = [send(4 * MIB, &[a, c], 0), send(4 * MIB, &[b, c], 1)];
    let pfc = PfcConfig {
        xoff_bytes: Some(32 * KIB),
        xon_bytes: None,
        headroom_bytes,
    };
    let net = PacketNetwork::new(t, false)
        .with_pfc(pfc)
        .with_transport(fast_timeout());
    run(net, &sends, &[])
}

#[test]
fn pfc_with_sized_headroom_pauses_and_never_drops() {
    let (_, [a, b, c]) = incast(kind_link("roce100"));
    let o = incast_run(None);
    assert!(o.delivered_ps.iter().all(Option::is_some));
    assert_eq!(total(&o.usage, |u| u.overflow_drops), 0);
    assert_eq!(total(&o.usage, |u| u.retransmitted), 0);
    for l in [a, b] {
        let u = o.usage[l.index()];
        assert!(u.pause_frames > 0 && u.paused_ps > 0, "{u:?}");
    }
    assert_eq!(o.usage[c.index()].pause_frames, 0);
    // The bottleneck stays busy: 8 MiB through one 12.5 GB/s port, within
    // a few round trips.
    let bound = topologies::duration_ps(8 * MIB, 12.5e9);
    let m = makespan(&o);
    assert!(m >= bound && m < bound + 5_000_000, "{m} vs {bound}");
}

#[test]
fn undersized_headroom_drops_and_the_transport_recovers() {
    let (_, [a, b, _]) = incast(kind_link("roce100"));
    let o = incast_run(Some(1));
    assert!(o.delivered_ps.iter().all(Option::is_some));
    let drops = o.usage[a.index()].overflow_drops + o.usage[b.index()].overflow_drops;
    assert!(drops > 0);
    assert!(total(&o.usage, |u| u.retransmitted) > 0);
    assert!(o.failures.is_empty());
}

#[test]
fn a_lossy_ethernet_port_drops_when_its_buffer_is_full() {
    let mut l = kind_link("ethernet100");
    l.buffer_bytes = 64 * KIB;
    let (t, [a, b, c]) = incast(l);
    let sends = [send(2 * MIB, &[a, c], 0), send(2 * MIB, &[b, c], 1)];
    let net = PacketNetwork::new(t, false).with_transport(fast_timeout());
    let o = run(net, &sends, &[]);
    assert!(o.delivered_ps.iter().all(Option::is_some));
    // Dropped at the full egress port, never paused.
    assert!(o.usage[c.index()].overflow_drops > 0);
    assert_eq!(total(&o.usage, |u| u.pause_frames), 0);
    assert!(o.usage[c.index()].max_queue <= 64 * KIB);
}

/// Five switches in a ring, a host on each; host `i` sends to host
/// `i + 2` clockwise over two switch links, for the hosts in `senders`.
fn ring_flows(senders: &[usize]) -> Outcome {
    ring_flows_with(senders, false)
}

/// The same; with a `bystander`, two more hosts on switch `s0`, one
/// sending 8 KiB to the other (the last send) over its own links, its
/// first packets lost in the first 5 us.
fn ring_flows_with(senders: &[usize], bystander: bool) -> Outcome {
    let mut t = Topology::new();
    let hosts: Vec<VertexId> = (0..5).map(|i| gpu(&mut t, &format!("h{i}"))).collect();
    let sw: Vec<VertexId> = (0..5).map(|i| leaf(&mut t, &format!("s{i}"))).collect();
    let l = kind_link("roce100");
    let up: Vec<(LinkId, LinkId)> = (0..5)
        .map(|i| t.add_link(hosts[i], sw[i], l).unwrap())
        .collect();
    let ring: Vec<LinkId> = (0..5)
        .map(|i| t.add_link(sw[i], sw[(i + 1) % 5], l).unwrap().0)
        .collect();
    let sends: Vec<Send> = senders
        .iter()
        .map(|&i| {
            let j = (i + 2) % 5;
            send(
                8 * MIB,
                &[up[i].0, ring[i], ring[(i + 1) % 5], up[j].1],
                i as u64,
            )
        })
        .collect();
    let mut sends = sends;
    let mut changes = Vec::new();
    if bystander {
        let h5 = gpu(&mut t, "h5");
        let h6 = gpu(&mut t, "h6");
        let (a, _) = t.add_link(h5, sw[0], l).unwrap();
        let (_, b) = t.add_link(h6, sw[0], l).unwrap();
        sends.push(send(8 * KIB, &[a, b], 5));
        changes.push(loss(a, 1.0, 0.0));
        changes.push(LinkChange::bandwidth(Time(5_000_000), a, 1.0));
    }
    let pfc = PfcConfig {
        xoff_bytes: Some(64 * KIB),
        ..PfcConfig::default()
    };
    let net = PacketNetwork::new(Arc::new(t), false)
        .with_pfc(pfc)
        .with_transport(fast_timeout());
    let mut o = run(net, &sends, &changes);
    o.usage = o.net.usage().to_vec();
    o
}

#[test]
fn a_routing_loop_under_pfc_deadlocks_and_the_cycle_is_found() {
    let o = ring_flows(&[0, 1, 2, 3, 4]);
    assert!(o.delivered_ps.iter().any(Option::is_none));
    // No event is left (the timers saw the cycle and stopped) and the
    // paused switch links wait on each other all the way round.
    assert_eq!(o.net.pending_activity, 0);
    assert!(o.failures.is_empty());
    let cycle = o.net.buffer_cycle().expect("a cycle");
    let names: Vec<String> = cycle
        .iter()
        .map(|&(l, _)| o.net.topology().link_name(l))
        .collect();
    assert_eq!(names, ["s0->s1", "s1->s2", "s2->s3", "s3->s4", "s4->s0"]);
    assert!(cycle.iter().all(|&(_, s)| s == Stall::Paused));
    // Without the fifth flow the dependencies form a chain: it completes.
    let open = ring_flows(&[0, 1, 2, 3]);
    assert!(open.delivered_ps.iter().all(Option::is_some));
    assert!(total(&open.usage, |u| u.pause_frames) > 0);
    assert!(open.net.buffer_cycle().is_none());
}

/// One flow over `h0 -> s -> h2` with 5 us links and a 4 us timeout:
/// the timer goes back while the first copies are still on their way,
/// and the sender's link is down then, so the second pass has not ended
/// when the first copies arrive.
fn spurious_retransmission(messages: usize) -> Outcome {
    let mut l = kind_link("roce100");
    l.latency_ps = 5_000_000;
    let (t, [a, _, c]) = incast(l);
    let sends: Vec<Send> = (0..messages).map(|_| send(12 * KIB, &[a, c], 3)).collect();
    let transport = TransportConfig {
        ib_timeout: 0,
        ib_retry_cnt: 7,
    };
    let net = PacketNetwork::new(t, false).with_transport(transport);
    let down = LinkChange::bandwidth(Time(3_500_000), a, 0.0);
    let up = LinkChange::bandwidth(Time(30_000_000), a, 1.0);
    run(net, &sends, &[down, up])
}

#[test]
fn a_message_whose_first_copies_arrive_during_its_retransmission_is_delivered_once() {
    for messages in [1, 3] {
        let o = spurious_retransmission(messages);
        assert!(o.failures.is_empty(), "{:?}", o.failures);
        assert!(o.delivered_ps.iter().all(Option::is_some));
        // Delivered by the first copies, before the link came back.
        assert!(o.delivered_ps.iter().all(|t| t.unwrap() < 30_000_000));
        super::stress_tests::assert_drained(&o.net, 0);
    }
}

#[test]
fn a_flow_over_a_lossy_on_board_link_recovers_its_tail_drops() {
    // A scenario may declare any link lossy (`lossless = false`): here
    // the NVLinks of a switch, whose small buffer overflows in an incast.
    let mut l = kind_link("nvlink4");
    l.lossless = false;
    l.buffer_bytes = 16 * KIB;
    let mut t = Topology::new();
    let g: Vec<VertexId> = (0..3).map(|i| gpu(&mut t, &format!("g{i}"))).collect();
    let s = t
        .add_vertex(Vertex::with_default_latency("nvs", VertexKind::NvSwitch))
        .unwrap();
    let (a, _) = t.add_link(g[0], s, l).unwrap();
    let (b, _) = t.add_link(g[1], s, l).unwrap();
    let (_, c) = t.add_link(g[2], s, l).unwrap();
    let sends = [send(256 * KIB, &[a, c], 0), send(256 * KIB, &[b, c], 1)];
    let net = PacketNetwork::new(Arc::new(t), false).with_transport(fast_timeout());
    let o = run(net, &sends, &[]);
    assert!(o.usage[c.index()].overflow_drops > 0);
    assert!(o.failures.is_empty(), "{:?}", o.failures);
    assert!(o.delivered_ps.iter().all(Option::is_some));
    assert!(total(&o.usage, |u| u.retransmitted) > 0);
    super::stress_tests::assert_drained(&o.net, 0);
}

#[test]
fn a_flow_apart_from_a_pfc_deadlock_still_recovers_its_losses() {
    // The ring deadlocks while the bystander's packets are lost; when its
    // timer expires nothing in the network moves and the cycle is there,
    // but its own route is free: its retransmission gets through.
    let o = ring_flows_with(&[0, 1, 2, 3, 4], true);
    assert!(o.net.buffer_cycle().is_some());
    assert!(o.delivered_ps[..5].iter().any(Option::is_none));
    assert!(o.delivered_ps[5].is_some(), "{:?}", o.delivered_ps);
    assert!(o.failures.is_empty());
    assert_eq!(o.net.pending_activity, 0);
}

/// One 128 KiB message over `h0 -> s -> h2` (100 GbE, 4 us timeout, one
/// retry allowed); the switch's link loses everything from `from_ps` to
/// `until_ps`.
fn one_loss(from_ps: u64, until_ps: u64) -> Outcome {
    let (t, [a, _, c]) = incast(kind_link("roce100"));
    let sends = [send(128 * KIB, &[a, c], 0)];
    let transport = TransportConfig {
        ib_timeout: 0,
        ib_retry_cnt: 1,
    };
    let net = PacketNetwork::new(t, false).with_transport(transport);
    let on = LinkChange {
        loss_rate: 1.0,
        ..LinkChange::bandwidth(Time(from_ps), c, 1.0)
    };
    let off = LinkChange::bandwidth(Time(until_ps), c, 1.0);
    run(net, &sends, &[on, off])
}

#[test]
fn a_nak_restarts_the_timer_so_one_loss_costs_one_retry() {
    // Packet 20 is lost; the NAK that packet 21 draws reaches the sender
    // at 8.40 us, just before the timer (restarted at the last
    // acknowledgement, 8.56 us). The NAK's retry resends from packet 20;
    // the timer must not count a second retry against the budget of one
    // before the resent packets can arrive (9.6 us).
    let o = one_loss(7_500_000, 7_800_000);
    assert_eq!(total(&o.usage, |u| u.lost), 1);
    assert!(o.failures.is_empty(), "{:?}", o.failures);
    assert!(o.delivered_ps[0].is_some());
    super::stress_tests::assert_drained(&o.net, 0);
}
