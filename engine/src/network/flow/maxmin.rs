//! Max-min fair rates by progressive filling, restricted to the flows
//! connected to a few changed links.
//!
//! # Algorithm
//! All flows start unfrozen at rate zero and grow together. The first link
//! to saturate is the one with the smallest fair share
//! `remaining capacity / unfrozen flows crossing it`; its unfrozen flows
//! freeze at that share, which is subtracted from every link they cross,
//! and the filling goes on with the others. The result is the max-min fair
//! allocation: no flow can get more without taking from one that has no
//! more than it (Bertsekas and Gallager, *Data Networks*, 1992, §6.5.2).
//!
//! # Components
//! Flows that share no link, even transitively, do not influence each
//! other's rates. [`MaxMin::allocate`] therefore starts from the links
//! whose set of flows changed and only visits the connected component they
//! reach (a breadth-first search alternating links and flows): flows
//! elsewhere keep their rates and are never touched.
//!
//! # Cost
//! With `E` the number of (flow, link) incidences in the component, the
//! search is `O(E)` and the filling `O(E log E)` at worst: a binary heap
//! holds each link's share as a lower bound (its *key*). A freeze makes
//! the shares of the frozen flow's other links grow (in exact arithmetic),
//! so their keys stay valid bounds and nothing is pushed; only a share
//! that rounding made smaller than its key is pushed at once. A popped key
//! that is no longer the link's share is pushed again with the share; a
//! popped key equal to the share is the smallest share of all (every
//! other key bounds its link's share from below), so the links saturate
//! in exactly the order, and with exactly the arithmetic, of pushing every
//! changed share (what this module did first; a tree allreduce on 512
//! GPUs spent half its run in those pushes and pops). The filling stops
//! as soon as every flow is frozen: the links still in the heap then have
//! no unfrozen flow, and popping them would only skip them (in a tree
//! allreduce most links are no bottleneck and would be popped that way). A link's flow list
//! is scanned once by the search and at most once by the filling.
//! [`MaxMin::work`] counts the incidences visited, so tests can check
//! that unrelated components stay untouched.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use topologies::LinkId;

/// A link's fair share when it was pushed; the heap pops the smallest
/// share first, ties by the smaller link index (determinism).
#[derive(Clone, Copy, Debug)]
struct Candidate {
    share: f64,
    link: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Reversed, so that the max-heap pops the smallest share first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .share
            .total_cmp(&self.share)
            .then(other.link.cmp(&self.link))
    }
}

/// What the allocator reads of a link direction.
pub trait Capacity {
    /// The flows crossing it (a flow crossing it twice is listed twice).
    fn flows(&self) -> &[u32];
    /// Its bandwidth (finite, `>= 0`).
    fn capacity_bytes_per_s(&self) -> f64;
}

/// The allocator's scratch of one link, together for locality.
#[derive(Clone, Copy, Debug, Default)]
struct LinkScratch {
    /// The link is in the component when this equals `epoch`.
    mark: u32,
    /// Crossings by flows not yet frozen.
    unfrozen: u32,
    /// Capacity not yet given to frozen flows.
    capacity_left: f64,
    /// The share of its live heap entry, at most its current share.
    key: f64,
}

/// Scratch state of the allocator, kept between calls so that a
/// recomputation allocates nothing once the tables have grown.
#[derive(Debug, Default)]
pub struct MaxMin {
    /// Marks of the current call: a link or flow is in the component when
    /// its mark equals `epoch`.
    epoch: u32,
    /// Per link (see [`LinkScratch`]).
    link: Vec<LinkScratch>,
    flow_mark: Vec<u32>,
    /// Per flow of the component: its rate once frozen, NaN before.
    rate: Vec<f64>,
    /// The component's links.
    links: Vec<u32>,
    /// The component's flows.
    flows: Vec<u32>,
    heap: BinaryHeap<Candidate>,
    /// (flow, link) incidences visited so far, over all calls.
    work: u64,
}

impl MaxMin {
    /// An allocator for a topology with `link_count` link directions.
    pub fn new(link_count: usize) -> MaxMin {
        MaxMin {
            link: vec![LinkScratch::default(); link_count],
            ..MaxMin::default()
        }
    }

    /// (flow, link) incidences visited by all calls so far: the work the
    /// recomputations did.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Computes the max-min fair rates of every flow connected to the
    /// links in `seeds`, appending `(flow, rate)` to `rates` (cleared
    /// first) in the order the flows were reached.
    ///
    /// `links[l].flows()` lists the flows crossing link `l` (a flow
    /// crossing it twice is listed twice and uses it twice); `route(f)`
    /// gives the links of flow `f`, consistent with the lists;
    /// `links[l].capacity_bytes_per_s()` is link `l`'s bandwidth (finite,
    /// `>= 0`). A link of capacity 0 (down)
    /// has share 0, so it saturates first: its flows get rate 0 and take
    /// nothing from their other links. Flow ids are small integers (they
    /// index tables here).
    pub fn allocate<'a, L: Capacity>(
        &mut self,
        seeds: &[u32],
        links: &[L],
        route: impl Fn(u32) -> &'a [LinkId],
        rates: &mut Vec<(u32, f64)>,
    ) {
        rates.clear();
        self.next_epoch();
        self.collect_component(seeds, links, &route);
        self.fill(links, &route);
        rates.extend(self.flows.iter().map(|&f| (f, self.rate[f as usize])));
    }

    /// Whether the latest [`MaxMin::allocate`] reached flow `f` (gave it
    /// a rate).
    pub fn reached(&self, f: u32) -> bool {
        self.flow_mark.get(f as usize) == Some(&self.epoch)
    }

    /// Starts a new call: marks of earlier calls become stale.
    fn next_epoch(&mut self) {
        if self.epoch == u32::MAX {
            self.link.iter_mut().for_each(|l| l.mark = 0);
            self.flow_mark.fill(0);
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    /// Collects into `links` and `flows` everything connected to `seeds`,
    /// and counts each link's crossings into `unfrozen`.
    fn collect_component<'a, L: Capacity>(
        &mut self,
        seeds: &[u32],
        links: &[L],
        route: &impl Fn(u32) -> &'a [LinkId],
    ) {
        self.links.clear();
        self.flows.clear();
        for &l in seeds {
            self.visit_link(l);
        }
        // `links` doubles as the search's queue: links before `next` have
        // had their flows visited.
        let mut next = 0;
        while next < self.links.len() {
            let l = self.links[next];
            next += 1;
            let crossing = links[l as usize].flows();
            self.link[l as usize].unfrozen = u32::try_from(crossing.len()).expect("< 2^32 flows");
            for &f in crossing {
                self.work += 1;
                if self.visit_flow(f) {
                    for &m in route(f) {
                        self.work += 1;
                        self.visit_link(m.index() as u32);
                    }
                }
            }
        }
    }

    fn visit_link(&mut self, l: u32) {
        let mark = &mut self.link[l as usize].mark;
        if *mark != self.epoch {
            *mark = self.epoch;
            self.links.push(l);
        }
    }

    /// Marks flow `f` as part of the component; false if it already was.
    fn visit_flow(&mut self, f: u32) -> bool {
        let i = f as usize;
        if i >= self.flow_mark.len() {
            self.flow_mark.resize(i + 1, 0);
            self.rate.resize(i + 1, f64::NAN);
        }
        if self.flow_mark[i] == self.epoch {
            return false;
        }
        self.flow_mark[i] = self.epoch;
        self.rate[i] = f64::NAN;
        self.flows.push(f);
        true
    }

    /// Progressive filling over the collected component.
    fn fill<'a, L: Capacity>(&mut self, links: &[L], route: &impl Fn(u32) -> &'a [LinkId]) {
        self.heap.clear();
        for &l in &self.links {
            let i = l as usize;
            let capacity = links[i].capacity_bytes_per_s();
            let scratch = &mut self.link[i];
            scratch.capacity_left = capacity;
            if scratch.unfrozen > 0 {
                scratch.key = capacity / f64::from(scratch.unfrozen);
                self.heap.push(Candidate {
                    share: scratch.key,
                    link: l,
                });
            }
        }
        // Shares only grow as flows freeze (in exact arithmetic); `level`
        // keeps rounding from ever giving a later flow less, or zero.
        let mut level = 0.0f64;
        // Once every flow is frozen, what the heap still holds are links
        // without unfrozen flows, each popped only to be skipped: stop.
        let mut unfrozen_flows = self.flows.len();
        while unfrozen_flows > 0
            && let Some(Candidate { share, link }) = self.heap.pop()
        {
            let i = link as usize;
            let scratch = self.link[i];
            let n = scratch.unfrozen;
            if n == 0 || share.to_bits() != scratch.key.to_bits() {
                continue; // Saturated, or replaced by a smaller key.
            }
            let current = scratch.capacity_left / f64::from(n);
            if share != current {
                // A stale lower bound: the link's share grew since.
                self.link[i].key = current;
                self.heap.push(Candidate {
                    share: current,
                    link,
                });
                continue;
            }
            level = level.max(share);
            for &f in links[i].flows() {
                self.work += 1;
                if !self.rate[f as usize].is_nan() {
                    continue;
                }
                self.rate[f as usize] = level;
                unfrozen_flows -= 1;
                for &m in route(f) {
                    self.work += 1;
                    let j = m.index();
                    let other = &mut self.link[j];
                    other.capacity_left = (other.capacity_left - level).max(0.0);
                    other.unfrozen -= 1;
                    if other.unfrozen > 0 && j != i {
                        let grown = other.capacity_left / f64::from(other.unfrozen);
                        if grown < other.key {
                            // Rounding made it smaller: its key must
                            // still bound it.
                            other.key = grown;
                            self.heap.push(Candidate {
                                share: grown,
                                link: m.index() as u32,
                            });
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
            let capacity: Vec<f64> = (0..links)
                .map(|_| 1e9 * (1.0 + next(1000) as f64 / 7.0) / 3.0)
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
}
