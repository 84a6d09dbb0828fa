//! [`Wire`]: the few verbs the fabric uses, as a trait, so that the fabric's
//! logic also runs (in unit tests) on an in-memory stand-in for a device.

use std::ops::Range;

use crate::verbs::slots::WorkId;

/// A work completion, reduced to what the fabric reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id (a [`WorkId`]).
    pub wr_id: u64,
    /// `enum ibv_wc_status`: 0 is success.
    pub status: u32,
    /// The device's own error code for a failure.
    pub vendor_err: u32,
    /// Bytes received (receive completions).
    pub len: usize,
}

/// Posting and polling on registered slots.
pub trait Wire {
    /// The registered region, laid out as the fabric's `SlotLayout` says.
    fn memory(&mut self) -> &mut [u8];

    /// Posts receive slot `slot` of the connection to `peer`.
    fn post_recv(&mut self, peer: usize, slot: u32) -> Result<(), String>;

    /// Posts a send of `range` of the region to `peer`.
    fn post_send(&mut self, peer: usize, range: Range<usize>, id: WorkId) -> Result<(), String>;

    /// Appends the completions that are ready to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), String>;
}
