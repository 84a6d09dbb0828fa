//! Binomial-tree arithmetic shared by the binomial broadcast, reduce,
//! gather and scatter.
//!
//! Ranks are renumbered relative to the root (`v = (r - root) mod N`, the
//! root is 0). Relative rank `v`'s parent clears its lowest set bit; its
//! children are `v + 2^k` for every `2^k` below that bit (and below `N - v`),
//! so its subtree is the relative ranks `v .. v + min(lowbit(v), N - v)`.
//! A subtree's blocks are contiguous in relative order, which is at most
//! two runs of the buffer once the root's offset wraps them past `N - 1`.

use std::ops::Range;

use crate::error::CollectiveError;
use crate::fabric::Rank;
use crate::layout::blocks_range;
use crate::payload::Payload;

/// The rank `r` numbered relative to `root`.
pub(crate) fn relative(r: Rank, root: Rank, n: usize) -> usize {
    (r + n - root) % n
}

/// The rank whose number relative to `root` is `v`.
pub(crate) fn absolute(v: usize, root: Rank, n: usize) -> Rank {
    (v + root) % n
}

/// The lowest set bit of `v`; for the root (`v = 0`) a bit above every
/// rank, so that every power of two below `N` gives it a child.
pub(crate) fn lowest_bit(v: usize) -> usize {
    if v == 0 {
        usize::MAX
    } else {
        v & v.wrapping_neg()
    }
}

/// The children of relative rank `v`.
pub(crate) fn children(v: usize, n: usize) -> impl Iterator<Item = usize> {
    let below = lowest_bit(v);
    (0..usize::BITS)
        .map(|k| 1usize << k)
        .take_while(move |&m| m < below && v + m < n)
        .map(move |m| v + m)
}

/// The number of ranks in the subtree of relative rank `v`.
pub(crate) fn subtree_size(v: usize, n: usize) -> usize {
    lowest_bit(v).min(n - v)
}

/// The buffer positions of the blocks of the subtree of relative rank `v`,
/// in relative order: at most two runs, the second empty unless the
/// subtree's absolute ranks wrap past `N - 1`.
pub(crate) fn subtree_runs(count: usize, n: usize, root: Rank, v: usize) -> [Range<usize>; 2] {
    let first = absolute(v, root, n);
    let blocks = subtree_size(v, n);
    let before_wrap = blocks.min(n - first);
    [
        blocks_range(count, n, first, before_wrap),
        blocks_range(count, n, 0, blocks - before_wrap),
    ]
}

/// The total number of elements in `runs`.
pub(crate) fn runs_len(runs: &[Range<usize>]) -> usize {
    runs.iter().map(|r| r.len()).sum()
}

/// The elements of `runs` of `buf`, concatenated into one message.
pub(crate) fn pack(buf: &Payload, runs: &[Range<usize>]) -> Result<Payload, CollectiveError> {
    let mut message = Payload::zeros(buf.shape().dtype, runs_len(runs), buf.is_phantom());
    let mut at = 0;
    for run in runs {
        message.copy_from(at..at + run.len(), &buf.extract(run.clone()))?;
        at += run.len();
    }
    Ok(message)
}

/// Places a message made by [`pack`] back at `runs` of `buf`.
pub(crate) fn unpack(
    buf: &mut Payload,
    runs: &[Range<usize>],
    message: &Payload,
) -> Result<(), CollectiveError> {
    let mut at = 0;
    for run in runs {
        buf.copy_from(run.clone(), &message.extract(at..at + run.len()))?;
        at += run.len();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_runs_wrap_around_the_buffer() {
        // 10 elements on 4 ranks: blocks 0..3, 3..6, 6..8, 8..10.
        assert_eq!(subtree_runs(10, 4, 3, 0), [8..10, 0..8]);
        assert_eq!(subtree_runs(10, 4, 3, 2), [3..8, 0..0]);
        assert_eq!(subtree_runs(10, 4, 3, 1), [0..3, 0..0]);
        assert_eq!(subtree_runs(10, 4, 0, 2), [6..10, 0..0]);
    }
}
