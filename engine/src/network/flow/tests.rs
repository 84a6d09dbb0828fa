//! Tests of the flow-level model, driven through an [`EventQueue`] the way
//! the world drives it. Expected times are derived in the comments, from
//! the max-min rates worked out by hand.

use super::*;
use crate::network::path::{idle_delivery_ps, idle_latency_ps};
use topologies::{Link, LinkId, LinkKind, Vertex, VertexKind, duration_ps};

mod faults;
mod incremental;

/// A chain `v0 - v1 - ... - vn` where link `i` joins `v_i` and `v_(i+1)`
/// with bandwidth `bandwidths[i]` (bytes/s), the given latency and an MTU
/// of 4096 bytes; returns the forward directions.
fn chain(bandwidths: &[f64], latency_ps: u64) -> (Arc<Topology>, Vec<LinkId>) {
    let mut t = Topology::new();
    let mut prev = t.add_vertex(Vertex::new("v0", VertexKind::Gpu)).unwrap();
    let mut forward = Vec::new();
    for (i, &bw) in bandwidths.iter().enumerate() {
        let v = t
            .add_vertex(Vertex::new(format!("v{}", i + 1), VertexKind::Leaf))
            .unwrap();
        let link = Link {
            bandwidth_bytes_per_s: bw,
            latency_ps,
            mtu_bytes: 4096,
            ..LinkKind::parse("ib_ndr").unwrap().defaults()
        };
        forward.push(t.add_link(prev, v, link).unwrap().0);
        prev = v;
    }
    (Arc::new(t), forward)
}

/// 1 byte per ps.
const TB_PER_S: f64 = 1e12;

/// The world's role: starts transfers at their times, pops events, hands
/// the model its own and records arrivals.
struct Driver {
    topology: Arc<Topology>,
    net: FlowNetwork,
    queue: EventQueue,
    sends: Vec<Transfer>,
    start_ps: Vec<u64>,
    /// (time, message) in the order they arrived.
    delivered: Vec<(u64, MessageId)>,
    /// (time, work) of each `Reallocate`.
    reallocations: Vec<(u64, u64)>,
}

impl Driver {
    fn new(topology: &Arc<Topology>, sample_links: bool) -> Driver {
        Driver {
            topology: topology.clone(),
            net: FlowNetwork::new(topology.clone(), sample_links),
            queue: EventQueue::new(),
            sends: Vec::new(),
            start_ps: Vec::new(),
            delivered: Vec::new(),
            reallocations: Vec::new(),
        }
    }

    /// Sends message `sends.len()` of `bytes` over `route` at `at_ps`, as
    /// part of flow `pair`; returns its id.
    fn send(&mut self, at_ps: u64, bytes: u64, route: &[LinkId], pair: u64) -> MessageId {
        let message = self.sends.len() as MessageId;
        self.sends.push(Transfer {
            message,
            bytes,
            route: route.into(),
            flow: pair,
            path: None,
        });
        self.start_ps.push(at_ps);
        // A compute timer stands for "a rank sends now".
        let start = EventKind::ComputeDone {
            rank: 0,
            timer: message,
        };
        self.queue.schedule(Time(at_ps), start);
        message
    }

    /// Schedules link changes given as `(time_ps, link, factor)`.
    fn change(&mut self, changes: &[(u64, LinkId, f64)]) {
        let changes: Vec<LinkChange> = changes
            .iter()
            .map(|&(at_ps, link, factor)| LinkChange::bandwidth(Time(at_ps), link, factor))
            .collect();
        self.net
            .schedule_changes(&changes, &mut self.queue)
            .expect("any time can be scheduled");
    }

    fn run(&mut self) -> Result<(), OutOfTime> {
        while let Some(event) = self.queue.pop() {
            match event.kind {
                EventKind::ComputeDone { timer, .. } => {
                    let transfer = self.sends[timer as usize].clone();
                    self.net.start(event.time, transfer, &mut self.queue)?;
                }
                EventKind::Net(NetEvent::Flow(e)) => {
                    let work = self.net.reallocation_work();
                    let mut out = Vec::new();
                    self.net.handle(event.time, e, &mut self.queue, &mut out)?;
                    self.delivered
                        .extend(out.into_iter().map(|m| (event.time.0, m)));
                    if e == FlowEvent::Reallocate {
                        let done = self.net.reallocation_work() - work;
                        self.reallocations.push((event.time.0, done));
                    }
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        Ok(())
    }

    /// When `message` arrived; each message must arrive exactly once.
    fn arrival(&self, message: MessageId) -> u64 {
        let times: Vec<u64> = self
            .delivered
            .iter()
            .filter(|&&(_, m)| m == message)
            .map(|&(t, _)| t)
            .collect();
        assert_eq!(times.len(), 1, "message {message} arrives once");
        times[0]
    }

    /// The idle latency of message `message`.
    fn latency(&self, message: MessageId) -> u64 {
        let t = &self.sends[message as usize];
        idle_latency_ps(&self.topology, &t.route, t.bytes)
    }
}

#[test]
fn events_are_small() {
    assert!(std::mem::size_of::<FlowEvent>() <= 12);
}

#[test]
fn idle_link_delivers_after_serialization_plus_latency_exactly() {
    // An integer bandwidth (exact integer rounding) and one that is not.
    for bw in [25e9, 100e9 / 3.0] {
        for bytes in [1u64, 4 << 10, 1 << 20, 1 << 30] {
            let (topo, links) = chain(&[bw], 1_234);
            let mut d = Driver::new(&topo, false);
            let m = d.send(77, bytes, &links, 0);
            d.run().unwrap();
            assert_eq!(
                d.arrival(m),
                77 + duration_ps(bytes, bw) + 1_234,
                "{bw} {bytes}"
            );
        }
    }
}

#[test]
fn idle_route_matches_the_packet_model_formula() {
    let (topo, links) = chain(&[50e9, 25e9, 100e9], 3_000);
    for bytes in [1u64, 3000, 1 << 20] {
        let mut d = Driver::new(&topo, false);
        let m = d.send(0, bytes, &links, 0);
        d.run().unwrap();
        assert_eq!(d.arrival(m), idle_delivery_ps(&topo, &links, bytes));
    }
}

#[test]
fn two_flows_on_a_bottleneck_each_get_half() {
    let bw = 1e10;
    let bytes = 1 << 20;
    let (topo, links) = chain(&[bw], 0);
    let single = duration_ps(bytes, bw);
    let mut d = Driver::new(&topo, false);
    let a = d.send(0, bytes, &links, 1);
    let b = d.send(0, bytes, &links, 2);
    d.run().unwrap();
    for m in [a, b] {
        // Both at bw/2 the whole time: twice the single time, up to the
        // rounding of one ceiling.
        assert!(d.arrival(m).abs_diff(2 * single) <= 1, "{}", d.arrival(m));
    }
    // One recomputation when both start, one when both end.
    assert_eq!(d.net.reallocations(), 2);
}

#[test]
fn the_long_flow_speeds_up_when_the_short_one_ends() {
    // At 1 byte/ps: S (1000 B) and L (5000 B) share the link at 0.5 B/ps.
    // S is done at 2000 ps, when L has sent 1000 B; L's other 4000 B go at
    // 1 B/ps and are done at 6000 ps. Latency 300 ps on top.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let mut d = Driver::new(&topo, true);
    let s = d.send(0, 1000, &links, 1);
    let l = d.send(0, 5000, &links, 2);
    d.run().unwrap();
    assert_eq!(d.arrival(s), 2300);
    assert_eq!(d.arrival(l), 6300);
    let usage = d.net.usage()[links[0].index()];
    assert_eq!(
        usage,
        LinkUsage {
            bytes: 6000,
            units: 2,
            busy_ps: 6000,
            max_queue: 2,
            ..LinkUsage::default()
        }
    );
    // The reverse direction carried nothing.
    assert_eq!(
        d.net.usage()[topo.reverse(links[0]).index()],
        LinkUsage::default()
    );
    let samples: Vec<(u64, u64)> = d
        .net
        .take_samples()
        .iter()
        .map(|s| (s.time.0, s.queue))
        .collect();
    // Both flows join at time 0: one sample, the last value at that instant.
    assert_eq!(samples, vec![(0, 2), (2000, 1), (6000, 0)]);
    assert!(d.net.take_samples().is_empty());
}

/// Three flows A (links 0 and 1), B (link 0) and C (link 1) of `bytes`
/// each; returns their arrival times minus their idle latencies.
fn two_link_case(bandwidths: [f64; 2], bytes: u64) -> [u64; 3] {
    let (topo, links) = chain(&bandwidths, 0);
    let mut d = Driver::new(&topo, false);
    let a = d.send(0, bytes, &links, 0);
    let b = d.send(0, bytes, &links[..1], 1);
    let c = d.send(0, bytes, &links[1..], 2);
    d.run().unwrap();
    [a, b, c].map(|m| d.arrival(m) - d.latency(m))
}

#[test]
fn max_min_symmetric_case() {
    // Capacities 10 and 10 GB/s: every link has share 10/2, all three
    // flows get 5 GB/s; 5 MB take 1 ms = 1e9 ps.
    assert_eq!(two_link_case([10e9, 10e9], 5_000_000), [1_000_000_000; 3]);
}

#[test]
fn max_min_leftover_goes_to_the_free_flow() {
    // Capacities 10 and 4 GB/s: link 1 saturates first at 4/2 = 2 GB/s for
    // A and C; B gets the 8 GB/s left on link 0. 8 MB: B is done after
    // 1 ms; A stays limited by link 1 (shared with C at 2 each), so A and C
    // take 4 ms.
    assert_eq!(
        two_link_case([10e9, 4e9], 8_000_000),
        [4_000_000_000, 1_000_000_000, 4_000_000_000]
    );
}

#[test]
fn max_min_three_links() {
    // Parking lot: A crosses links 0, 1, 2 (12, 6, 30 GB/s); B, C, D use
    // one link each. Link 1 saturates first at 6/2: A = C = 3 GB/s; then
    // B = 12 - 3 = 9 and D = 30 - 3 = 27 GB/s. When D and B end, A is still
    // held at 3 by link 1, so nothing else changes. 27 MB take 1 ms at
    // 27 GB/s, 3 ms at 9 and 9 ms at 3.
    let (topo, links) = chain(&[12e9, 6e9, 30e9], 1_000);
    let mut d = Driver::new(&topo, false);
    let bytes = 27_000_000;
    let a = d.send(0, bytes, &links, 0);
    let b = d.send(0, bytes, &links[0..1], 1);
    let c = d.send(0, bytes, &links[1..2], 2);
    let dd = d.send(0, bytes, &links[2..3], 3);
    d.run().unwrap();
    let ms = 1_000_000_000;
    assert_eq!(d.arrival(dd) - d.latency(dd), ms);
    assert_eq!(d.arrival(b) - d.latency(b), 3 * ms);
    assert_eq!(d.arrival(c) - d.latency(c), 9 * ms);
    assert_eq!(d.arrival(a) - d.latency(a), 9 * ms);
}

#[test]
fn messages_of_a_pair_go_one_after_another() {
    // At 1 B/ps with latency 500: pair 7 sends m1 then m2 (1000 B each),
    // pair 8 sends p (1000 B), all at 0. m1 and p share the link at 0.5 B/ps
    // and are done at 2000; only then m2 starts, alone: done at 3000.
    let (topo, links) = chain(&[TB_PER_S], 500);
    let mut d = Driver::new(&topo, false);
    let m1 = d.send(0, 1000, &links, 7);
    let m2 = d.send(0, 1000, &links, 7);
    let p = d.send(0, 1000, &links, 8);
    d.run().unwrap();
    assert_eq!(d.arrival(m1), 2500);
    assert_eq!(d.arrival(p), 2500);
    assert_eq!(d.arrival(m2), 3500);
    let usage = d.net.usage()[links[0].index()];
    assert_eq!((usage.units, usage.max_queue, usage.busy_ps), (3, 2, 3000));
}

#[test]
fn a_pair_delivers_in_order_even_when_a_later_message_is_faster() {
    // Two hops at 1 B/ps, latency 100 each. The big message's last byte
    // leaves at 10000 and arrives 200 + 4096 (one MTU packet's second
    // serialization) later; the zero-byte message that follows would
    // arrive after 200 only, but may not overtake.
    let (topo, links) = chain(&[TB_PER_S, TB_PER_S], 100);
    let mut d = Driver::new(&topo, false);
    let big = d.send(0, 10_000, &links, 3);
    let empty = d.send(0, 0, &links, 3);
    d.run().unwrap();
    assert_eq!(d.arrival(big), 14_296);
    assert_eq!(d.delivered, vec![(14_296, big), (14_296, empty)]);
}

#[test]
fn zero_byte_messages_take_the_idle_latency() {
    let (topo, links) = chain(&[TB_PER_S], 700);
    let mut d = Driver::new(&topo, false);
    let a = d.send(50, 0, &links, 0);
    d.run().unwrap();
    assert_eq!(d.arrival(a), 750);
    assert_eq!(d.net.usage()[links[0].index()], LinkUsage::default());
    assert_eq!(d.net.reallocations(), 0);

    let (topo, links) = chain(&[TB_PER_S], 0);
    let mut d = Driver::new(&topo, false);
    let b = d.send(50, 0, &links, 0);
    d.run().unwrap();
    assert_eq!(d.arrival(b), 50);
}

#[test]
fn outdated_finish_events_are_ignored() {
    // At 1 B/ps: L (4000 B) starts alone at 0 and is due at 4000. At 1000
    // S (1000 B) joins: both at 0.5 B/ps, L has 3000 B left. S is done at
    // 3000, when L has 2000 B left, sent at 1 B/ps by 5000. L's first
    // Finish (at 4000) must be ignored.
    let (topo, links) = chain(&[TB_PER_S], 0);
    let mut d = Driver::new(&topo, false);
    let l = d.send(0, 4000, &links, 1);
    let s = d.send(1000, 1000, &links, 2);
    d.run().unwrap();
    assert_eq!(d.delivered, vec![(3000, s), (5000, l)]);
}

#[test]
fn recomputation_stays_in_the_affected_component() {
    // 100 flows on link 0; at 10 ps one flow on link 2, which shares no
    // link with them.
    let (topo, links) = chain(&[1e10, 1e10, 1e10], 0);
    let mut d = Driver::new(&topo, false);
    for pair in 0..100 {
        d.send(0, 1 << 20, &links[0..1], pair);
    }
    d.send(10, 1000, &links[2..3], 100);
    d.run().unwrap();
    let (t0, work0) = d.reallocations[0];
    assert_eq!(t0, 0);
    // Search: 100 list entries + 100 route links; filling: the same.
    assert_eq!(work0, 400);
    let (t1, work1) = d.reallocations[1];
    assert_eq!(t1, 10);
    assert_eq!(
        work1, 4,
        "the lone flow's one list entry and one route link, twice"
    );
    // Its end leaves link 2 empty: nothing to recompute.
    assert_eq!(d.reallocations[2].1, 0);
}

#[test]
fn a_ring_of_512_flows_needs_two_recomputations() {
    // 512 vertices in a ring; flow i crosses links i and i + 1, so every
    // link carries two flows and all 512 form one component. Each gets half
    // a link, and all end together.
    let n = 512;
    let bw = 1e10;
    let mut t = Topology::new();
    let vs: Vec<_> = (0..n)
        .map(|i| {
            t.add_vertex(Vertex::new(format!("v{i}"), VertexKind::Gpu))
                .unwrap()
        })
        .collect();
    let link = Link {
        bandwidth_bytes_per_s: bw,
        ..LinkKind::parse("ib_ndr").unwrap().defaults()
    };
    let ring: Vec<LinkId> = (0..n)
        .map(|i| t.add_link(vs[i], vs[(i + 1) % n], link).unwrap().0)
        .collect();
    let topo = Arc::new(t);
    let mut d = Driver::new(&topo, false);
    let bytes = 1 << 16;
    for i in 0..n {
        d.send(0, bytes, &[ring[i], ring[(i + 1) % n]], i as u64);
    }
    d.run().unwrap();
    assert_eq!(d.net.reallocations(), 2);
    let expected = duration_ps(bytes, bw / 2.0) + d.latency(0);
    for m in 0..n as MessageId {
        assert_eq!(d.arrival(m), expected);
    }
    // 1024 incidences, each seen at most twice by the search and twice by
    // the filling; the end leaves every link empty (no work).
    assert!(d.reallocations[0].1 <= 4 * 1024, "{:?}", d.reallocations);
    assert_eq!(d.reallocations[1].1, 0);
}

/// A reproducible mixed workload on a chain of 4 links; with `faults`,
/// also random link changes (factors at most 1, every link restored at
/// 250 us).
fn mixed_run(faults: bool) -> (Vec<(u64, MessageId)>, Vec<LinkUsage>, Driver) {
    let (topo, links) = chain(&[10e9, 25e9, 7e9, 50e9], 2_000);
    let mut d = Driver::new(&topo, false);
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut draw = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _ in 0..80 {
        let first = draw(4) as usize;
        let last = first + draw(4 - first as u64) as usize;
        let bytes = [0, 1, 4096, 100_000, 1 << 20][draw(5) as usize];
        let at = draw(200_000_000);
        let pair = draw(6);
        d.send(at, bytes, &links[first..=last], pair);
    }
    if faults {
        for _ in 0..40 {
            let link = links[draw(4) as usize];
            let factor = [0.0, 0.25, 0.5, 1.0][draw(4) as usize];
            d.change(&[(draw(200_000_000), link, factor)]);
        }
        for &link in &links {
            d.change(&[(250_000_000, link, 1.0)]);
        }
    }
    d.run().unwrap();
    (d.delivered.clone(), d.net.usage().to_vec(), d)
}

#[test]
fn mixed_runs_are_deterministic_and_consistent() {
    check_mixed_run(false);
}

#[test]
fn mixed_runs_with_link_faults_are_deterministic_and_consistent() {
    check_mixed_run(true);
    // The faults did slow something down.
    assert_ne!(mixed_run(true).0, mixed_run(false).0);
}

fn check_mixed_run(faults: bool) {
    let (delivered, usage, d) = mixed_run(faults);
    let (again, usage_again, _) = mixed_run(faults);
    assert_eq!(delivered, again);
    assert_eq!(usage, usage_again);
    let topo = &d.topology;
    let mut bytes_per_link = vec![0u64; topo.link_direction_count()];
    for (m, t) in d.sends.iter().enumerate() {
        let m = m as MessageId;
        let start = d.start_ps[m as usize];
        // Never faster than on an idle route (1 ps of float slack), and
        // sane: the whole workload needs well under 1 s even with faults.
        assert!(d.arrival(m) + 1 >= start + idle_delivery_ps(topo, &t.route, t.bytes));
        assert!(d.arrival(m) < 1_000_000_000_000, "{}", d.arrival(m));
        if t.bytes > 0 {
            for l in t.route.iter() {
                bytes_per_link[l.index()] += t.bytes;
            }
        }
    }
    let carried: Vec<u64> = usage.iter().map(|u| u.bytes).collect();
    assert_eq!(carried, bytes_per_link);
    // Messages of a pair arrive in the order they were started (ties in
    // the start time keep the sending order).
    let mut order: Vec<MessageId> = (0..d.sends.len() as MessageId).collect();
    order.sort_by_key(|&m| (d.start_ps[m as usize], m));
    for pair in 0..6 {
        let sent: Vec<MessageId> = order
            .iter()
            .copied()
            .filter(|&m| d.sends[m as usize].flow == pair)
            .collect();
        let arrived: Vec<MessageId> = delivered
            .iter()
            .map(|&(_, m)| m)
            .filter(|&m| d.sends[m as usize].flow == pair)
            .collect();
        assert_eq!(arrived, sent, "pair {pair}");
    }
}

#[test]
fn times_past_the_end_are_errors() {
    let (topo, links) = chain(&[1e10], 500);
    let mut d = Driver::new(&topo, false);
    d.send(u64::MAX - 10, 1 << 20, &links, 0);
    assert_eq!(d.run(), Err(OutOfTime));

    // A zero-byte message whose latency alone overflows.
    let mut d = Driver::new(&topo, false);
    d.send(u64::MAX - 1, 0, &links, 0);
    assert_eq!(d.run(), Err(OutOfTime));
}

/// SplitMix64 numbers below `bound`: random but fixed instances.
fn split_mix(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |bound: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound
    }
}

#[test]
fn successors_inheriting_their_rate_time_what_recomputing_everything_times() {
    // Random chains whose pairs send queues of messages over sub-ranges
    // of the chain (mostly one route per pair, sometimes another), at
    // few distinct start times so that many things happen at one
    // picosecond; some links halve or go down and up. Arrivals and every
    // link's counters must be the same to the picosecond and the byte
    // with the shortcut as without.
    let mut next = split_mix(0x5eed);
    let mut inherited_work_saved = 0u64;
    for instance in 0..200 {
        let links = 2 + next(6) as usize;
        let bandwidths: Vec<f64> = (0..links)
            .map(|_| 1e9 * (1.0 + next(1000) as f64 / 7.0) / 3.0)
            .collect();
        let (topo, chain_links) = chain(&bandwidths, 100 + next(1000));
        let pairs = 1 + next(8);
        let mut sends = Vec::new();
        for pair in 0..pairs {
            let from = next(links as u64) as usize;
            let to = from + 1 + next((links - from) as u64) as usize;
            for _ in 0..1 + next(12) {
                let (from, to) = if next(8) == 0 {
                    let other = next(links as u64) as usize;
                    (other, other + 1)
                } else {
                    (from, to)
                };
                let bytes = [0, 1000, 4096, 12_345, 65_536][next(5) as usize];
                sends.push((next(4) * 50_000, bytes, from..to, pair));
            }
        }
        let changes: Vec<(u64, LinkId, f64)> = (0..next(3))
            .map(|_| {
                let link = chain_links[next(links as u64) as usize];
                (next(8) * 25_000, link, [0.0, 0.5, 1.0][next(3) as usize])
            })
            .collect();
        let run = |inherit: bool| {
            let mut d = Driver::new(&topo, false);
            d.net = FlowNetwork::new(topo.clone(), false).with_successors_inheriting(inherit);
            for (at, bytes, range, pair) in &sends {
                d.send(*at, *bytes, &chain_links[range.clone()], *pair);
            }
            d.change(&changes);
            d.run().unwrap();
            let mut arrivals = d.delivered.clone();
            arrivals.sort_by_key(|&(_, m)| m);
            let work: u64 = d.reallocations.iter().map(|&(_, w)| w).sum();
            (arrivals, d.net.usage().to_vec(), work)
        };
        let (arrivals, usage, work) = run(true);
        let (want_arrivals, want_usage, want_work) = run(false);
        assert_eq!(arrivals, want_arrivals, "instance {instance}");
        assert_eq!(usage, want_usage, "instance {instance}");
        assert!(work <= want_work, "instance {instance}");
        inherited_work_saved += want_work - work;
    }
    // The shortcut did fire.
    assert!(inherited_work_saved > 1000, "{inherited_work_saved}");
}
