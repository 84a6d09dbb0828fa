//! Tests of the packet model on small hand-built topologies, driven by an
//! event-queue pop loop like the world's.

use std::sync::Arc;

use algorithms::Time;
use topologies::{Link, LinkId, LinkKind, Topology, Vertex, VertexId, VertexKind, duration_ps};

use super::PacketNetwork;
use crate::event::{EventKind, EventQueue};
use crate::network::path::idle_delivery_ps;
use crate::network::{LinkChange, LinkSample, NetEvent, OutOfTime, Transfer};

pub(super) const KIB: u64 = 1 << 10;
pub(super) const MIB: u64 = 1 << 20;

pub(super) fn link(
    bandwidth_bytes_per_s: f64,
    latency_ps: u64,
    mtu_bytes: u64,
    buffer_bytes: u64,
) -> Link {
    Link {
        kind: LinkKind::NvLink { generation: 4 },
        count: 1,
        bandwidth_bytes_per_s,
        latency_ps,
        mtu_bytes,
        buffer_bytes,
        lossless: true,
    }
}

pub(super) fn gpu(t: &mut Topology, name: &str) -> VertexId {
    t.add_vertex(Vertex::new(name, VertexKind::Gpu)).unwrap()
}

pub(super) fn switch(t: &mut Topology, name: &str, forward_latency_ps: u64) -> VertexId {
    let v = Vertex::new(name, VertexKind::NvSwitch).with_forward_latency_ps(forward_latency_ps);
    t.add_vertex(v).unwrap()
}

/// A start of a transfer in a test: when, how many bytes, which way, which flow.
pub(super) struct Send {
    pub(super) at_ps: u64,
    bytes: u64,
    route: Vec<LinkId>,
    flow: u64,
}

pub(super) fn send(bytes: u64, route: &[LinkId], flow: u64) -> Send {
    Send {
        at_ps: 0,
        bytes,
        route: route.to_vec(),
        flow,
    }
}

/// What a run produced.
pub(super) struct Run {
    /// Delivery time of each send, by index.
    pub(super) delivered_ps: Vec<u64>,
    pub(super) net: PacketNetwork,
    pub(super) samples: Vec<LinkSample>,
}

/// Runs `sends` on `topology` to completion. Starts are scheduled as
/// `Deliver { message: i }` events, which only this driver interprets.
pub(super) fn run(topology: &Arc<Topology>, sends: &[Send]) -> Result<Run, OutOfTime> {
    run_with(topology, sends, &[])
}

/// The same with link `changes`, scheduled before the sends.
pub(super) fn run_with(
    topology: &Arc<Topology>,
    sends: &[Send],
    changes: &[LinkChange],
) -> Result<Run, OutOfTime> {
    let mut d = Driver::new(topology, sends, changes)?;
    d.run_until(u64::MAX)?;
    let Driver { mut net, at, .. } = d;
    // Nothing left behind: every packet arrived, every port is idle.
    assert_eq!(net.messages_in_flight(), 0);
    assert_eq!(net.packets.len(), 0);
    assert_eq!(net.flows.len(), 0);
    for port in &net.ports {
        assert!(!port.busy && port.blocked.is_none() && port.waiters.is_empty());
        assert_eq!(port.reserved_bytes, 0);
    }
    let samples = net.take_samples();
    let delivered_ps = at
        .into_iter()
        .map(|t| t.expect("every message is delivered"))
        .collect();
    Ok(Run {
        delivered_ps,
        net,
        samples,
    })
}

/// An event-queue pop loop like the world's, that can stop part way.
pub(super) struct Driver<'a> {
    sends: &'a [Send],
    pub(super) net: PacketNetwork,
    queue: EventQueue,
    /// Delivery time of each send so far, by index.
    pub(super) at: Vec<Option<u64>>,
}

impl<'a> Driver<'a> {
    pub(super) fn new(
        topology: &Arc<Topology>,
        sends: &'a [Send],
        changes: &[LinkChange],
    ) -> Result<Driver<'a>, OutOfTime> {
        Driver::with_net(PacketNetwork::new(topology.clone(), true), sends, changes)
    }

    /// The same with a network already configured.
    pub(super) fn with_net(
        mut net: PacketNetwork,
        sends: &'a [Send],
        changes: &[LinkChange],
    ) -> Result<Driver<'a>, OutOfTime> {
        let mut queue = EventQueue::new();
        net.schedule_changes(changes, &mut queue)?;
        for (i, s) in sends.iter().enumerate() {
            let message = u32::try_from(i).unwrap();
            queue.schedule(Time(s.at_ps), EventKind::Deliver { message });
        }
        Ok(Driver {
            sends,
            net,
            queue,
            at: vec![None; sends.len()],
        })
    }

    /// Handles every event before `end_ps`.
    pub(super) fn run_until(&mut self, end_ps: u64) -> Result<(), OutOfTime> {
        let mut delivered = Vec::new();
        while self.queue.peek_time().is_some_and(|t| t.0 < end_ps) {
            let event = self.queue.pop().unwrap();
            match event.kind {
                EventKind::Deliver { message } => {
                    let s = &self.sends[message as usize];
                    let transfer = Transfer {
                        message,
                        bytes: s.bytes,
                        route: s.route.clone().into(),
                        flow: s.flow,
                        path: None,
                    };
                    self.net.start(event.time, transfer, &mut self.queue)?;
                }
                EventKind::Net(NetEvent::Packet(e)) => {
                    self.net
                        .handle(event.time, e, &mut self.queue, &mut delivered)?;
                }
                other => panic!("unexpected event {other:?}"),
            }
            for m in delivered.drain(..) {
                assert_eq!(self.at[m as usize], None, "message {m} delivered twice");
                self.at[m as usize] = Some(event.time.0);
            }
        }
        Ok(())
    }
}

/// Two GPUs joined by one link; returns the topology and the `0 -> 1` direction.
pub(super) fn pair(l: Link) -> (Arc<Topology>, LinkId) {
    let mut t = Topology::new();
    let a = gpu(&mut t, "gpu0");
    let b = gpu(&mut t, "gpu1");
    let (ab, _) = t.add_link(a, b, l).unwrap();
    (Arc::new(t), ab)
}

#[test]
fn one_link_takes_serialization_plus_latency_exactly() {
    // 25 GB/s and 7 GB/s are whole rates (exact integer arithmetic); the
    // PCIe-like rate takes duration_ps's floating-point path.
    for bw in [25e9, 7e9, 16e9 * 128.0 / 130.0] {
        for bytes in [0, 1, 4096, 4097, MIB] {
            let (t, ab) = pair(link(bw, 100_000, 4096, 64 * KIB));
            let r = run(&t, &[send(bytes, &[ab], 0)]).unwrap();
            let expected = duration_ps(bytes, bw) + 100_000;
            assert_eq!(r.delivered_ps[0], expected, "{bytes} B at {bw} B/s");
            let u = r.net.usage()[ab.index()];
            assert_eq!(u.bytes, bytes);
            assert_eq!(u.units, bytes.div_ceil(4096).max(1));
            assert_eq!(u.busy_ps, duration_ps(bytes, bw));
            // Nothing is in transit on a one-hop route.
            assert_eq!(u.max_queue, 0);
        }
    }
}

#[test]
fn a_message_to_itself_arrives_at_once() {
    let (t, _) = pair(link(25e9, 100_000, 4096, 64 * KIB));
    let mut s = send(100, &[], 0);
    s.at_ps = 1234;
    assert_eq!(run(&t, &[s]).unwrap().delivered_ps, vec![1234]);
}

/// gpu0 -> sw1 -> sw2 -> gpu1 with unequal bandwidths (the middle link is
/// the bottleneck), latencies, forwarding latencies and MTUs (path MTU
/// 2048), and buffers large enough that credit never stalls.
fn chain() -> (Arc<Topology>, Vec<LinkId>) {
    let mut t = Topology::new();
    let g0 = gpu(&mut t, "gpu0");
    let s1 = switch(&mut t, "sw1", 200_000);
    let s2 = switch(&mut t, "sw2", 50_000);
    let g1 = gpu(&mut t, "gpu1");
    let (a, _) = t.add_link(g0, s1, link(50e9, 100_000, 4096, MIB)).unwrap();
    let (b, _) = t
        .add_link(s1, s2, link(12.5e9, 300_000, 2048, MIB))
        .unwrap();
    let (c, _) = t.add_link(s2, g1, link(23e9, 100_000, 4096, MIB)).unwrap();
    (Arc::new(t), vec![a, b, c])
}

#[test]
fn an_idle_route_matches_the_idle_formula() {
    let (t, route) = chain();
    // With whole packets every packet is alike, the formula of `path` is
    // exact for store and forward, and the model rounds each busy period
    // once: the bottleneck is busy from the first packet's arrival to the
    // end, the faster links upstream never delay it, and those downstream
    // go idle between packets, so each of their packets is rounded once,
    // as in the formula. Allow 1 ps per hop for rounding ties.
    for packets in [1, 2, 7, 512] {
        let bytes = packets * 2048;
        let r = run(&t, &[send(bytes, &route, 0)]).unwrap();
        let formula = idle_delivery_ps(&t, &route, bytes);
        assert!(
            r.delivered_ps[0].abs_diff(formula) <= route.len() as u64,
            "{bytes} B: model {} formula {formula}",
            r.delivered_ps[0]
        );
    }
    // A short last packet crosses the links after the bottleneck faster
    // than the full packet the formula assumes: the model is earlier, by
    // at most those links' serialization of a full packet.
    for bytes in [1, 2049, 5000, MIB + 3] {
        let r = run(&t, &[send(bytes, &route, 0)]).unwrap();
        let formula = idle_delivery_ps(&t, &route, bytes);
        let slack = t.link(route[2]).serialization_ps(2048) + route.len() as u64;
        assert!(
            r.delivered_ps[0] <= formula + route.len() as u64
                && formula <= r.delivered_ps[0] + slack,
            "{bytes} B: model {} formula {formula}",
            r.delivered_ps[0]
        );
    }
}

/// gpu0 and gpu1 each linked to a switch that is linked to gpu2, all links
/// alike. Returns the routes 0 -> 2 and 1 -> 2.
pub(super) fn converging(l: Link) -> (Arc<Topology>, [LinkId; 2], [LinkId; 2]) {
    let mut t = Topology::new();
    let g0 = gpu(&mut t, "gpu0");
    let g1 = gpu(&mut t, "gpu1");
    let g2 = gpu(&mut t, "gpu2");
    let sw = switch(&mut t, "sw", 0);
    let (a, _) = t.add_link(g0, sw, l).unwrap();
    let (b, _) = t.add_link(g1, sw, l).unwrap();
    let (c, _) = t.add_link(sw, g2, l).unwrap();
    (Arc::new(t), [a, c], [b, c])
}

#[test]
fn two_flows_share_a_bottleneck_equally() {
    let buffer = 64 * KIB;
    let (t, r0, r1) = converging(link(25e9, 100_000, 4096, buffer));
    let alone = run(&t, &[send(MIB, &r0, 0)]).unwrap().delivered_ps[0];
    let both = run(&t, &[send(MIB, &r0, 0), send(MIB, &r1, 1)]).unwrap();
    for (i, &at) in both.delivered_ps.iter().enumerate() {
        let ratio = at as f64 / (2 * alone) as f64;
        assert!(
            (ratio - 1.0).abs() < 0.01,
            "flow {i}: {at} vs alone {alone}"
        );
    }
    let bottleneck = r0[1];
    let u = both.net.usage()[bottleneck.index()];
    assert_eq!(u.bytes, 2 * MIB);
    // The switch's buffer filled (the inputs bring twice what the output
    // carries) but never overflowed.
    assert!(u.max_queue > buffer / 2 && u.max_queue <= buffer, "{u:?}");
    let seen = both.samples.iter().filter(|s| s.link == bottleneck);
    assert_eq!(seen.clone().map(|s| s.queue).max(), Some(u.max_queue));
    assert_eq!(seen.map(|s| s.queue).next_back(), Some(0));
}

#[test]
fn a_flow_sends_in_order_and_flows_take_turns() {
    let p = 4096;
    let lat = 100_000;
    let (t, ab) = pair(link(25e9, lat, p, 64 * KIB));
    let d = |packets: u64| duration_ps(packets * p, 25e9) + lat;
    // a1 and a2 are one flow, c another, 16 packets each, all started at 0
    // on one link (always busy, so packet k ends at d(k)). a1's first
    // packet goes before c exists; then the flows alternate: a1 at slots
    // 2, 4, .., 30 (its 16th), c at 3, 5, .., 29 (its 14th). a2 joins the
    // round after a1 ends, behind c: c at 31 and 33, a2 at 32, 34..48.
    let sends = [
        send(16 * p, &[ab], 7),
        send(16 * p, &[ab], 7),
        send(16 * p, &[ab], 9),
    ];
    let r = run(&t, &sends).unwrap();
    assert_eq!(r.delivered_ps, vec![d(30), d(48), d(33)]);

    // A short message behind a long one of the same flow waits for it.
    let sends = [send(64 * p, &[ab], 7), send(1, &[ab], 7)];
    let r = run(&t, &sends).unwrap();
    let last = duration_ps(64 * p + 1, 25e9) + lat;
    assert_eq!(r.delivered_ps, vec![d(64), last]);
}

/// gpu0 -> sw -> gpu1, the second link four times slower with a buffer of
/// `buffer` bytes, no latencies.
fn slow_exit(buffer: u64) -> (Arc<Topology>, Vec<LinkId>) {
    let mut t = Topology::new();
    let g0 = gpu(&mut t, "gpu0");
    let sw = switch(&mut t, "sw", 0);
    let g1 = gpu(&mut t, "gpu1");
    let (a, _) = t.add_link(g0, sw, link(25e9, 0, 4096, MIB)).unwrap();
    let (b, _) = t.add_link(sw, g1, link(6.25e9, 0, 4096, buffer)).unwrap();
    (Arc::new(t), vec![a, b])
}

#[test]
fn credit_backpressure_holds_the_sender_back_without_loss() {
    let bytes = MIB;
    let run_with = |buffer| {
        let (t, route) = slow_exit(buffer);
        let r = run(&t, &[send(bytes, &route, 0)]).unwrap();
        let formula = idle_delivery_ps(&t, &route, bytes);
        (r, route, formula)
    };
    // A big buffer takes most of the message: the fast link runs ahead.
    let (big, route, formula) = run_with(4 * MIB);
    assert!(big.net.usage()[route[1].index()].max_queue >= bytes / 2);
    // Two packets of buffer: the sender waits for credit, the queue stays
    // within the buffer, and the slow link is still never idle (without
    // latency a freed slot is refilled in one fast serialization), so the
    // message arrives as early as with the big buffer.
    let (small, _, _) = run_with(2 * 4096);
    let u = small.net.usage();
    assert!(u[route[1].index()].max_queue <= 2 * 4096);
    assert!(small.samples.iter().all(|s| s.queue <= 2 * 4096));
    assert_eq!(small.delivered_ps, big.delivered_ps);
    assert_eq!(small.delivered_ps[0], formula);
    for l in &route {
        assert_eq!(u[l.index()].bytes, bytes, "nothing lost");
    }
}

#[test]
fn a_forwarding_gpu_interleaves_transit_and_its_own_packets() {
    // gpu0 -> gpu1 -> gpu2, gpu1 relaying (its buffer is unbounded, so the
    // tiny configured buffer does not stop gpu0) and sending its own.
    let mut t = Topology::new();
    let g0 = gpu(&mut t, "gpu0");
    let relay = Vertex::new("gpu1", VertexKind::Gpu).with_forwarding(true);
    let g1 = t.add_vertex(relay).unwrap();
    let g2 = gpu(&mut t, "gpu2");
    let l = link(25e9, 100_000, 4096, 4096);
    let (a, _) = t.add_link(g0, g1, l).unwrap();
    let (b, _) = t.add_link(g1, g2, l).unwrap();
    let t = Arc::new(t);
    let r = run(&t, &[send(MIB, &[a, b], 0), send(MIB, &[b], 1)]).unwrap();
    let shared = duration_ps(2 * MIB, 25e9);
    for &at in &r.delivered_ps {
        let ratio = at as f64 / shared as f64;
        assert!((ratio - 1.0).abs() < 0.01, "{at} vs {shared}");
    }
    assert!(r.net.usage()[b.index()].max_queue > 4096);
}

#[test]
fn time_running_out_is_an_error() {
    let (t, ab) = pair(link(25e9, 100_000, 4096, 64 * KIB));
    let mut s = send(MIB, &[ab], 0);
    s.at_ps = u64::MAX - 1_000_000;
    assert_eq!(run(&t, &[s]).err(), Some(OutOfTime));
}

#[test]
fn runs_are_deterministic() {
    let (t, r0, r1) = converging(link(25e9, 100_000, 4096, 16 * KIB));
    let sends = || {
        let mut v = Vec::new();
        for i in 0..6u64 {
            let (route, flow) = if i % 2 == 0 { (&r0, 0) } else { (&r1, i) };
            let mut s = send(100_000 * (i + 1) + 17, route, flow);
            s.at_ps = i * 1_000_000;
            v.push(s);
        }
        v
    };
    let a = run(&t, &sends()).unwrap();
    let b = run(&t, &sends()).unwrap();
    assert_eq!(a.delivered_ps, b.delivered_ps);
    assert_eq!(a.net.usage(), b.net.usage());
    assert_eq!(a.samples, b.samples);
}
