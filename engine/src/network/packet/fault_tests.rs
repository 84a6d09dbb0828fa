//! Tests of scheduled link changes (faults) in the packet model.
//!
//! Most use whole rates where `duration_ps` is exact: a 4096 B packet
//! takes `P = 163_840` ps at 25 GB/s, `2P` at half and `4P` at a quarter.
//! Changes are scheduled before any traffic, so a change fires before
//! the packet events at its time.

use std::sync::Arc;

use algorithms::Time;
use topologies::{LinkId, Topology, duration_ps};

use super::PacketEvent;
use super::tests::{Driver, KIB, converging, gpu, link, pair, run, run_with, send, switch};
use crate::network::LinkChange;

const PKT: u64 = 4096;

fn change(at_ps: u64, link: LinkId, bandwidth_factor: f64) -> LinkChange {
    LinkChange::bandwidth(Time(at_ps), link, bandwidth_factor)
}

#[test]
fn the_event_stays_small() {
    assert!(std::mem::size_of::<PacketEvent>() <= 12);
}

#[test]
fn an_outage_delays_a_queued_message_by_its_length() {
    let lat = 100_000;
    let n = 64;
    // 7 GB/s does not divide a packet's bytes: every busy period is
    // rounded once, so durations of periods add up to within 1 ps.
    for bw in [25e9, 7e9] {
        let (t, ab) = pair(link(bw, lat, PKT, 64 * KIB));
        // One busy period from 0: the first k packets end at end(k).
        let end = |k: u64| duration_ps(k * PKT, bw);
        let msg = [send(n * PKT, &[ab], 0)];
        let alone = run(&t, &msg).unwrap().delivered_ps[0];
        assert_eq!(alone, end(n) + lat);

        // Down exactly when the 10th packet ends: it completes, the 11th
        // waits, and the other 54 go in a new busy period from t2.
        let t1 = end(10);
        let t2 = t1 + 1_000_000;
        let r = run_with(&t, &msg, &[change(t1, ab, 0.0), change(t2, ab, 1.0)]).unwrap();
        assert_eq!(
            r.delivered_ps[0],
            t2 + duration_ps((n - 10) * PKT, bw) + lat
        );
        let delay = r.delivered_ps[0] - alone;
        if bw == 25e9 {
            assert_eq!(delay, t2 - t1);
        } else {
            assert!(delay.abs_diff(t2 - t1) <= 1, "{delay}");
        }

        // Down while the 11th packet is on the wire: it completes at
        // end(11) at the rate it started with; the outage costs the
        // message only t2 - end(11).
        let t1 = end(10) + 5_000;
        let r = run_with(&t, &msg, &[change(t1, ab, 0.0), change(t2, ab, 1.0)]).unwrap();
        let rest_ps = duration_ps((n - 11) * PKT, bw);
        assert_eq!(r.delivered_ps[0], t2 + rest_ps + lat);
        let u = r.net.usage()[ab.index()];
        assert_eq!((u.bytes, u.units), (n * PKT, n));
        assert_eq!(u.busy_ps, end(11) + rest_ps, "the outage is not busy time");
    }
}

#[test]
fn half_the_bandwidth_takes_the_rest_twice_as_long() {
    let lat = 100_000;
    let n = 64;
    for bw in [25e9, 7e9, 16e9 * 128.0 / 130.0] {
        let (t, ab) = pair(link(bw, lat, PKT, 64 * KIB));
        let end = |k: u64| duration_ps(k * PKT, bw);
        // The 11th packet is on the wire at t0 and keeps its time; the
        // other 53 form a new busy period at half the rate.
        let t0 = end(10) + 5_000;
        let msg = [send(n * PKT, &[ab], 0)];
        let r = run_with(&t, &msg, &[change(t0, ab, 0.5)]).unwrap();
        let rest = (n - 11) * PKT;
        let slow_ps = duration_ps(rest, bw * 0.5);
        assert_eq!(r.delivered_ps[0], end(11) + slow_ps + lat, "{bw}");
        // ceil(2x) and 2 ceil(x) differ by at most 1 (halving a float
        // rate is exact, so the float path doubles x exactly).
        let twice = 2 * duration_ps(rest, bw);
        assert!(slow_ps.abs_diff(twice) <= 1, "{slow_ps} vs {twice}");
        if bw == 25e9 {
            assert_eq!(slow_ps, twice);
        }
        assert_eq!(r.net.usage()[ab.index()].busy_ps, end(11) + slow_ps);
    }
}

/// gpu0 -> sw -> gpu1 at 25 GB/s, no latencies, the switch's port to
/// gpu1 with a buffer of four packets.
fn two_hops() -> (Arc<Topology>, [LinkId; 2]) {
    let mut t = Topology::new();
    let g0 = gpu(&mut t, "gpu0");
    let sw = switch(&mut t, "sw", 0);
    let g1 = gpu(&mut t, "gpu1");
    let (a, _) = t.add_link(g0, sw, link(25e9, 0, PKT, 64 * KIB)).unwrap();
    let (b, _) = t.add_link(sw, g1, link(25e9, 0, PKT, 4 * PKT)).unwrap();
    (Arc::new(t), [a, b])
}

#[test]
fn a_down_link_backs_traffic_up_without_loss() {
    let (t, [a, b]) = two_hops();
    let p = duration_ps(PKT, 25e9);
    let n = 64;
    let msg = [send(n * PKT, &[a, b], 0)];
    // Before the outage packet k crosses a in [kP, (k+1)P] and b in
    // [(k+1)P, (k+2)P]. b goes down at 10.5P, while it carries packet 9
    // (which completes at 11P) and a carries packet 10. a goes on while
    // b's buffer has room: packets 11, 12, 13 start at 11P, 12P, 13P,
    // filling it with 10..13; packet 14 finds it full and waits.
    let t1 = 10 * p + p / 2;
    let t2 = 40 * p + 12_345;
    let changes = [change(t1, b, 0.0), change(t2, b, 1.0)];
    let mut d = Driver::new(&t, &msg, &changes).unwrap();
    d.run_until(t2).unwrap();
    let u = d.net.usage();
    assert_eq!((u[a.index()].units, u[b.index()].units), (14, 10));
    let port = &d.net.ports[b.index()];
    assert_eq!(port.reserved_bytes, 4 * PKT);
    assert_eq!(port.transit.len(), 4);
    assert!(port.waiters.iter().eq([a.index() as u32].iter()));
    assert!(d.net.ports[a.index()].blocked.is_some());
    assert_eq!(d.at, vec![None]);

    // From t2 b is never idle (a refills each freed slot while b still
    // has three packets): the 54 left take one busy period.
    let r = run_with(&t, &msg, &changes).unwrap();
    assert_eq!(r.delivered_ps[0], t2 + (n - 10) * p);
    let u = r.net.usage();
    assert_eq!(u[b.index()].max_queue, 4 * PKT);
    assert!(r.samples.iter().all(|s| s.queue <= 4 * PKT));
    for l in [a, b] {
        assert_eq!(u[l.index()].bytes, n * PKT, "nothing lost");
    }
}

#[test]
fn a_port_waiting_for_credit_that_goes_down_holds_no_one_up() {
    // Two flows into the switch's port c (buffer of four packets). c goes
    // down at 2.5P: both a and b soon wait for its credit. a goes down at
    // 20P, while waiting; c comes back at 100P and serves b alone, which
    // is done before a comes back at 300P.
    let (t, r0, r1) = converging(link(25e9, 0, PKT, 4 * PKT));
    let (a, b, c) = (r0[0], r1[0], r0[1]);
    let p = duration_ps(PKT, 25e9);
    let n = 32;
    let sends = [send(n * PKT, &r0, 0), send(n * PKT, &r1, 1)];
    let (t3, t2) = (300 * p, 100 * p);
    let changes = [
        change(2 * p + p / 2, c, 0.0),
        change(20 * p, a, 0.0),
        change(t2, c, 1.0),
        change(t3, a, 1.0),
    ];
    let mut d = Driver::new(&t, &sends, &changes).unwrap();
    d.run_until(20 * p).unwrap();
    assert!(d.net.ports[a.index()].blocked.is_some(), "a waits for c");
    assert!(d.net.ports[b.index()].blocked.is_some(), "b waits for c");
    d.run_until(20 * p + 1).unwrap();
    assert!(d.net.ports[a.index()].blocked.is_none(), "a withdrew");
    assert!(
        d.net.ports[c.index()]
            .waiters
            .iter()
            .eq([b.index() as u32].iter())
    );
    let sent_by_a = d.net.usage()[a.index()].units;

    let r = run_with(&t, &sends, &changes).unwrap();
    let [at_a, at_b] = r.delivered_ps[..] else {
        unreachable!()
    };
    assert!(at_b < t3, "b was not held up by a: {at_b}");
    // From t3 a's packets alone cross a then c, one P each, pipelined.
    assert_eq!(at_a, t3 + (n - sent_by_a + 1) * p);
    assert!(r.net.usage()[c.index()].max_queue <= 4 * PKT);
}

#[test]
fn changes_at_time_zero_and_in_a_row_apply_in_order() {
    let lat = 100_000;
    let n = 32;
    let (t, ab) = pair(link(25e9, lat, PKT, 64 * KIB));
    let p1 = duration_ps(PKT, 25e9);
    let (p2, p4) = (2 * p1, 4 * p1);
    assert_eq!(duration_ps(PKT, 12.5e9), p2);
    assert_eq!(duration_ps(PKT, 6.25e9), p4);
    let msg = [send(n * PKT, &[ab], 0)];
    // Half the rate from 0 (the last of two changes at 0 holds), so the
    // k-th packet ends at k P2. At x packet 6 is on the wire (ends 6 P2),
    // then a quarter (down and back up at one instant is no outage);
    // at y packet 11 is on the wire (ends 6 P2 + 5 P4); the 21 left go
    // at the full rate.
    let x = 5 * p2 + 1_000;
    let y = 6 * p2 + 4 * p4 + 7;
    let changes = [
        change(0, ab, 0.25),
        change(0, ab, 0.5),
        change(x, ab, 0.0),
        change(x, ab, 0.25),
        change(y, ab, 1.0),
    ];
    let r = run_with(&t, &msg, &changes).unwrap();
    let busy = 6 * p2 + 5 * p4 + 21 * p1;
    assert_eq!(r.delivered_ps[0], busy + lat);
    assert_eq!(r.net.usage()[ab.index()].busy_ps, busy);

    // Down from 0: the message starts when the link comes back.
    let up = 3_000_000;
    let r = run_with(&t, &msg, &[change(0, ab, 0.0), change(up, ab, 1.0)]).unwrap();
    assert_eq!(r.delivered_ps[0], up + n * p1 + lat);

    // Down and back up while one packet is on the wire changes nothing,
    // even at a rate that rounds.
    let (t, ab) = pair(link(7e9, lat, PKT, 64 * KIB));
    let msg = [send(n * PKT, &[ab], 0)];
    let alone = run(&t, &msg).unwrap().delivered_ps[0];
    let mid = duration_ps(5 * PKT, 7e9) + 10;
    let blip = [change(mid, ab, 0.0), change(mid + 1_000, ab, 1.0)];
    assert_eq!(run_with(&t, &msg, &blip).unwrap().delivered_ps[0], alone);
}

#[test]
fn changes_without_traffic_are_harmless() {
    let (t, [a, b]) = two_hops();
    let changes = [
        change(0, a, 0.5),
        change(1_000, b, 0.0),
        change(2_000, a, 0.0),
        change(3_000, a, 1.0),
        change(5_000, a, 0.25),
    ];
    let r = run_with(&t, &[], &changes).unwrap();
    assert!(r.net.usage().iter().all(|u| *u == Default::default()));
    assert!(r.samples.is_empty());

    // A message after a down-and-up, on a link whose reverse direction
    // is down for good, goes as if nothing had happened.
    let (t, ab) = pair(link(25e9, 100_000, PKT, 64 * KIB));
    let mut late = send(10 * PKT, &[ab], 0);
    late.at_ps = 10_000;
    let changes = [
        change(1_000, ab, 0.0),
        change(2_000, ab, 1.0),
        change(3_000, t.reverse(ab), 0.0),
    ];
    let r = run_with(&t, &[late], &changes).unwrap();
    let expect = 10_000 + duration_ps(10 * PKT, 25e9) + 100_000;
    assert_eq!(r.delivered_ps, vec![expect]);
}

#[test]
fn runs_with_changes_are_deterministic() {
    let (t, r0, r1) = converging(link(25e9, 100_000, PKT, 16 * KIB));
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
    let changes = [
        change(500_000, r0[1], 0.0),
        change(700_000, r1[0], 0.3),
        change(3_000_000, r0[1], 0.7),
        change(4_000_000, r1[0], 0.0),
        change(9_000_000, r1[0], 1.0),
    ];
    let a = run_with(&t, &sends(), &changes).unwrap();
    let b = run_with(&t, &sends(), &changes).unwrap();
    assert_eq!(a.delivered_ps, b.delivered_ps);
    assert_eq!(a.net.usage(), b.net.usage());
    assert_eq!(a.samples, b.samples);
    let plain = run(&t, &sends()).unwrap();
    assert!(
        a.delivered_ps
            .iter()
            .zip(&plain.delivered_ps)
            .all(|(x, y)| x >= y),
        "faults never speed anything up here"
    );
}
