//! The ring's concurrency primitives: std's in a normal build, loom's
//! under `--cfg loom`, so the loom model checks the very code that runs.
//!
//! [`UnsafeCell`] is a byte of ring data. In a normal build it is
//! `repr(transparent)` over [`std::cell::UnsafeCell<u8>`] so that a shared
//! mapping can be viewed as `&[UnsafeCell<u8>]`, and [`copy_in`] /
//! [`copy_out`] move whole runs with one `memcpy`; under loom every byte is
//! a loom cell, accessed one at a time, so loom sees (and checks) each
//! access.
#![allow(unsafe_code)]

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU64;

pub(crate) use std::sync::atomic::Ordering;

/// One byte of ring data, written by the producer and read by the consumer.
#[cfg(not(loom))]
#[repr(transparent)]
pub(crate) struct UnsafeCell(std::cell::UnsafeCell<u8>);

/// One byte of ring data, written by the producer and read by the consumer.
#[cfg(loom)]
pub(crate) struct UnsafeCell(loom::cell::UnsafeCell<u8>);

// SAFETY: ring bytes are shared between a producer and a consumer thread
// (or process); they are only touched through `copy_in` and `copy_out`,
// which the ring protocol (release/acquire on head and tail) gives to one
// side at a time, and loom checks that it does.
unsafe impl Sync for UnsafeCell {}

impl UnsafeCell {
    /// A zero byte (loom models and tests build their own rings).
    #[cfg(any(test, loom))]
    pub(crate) fn new() -> UnsafeCell {
        #[cfg(loom)]
        return UnsafeCell(loom::cell::UnsafeCell::new(0));
        #[cfg(not(loom))]
        UnsafeCell(std::cell::UnsafeCell::new(0))
    }
}

/// Copies `src` into `dst` (same length). The caller owns `dst`'s bytes
/// for writing: the ring protocol gives them to the producer until it
/// publishes them.
pub(crate) fn copy_in(dst: &[UnsafeCell], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_in of equal lengths");
    #[cfg(not(loom))]
    {
        let to = std::cell::UnsafeCell::raw_get(dst.as_ptr().cast::<std::cell::UnsafeCell<u8>>());
        // SAFETY: `dst` is `len` contiguous `UnsafeCell<u8>` (repr
        // transparent), so `to` is valid for `len` byte writes through
        // shared references; the ring protocol guarantees no one else
        // reads or writes these bytes until they are published; `src` is
        // ordinary memory that cannot overlap the ring.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), to, src.len()) };
    }
    #[cfg(loom)]
    for (cell, byte) in dst.iter().zip(src) {
        // SAFETY: as above; loom checks that no other access races it.
        cell.0.with_mut(|p| unsafe { *p = *byte });
    }
}

/// Copies `src` (ring bytes the consumer owns) into `dst` (same length).
pub(crate) fn copy_out(dst: &mut [u8], src: &[UnsafeCell]) {
    assert_eq!(dst.len(), src.len(), "copy_out of equal lengths");
    #[cfg(not(loom))]
    {
        let from = std::cell::UnsafeCell::raw_get(src.as_ptr().cast::<std::cell::UnsafeCell<u8>>());
        // SAFETY: `src` is `len` contiguous bytes valid for reads; the ring
        // protocol guarantees the producer does not write them until the
        // consumer releases them; `dst` is ordinary memory.
        unsafe { std::ptr::copy_nonoverlapping(from.cast_const(), dst.as_mut_ptr(), dst.len()) };
    }
    #[cfg(loom)]
    for (byte, cell) in dst.iter_mut().zip(src) {
        // SAFETY: as above; loom checks that no other access races it.
        *byte = cell.0.with(|p| unsafe { *p });
    }
}
