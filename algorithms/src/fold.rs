//! The standard non-power-of-two fold of recursive halving and doubling
//! (MPICH, Rabenseifner): with `p` the largest power of two not above `N`
//! and `e = N - p` extra ranks, the first `2e` ranks pair up (`2i` folds
//! into `2i + 1`), leaving `p` "new" ranks: new rank `i` is rank `2i + 1`
//! for `i < e` and rank `i + e` after. New rank `i` owns the blocks of the
//! ranks it stands for: `2i` and `2i + 1` below `e`, `i + e` above.

use std::ops::Range;

use crate::fabric::Rank;
use crate::layout::blocks_range;

/// The fold of `n` ranks over a buffer of `count` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fold {
    /// World size.
    pub n: usize,
    /// Elements in the buffer.
    pub count: usize,
    /// The largest power of two not above `n`.
    pub p: usize,
    /// Ranks folded in: `n - p`.
    pub extra: usize,
}

impl Fold {
    /// The fold of `n >= 1` ranks over `count` elements.
    pub(crate) fn new(n: usize, count: usize) -> Fold {
        let p = 1 << n.ilog2();
        Fold {
            n,
            count,
            p,
            extra: n - p,
        }
    }

    /// The rank that new rank `i` is.
    pub(crate) fn rank_of(&self, i: usize) -> Rank {
        if i < self.extra {
            2 * i + 1
        } else {
            i + self.extra
        }
    }

    /// The new rank of `r`, or `None` for a rank that sits out.
    pub(crate) fn new_rank(&self, r: Rank) -> Option<usize> {
        if r >= 2 * self.extra {
            Some(r - self.extra)
        } else {
            (r % 2 == 1).then_some(r / 2)
        }
    }

    /// The first block owned by new rank `i` (`N` for `i = p`).
    pub(crate) fn first_block(&self, i: usize) -> usize {
        if i < self.extra {
            2 * i
        } else {
            i + self.extra
        }
    }

    /// The buffer elements owned by new ranks `lo..hi`.
    pub(crate) fn owned(&self, lo: usize, hi: usize) -> Range<usize> {
        let first = self.first_block(lo);
        blocks_range(self.count, self.n, first, self.first_block(hi) - first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ranks_and_their_blocks_cover_everything() {
        for n in 1..40 {
            let fold = Fold::new(n, 3 * n + 1);
            assert_eq!(fold.owned(0, fold.p), 0..3 * n + 1);
            for i in 0..fold.p {
                assert_eq!(fold.new_rank(fold.rank_of(i)), Some(i));
            }
            let sitting_out = (0..n).filter(|&r| fold.new_rank(r).is_none()).count();
            assert_eq!(sitting_out, fold.extra);
        }
    }
}
