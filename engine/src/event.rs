//! Events and the event queue.
//!
//! Events are ordered by `(time, seq)`, where `seq` is the order in which
//! they were scheduled: **events at equal time fire in the order they were
//! scheduled**. That tie-break is what makes a run deterministic.
//!
//! The queue stores events in delay lanes (`lanes`): a sorted FIFO per
//! recurring delay, which pops in exactly the order of a binary heap of
//! `(time, seq)` at a fraction of its cost. *Keyed* events (`keyed`) are
//! at most one per id and can be moved or cancelled in place
//! ([`EventQueue::schedule_keyed`]), for events whose time keeps changing
//! (a flow's finish), so no outdated copy waits in the queue.

mod keyed;
mod lanes;

use std::cmp::Ordering;

use algorithms::{Rank, Time};

/// Index of an in-flight message in the world's message table.
pub type MessageId = u32;

/// Index of a pending timer (a compute completion) in the world's table.
pub type TimerId = u32;

/// Something that happens at a point in virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A message's last byte reaches its receiver.
    Deliver {
        /// The message.
        message: MessageId,
    },
    /// A rank's local work finishes.
    ComputeDone {
        /// The rank that was computing.
        rank: Rank,
        /// The timer that holds the waiting future's waker.
        timer: TimerId,
    },
    /// Something happens in the network model.
    Net(crate::network::NetEvent),
    /// A rank crashes (a scheduled fault).
    Crash {
        /// The rank.
        rank: Rank,
    },
}

/// An event with its firing time and scheduling sequence number.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// When it fires.
    pub time: Time,
    /// Order of scheduling; breaks ties between equal times.
    pub seq: u64,
    /// What happens.
    pub kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    /// Reversed, so that the max-heap pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// A priority queue of events, earliest first, FIFO among equal times.
#[derive(Debug, Default)]
pub struct EventQueue {
    lanes: lanes::Lanes,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    /// Schedules `kind` at `time`. Any time is accepted, even one before
    /// the last event popped; times at or after it are the fast case.
    #[inline]
    pub fn schedule(&mut self, time: Time, kind: EventKind) {
        let seq = self.next_seq;
        assert!(seq < lanes::SEQ_LIMIT, "fewer than 2^56 - 1 events per run");
        self.next_seq += 1;
        self.lanes.push(Event { time, seq, kind });
    }

    /// Schedules `kind` at `time` as the one event of `id`, replacing
    /// (cancelling) the one `id` had; returns the replaced event's time.
    /// The event takes a new place in the scheduling order, as
    /// [`Self::schedule`] would give it. Ids are small integers (they index
    /// a table).
    pub fn schedule_keyed(&mut self, id: u32, time: Time, kind: EventKind) -> Option<Time> {
        let seq = self.next_seq;
        assert!(seq < lanes::SEQ_LIMIT, "fewer than 2^56 - 1 events per run");
        self.next_seq += 1;
        self.lanes
            .set_keyed(id, Event { time, seq, kind })
            .map(|e| e.time)
    }

    /// Cancels `id`'s keyed event; returns its time if it had one.
    pub fn cancel_keyed(&mut self, id: u32) -> Option<Time> {
        self.lanes.cancel_keyed(id).map(|e| e.time)
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        self.lanes.pop()
    }

    /// When the earliest event fires, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.lanes.peek_time()
    }

    /// Number of events waiting.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.lanes.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::*;

    impl EventQueue {
        /// The time delays are measured from, for tests.
        fn lanes_now(&self) -> u64 {
            self.lanes.now().0
        }
    }

    #[test]
    fn earliest_first_then_scheduling_order() {
        let mut q = EventQueue::new();
        let at = |t| Time(t);
        q.schedule(at(5), EventKind::Deliver { message: 0 });
        q.schedule(at(3), EventKind::Deliver { message: 1 });
        q.schedule(at(5), EventKind::Deliver { message: 2 });
        q.schedule(at(3), EventKind::Deliver { message: 3 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop())
            .map(|e| match e.kind {
                EventKind::Deliver { message } => message,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec![1, 3, 0, 2]);
    }

    /// The last sequence number the queue hands out, on an event at the
    /// end of time in a lane: its key must stay below every empty
    /// source's, or the winner tree names an empty source.
    #[test]
    fn the_last_seq_at_the_end_of_time_pops() {
        let mut q = EventQueue::new();
        q.schedule(Time(1), EventKind::Deliver { message: 0 });
        assert_eq!(q.pop().map(|e| e.time), Some(Time(1)));
        q.next_seq = lanes::SEQ_LIMIT - 1;
        q.schedule(Time(u64::MAX), EventKind::Deliver { message: 1 });
        assert_eq!(q.peek_time(), Some(Time(u64::MAX)));
        let e = q.pop().expect("one event waits");
        assert_eq!(
            (e.time, e.kind),
            (Time(u64::MAX), EventKind::Deliver { message: 1 })
        );
        assert!(q.pop().is_none());
    }

    /// An event as the tests see it: `(time, message)`.
    type Popped = Option<(u64, u32)>;

    /// Pops `q` and a reference binary heap of `(time, seq)` together.
    fn pop_both(
        q: &mut EventQueue,
        reference: &mut BinaryHeap<Reverse<(u64, u32)>>,
    ) -> (Popped, Popped) {
        let got = q.pop().map(|e| match e.kind {
            EventKind::Deliver { message } => (e.time.0, message),
            _ => unreachable!(),
        });
        (got, reference.pop().map(|Reverse(k)| k))
    }

    #[test]
    fn more_delays_than_lanes_still_pop_in_order() {
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u32;
        for round in 0..4u64 {
            for d in 0..(3 * lanes::MAX_LANES as u64) {
                let at = q.lanes_now() + (d * 7919 + round) % 5000;
                q.schedule(Time(at), EventKind::Deliver { message: seq });
                reference.push(Reverse((at, seq)));
                seq += 1;
            }
            for _ in 0..500 {
                let (got, want) = pop_both(&mut q, &mut reference);
                assert_eq!(got, want);
            }
        }
        while !reference.is_empty() {
            let (got, want) = pop_both(&mut q, &mut reference);
            assert_eq!(got, want);
        }
        assert!(q.is_empty());
    }

    proptest::proptest! {
        /// Against a reference binary heap of `(time, seq)`: schedules at
        /// `now` plus a few recurring delays, equal times, random delays,
        /// and times before `now`, interleaved with pops and peeks.
        #[test]
        fn pops_like_a_binary_heap_of_time_and_seq(
            ops in proptest::collection::vec((0u8..10, 0u64..100_000), 0..2000)
        ) {
            const DELAYS: [u64; 5] = [0, 1, 2048, 2049, 300_000];
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            for (i, (op, x)) in ops.into_iter().enumerate() {
                let now = q.lanes_now();
                let at = match op {
                    0..=2 => {
                        let (got, want) = pop_both(&mut q, &mut reference);
                        proptest::prop_assert_eq!(got, want);
                        continue;
                    }
                    3..=6 => now + DELAYS[x as usize % DELAYS.len()],
                    7 => now + x,
                    8 => now.saturating_sub(x % 1000),
                    _ => x % 1000,
                };
                let message = i as u32;
                q.schedule(Time(at), EventKind::Deliver { message });
                reference.push(Reverse((at, message)));
                proptest::prop_assert_eq!(q.len(), reference.len());
                proptest::prop_assert_eq!(
                    q.peek_time().map(|t| t.0),
                    reference.peek().map(|Reverse((t, _))| *t)
                );
            }
            while !reference.is_empty() {
                let (got, want) = pop_both(&mut q, &mut reference);
                proptest::prop_assert_eq!(got, want);
            }
            proptest::prop_assert!(q.pop().is_none());
        }

        /// Keyed events among plain ones, against a list of live events
        /// (a keyed event replaced or cancelled leaves it): pops come in
        /// `(time, seq)` order, a replaced or cancelled event never pops,
        /// and the replaced or cancelled time is returned.
        #[test]
        fn keyed_events_move_and_cancel_in_place(
            ops in proptest::collection::vec((0u8..10, 0u64..3000, 0u32..6), 0..1500)
        ) {
            let mut q = EventQueue::new();
            // (time, message, key) of every live event, in scheduling order.
            let mut live: Vec<(u64, u32, Option<u32>)> = Vec::new();
            for (i, (op, x, id)) in ops.into_iter().enumerate() {
                let now = q.lanes_now();
                let message = i as u32;
                match op {
                    0..=2 => {
                        let first = live
                            .iter()
                            .enumerate()
                            .min_by_key(|(at, e)| (e.0, *at))
                            .map(|(at, _)| at);
                        let want = first.map(|at| live.remove(at)).map(|e| (e.0, e.1));
                        let got = q.pop().map(|e| match e.kind {
                            EventKind::Deliver { message } => (e.time.0, message),
                            _ => unreachable!(),
                        });
                        proptest::prop_assert_eq!(got, want);
                    }
                    3..=4 => {
                        q.schedule(Time(now + x % 7), EventKind::Deliver { message });
                        live.push((now + x % 7, message, None));
                    }
                    5..=7 => {
                        let at = now + x;
                        let had = live.iter().position(|e| e.2 == Some(id));
                        let want = had.map(|p| Time(live.remove(p).0));
                        let got = q.schedule_keyed(id, Time(at), EventKind::Deliver { message });
                        proptest::prop_assert_eq!(got, want);
                        live.push((at, message, Some(id)));
                    }
                    _ => {
                        let had = live.iter().position(|e| e.2 == Some(id));
                        let want = had.map(|p| Time(live.remove(p).0));
                        proptest::prop_assert_eq!(q.cancel_keyed(id), want);
                    }
                }
                proptest::prop_assert_eq!(q.len(), live.len());
                proptest::prop_assert_eq!(
                    q.peek_time().map(|t| t.0),
                    live.iter().map(|e| e.0).min()
                );
            }
        }

        /// Pops come out sorted by (time, scheduling order), with pushes
        /// and pops interleaved.
        #[test]
        fn pops_in_time_then_scheduling_order(
            ops in proptest::collection::vec((0u64..50, proptest::bool::ANY), 0..300)
        ) {
            let mut q = EventQueue::new();
            let mut model: Vec<(u64, u32)> = Vec::new();
            for (i, (t, pop)) in ops.into_iter().enumerate() {
                if pop {
                    model.sort();
                    let want = (!model.is_empty()).then(|| model.remove(0));
                    let got = q.pop().map(|e| match e.kind {
                        EventKind::Deliver { message } => (e.time.0, message),
                        _ => unreachable!(),
                    });
                    proptest::prop_assert_eq!(got, want);
                } else {
                    q.schedule(Time(t), EventKind::Deliver { message: i as u32 });
                    model.push((t, i as u32));
                }
                proptest::prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
