//! Events and the event queue.
//!
//! Events are ordered by `(time, seq)`, where `seq` is the order in which
//! they were scheduled: **events at equal time fire in the order they were
//! scheduled**. That tie-break is what makes a run deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
    heap: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    /// Schedules `kind` at `time`.
    pub fn schedule(&mut self, time: Time, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Event { time, seq, kind });
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }

    /// When the earliest event fires, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Number of events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
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
