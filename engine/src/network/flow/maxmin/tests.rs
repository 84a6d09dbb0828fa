//! Tests of the max-min filling: worked cases, and the keyed filling
//! against the eager one bit for bit.

use super::*;

/// A link of the tests: its flows and bandwidth.
struct TestLink(Vec<u32>, f64);

impl Capacity for TestLink {
    fn flows(&self) -> &[u32] {
        &self.0
    }

    fn capacity_bytes_per_s(&self) -> f64 {
        self.1
    }
}

/// The links of `link_flows` with bandwidths `capacity`.
fn links(link_flows: &[Vec<u32>], capacity: &[f64]) -> Vec<TestLink> {
    link_flows
        .iter()
        .zip(capacity)
        .map(|(f, &c)| TestLink(f.clone(), c))
        .collect()
}

/// Rates of flows given as lists of link indices on links of the
/// given capacities, all in one call seeded with every link.
fn rates(capacity: &[f64], routes: &[&[u32]]) -> (Vec<f64>, u64) {
    let routes: Vec<Vec<LinkId>> = routes
        .iter()
        .map(|r| r.iter().map(|&l| LinkId::new(l as usize)).collect())
        .collect();
    let mut link_flows = vec![Vec::new(); capacity.len()];
    for (f, r) in routes.iter().enumerate() {
        for l in r {
            link_flows[l.index()].push(f as u32);
        }
    }
    let mut mm = MaxMin::new(capacity.len());
    let seeds: Vec<u32> = (0..capacity.len() as u32).collect();
    let mut out = Vec::new();
    mm.allocate(
        &seeds,
        &links(&link_flows, capacity),
        |f| &routes[f as usize],
        &mut out,
    );
    out.sort_by_key(|&(f, _)| f);
    assert_eq!(out.len(), routes.len(), "every flow is reached");
    (out.into_iter().map(|(_, r)| r).collect(), mm.work())
}

#[test]
fn symmetric_two_links() {
    // A over links 0 and 1, B over 0, C over 1; capacities 10 and 10:
    // both links have share 10/2 = 5 and saturate together.
    let (r, _) = rates(&[10.0, 10.0], &[&[0, 1], &[0], &[1]]);
    assert_eq!(r, vec![5.0, 5.0, 5.0]);
}

#[test]
fn leftover_goes_to_the_unconstrained_flow() {
    // Capacities 10 and 4. Link 1 saturates first at 4/2 = 2 (A and
    // C); link 0 then has 10 - 2 = 8 left for B alone.
    let (r, _) = rates(&[10.0, 4.0], &[&[0, 1], &[0], &[1]]);
    assert_eq!(r, vec![2.0, 8.0, 2.0]);
}

#[test]
fn three_links_parking_lot() {
    // A crosses links 0, 1, 2 (capacities 12, 6, 30); B uses 0, C uses
    // 1, D uses 2. Link 1: 6/2 = 3 is the smallest share, so A and C
    // get 3; link 0 then leaves 12 - 3 = 9 to B, link 2 leaves 27 to D.
    let (r, _) = rates(&[12.0, 6.0, 30.0], &[&[0, 1, 2], &[0], &[1], &[2]]);
    assert_eq!(r, vec![3.0, 9.0, 3.0, 27.0]);
}

#[test]
fn a_flow_crossing_a_link_twice_uses_it_twice() {
    // A crosses link 0 twice, B once: 3 crossings share 9, so 3 each;
    // A's rate is 3 and it takes 6 of the link.
    let (r, _) = rates(&[9.0], &[&[0, 0], &[0]]);
    assert_eq!(r, vec![3.0, 3.0]);
}

#[test]
fn a_down_link_stops_its_flows_and_frees_their_other_links() {
    // Link 1 has capacity 0: A (links 0 and 1) and C (link 1) get 0,
    // so B has link 0 (capacity 10) to itself. Rates stay finite.
    let (r, _) = rates(&[10.0, 0.0], &[&[0, 1], &[0], &[1]]);
    assert_eq!(r, vec![0.0, 10.0, 0.0]);
    // Halving link 0 instead: A and B share 5 (link 0 saturates at
    // 5/2 before link 1 at 10/2), C gets 10 - 2.5.
    let (r, _) = rates(&[5.0, 10.0], &[&[0, 1], &[0], &[1]]);
    assert_eq!(r, vec![2.5, 2.5, 7.5]);
    // Every link down: all zero, no NaN.
    let (r, _) = rates(&[0.0, 0.0], &[&[0, 1], &[0], &[1]]);
    assert_eq!(r, vec![0.0; 3]);
}

/// A candidate of [`eager_rates`]' heap, which pops the smallest share
/// first, ties by the smaller link index.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    share: f64,
    link: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Reversed, so that the max-heap pops the smallest share first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .share
            .total_cmp(&self.share)
            .then(other.link.cmp(&self.link))
    }
}

/// Progressive filling as first written: every changed share pushed,
/// outdated candidates skipped when popped. The rates, bit for bit,
/// that the keyed filling must reproduce.
fn eager_rates(capacity: &[f64], routes: &[Vec<u32>]) -> Vec<f64> {
    let mut link_flows = vec![Vec::new(); capacity.len()];
    for (f, r) in routes.iter().enumerate() {
        for &l in r {
            link_flows[l as usize].push(f as u32);
        }
    }
    let mut left = capacity.to_vec();
    let mut unfrozen: Vec<u32> = link_flows.iter().map(|f| f.len() as u32).collect();
    let mut rate = vec![f64::NAN; routes.len()];
    let mut heap = BinaryHeap::new();
    for (l, &n) in unfrozen.iter().enumerate() {
        if n > 0 {
            let share = left[l] / f64::from(n);
            heap.push(Candidate {
                share,
                link: l as u32,
            });
        }
    }
    let mut level = 0.0f64;
    while let Some(Candidate { share, link }) = heap.pop() {
        let i = link as usize;
        let n = unfrozen[i];
        if n == 0 || share != left[i] / f64::from(n) {
            continue;
        }
        level = level.max(share);
        for &f in &link_flows[i] {
            if !rate[f as usize].is_nan() {
                continue;
            }
            rate[f as usize] = level;
            for &j in &routes[f as usize] {
                let j = j as usize;
                left[j] = (left[j] - level).max(0.0);
                unfrozen[j] -= 1;
                if unfrozen[j] > 0 && j != i {
                    let share = left[j] / f64::from(unfrozen[j]);
                    heap.push(Candidate {
                        share,
                        link: j as u32,
                    });
                }
            }
        }
    }
    rate
}

#[test]
fn keyed_filling_gives_the_eager_fillings_rates_bit_for_bit() {
    // SplitMix64: random but fixed instances, with capacities that
    // are not powers of two (so shares round) and links shared by
    // many flows, some crossed twice.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound
    };
    let mut compared = 0;
    for _ in 0..300 {
        let links = 2 + next(30) as usize;
        // Every other instance draws from three capacities only, so
        // that routes cross links of equal capacity (the ties the
        // dominated links are left out by).
        let few = next(2) == 0;
        let capacity: Vec<f64> = (0..links)
            .map(|_| {
                let step = if few { next(3) * 100 } else { next(1000) };
                1e9 * (1.0 + step as f64 / 7.0) / 3.0
            })
            .collect();
        let flows = 1 + next(60) as usize;
        let routes: Vec<Vec<u32>> = (0..flows)
            .map(|_| {
                (0..1 + next(5))
                    .map(|_| next(links as u64) as u32)
                    .collect()
            })
            .collect();
        let want = eager_rates(&capacity, &routes);
        let slices: Vec<&[u32]> = routes.iter().map(Vec::as_slice).collect();
        let (got, _) = rates(&capacity, &slices);
        let bits = |v: &[f64]| v.iter().map(|r| r.to_bits()).collect::<Vec<u64>>();
        assert_eq!(bits(&got), bits(&want), "{capacity:?} {routes:?}");
        compared += flows;
    }
    assert!(compared > 3000, "{compared}");
}

#[test]
fn only_the_seeded_component_is_visited() {
    // Link 0 carries 100 flows; link 1 one flow. Seeding link 1 alone
    // must not touch link 0's flows.
    let routes: Vec<Vec<LinkId>> = (0..101)
        .map(|f| vec![LinkId::new(usize::from(f == 100))])
        .collect();
    let mut link_flows = vec![Vec::new(); 2];
    for (f, r) in routes.iter().enumerate() {
        link_flows[r[0].index()].push(f as u32);
    }
    let mut mm = MaxMin::new(2);
    let mut out = Vec::new();
    let route = |f: u32| -> &[LinkId] { &routes[f as usize] };
    let both = links(&link_flows, &[7.0, 5.0]);
    mm.allocate(&[1], &both, route, &mut out);
    assert_eq!(out, vec![(100, 5.0)]);
    // One list entry and one route link in the search, the same in
    // the filling.
    assert_eq!(mm.work(), 4);
    mm.allocate(&[0], &both, route, &mut out);
    assert_eq!(out.len(), 100);
    assert!(out.iter().all(|&(f, r)| f < 100 && r == 7.0 / 100.0));
}
