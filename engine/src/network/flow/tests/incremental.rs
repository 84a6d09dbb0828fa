//! The component-local recomputation against recomputing every flow: after
//! each `Reallocate`, every active flow's rate (kept, inherited or
//! recomputed) must equal, to the bit, the rate a max-min filling of all
//! active flows over all links gives.

use super::*;

/// Max-min rates of every active flow, from a fresh allocator seeded with
/// every link, by flow slot.
fn full_rates(net: &FlowNetwork) -> Vec<(u32, f64)> {
    let mut allocator = MaxMin::new(net.links.len());
    let seeds: Vec<u32> = (0..net.links.len() as u32).collect();
    let mut rates = Vec::new();
    allocator.allocate(
        &seeds,
        &net.links,
        |f| &net.slots[f as usize].route[..],
        &mut rates,
    );
    rates.sort_by_key(|&(f, _)| f);
    rates
}

/// The rates the model holds for its active flows, by flow slot.
fn held_rates(net: &FlowNetwork) -> Vec<(u32, f64)> {
    (0..net.slots.len() as u32)
        .filter(|&f| net.slots[f as usize].active)
        .map(|f| (f, net.slots[f as usize].rate_bytes_per_s))
        .collect()
}

/// Runs `d` like `Driver::run`, comparing the held rates with a full
/// recomputation after every `Reallocate`; returns how many flows were
/// compared.
fn run_checked(d: &mut Driver, instance: u64) -> usize {
    let mut compared = 0;
    while let Some(event) = d.queue.pop() {
        match event.kind {
            EventKind::ComputeDone { timer, .. } => {
                let transfer = d.sends[timer as usize].clone();
                d.net.start(event.time, transfer, &mut d.queue).unwrap();
            }
            EventKind::Net(NetEvent::Flow(e)) => {
                let mut out = Vec::new();
                d.net.handle(event.time, e, &mut d.queue, &mut out).unwrap();
                d.delivered
                    .extend(out.into_iter().map(|m| (event.time.0, m)));
                if e == FlowEvent::Reallocate {
                    let bits = |v: Vec<(u32, f64)>| -> Vec<(u32, u64)> {
                        v.into_iter().map(|(f, r)| (f, r.to_bits())).collect()
                    };
                    let held = bits(held_rates(&d.net));
                    let full = bits(full_rates(&d.net));
                    assert_eq!(held, full, "instance {instance} at {} ps", event.time.0);
                    compared += held.len();
                }
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    compared
}

#[test]
fn component_local_rates_equal_a_full_recomputation_bit_for_bit() {
    // Random flow sets: each pair sends a queue of messages, mostly over
    // one random set of a chain's links (not only contiguous: a route here is any
    // list of link directions, some crossed twice), so components form,
    // merge and split as flows start and end; capacities that round;
    // few distinct start times, so that many changes share an instant;
    // sometimes a link halves, goes down or comes back.
    let mut next = split_mix(0xc0ff_ee00);
    let mut compared = 0;
    let mut unmarked = 0;
    for instance in 0..300 {
        let links = 2 + next(10) as usize;
        let bandwidths: Vec<f64> = (0..links)
            .map(|_| 1e9 * (1.0 + next(1000) as f64 / 7.0) / 3.0)
            .collect();
        let (topo, chain_links) = chain(&bandwidths, 100 + next(1000));
        let mut d = Driver::new(&topo, false);
        for pair in 0..1 + next(12) {
            let route: Vec<LinkId> = (0..1 + next(4))
                .map(|_| chain_links[next(links as u64) as usize])
                .collect();
            for _ in 0..1 + next(8) {
                let bytes = [0, 1000, 4096, 12_345, 65_536, 1 << 20][next(6) as usize];
                // Now and then another route of the same length: not a
                // successor that may inherit.
                let other: Vec<LinkId> = route
                    .iter()
                    .map(|_| chain_links[next(links as u64) as usize])
                    .collect();
                let route = if next(4) == 0 { &other } else { &route };
                d.send(next(6) * 40_000, bytes, route, pair);
            }
        }
        let changes: Vec<(u64, LinkId, f64)> = (0..next(3))
            .map(|_| {
                let link = chain_links[next(links as u64) as usize];
                (next(8) * 25_000, link, [0.0, 0.5, 1.0][next(3) as usize])
            })
            .collect();
        d.change(&changes);
        compared += run_checked(&mut d, instance);
        unmarked += d.net.departures_unmarked();
    }
    // Enough rates were compared for the claim to mean something, some
    // after departures that left their links clean.
    assert!(compared > 5_000, "{compared}");
    assert!(unmarked > 100, "{unmarked}");
}
