//! Allgather by recursive doubling, for any number of ranks.
//!
//! # Schedule
//! Let `p` be the largest power of two `≤ N` and `e = N - p` the extra
//! ranks. The standard non-power-of-two handling folds them in first and
//! out last:
//!
//! 1. **Fold in.** For `i < e`, rank `2i` sends its block to rank `2i + 1`
//!    and sits out. The `p` remaining ranks get new numbers: rank `2i + 1`
//!    is `i` (`i < e`), rank `r ≥ 2e` is `r - e`. New rank `i` holds the
//!    blocks of the ranks it stands for (`2i, 2i+1` for `i < e`, else
//!    `i + e`), so the blocks of new ranks `lo..hi` are one contiguous
//!    range of the buffer.
//! 2. **Doubling.** For `m = 1, 2, 4, ..., p/2`, new rank `i` exchanges
//!    with `i XOR m` the blocks of its aligned group of `m` new ranks for
//!    those of the partner's group (send joined with receive). Message
//!    sizes double every step.
//! 3. **Fold out.** New rank `i < e` sends rank `2i` everything except
//!    block `2i` (two ranges, one message).
//!
//! Chunking (`chunk_bytes`) is not used. Nothing is reduced.
//!
//! # Cost (ideal links)
//! With `N` dividing the buffer of `n` bytes, a power-of-two `N` costs
//!
//! ```text
//! T = log2(N)·α + (N-1)/N · n/B
//! ```
//!
//! Otherwise the fold-in adds `α + n/(N·B)` on the folded ranks (their
//! partners in the first exchanges wait for them) and the fold-out
//! `α + (N-1)/N · n/B`. [`cost_ps`] evaluates the schedule exactly in the
//! ideal-link model, which is the closed form above for a power of two.

use std::ops::Range;

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::fold::Fold;
use crate::layout::blocks_range;
use crate::payload::Payload;
use crate::schedule::{self, Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "N = 2^k: log2(N)·α + (N-1)/N·n/B; otherwise + α + n/(N·B) (fold in) + α + (N-1)/N·n/B (fold out)";

/// Modelled time of one call in picoseconds under ideal links: the
/// schedule of the module docs evaluated exactly (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    let fold = Fold::new(n.max(1), count);
    schedule::cost(model, n, count, dtype.size_bytes(), |r| {
        fold.allgather_steps(r)
    })
}

/// Every rank's buffer after the call: block `j` from rank `j`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Allgather, inputs, 0)
}

/// Recursive-doubling allgather, in place: on entry block `r` of rank
/// `r`'s `buf` (see [`crate::layout::block_range`]) holds its
/// contribution; on return every rank's `buf` holds block `j` of rank `j`
/// for every `j`. Works for any world size and count; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    schedule::run(fabric, buf, op, params.tag, |n, count, r| {
        Fold::new(n, count).allgather_steps(r)
    })
    .await
}

/// This algorithm's use of the shared [`Fold`].
impl Fold {
    /// The elements of block `j`.
    fn block(&self, j: usize) -> Range<usize> {
        blocks_range(self.count, self.n, j, 1)
    }

    /// Everything but block `j`, as the two ranges around it.
    fn all_but(&self, j: usize) -> Vec<Range<usize>> {
        let own = self.block(j);
        vec![0..own.start, own.end..self.count]
    }

    /// Rank `r`'s steps.
    fn allgather_steps(&self, r: Rank) -> Vec<Step> {
        let Some(i) = self.new_rank(r) else {
            // A folded rank hands its block over and gets the rest back.
            let rest = Part {
                peer: r + 1,
                ranges: self.all_but(r),
            };
            return vec![
                Step::Move {
                    send: Some(Part::one(r + 1, self.block(r))),
                    recv: None,
                },
                Step::Move {
                    send: None,
                    recv: Some((rest, Combine::Copy)),
                },
            ];
        };
        let mut steps = Vec::new();
        if i < self.extra {
            let recv = Part::one(r - 1, self.block(r - 1));
            steps.push(Step::Move {
                send: None,
                recv: Some((recv, Combine::Copy)),
            });
        }
        let mut m = 1;
        while m < self.p {
            let partner = i ^ m;
            let peer = self.rank_of(partner);
            let mine = self.owned(i & !(m - 1), (i & !(m - 1)) + m);
            let theirs = self.owned(partner & !(m - 1), (partner & !(m - 1)) + m);
            steps.push(Step::exchange(
                Part::one(peer, mine),
                Part::one(peer, theirs),
                Combine::Copy,
            ));
            m *= 2;
        }
        if i < self.extra {
            let rest = Part {
                peer: r - 1,
                ranges: self.all_but(r - 1),
            };
            steps.push(Step::Move {
                send: Some(rest),
                recv: None,
            });
        }
        steps
    }
}

/// The recursive-doubling allgather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RecursiveDoubling;

impl CollectiveAlgorithm for RecursiveDoubling {
    fn name(&self) -> &str {
        "recursive_doubling"
    }

    fn collective(&self) -> Collective {
        Collective::Allgather
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}
