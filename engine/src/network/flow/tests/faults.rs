//! Tests of scheduled link changes in the flow-level model. Expected
//! times are derived in the comments, from the max-min rates worked out by
//! hand around each change.

use super::*;

#[test]
fn a_link_down_mid_transfer_delays_the_end_by_the_outage() {
    // 10000 B at 1 B/ps from 0: 3000 B sent when the link goes down at
    // 3000; the other 7000 B go from 7000 on, done at 14000 instead of
    // 10000. Busy while sending only: 3000 + 7000 ps.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 10_000, &links, 0);
    d.change(&[(3000, links[0], 0.0), (7000, links[0], 1.0)]);
    d.run().unwrap();
    assert_eq!(d.arrival(m), 14_000 + d.latency(m));
    let usage = d.net.usage()[links[0].index()];
    assert_eq!(
        (usage.bytes, usage.units, usage.busy_ps),
        (10_000, 1, 10_000)
    );

    // 1 MiB at 25 GB/s (0.025 B/ps) is due at duration_ps(2^20, 25e9);
    // down from 1 us (25000 B sent, a whole number) to 5 us: the remaining
    // 2^20 - 25000 B take exactly 1 us less than the whole, so the end is
    // exactly 4 us late.
    let (topo, links) = chain(&[25e9], 1_000);
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 1 << 20, &links, 0);
    d.change(&[(1_000_000, links[0], 0.0), (5_000_000, links[0], 1.0)]);
    d.run().unwrap();
    let idle = duration_ps(1 << 20, 25e9);
    assert_eq!(d.arrival(m), idle + 4_000_000 + d.latency(m));

    // A message started while its link is down waits for the restore:
    // 1000 B from 5000 on, done at 6000.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let mut d = Driver::new(&topo, false);
    d.change(&[(0, links[0], 0.0), (5000, links[0], 1.0)]);
    let m = d.send(100, 1000, &links, 0);
    d.run().unwrap();
    assert_eq!(d.arrival(m), 6000 + d.latency(m));
    assert_eq!(d.net.usage()[links[0].index()].busy_ps, 1000);
}

#[test]
fn degrading_a_link_slows_the_rest_of_the_transfer() {
    // 10000 B at 1 B/ps; halved at 4000 with 6000 B left: 12000 ps more.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 10_000, &links, 0);
    d.change(&[(4000, links[0], 0.5)]);
    d.run().unwrap();
    assert_eq!(d.arrival(m), 16_000 + d.latency(m));

    // Doubled instead (factors above 1 are allowed): 6000 B at 2 B/ps.
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 10_000, &links, 0);
    d.change(&[(4000, links[0], 2.0)]);
    d.run().unwrap();
    assert_eq!(d.arrival(m), 7000 + d.latency(m));

    // A rate that is not a whole number of bytes per ps (1/30 B/ps): the
    // rest, from fractional remaining bytes, takes twice as long as it
    // would have, to one ps of rounding.
    let bw = 100e9 / 3.0;
    let (topo, links) = chain(&[bw], 0);
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 1 << 20, &links, 0);
    let t0 = 3_000_000;
    d.change(&[(t0, links[0], 0.5)]);
    d.run().unwrap();
    let full = duration_ps(1 << 20, bw);
    let expected = t0 + 2 * (full - t0) + d.latency(m);
    assert!(
        d.arrival(m).abs_diff(expected) <= 1,
        "{} {expected}",
        d.arrival(m)
    );
}

#[test]
fn a_flow_stuck_behind_a_down_link_leaves_the_shared_link_to_the_other() {
    // Links 0 and 1 at 1 B/ps. A (6000 B) crosses both, B (10000 B) link
    // 0 only; they share link 0 at 0.5 B/ps each. At 2000 (A and B have
    // 5000 and 9000 B left) link 1 goes down: A gets 0 and B all of link
    // 0, sending 2000 B until link 1 is back at 4000. Then they share
    // again: A's 5000 B take until 14000, when B has 7000 - 5000 = 2000 B
    // left, alone at 1 B/ps: done at 16000. (Had B stayed at 0.5 during
    // the outage it would end at 17000.)
    let (topo, links) = chain(&[TB_PER_S, TB_PER_S], 100);
    let mut d = Driver::new(&topo, false);
    let a = d.send(0, 6000, &links, 0);
    let b = d.send(0, 10_000, &links[..1], 1);
    d.change(&[(2000, links[1], 0.0), (4000, links[1], 1.0)]);
    d.run().unwrap();
    assert_eq!(d.arrival(a), 14_000 + d.latency(a));
    assert_eq!(d.arrival(b), 16_000 + d.latency(b));

    // B (3000 B) is done while A is stuck: 2000 B left at 2000, alone at
    // 1 B/ps, done at 4000. A resumes at 6000 with 5000 B: done at 11000.
    // Link 0 sends during 0-4000 and 6000-11000 (A stuck does not count),
    // link 1 during 0-2000 and 6000-11000.
    let mut d = Driver::new(&topo, false);
    let a = d.send(0, 6000, &links, 0);
    let b = d.send(0, 3000, &links[..1], 1);
    d.change(&[(2000, links[1], 0.0), (6000, links[1], 1.0)]);
    d.run().unwrap();
    assert_eq!(d.arrival(b), 4000 + d.latency(b));
    assert_eq!(d.arrival(a), 11_000 + d.latency(a));
    let usage = d.net.usage();
    assert_eq!(
        usage[links[0].index()],
        LinkUsage {
            bytes: 9000,
            units: 2,
            busy_ps: 9000,
            max_queue: 2,
            ..LinkUsage::default()
        }
    );
    assert_eq!(usage[links[1].index()].busy_ps, 7000);
}

#[test]
fn several_changes_apply_in_time_order() {
    // 10000 B at 1 B/ps. Given out of order and in two calls; at 3000 the
    // later-scheduled 0 wins over 0.25. 0-1000 at 1 B/ps: 1000 B;
    // 1000-3000 at 0.5: 1000 B; down 3000-5000; 5000-6000 at 2: 2000 B;
    // the last 6000 B at 1 B/ps from 6000: done at 12000. The reverse
    // direction going down changes nothing.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let mut d = Driver::new(&topo, false);
    let m = d.send(0, 10_000, &links, 0);
    let l = links[0];
    d.change(&[(5000, l, 2.0), (1000, l, 0.5), (3000, l, 0.25)]);
    d.change(&[(3000, l, 0.0), (6000, l, 1.0), (0, topo.reverse(l), 0.0)]);
    d.run().unwrap();
    assert_eq!(d.delivered, vec![(12_000 + d.latency(m), m)]);
    // Busy: 0-3000 and 5000-12000.
    assert_eq!(d.net.usage()[l.index()].busy_ps, 10_000);
}

#[test]
fn changes_without_flows_are_harmless() {
    // The link flaps before the message starts, its reverse goes down for
    // good, and the link goes down again after everything is done: the
    // message sees an idle link and only its own start and end cause
    // recomputations.
    let (topo, links) = chain(&[TB_PER_S], 300);
    let plain = {
        let mut d = Driver::new(&topo, false);
        d.send(100, 1000, &links, 0);
        d.run().unwrap();
        (d.delivered.clone(), d.net.usage().to_vec())
    };
    let mut d = Driver::new(&topo, false);
    let m = d.send(100, 1000, &links, 0);
    d.change(&[
        (0, links[0], 0.0),
        (0, topo.reverse(links[0]), 0.0),
        (50, links[0], 1.0),
        (1_000_000, links[0], 0.0),
    ]);
    d.run().unwrap();
    assert_eq!(d.arrival(m), 1100 + d.latency(m));
    assert_eq!((d.delivered.clone(), d.net.usage().to_vec()), plain);
    assert_eq!(d.net.reallocations(), 2);
}
