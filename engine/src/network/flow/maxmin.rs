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
//! that unrelated components stay untouched. The search copies the
//! component's routes into one table the filling reads. The "heap" is
//! the initial keys sorted once (as `u128`s ordered like `(share, link)`)
//! and taken in order, beside a small heap of the keys added later
//! (stale keys put back with their share, shares rounding made smaller):
//! the smaller front comes first, so the keys come out in exactly the
//! order of one heap holding them all (the order is total, equal keys
//! cannot be told apart), and most pops are a step along an array
//! (folded `nccl_tree` at 2048 GPUs: 133 initial keys per filling, 13
//! added later; a binary heap's pops were a quarter of the run).
//!
//! # Dominated links
//! A link crossed once by a single flow `f` has a constant share, its
//! capacity, until `f` freezes; any other link `k` of `f`'s route has a
//! share of at most its capacity (its capacity left, never more than the
//! capacity, over at least `f`'s crossing; rounding keeps both bounds).
//! So when `k` has a smaller capacity, or the same and a smaller index,
//! `k`'s entry always comes first in the heap, and `k` saturates (freezing
//! `f`) before the link's own entry could: the link would only be popped
//! to be skipped, and is left out of the heap. Every flow keeps the first
//! link of its route in that order, and the pops that remain are the same
//! in the same order, so the rates are the same to the bit. Of the links
//! of a route that no other flow of the component crosses (on a fat-tree:
//! PCIe hops, switch ports), only the narrowest enters the heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use topologies::LinkId;

/// A link's fair share and index as one key: the order of the keys is
/// that of `(share, link)`, shares compared by [`f64::total_cmp`], so the
/// smallest share comes first, ties by the smaller link index
/// (determinism).
fn candidate(share: f64, link: u32) -> u128 {
    let bits = share.to_bits();
    // Non-negative shares above every negative one, negative ones in
    // reverse: `total_cmp`'s order as an unsigned integer.
    let ordered = if bits >> 63 == 0 {
        bits | 1 << 63
    } else {
        !bits
    };
    (u128::from(ordered) << 32) | u128::from(link)
}

/// The share and link of a [`candidate`] key.
fn share_and_link(key: u128) -> (f64, u32) {
    let ordered = (key >> 32) as u64;
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    (f64::from_bits(bits), key as u32)
}

/// The filling's candidates, smallest key first: the initial shares
/// sorted once, and the few entries added later (keys of stale entries
/// replaced, shares that rounding made smaller) in a heap beside them.
/// The smaller of the two fronts comes first, so the entries come out in
/// exactly the order of one heap holding them all (equal keys cannot be
/// told apart).
#[derive(Debug, Default)]
struct Candidates {
    /// The initial keys, ascending.
    sorted: Vec<u128>,
    /// How many of `sorted` have been taken.
    taken: usize,
    /// Keys added during the filling.
    later: BinaryHeap<Reverse<u128>>,
}

impl Candidates {
    /// Starts over with `sorted`, which is sorted here.
    fn reset(&mut self) {
        self.sorted.sort_unstable();
        self.taken = 0;
        self.later.clear();
    }

    /// The smallest key, if any.
    #[inline]
    fn peek(&self) -> Option<u128> {
        let first = self.sorted.get(self.taken).copied();
        match (first, self.later.peek()) {
            (Some(a), Some(&Reverse(b))) => Some(a.min(b)),
            (a, b) => a.or(b.map(|r| r.0)),
        }
    }

    /// Removes the smallest key, `top` (what [`Self::peek`] returned).
    #[inline]
    fn pop(&mut self, top: u128) {
        if self.sorted.get(self.taken) == Some(&top) {
            self.taken += 1;
        } else {
            self.later.pop();
        }
    }

    /// Adds a key.
    #[inline]
    fn push(&mut self, key: u128) {
        self.later.push(Reverse(key));
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

/// The allocator's mark of one flow id: small, since the table grows
/// with the flow ids of the whole run.
#[derive(Clone, Copy, Debug, Default)]
struct FlowMark {
    /// The flow is in the component when this equals `epoch`.
    mark: u32,
    /// Its position in [`MaxMin::members`] (valid with the mark).
    pos: u32,
}

/// A flow of the current component.
#[derive(Clone, Copy, Debug)]
struct Member {
    flow: u32,
    /// Where its route starts in [`MaxMin::routes`].
    start: u32,
    /// Its route's length.
    len: u32,
    /// Its rate once frozen, NaN before.
    rate: f64,
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
    /// Per flow id (see [`FlowMark`]).
    flow: Vec<FlowMark>,
    /// The component's routes, copied once by the search so that the
    /// filling reads them from one contiguous table (link indices).
    routes: Vec<u32>,
    /// The component's links.
    links: Vec<u32>,
    /// The component's flows, in the order they were reached.
    members: Vec<Member>,
    candidates: Candidates,
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
        self.fill(links);
        rates.extend(self.members.iter().map(|m| (m.flow, m.rate)));
    }

    /// Whether the latest [`MaxMin::allocate`] reached flow `f` (gave it
    /// a rate).
    pub fn reached(&self, f: u32) -> bool {
        self.flow
            .get(f as usize)
            .is_some_and(|s| s.mark == self.epoch)
    }

    /// Starts a new call: marks of earlier calls become stale.
    fn next_epoch(&mut self) {
        if self.epoch == u32::MAX {
            self.link.iter_mut().for_each(|l| l.mark = 0);
            self.flow.iter_mut().for_each(|f| f.mark = 0);
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    /// Collects into `links` and `flows` everything connected to `seeds`,
    /// copies the flows' routes into `routes` and counts each link's
    /// crossings into `unfrozen`.
    fn collect_component<'a, L: Capacity>(
        &mut self,
        seeds: &[u32],
        links: &[L],
        route: &impl Fn(u32) -> &'a [LinkId],
    ) {
        self.links.clear();
        self.members.clear();
        self.routes.clear();
        for &l in seeds {
            self.visit_link(l);
        }
        let mut work = 0u64;
        // `links` doubles as the search's queue: links before `next` have
        // had their flows visited.
        let mut next = 0;
        while next < self.links.len() {
            let l = self.links[next];
            next += 1;
            let crossing = links[l as usize].flows();
            self.link[l as usize].unfrozen = u32::try_from(crossing.len()).expect("< 2^32 flows");
            work += crossing.len() as u64;
            for &f in crossing {
                if self.visit_flow(f) {
                    let r = route(f);
                    work += r.len() as u64;
                    let start = u32::try_from(self.routes.len()).expect("< 2^32 incidences");
                    let member = self.members.last_mut().expect("just reached");
                    member.start = start;
                    member.len = u32::try_from(r.len()).expect("< 2^32 links");
                    for &m in r {
                        let m = m.index() as u32;
                        self.routes.push(m);
                        self.visit_link(m);
                    }
                }
            }
        }
        self.work += work;
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
        if i >= self.flow.len() {
            self.flow.resize(i + 1, FlowMark::default());
        }
        let scratch = &mut self.flow[i];
        if scratch.mark == self.epoch {
            return false;
        }
        scratch.mark = self.epoch;
        scratch.pos = u32::try_from(self.members.len()).expect("< 2^32 flows");
        self.members.push(Member {
            flow: f,
            start: 0,
            len: 0,
            rate: f64::NAN,
        });
        true
    }

    /// Whether link `j` (capacity `capacity`), crossed once by one flow
    /// only, is not the smallest (capacity, link) of that flow's route, so
    /// that the filling never saturates it (see [Dominated
    /// links](self#dominated-links)).
    fn never_first<L: Capacity>(&self, links: &[L], j: u32, capacity: f64) -> bool {
        let pos = self.flow[links[j as usize].flows()[0] as usize].pos;
        let flow = self.members[pos as usize];
        let route = &self.routes[flow.start as usize..(flow.start + flow.len) as usize];
        route.iter().any(|&k| {
            let other = links[k as usize].capacity_bytes_per_s();
            other < capacity || (other == capacity && k < j)
        })
    }

    /// Progressive filling over the collected component.
    fn fill<L: Capacity>(&mut self, links: &[L]) {
        self.candidates.sorted.clear();
        for &l in &self.links {
            let i = l as usize;
            let capacity = links[i].capacity_bytes_per_s();
            let scratch = &mut self.link[i];
            scratch.capacity_left = capacity;
            if scratch.unfrozen > 0 {
                scratch.key = capacity / f64::from(scratch.unfrozen);
                let key = scratch.key;
                if scratch.unfrozen == 1 && self.never_first(links, l, capacity) {
                    continue;
                }
                self.candidates.sorted.push(candidate(key, l));
            }
        }
        self.candidates.reset();
        let mut work = 0u64;
        // Shares only grow as flows freeze (in exact arithmetic); `level`
        // keeps rounding from ever giving a later flow less, or zero.
        let mut level = 0.0f64;
        // Once every flow is frozen, what is still queued are links
        // without unfrozen flows, each taken only to be skipped: stop.
        let mut unfrozen_flows = self.members.len();
        while unfrozen_flows > 0 {
            let Some(top) = self.candidates.peek() else {
                break;
            };
            self.candidates.pop(top);
            let (share, link) = share_and_link(top);
            let i = link as usize;
            let scratch = self.link[i];
            let n = scratch.unfrozen;
            if n == 0 || share.to_bits() != scratch.key.to_bits() {
                // Saturated, or replaced by a smaller key.
                continue;
            }
            let current = scratch.capacity_left / f64::from(n);
            if share != current {
                // A stale lower bound: the link's share grew since. It
                // goes back with the share.
                self.link[i].key = current;
                self.candidates.push(candidate(current, link));
                continue;
            }
            level = level.max(share);
            let crossing = links[i].flows();
            work += crossing.len() as u64;
            for &f in crossing {
                let flow = &mut self.members[self.flow[f as usize].pos as usize];
                if !flow.rate.is_nan() {
                    continue;
                }
                flow.rate = level;
                unfrozen_flows -= 1;
                let (start, len) = (flow.start as usize, flow.len as usize);
                work += len as u64;
                for &m in &self.routes[start..start + len] {
                    let j = m as usize;
                    let other = &mut self.link[j];
                    other.capacity_left = (other.capacity_left - level).max(0.0);
                    other.unfrozen -= 1;
                    if other.unfrozen > 0 && j != i {
                        let grown = other.capacity_left / f64::from(other.unfrozen);
                        if grown < other.key {
                            // Rounding made it smaller: its key must
                            // still bound it.
                            other.key = grown;
                            self.candidates.push(candidate(grown, m));
                        }
                    }
                }
            }
        }
        self.work += work;
    }
}

#[cfg(test)]
mod tests;
