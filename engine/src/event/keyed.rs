//! Keyed events: at most one event per id, replaced or cancelled in
//! place (an indexed binary heap), for the flow model's finishes.
//!
//! A flow's finish moves whenever its rate changes. Scheduled as plain
//! events, every move left the outdated event in the queue to be popped
//! and ignored; under max-min sharing a recomputation moves the finishes
//! of every flow of its component, so outdated events outnumbered real
//! ones 10 to 1 in a 128 MiB `nccl_tree` allreduce on 512 GPUs and the
//! overflow heap held tens of thousands of them. Here a move re-keys the
//! id's one entry, so the heap holds one entry per flow with a finish in
//! sight. Keys are the queue's `(time, seq)`, a move taking a fresh
//! `seq` as a new event would, so live events pop in exactly the order
//! they did as plain events.

use super::Event;
use super::lanes::key;

/// No entry: the id has no event.
const ABSENT: u32 = u32::MAX;

/// An event and the id it belongs to.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// `(time, seq)` packed as the lanes pack it (source bits zero).
    key: u128,
    id: u32,
    event: Event,
}

/// An indexed binary min-heap of events by `(time, seq)`, one per id.
#[derive(Debug, Default)]
pub(super) struct Keyed {
    heap: Vec<Entry>,
    /// Each id's position in `heap`, or [`ABSENT`].
    pos: Vec<u32>,
}

impl Keyed {
    /// The earliest event's key (source bits zero), if any.
    pub(super) fn min_key(&self) -> Option<u128> {
        self.heap.first().map(|e| e.key)
    }

    /// Sets `id`'s event to `event`, returning the one it replaces.
    pub(super) fn set(&mut self, id: u32, event: Event) -> Option<Event> {
        let i = id as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, ABSENT);
        }
        let entry = Entry {
            key: key(&event, 0),
            id,
            event,
        };
        match self.pos[i] {
            ABSENT => {
                self.heap.push(entry);
                self.sift_up(self.heap.len() - 1);
                None
            }
            at => {
                let at = at as usize;
                let earlier = entry.key < self.heap[at].key;
                let replaced = std::mem::replace(&mut self.heap[at], entry).event;
                if earlier {
                    self.sift_up(at);
                } else {
                    self.sift_down(at);
                }
                Some(replaced)
            }
        }
    }

    /// Removes `id`'s event, returning it if it had one.
    pub(super) fn cancel(&mut self, id: u32) -> Option<Event> {
        let at = *self.pos.get(id as usize)?;
        if at == ABSENT {
            return None;
        }
        Some(self.remove_at(at as usize))
    }

    /// Removes and returns the earliest event.
    pub(super) fn pop(&mut self) -> Option<Event> {
        (!self.heap.is_empty()).then(|| self.remove_at(0))
    }

    fn remove_at(&mut self, at: usize) -> Event {
        let last = self.heap.len() - 1;
        self.heap.swap(at, last);
        let gone = self.heap.pop().expect("not empty");
        self.pos[gone.id as usize] = ABSENT;
        if at < last {
            self.pos[self.heap[at].id as usize] = at as u32;
            if at > 0 && self.heap[at].key < self.heap[(at - 1) / 2].key {
                self.sift_up(at);
            } else {
                self.sift_down(at);
            }
        }
        gone.event
    }

    fn sift_up(&mut self, mut at: usize) {
        let entry = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.heap[parent].key <= entry.key {
                break;
            }
            self.heap[at] = self.heap[parent];
            self.pos[self.heap[at].id as usize] = at as u32;
            at = parent;
        }
        self.heap[at] = entry;
        self.pos[entry.id as usize] = at as u32;
    }

    fn sift_down(&mut self, mut at: usize) {
        let entry = self.heap[at];
        let n = self.heap.len();
        loop {
            let left = 2 * at + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right].key < self.heap[left].key {
                right
            } else {
                left
            };
            if entry.key <= self.heap[child].key {
                break;
            }
            self.heap[at] = self.heap[child];
            self.pos[self.heap[at].id as usize] = at as u32;
            at = child;
        }
        self.heap[at] = entry;
        self.pos[entry.id as usize] = at as u32;
    }
}
