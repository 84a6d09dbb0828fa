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
//! leaf-to-root path of it. A key packs `(time, seq, source)` into one
//! `u128`, so each step of a replay is one load and one comparison.
//!
//! ```text
//!   overflow (any other delay): heap ---------- key --.
//!   lane, delay 2048 ps: [e3 e7 e9 ...] ------- key --+--> winner tree --> pop
//!   lane, delay  300 ps: [e4 e8 ...] ---------- key --+
//!   lane, delay 5000 ps: [e6 ...] ------------- key --'
//! ```
//!
//! A third kind of source holds *keyed* events (`super::keyed`): at
//! most one per id, moved or cancelled in place (the flow model's
//! finishes, whose times change with every rate).
//!
//! Pops come out in exactly the order of one binary heap of `(time, seq)`:
//! keys are unique, every lane is sorted, and the tree picks the least
//! key.

use std::collections::{BinaryHeap, VecDeque};

use algorithms::Time;

use super::Event;
use super::keyed::Keyed;

/// Most lanes a queue keeps (sources `2..=255`); events of any other
/// delay go to the overflow heap. A lane lives as long as the queue. With
/// the overflow and the keyed events, the sources number at most 256: a
/// source fits in a key's low byte.
pub(super) const MAX_LANES: usize = 254;

/// Scheduling sequence numbers must stay below this, to fit in a key
/// beside the source and to keep every event's key below [`no_key`]'s
/// (at `time = u64::MAX`, `seq = 2^56 - 1` would equal it): about 2^56
/// events, decades at today's event rates.
pub(super) const SEQ_LIMIT: u64 = (1 << 56) - 1;

/// Leaves of the winner tree at first: the overflow, the keyed events
/// and 14 lanes. It
/// doubles as lanes are added.
const FIRST_CAPACITY: usize = 16;

/// Slots of the delay-to-lane table: a power of two, at least four times
/// [`MAX_LANES`], so that probes stay short.
const INDEX_SLOTS: usize = 1024;

/// An empty slot of the delay-to-lane table (a delay of `u64::MAX` ps
/// never gets a lane).
const EMPTY: u64 = u64::MAX;

/// The source number of the overflow heap.
const OVERFLOW: usize = 0;

/// The source number of the keyed events; lanes are `2..`.
const KEYED: usize = 1;

/// The key of an event from `source`: `(time, seq, source)` as one
/// integer, ordered as `(time, seq)` since `seq` is unique.
#[inline]
pub(super) fn key(event: &Event, source: usize) -> u128 {
    debug_assert!(event.seq < SEQ_LIMIT && source <= MAX_LANES + 1);
    (u128::from(event.time.0) << 64) | (u128::from(event.seq) << 8) | source as u128
}

/// The key of `source` when it has no event: above every event's key
/// (whose `seq` is below [`SEQ_LIMIT`], so its bits 8..64 are not all
/// ones).
#[inline]
fn no_key(source: usize) -> u128 {
    (u128::MAX << 8) | source as u128
}

/// The source a key belongs to.
#[inline]
fn source_of(key: u128) -> usize {
    (key & 0xff) as usize
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
    /// number; `lanes[OVERFLOW]` and `lanes[KEYED]` stay empty.
    lanes: Vec<VecDeque<Event>>,
    /// Events without a lane.
    overflow: BinaryHeap<Event>,
    /// Keyed events, one per id.
    keyed: Keyed,
    /// The winner tree, `2 x capacity` keys: leaf `capacity + s` holds the
    /// key of source `s`'s earliest event (or [`no_key`]); node `n` in
    /// `1..capacity` the least key of its children `2n` and `2n + 1`.
    tree: Vec<u128>,
    /// The delay-to-lane table: open addressing, linear probing.
    index_delay: Box<[u64; INDEX_SLOTS]>,
    index_lane: Box<[u8; INDEX_SLOTS]>,
}

impl Default for Lanes {
    fn default() -> Self {
        let mut lanes = Lanes {
            now: Time(0),
            len: 0,
            lanes: vec![VecDeque::new(), VecDeque::new()],
            overflow: BinaryHeap::new(),
            keyed: Keyed::default(),
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
    /// pushed before and below [`SEQ_LIMIT`].
    #[inline]
    pub(super) fn push(&mut self, event: Event) {
        self.len += 1;
        if event.time >= self.now
            && let Some(lane) = self.lane_of(event.time.0 - self.now.0)
        {
            let fifo = &mut self.lanes[lane];
            fifo.push_back(event);
            if fifo.len() == 1 {
                self.replay(lane, key(&event, lane));
            }
            return;
        }
        let k = key(&event, OVERFLOW);
        self.overflow.push(event);
        if k < self.tree[self.capacity() + OVERFLOW] {
            self.replay(OVERFLOW, k);
        }
    }

    /// Sets `id`'s keyed event to `event` (whose `seq` is new, as for
    /// [`Self::push`]), returning the one it replaces.
    pub(super) fn set_keyed(&mut self, id: u32, event: Event) -> Option<Event> {
        let replaced = self.keyed.set(id, event);
        if replaced.is_none() {
            self.len += 1;
        }
        self.replay_keyed();
        replaced
    }

    /// Removes `id`'s keyed event, returning it if there was one.
    pub(super) fn cancel_keyed(&mut self, id: u32) -> Option<Event> {
        let cancelled = self.keyed.cancel(id);
        if cancelled.is_some() {
            self.len -= 1;
            self.replay_keyed();
        }
        cancelled
    }

    /// Puts the keyed events' earliest key in the tree.
    #[inline]
    fn replay_keyed(&mut self) {
        let k = self
            .keyed
            .min_key()
            .map_or_else(|| no_key(KEYED), |k| k | KEYED as u128);
        self.replay(KEYED, k);
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let source = source_of(self.tree[1]);
        let (event, next) = if source == OVERFLOW {
            let event = self.overflow.pop().expect("the winner has an event");
            let next = self.overflow.peek().map(|e| key(e, OVERFLOW));
            (event, next)
        } else if source == KEYED {
            let event = self.keyed.pop().expect("the winner has an event");
            (event, self.keyed.min_key().map(|k| k | KEYED as u128))
        } else {
            let fifo = &mut self.lanes[source];
            let event = fifo.pop_front().expect("the winner has an event");
            (event, fifo.front().map(|e| key(e, source)))
        };
        self.replay(source, next.unwrap_or_else(|| no_key(source)));
        self.len -= 1;
        self.now = self.now.max(event.time);
        Some(event)
    }

    /// When the earliest event fires, if any.
    pub(super) fn peek_time(&self) -> Option<Time> {
        (self.len > 0).then(|| Time((self.tree[1] >> 64) as u64))
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

    /// Leaves of the tree: one per possible source so far.
    #[inline]
    fn capacity(&self) -> usize {
        self.tree.len() / 2
    }

    /// Sets source `source`'s key to `key` and recomputes the winners on
    /// its path to the root: each step takes the lesser of the key
    /// carried up and the sibling's, which has not changed.
    #[inline]
    fn replay(&mut self, source: usize, key: u128) {
        let tree = &mut self.tree[..];
        let mut node = tree.len() / 2 + source;
        let mut winner = key;
        tree[node] = key;
        while node > 1 {
            winner = winner.min(tree[node ^ 1]);
            node >>= 1;
            tree[node] = winner;
        }
    }

    /// Gives the tree `capacity` leaves (a power of two, no fewer than
    /// before) and recomputes every winner.
    fn rebuild(&mut self, capacity: usize) {
        debug_assert!(capacity.is_power_of_two() && capacity >= self.capacity());
        let mut tree = vec![0; 2 * capacity];
        for (source, leaf) in tree[capacity..].iter_mut().enumerate() {
            *leaf = if source == OVERFLOW {
                self.overflow.peek().map(|e| key(e, OVERFLOW))
            } else if source == KEYED {
                self.keyed.min_key().map(|k| k | KEYED as u128)
            } else {
                self.lanes
                    .get(source)
                    .and_then(|f| f.front())
                    .map(|e| key(e, source))
            }
            .unwrap_or_else(|| no_key(source));
        }
        for node in (1..capacity).rev() {
            tree[node] = tree[2 * node].min(tree[2 * node + 1]);
        }
        self.tree = tree;
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
        if lane > MAX_LANES + 1 {
            return None;
        }
        self.lanes.push(VecDeque::new());
        if lane == self.capacity() {
            self.rebuild(2 * lane);
        }
        self.index_delay[slot] = delay_ps;
        self.index_lane[slot] = u8::try_from(lane).expect("MAX_LANES fits in u8");
        Some(lane)
    }
}
