//! `Ring`: a lock-free single-producer single-consumer byte ring in
//! shared memory, one per ordered pair of ranks.
//!
//! ```text
//!  RingControl (three 128-byte lines)        data: capacity bytes (a power of two)
//!  +------------+------------+------------+  +----------------------------------+
//!  | head       | tail       | copied     |  | ..consumed.. | published | free  |
//!  | (producer) | (consumer) | (consumer) |  +----------------------------------+
//!  +------------+------------+------------+        tail ^        head ^
//! ```
//!
//! `head` and `tail` count bytes since the ring was created (they never
//! wrap in practice: 2^64 bytes); a position's byte is `data[pos %
//! capacity]`. Only the producer stores `head` and only the consumer
//! stores `tail`, each on its own cache line (128 bytes, so that the
//! adjacent-line prefetcher does not pair them either). The protocol:
//! - the producer copies bytes into `[head, tail + capacity)` and then
//!   publishes them with a **release** store of `head`; the consumer's
//!   **acquire** load of `head` makes those bytes visible before it reads;
//! - the consumer copies bytes out of `[tail, head)` and then frees them
//!   with a **release** store of `tail`; the producer's **acquire** load of
//!   `tail` orders its next writes after the consumer's reads.
//!
//! Each side keeps its own position and the last position it saw of the
//! other side in a `Cursor`, and reloads the other side's atomic only
//! when the cached value does not offer what it wants, so a busy ring does
//! not bounce both lines between cores on every call. A position of the
//! other side that is behind our own or more than a capacity ahead (a
//! corrupt segment) is reported as `Corrupt`, never followed.
//!
//! `copied` is not part of the byte protocol: the consumer counts there the
//! messages it copied straight out of the producer's memory (cross-memory
//! attach, see `super::cma`), so the producer knows when it may free them.
//!
//! # Loom
//! The protocol is checked by loom models at the bottom of this file (the
//! atomics and the data cells come from `super::sync`, loom's under
//! `--cfg loom`). Run them with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p realnet --lib --release --target-dir target/loom shm::ring
//! ```
//!
//! (under `--cfg loom` only this module and `super::slots` of `shm` are
//! compiled).

// Under loom only the models use the ring.
#![cfg_attr(loom, allow(dead_code))]

use super::sync::{AtomicU64, Ordering, UnsafeCell, copy_in, copy_out};

/// One atomic counter alone on a 128-byte line.
#[repr(C, align(128))]
pub(crate) struct Line(pub(crate) AtomicU64);

/// The positions of one ring, each on its own cache line; the all-zero
/// bytes of a fresh segment are an empty ring.
#[repr(C)]
pub(crate) struct RingControl {
    /// Bytes the producer has published.
    head: Line,
    /// Bytes the consumer has freed.
    tail: Line,
    /// Messages the consumer copied out of the producer's memory.
    copied: Line,
}

impl RingControl {
    /// An empty ring's control (loom models and tests; shared memory starts zeroed).
    #[cfg(any(test, loom))]
    pub(crate) fn new() -> RingControl {
        RingControl {
            head: Line(AtomicU64::new(0)),
            tail: Line(AtomicU64::new(0)),
            copied: Line(AtomicU64::new(0)),
        }
    }
}

impl RingControl {
    /// Counts one more message copied out of the producer's memory (an
    /// attached payload or a lent part of a caller's buffer). Release: the
    /// consumer's reads of those bytes happen before the producer sees the
    /// count and reuses them.
    pub(crate) fn mark_copied(&self) {
        self.copied.0.fetch_add(1, Ordering::Release);
    }

    /// The messages the consumer has copied out of the producer's memory.
    /// Acquire: pairs with [`RingControl::mark_copied`], so the producer
    /// may overwrite or free those bytes once the count covers them.
    pub(crate) fn copied(&self) -> u64 {
        self.copied.0.load(Ordering::Acquire)
    }
}

/// One side's view of a ring: its own position and the last position it
/// saw of the other side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// This side's position (the producer's head, the consumer's tail).
    pos: u64,
    /// The other side's position when last loaded.
    seen: u64,
}

/// The other side's position is impossible: the segment is corrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Corrupt {
    /// Our position.
    pub(crate) pos: u64,
    /// The position the other side published.
    pub(crate) other: u64,
}

/// A ring's control and data, as seen by either side.
#[derive(Clone, Copy)]
pub(crate) struct Ring<'a> {
    ctl: &'a RingControl,
    data: &'a [UnsafeCell],
}

impl<'a> Ring<'a> {
    /// The ring over `ctl` and `data`, whose length is a power of two.
    pub(crate) fn new(ctl: &'a RingControl, data: &'a [UnsafeCell]) -> Ring<'a> {
        assert!(
            data.len().is_power_of_two(),
            "ring capacity is a power of two"
        );
        Ring { ctl, data }
    }

    /// The ring's size in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.data.len()
    }

    /// The control block (for the `copied` counter).
    pub(crate) fn control(&self) -> &'a RingControl {
        self.ctl
    }

    /// Producer: how many bytes it may write now, reloading the consumer's
    /// position if fewer than `want` were free when last seen.
    pub(crate) fn writable(&self, cur: &mut Cursor, want: usize) -> Result<usize, Corrupt> {
        let cap = self.capacity() as u64;
        if cap - (cur.pos - cur.seen) < want as u64 {
            let tail = self.ctl.tail.0.load(Ordering::Acquire);
            if tail < cur.seen || tail > cur.pos {
                return Err(Corrupt {
                    pos: cur.pos,
                    other: tail,
                });
            }
            cur.seen = tail;
        }
        Ok((cap - (cur.pos - cur.seen)) as usize)
    }

    /// Producer: copies `src` into the ring after what it wrote so far;
    /// `src` must fit in what [`Ring::writable`] returned. The bytes stay
    /// invisible to the consumer until [`Ring::publish`].
    pub(crate) fn write(&self, cur: &mut Cursor, src: &[u8]) {
        let cap = self.capacity();
        assert!(
            src.len() as u64 <= cap as u64 - (cur.pos - cur.seen),
            "write within the free space"
        );
        let start = (cur.pos % cap as u64) as usize;
        let first = src.len().min(cap - start);
        copy_in(&self.data[start..start + first], &src[..first]);
        copy_in(&self.data[..src.len() - first], &src[first..]);
        cur.pos += src.len() as u64;
    }

    /// Producer: makes everything written so far visible to the consumer.
    pub(crate) fn publish(&self, cur: &Cursor) {
        self.ctl.head.0.store(cur.pos, Ordering::Release);
    }

    /// Consumer: how many published bytes it may read now, reloading the
    /// producer's position if fewer than `want` were known.
    pub(crate) fn readable(&self, cur: &mut Cursor, want: usize) -> Result<usize, Corrupt> {
        if cur.seen - cur.pos < want as u64 {
            let head = self.ctl.head.0.load(Ordering::Acquire);
            if head < cur.seen || head - cur.pos > self.capacity() as u64 {
                return Err(Corrupt {
                    pos: cur.pos,
                    other: head,
                });
            }
            cur.seen = head;
        }
        Ok((cur.seen - cur.pos) as usize)
    }

    /// Consumer: copies the next `dst.len()` published bytes into `dst`;
    /// they must be within what [`Ring::readable`] returned. The space is
    /// not reused by the producer until [`Ring::release`].
    pub(crate) fn read(&self, cur: &mut Cursor, dst: &mut [u8]) {
        let cap = self.capacity();
        assert!(
            dst.len() as u64 <= cur.seen - cur.pos,
            "read within the published bytes"
        );
        let start = (cur.pos % cap as u64) as usize;
        let first = dst.len().min(cap - start);
        let (a, b) = dst.split_at_mut(first);
        copy_out(a, &self.data[start..start + first]);
        copy_out(b, &self.data[..b.len()]);
        cur.pos += dst.len() as u64;
    }

    /// Consumer: gives everything read so far back to the producer.
    pub(crate) fn release(&self, cur: &Cursor) {
        self.ctl.tail.0.store(cur.pos, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn cells(n: usize) -> Vec<UnsafeCell> {
        (0..n).map(|_| UnsafeCell::new()).collect()
    }

    #[test]
    fn bytes_wrap_around_and_come_out_in_order() {
        let ctl = RingControl::new();
        let data = cells(8);
        let ring = Ring::new(&ctl, &data);
        let (mut p, mut c) = (Cursor::default(), Cursor::default());
        let mut next = 0u8;
        let mut want = 0u8;
        for round in 0..20 {
            let n = (round % 5) + 1;
            assert!(ring.writable(&mut p, n).unwrap() >= n);
            let src: Vec<u8> = (0..n)
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            ring.write(&mut p, &src);
            assert_eq!(ring.readable(&mut c, 1).unwrap(), 0, "unpublished");
            ring.publish(&p);
            assert_eq!(ring.readable(&mut c, n).unwrap(), n);
            let mut dst = vec![0; n];
            ring.read(&mut c, &mut dst);
            ring.release(&c);
            for b in dst {
                want = want.wrapping_add(1);
                assert_eq!(b, want);
            }
        }
    }

    #[test]
    fn a_full_ring_refuses_more_until_released() {
        let ctl = RingControl::new();
        let data = cells(4);
        let ring = Ring::new(&ctl, &data);
        let (mut p, mut c) = (Cursor::default(), Cursor::default());
        ring.write(&mut p, &[1, 2, 3, 4]);
        ring.publish(&p);
        assert_eq!(ring.writable(&mut p, 1).unwrap(), 0);
        let mut two = [0; 2];
        assert_eq!(ring.readable(&mut c, 2).unwrap(), 4);
        ring.read(&mut c, &mut two);
        assert_eq!(ring.writable(&mut p, 1).unwrap(), 0, "not released yet");
        ring.release(&c);
        assert_eq!(ring.writable(&mut p, 1).unwrap(), 2);
    }

    #[test]
    fn impossible_positions_are_corrupt_not_followed() {
        let ctl = RingControl::new();
        let data = cells(4);
        let ring = Ring::new(&ctl, &data);
        ctl.head.0.store(100, Ordering::Release);
        let mut c = Cursor::default();
        assert_eq!(
            ring.readable(&mut c, 1),
            Err(Corrupt { pos: 0, other: 100 })
        );
        ctl.tail.0.store(7, Ordering::Release);
        let mut p = Cursor::default();
        ring.write(&mut p, &[0; 4]);
        assert_eq!(ring.writable(&mut p, 1), Err(Corrupt { pos: 4, other: 7 }));
    }

    #[test]
    fn two_threads_stream_a_megabyte_through_a_small_ring() {
        let ctl = RingControl::new();
        let data = cells(64);
        let ring = Ring::new(&ctl, &data);
        let total = 1 << 20;
        let byte = |i: usize| (i * 7 + i / 251) as u8;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = Cursor::default();
                let mut sent = 0;
                while sent < total {
                    let n = ring.writable(&mut p, 1).unwrap().min(total - sent).min(37);
                    let src: Vec<u8> = (sent..sent + n).map(byte).collect();
                    ring.write(&mut p, &src);
                    ring.publish(&p);
                    sent += n;
                    if n == 0 {
                        std::thread::yield_now();
                    }
                }
            });
            let mut c = Cursor::default();
            let mut got = 0;
            while got < total {
                let n = ring.readable(&mut c, 1).unwrap().min(29);
                let mut dst = vec![0; n];
                ring.read(&mut c, &mut dst);
                ring.release(&c);
                for (k, b) in dst.iter().enumerate() {
                    assert_eq!(*b, byte(got + k), "byte {}", got + k);
                }
                got += n;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
        });
    }
}

#[cfg(loom)]
mod loom_tests {
    //! Loom models: a producer and a consumer thread on a tiny ring. Loom
    //! explores their interleavings (and the weak-memory outcomes its model
    //! allows) and fails on a data race on a data byte, i.e. if the
    //! acquire/release pairs above did not order the copies.
    use super::*;
    use loom::sync::Arc;

    struct Shared {
        ctl: RingControl,
        data: Vec<UnsafeCell>,
    }

    impl Shared {
        fn new(capacity: usize) -> Arc<Shared> {
            Arc::new(Shared {
                ctl: RingControl::new(),
                data: (0..capacity).map(|_| UnsafeCell::new()).collect(),
            })
        }

        fn ring(&self) -> Ring<'_> {
            Ring::new(&self.ctl, &self.data)
        }
    }

    /// Streams `total` bytes (1, 2, 3, ...) in pieces of at most `piece`
    /// through a ring of `capacity`, and checks them on the other side.
    fn stream(capacity: usize, total: usize, piece: usize) {
        loom::model(move || {
            let shared = Shared::new(capacity);
            let producer = {
                let shared = shared.clone();
                loom::thread::spawn(move || {
                    let ring = shared.ring();
                    let mut p = Cursor::default();
                    let mut sent = 0;
                    while sent < total {
                        let n = ring
                            .writable(&mut p, 1)
                            .unwrap()
                            .min(piece)
                            .min(total - sent);
                        if n == 0 {
                            loom::thread::yield_now();
                            continue;
                        }
                        let src: Vec<u8> = (sent..sent + n).map(|i| i as u8 + 1).collect();
                        ring.write(&mut p, &src);
                        ring.publish(&p);
                        sent += n;
                    }
                })
            };
            let ring = shared.ring();
            let mut c = Cursor::default();
            let mut got = 0;
            while got < total {
                let n = ring.readable(&mut c, 1).unwrap().min(total - got);
                if n == 0 {
                    loom::thread::yield_now();
                    continue;
                }
                let mut dst = vec![0; n];
                ring.read(&mut c, &mut dst);
                ring.release(&c);
                for (k, b) in dst.iter().enumerate() {
                    assert_eq!(usize::from(*b), got + k + 1);
                }
                got += n;
            }
            producer.join().unwrap();
        });
    }

    #[test]
    fn bytes_wrap_around_a_two_byte_ring_in_order() {
        stream(2, 3, 2);
    }

    #[test]
    fn pieces_larger_than_what_is_free_wait_for_the_consumer() {
        stream(4, 5, 3);
    }

    #[test]
    fn a_full_ring_is_refilled_as_the_consumer_frees_it() {
        stream(2, 3, 1);
    }

    /// A lent part of a caller's buffer (see `shm::lend`): the producer
    /// announces it through the ring, the consumer copies it straight out
    /// of the producer's memory (cross-memory attach, modelled as reads of
    /// the producer's cells) and counts it copied; the producer reuses its
    /// buffer once the count covers the part. Loom fails on a data race if
    /// the count's release/acquire did not order the copy before the reuse.
    #[test]
    fn a_lent_buffer_is_reused_only_after_the_peer_copied_it() {
        loom::model(|| {
            let shared = Shared::new(2);
            let lent: Arc<Vec<UnsafeCell>> = Arc::new((0..2).map(|_| UnsafeCell::new()).collect());
            let producer = {
                let (shared, lent) = (shared.clone(), lent.clone());
                loom::thread::spawn(move || {
                    copy_in(&lent, &[7, 9]);
                    let ring = shared.ring();
                    let mut p = Cursor::default();
                    assert!(ring.writable(&mut p, 1).unwrap() >= 1);
                    ring.write(&mut p, &[1]);
                    ring.publish(&p);
                    while shared.ctl.copied() < 1 {
                        loom::thread::yield_now();
                    }
                    // The loan is over: the caller writes its buffer again.
                    copy_in(&lent, &[0, 0]);
                })
            };
            let ring = shared.ring();
            let mut c = Cursor::default();
            while ring.readable(&mut c, 1).unwrap() < 1 {
                loom::thread::yield_now();
            }
            let mut header = [0];
            ring.read(&mut c, &mut header);
            ring.release(&c);
            let mut copy = [0; 2];
            copy_out(&mut copy, &lent);
            shared.ctl.mark_copied();
            assert_eq!(copy, [7, 9]);
            producer.join().unwrap();
        });
    }
}
