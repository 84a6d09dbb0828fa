//! Delay lanes: the storage behind [`EventQueue`](super::EventQueue).
//!
//! A discrete-event simulation schedules most events at `now + d` for a
//! few recurring delays `d`: the serialisation of a full packet on each
//! kind of link, each link's latency, a transport timeout. Events
//! scheduled with the same delay arrive in nondecreasing `(time, seq)`
//! order (`now` never goes back, `seq` always grows), so a FIFO per delay
//! is already sorted. The queue keeps one such FIFO (a *lane*) per
//! distinct delay, up to [`MAX_LANES`]; an event whose delay has no lane
//! (or that is scheduled before `now`) goes to an ordinary binary heap,
//! the *overflow*. A winner tree over the sources (the overflow and the
//! lanes), keyed by each source's earliest event, names the source of
//! the next pop; a pop or a push into an empty lane replays one
//! leaf-to-root path of it.
//!
//! ```text
//!   overflow (any other delay): heap ---------- key --.
//!   lane, delay 2048 ps: [e3 e7 e9 ...] ------- key --+--> winner tree --> pop
//!   lane, delay  300 ps: [e4 e8 ...] ---------- key --+
//!   lane, delay 5000 ps: [e6 ...] ------------- key --'
//! ```
//!
//! Pops come out in exactly the order of one binary heap of `(time, seq)`:
//! keys are unique, every lane is sorted, and the tree picks the least
//! key.

use std::collections::{BinaryHeap, VecDeque};

use algorithms::Time;

use super::Event;

/// Most lanes a queue keeps; events of any other delay go to the overflow
/// heap. A lane lives as long as the queue.
pub(super) const MAX_LANES: usize = 255;

/// Leaves of the winner tree at first: the overflow and 15 lanes. It
/// doubles as lanes are added.
const FIRST_CAPACITY: usize = 16;

/// Slots of the delay-to-lane table: a power of two, at least four times
/// [`MAX_LANES`], so that probes stay short.
const INDEX_SLOTS: usize = 1024;

/// An empty slot of the delay-to-lane table (a delay of `u64::MAX` ps
/// never gets a lane).
const EMPTY: u64 = u64::MAX;

/// The key of a source with no event: above every event's key.
const NO_KEY: u128 = u128::MAX;

/// The source number of the overflow heap; lanes are `1..`.
const OVERFLOW: usize = 0;

/// An event's place in the order: `(time, seq)` as one integer.
#[inline]
fn key(event: &Event) -> u128 {
    (u128::from(event.time.0) << 64) | u128::from(event.seq)
}

/// Events in delay lanes plus an overflow heap (see the module docs).
#[derive(Debug)]
pub(super) struct Lanes {
    /// The time of the latest event popped (the simulation's `now`):
    /// delays are measured from it.
    now: Time,
    /// Events waiting, in lanes and overflow.
    len: usize,
    /// One FIFO per delay, each sorted by `(time, seq)`, indexed by source
    /// number; `lanes[OVERFLOW]` stays empty.
    lanes: Vec<VecDeque<Event>>,
    /// Events without a lane.
    overflow: BinaryHeap<Event>,
    /// The key of each source's earliest event ([`NO_KEY`] if it has
    /// none), one per leaf of the tree: its length is the capacity.
    keys: Vec<u128>,
    /// The winner tree: node `n` (in `1..capacity`) holds the source with
    /// the least key among the leaves below it, whose children are nodes
    /// `2n` and `2n + 1`; leaf `s` is node `capacity + s`.
    tree: Vec<u32>,
    /// The delay-to-lane table: open addressing, linear probing.
    index_delay: Box<[u64; INDEX_SLOTS]>,
    index_lane: Box<[u16; INDEX_SLOTS]>,
}

impl Default for Lanes {
    fn default() -> Self {
        let mut lanes = Lanes {
            now: Time(0),
            len: 0,
            lanes: vec![VecDeque::new()],
            overflow: BinaryHeap::new(),
            keys: Vec::new(),
            tree: Vec::new(),
            index_delay: Box::new([EMPTY; INDEX_SLOTS]),
            index_lane: Box::new([0; INDEX_SLOTS]),
        };
        lanes.rebuild(FIRST_CAPACITY);
        lanes
    }
}

impl Lanes {
    /// Adds `event`, whose `seq` is greater than that of every event
    /// pushed before.
    #[inline]
    pub(super) fn push(&mut self, event: Event) {
        self.len += 1;
        if event.time >= self.now
            && let Some(lane) = self.lane_of(event.time.0 - self.now.0)
        {
            let fifo = &mut self.lanes[lane];
            fifo.push_back(event);
            if fifo.len() == 1 {
                self.keys[lane] = key(&event);
                self.replay(lane);
            }
            return;
        }
        let k = key(&event);
        self.overflow.push(event);
        if k < self.keys[OVERFLOW] {
            self.keys[OVERFLOW] = k;
            self.replay(OVERFLOW);
        }
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let source = self.tree[1] as usize;
        let (event, next) = if source == OVERFLOW {
            let event = self.overflow.pop().expect("the winner has an event");
            (event, self.overflow.peek().map_or(NO_KEY, key))
        } else {
            let fifo = &mut self.lanes[source];
            let event = fifo.pop_front().expect("the winner has an event");
            (event, fifo.front().map_or(NO_KEY, key))
        };
        self.keys[source] = next;
        self.replay(source);
        self.len -= 1;
        self.now = self.now.max(event.time);
        Some(event)
    }

    /// When the earliest event fires, if any.
    pub(super) fn peek_time(&self) -> Option<Time> {
        let k = self.keys[self.tree[1] as usize];
        (k != NO_KEY).then(|| Time((k >> 64) as u64))
    }

    /// The time delays are measured from: that of the latest pop.
    #[cfg(test)]
    pub(super) fn now(&self) -> Time {
        self.now
    }

    /// Number of events waiting.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Source `source`'s key has changed: recomputes the winners on its
    /// path to the root. Each step compares the winner carried up with
    /// the winner of the sibling subtree, which has not changed.
    #[inline]
    fn replay(&mut self, source: usize) {
        let capacity = self.keys.len();
        let keys = &self.keys;
        let mut winner = source as u32;
        let mut winner_key = keys[source];
        let sibling = source ^ 1;
        let sibling_key = keys[sibling];
        if sibling_key < winner_key {
            winner = sibling as u32;
            winner_key = sibling_key;
        }
        let mut node = (capacity + source) >> 1;
        self.tree[node] = winner;
        while node > 1 {
            let other = self.tree[node ^ 1];
            let other_key = keys[other as usize];
            if other_key < winner_key {
                winner = other;
                winner_key = other_key;
            }
            node >>= 1;
            self.tree[node] = winner;
        }
    }

    /// Gives the tree `capacity` leaves (a power of two, no fewer than
    /// before) and recomputes every winner. Every node must name a source
    /// of its own subtree, even among keys that are all [`NO_KEY`]: a
    /// stranger's key would hide the subtree's own once it changes.
    fn rebuild(&mut self, capacity: usize) {
        debug_assert!(capacity.is_power_of_two() && capacity >= self.keys.len());
        self.keys.resize(capacity, NO_KEY);
        self.tree = vec![0; capacity];
        for node in (1..capacity).rev() {
            let child = |c: usize, tree: &[u32]| {
                if c >= capacity {
                    (c - capacity) as u32
                } else {
                    tree[c]
                }
            };
            let (a, b) = (child(2 * node, &self.tree), child(2 * node + 1, &self.tree));
            self.tree[node] = if self.keys[b as usize] < self.keys[a as usize] {
                b
            } else {
                a
            };
        }
    }

    /// The lane of events `delay_ps` after `now`, created if there is
    /// room for one more; `None` sends the event to the overflow.
    #[inline]
    fn lane_of(&mut self, delay_ps: u64) -> Option<usize> {
        if delay_ps == EMPTY {
            return None;
        }
        // Fibonacci hashing: the top bits of a multiplication.
        let mut slot = (delay_ps.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - INDEX_SLOTS.trailing_zeros())) as usize;
        loop {
            let key = self.index_delay[slot];
            if key == delay_ps {
                return Some(self.index_lane[slot] as usize);
            }
            if key == EMPTY {
                break;
            }
            slot = (slot + 1) & (INDEX_SLOTS - 1);
        }
        self.new_lane(delay_ps, slot)
    }

    /// Adds a lane for `delay_ps` at free `slot` of the table, unless
    /// there are [`MAX_LANES`] already.
    #[cold]
    fn new_lane(&mut self, delay_ps: u64, slot: usize) -> Option<usize> {
        let lane = self.lanes.len();
        if lane > MAX_LANES {
            return None;
        }
        if lane == self.keys.len() {
            self.rebuild(2 * lane);
        }
        self.lanes.push(VecDeque::new());
        self.index_delay[slot] = delay_ps;
        self.index_lane[slot] = u16::try_from(lane).expect("MAX_LANES fits in u16");
        Some(lane)
    }
}
