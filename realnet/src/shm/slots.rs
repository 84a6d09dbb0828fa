//! `Slots`: the message descriptors of one ordered pair of ranks, one
//! cache line each, in a lock-free single-producer single-consumer queue
//! of fixed slots beside the pair's byte ring.
//!
//! ```text
//!  SlotsControl (one 128-byte line)    slots: a power of two, 128 bytes apart
//!  +-----------------+                 +---------------------------------------+
//!  | freed           |                 | stamp | w1 .. w7 (64 bytes) | padding | x capacity
//!  | (consumer)      |                 +---------------------------------------+
//!  +-----------------+
//! ```
//!
//! Every message is one slot: its header (`super::wire`) and, for a
//! payload of at most `super::wire::SLOT_PAYLOAD_BYTES` (32), the payload
//! itself; a larger payload's bytes follow in the pair's byte ring
//! (`super::ring`), in message order, or are copied out of the sender's
//! memory. A small message therefore crosses cores as one cache line:
//! the receiver spins on the line of the next slot, and the producer's
//! stamp in that same line says it is complete (where a header and
//! payload in the byte ring were published by a position on a line of
//! its own, two lines per message; Open MPI's vader fast boxes are built
//! the same way).
//!
//! Message `m` (counted from 0 since the queue was created) goes into
//! slot `m % capacity`, and its **stamp** word is `m + 1`. The protocol:
//! - the producer waits until `m - freed < capacity`, stores words 1-7
//!   (relaxed), then the stamp with a **release** store;
//! - the consumer loads the stamp of slot `m % capacity` with **acquire**;
//!   `m + 1` means the slot holds message `m` (and words 1-7 are visible);
//!   `m + 1 - capacity` (or 0 before the first lap) means not yet; any
//!   other value is a corrupt segment, reported as `Corrupt`, never
//!   followed. It loads words 1-7, then stores `freed = m + 1` with
//!   **release**; the producer's **acquire** load of `freed` orders its
//!   next stores into that slot after those loads.
//!
//! Each side keeps its own count and the last `freed` it saw in a
//! `SlotCursor`; the producer reloads `freed` only when the queue looks
//! full, so the consumer's line is read once per lap, not per message.
//! Every word is an atomic, so a slot is never read while half written:
//! a stamp seen is a message complete.
//!
//! Slots are 128 bytes apart (the message in the first 64) so that the
//! adjacent-line prefetcher never pairs the slot being read with the one
//! being written.
//!
//! # Loom
//! Loom models at the bottom of this file check the protocol (the atomics
//! come from `super::sync`, loom's under `--cfg loom`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p realnet --lib --release --target-dir target/loom shm::slots
//! ```

// Under loom only the models use the slots.
#![cfg_attr(loom, allow(dead_code))]

use super::ring::{Corrupt, Line};
use super::sync::{AtomicU64, Ordering};

/// Words of a message in a slot after its stamp.
pub(crate) const SLOT_WORDS: usize = 7;

/// One slot: the stamp, then the message's words, alone on 128 bytes.
#[repr(C, align(128))]
pub(crate) struct Slot {
    /// `m + 1` once message `m` is complete in this slot.
    stamp: AtomicU64,
    /// The message (see `super::wire`).
    words: [AtomicU64; SLOT_WORDS],
}

// A message (stamp and words) fits one 64-byte cache line, and slots are
// 128 bytes apart.
const _: () = assert!(8 + SLOT_WORDS * 8 <= 64 && size_of::<Slot>() == 128);

impl Slot {
    /// An empty slot (loom models and tests; shared memory starts zeroed).
    #[cfg(any(test, loom))]
    pub(crate) fn new() -> Slot {
        Slot {
            stamp: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The consumer's count of the messages it has taken out of the slots;
/// the all-zero bytes of a fresh segment are an empty queue.
#[repr(C)]
pub(crate) struct SlotsControl {
    /// Messages the consumer has read (their slots free again).
    freed: Line,
}

impl SlotsControl {
    /// An empty queue's control (loom models and tests).
    #[cfg(any(test, loom))]
    pub(crate) fn new() -> SlotsControl {
        SlotsControl {
            freed: Line(AtomicU64::new(0)),
        }
    }
}

/// One side's view of the slots: its own count of messages and the last
/// `freed` it saw (the producer's; unused by the consumer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotCursor {
    /// Messages written (producer) or read (consumer).
    pos: u64,
    /// The consumer's `freed` when last loaded (producer).
    seen: u64,
}

/// A pair's slots, as seen by either side.
#[derive(Clone, Copy)]
pub(crate) struct Slots<'a> {
    ctl: &'a SlotsControl,
    slots: &'a [Slot],
}

impl<'a> Slots<'a> {
    /// The queue over `ctl` and `slots`, whose count is a power of two.
    pub(crate) fn new(ctl: &'a SlotsControl, slots: &'a [Slot]) -> Slots<'a> {
        assert!(
            slots.len().is_power_of_two(),
            "the slot count is a power of two"
        );
        Slots { ctl, slots }
    }

    fn slot(&self, m: u64) -> &'a Slot {
        // The count is a power of two (checked in `new`): a mask, not a
        // division, on every look at a slot.
        &self.slots[(m & (self.slots.len() as u64 - 1)) as usize]
    }

    /// Consumer: whether the next message's slot says anything but "not
    /// yet" (one load of its stamp: an idle look). [`Slots::read`] then
    /// takes the message, or reports a corrupt stamp.
    #[inline]
    pub(crate) fn stirred(&self, cur: &SlotCursor) -> bool {
        let stamp = self.slot(cur.pos).stamp.load(Ordering::Relaxed);
        let lap = self.slots.len() as u64;
        stamp != (cur.pos + 1).saturating_sub(lap)
    }

    /// Producer: whether a slot is free for the next message, reloading
    /// the consumer's `freed` only if none was when last seen.
    pub(crate) fn writable(&self, cur: &mut SlotCursor) -> Result<bool, Corrupt> {
        let cap = self.slots.len() as u64;
        if cur.pos - cur.seen >= cap {
            let freed = self.ctl.freed.0.load(Ordering::Acquire);
            if freed < cur.seen || freed > cur.pos {
                return Err(Corrupt {
                    pos: cur.pos,
                    other: freed,
                });
            }
            cur.seen = freed;
        }
        Ok(cur.pos - cur.seen < cap)
    }

    /// Producer: writes the next message, which [`Slots::writable`] said
    /// has a free slot, and makes it visible to the consumer.
    pub(crate) fn write(&self, cur: &mut SlotCursor, words: &[u64; SLOT_WORDS]) {
        assert!(
            cur.pos - cur.seen < self.slots.len() as u64,
            "write into a free slot"
        );
        let slot = self.slot(cur.pos);
        for (w, v) in slot.words.iter().zip(words) {
            w.store(*v, Ordering::Relaxed);
        }
        slot.stamp.store(cur.pos + 1, Ordering::Release);
        cur.pos += 1;
    }

    /// Consumer: the next message's words if it has arrived (the slot is
    /// not freed yet: see [`Slots::release`]).
    pub(crate) fn read(&self, cur: &mut SlotCursor) -> Result<Option<[u64; SLOT_WORDS]>, Corrupt> {
        let slot = self.slot(cur.pos);
        let stamp = slot.stamp.load(Ordering::Acquire);
        if stamp != cur.pos + 1 {
            let lap = self.slots.len() as u64;
            let previous = (cur.pos + 1).saturating_sub(lap);
            if stamp == previous || (stamp == 0 && cur.pos < lap) {
                return Ok(None);
            }
            return Err(Corrupt {
                pos: cur.pos,
                other: stamp,
            });
        }
        let words = std::array::from_fn(|i| slot.words[i].load(Ordering::Relaxed));
        cur.pos += 1;
        Ok(Some(words))
    }

    /// Consumer: frees every slot read so far for the producer.
    pub(crate) fn release(&self, cur: &SlotCursor) {
        self.ctl.freed.0.store(cur.pos, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn slots(n: usize) -> Vec<Slot> {
        (0..n).map(|_| Slot::new()).collect()
    }

    fn words(m: u64) -> [u64; SLOT_WORDS] {
        std::array::from_fn(|i| m * 10 + i as u64)
    }

    #[test]
    fn messages_come_out_in_order_and_a_full_queue_waits_for_release() {
        let ctl = SlotsControl::new();
        let data = slots(4);
        let q = Slots::new(&ctl, &data);
        let (mut p, mut c) = (SlotCursor::default(), SlotCursor::default());
        let mut next = 0;
        for round in 0..10u64 {
            let burst = round % 4 + 1;
            for m in 0..burst {
                assert!(q.writable(&mut p).unwrap());
                q.write(&mut p, &words(round * 100 + m));
            }
            assert!(!q.writable(&mut p).unwrap() || burst < 4);
            for m in 0..burst {
                assert_eq!(q.read(&mut c).unwrap(), Some(words(round * 100 + m)));
                next += 1;
            }
            assert_eq!(q.read(&mut c).unwrap(), None, "nothing more yet");
            if burst == 4 {
                assert!(!q.writable(&mut p).unwrap(), "full until released");
            }
            q.release(&c);
            assert!(q.writable(&mut p).unwrap());
        }
        assert_eq!(c.pos, next);
    }

    #[test]
    fn impossible_stamps_and_counts_are_corrupt_not_followed() {
        let ctl = SlotsControl::new();
        let data = slots(2);
        let q = Slots::new(&ctl, &data);
        data[0].stamp.store(9, Ordering::Release);
        let mut c = SlotCursor::default();
        assert_eq!(q.read(&mut c), Err(Corrupt { pos: 0, other: 9 }));
        let mut p = SlotCursor::default();
        q.write(&mut p, &words(0));
        q.write(&mut p, &words(1));
        ctl.freed.0.store(5, Ordering::Release);
        assert_eq!(q.writable(&mut p), Err(Corrupt { pos: 2, other: 5 }));
    }

    #[test]
    fn two_threads_pass_many_messages_through_few_slots() {
        let ctl = SlotsControl::new();
        let data = slots(4);
        let q = Slots::new(&ctl, &data);
        let total = 100_000u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = SlotCursor::default();
                let mut m = 0;
                while m < total {
                    if q.writable(&mut p).unwrap() {
                        q.write(&mut p, &words(m));
                        m += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
            let mut c = SlotCursor::default();
            let mut m = 0;
            while m < total {
                match q.read(&mut c).unwrap() {
                    Some(w) => {
                        assert_eq!(w, words(m), "message {m}");
                        q.release(&c);
                        m += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
        });
    }
}

#[cfg(loom)]
mod loom_tests {
    //! Loom models: a producer and a consumer thread on a queue of two
    //! slots. Loom explores their interleavings and the weak-memory
    //! outcomes its model allows; a word read from a slot that the
    //! release/acquire pairs above did not order (a message seen half
    //! written, or overwritten before it was read) fails the asserts.
    use super::*;
    use loom::sync::Arc;

    struct Shared {
        ctl: SlotsControl,
        slots: Vec<Slot>,
    }

    /// Passes `total` messages through `capacity` slots; each message's
    /// words are all `m + 1` (a torn message would mix two values).
    fn pass(capacity: usize, total: u64) {
        loom::model(move || {
            let shared = Arc::new(Shared {
                ctl: SlotsControl::new(),
                slots: (0..capacity).map(|_| Slot::new()).collect(),
            });
            let producer = {
                let shared = shared.clone();
                loom::thread::spawn(move || {
                    let q = Slots::new(&shared.ctl, &shared.slots);
                    let mut p = SlotCursor::default();
                    let mut m = 0;
                    while m < total {
                        if q.writable(&mut p).unwrap() {
                            q.write(&mut p, &[m + 1; SLOT_WORDS]);
                            m += 1;
                        } else {
                            loom::thread::yield_now();
                        }
                    }
                })
            };
            let q = Slots::new(&shared.ctl, &shared.slots);
            let mut c = SlotCursor::default();
            let mut m = 0;
            while m < total {
                match q.read(&mut c).unwrap() {
                    Some(w) => {
                        assert_eq!(w, [m + 1; SLOT_WORDS], "message {m}");
                        q.release(&c);
                        m += 1;
                    }
                    None => loom::thread::yield_now(),
                }
            }
            producer.join().unwrap();
        });
    }

    #[test]
    fn messages_are_never_seen_half_written() {
        pass(2, 2);
    }

    #[test]
    fn a_slot_is_reused_only_after_the_consumer_read_it() {
        pass(1, 2);
    }
}
