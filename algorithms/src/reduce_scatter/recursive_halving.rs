//! Reduce-scatter by recursive halving, for any number of ranks.
//!
//! # Schedule
//! Let `p` be the largest power of two `≤ N` and `e = N - p` the extra
//! ranks. The standard non-power-of-two handling folds them in first:
//!
//! 1. **Fold in.** For `i < e`, rank `2i` sends its whole buffer to rank
//!    `2i + 1`, which reduces it in and stands for both from now on; rank
//!    `2i` sits out. The `p` remaining ranks get new numbers: rank `2i + 1`
//!    is `i` (`i < e`), rank `r ≥ 2e` is `r - e`. New rank `i` *owns* the
//!    blocks of the ranks it stands for (`2i, 2i+1` for `i < e`, else
//!    `i + e`), so the blocks of new ranks `lo..hi` are one contiguous
//!    range of the buffer.
//! 2. **Halving.** For `m = p/2, p/4, ..., 1`, new rank `i` exchanges with
//!    `i XOR m`: of the new-rank interval `[lo, lo + 2m)` both currently
//!    reduce, the lower partner keeps `[lo, lo + m)` and sends the upper
//!    half, the upper partner the reverse; each reduces what it receives
//!    into the half it keeps. Message sizes halve every step.
//! 3. **Fold out.** New rank `i < e` now holds the complete blocks `2i` and
//!    `2i + 1` and sends block `2i` to rank `2i`.
//!
//! # Reduction order (floating point)
//! Every combination puts the lower rank's partial result on the left: the
//! fold-in computes `x_{2i} ⊕ x_{2i+1}`, and in the halving both partners
//! compute `lower ⊕ upper`. Writing `leaf(a)` for new rank `a`'s input
//! after the fold-in, every element is reduced by the same tree
//! `T(a, m) = T(a, 2m) ⊕ T(a | m, 2m)` for `a` with bit `m` clear,
//! `T(a, p) = leaf(a)`, result `T(0, 1)`: the top split is by the lowest
//! bit of the new rank (the last exchange), the leaves are the deepest.
//! For [`ReduceOp::Avg`] the owner divides the complete sum by `N` once,
//! before the fold-out. Partners apply the same tree, so results are
//! identical wherever they are computed.
//!
//! # Cost (ideal links)
//! With `N` dividing the buffer of `n` bytes, a power-of-two `N` costs
//!
//! ```text
//! T = log2(N)·α + (N-1)/N · n/B + (N-1)/N · n·γ
//! ```
//!
//! (step `k` moves and reduces `n/2^k` bytes). Otherwise the fold-in adds
//! `α + n/B + n·γ` on the folded ranks and the fold-out `α + n/(N·B)`; the
//! folded ranks start the halving late, which their partners wait for.
//! [`cost_ps`] evaluates the schedule exactly in the ideal-link model
//! (each message `α + ⌈b/B⌉` after its link frees, each reduction
//! `⌈b·γ⌉` on the receiver), which is the closed form above in the
//! power-of-two case. Chunking (`chunk_bytes`) is not used.

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::Collective;
use crate::collective::Params;
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::fold::Fold;
use crate::layout::blocks_range;
use crate::payload::Payload;
use crate::reference::{Order, fold_reference};

use crate::schedule::{self, Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "N = 2^k: log2(N)·α + (N-1)/N·n/B + (N-1)/N·n·γ; otherwise + α + n/B + n·γ (fold in) + α + n/(N·B) (fold out)";

/// Modelled time of one call in picoseconds under ideal links: the
/// schedule of the module docs evaluated exactly (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    let fold = Fold::new(n.max(1), count);
    schedule::cost(model, n, count, dtype.size_bytes(), |r| {
        fold.reduce_scatter_steps(r)
    })
}

/// Every rank's buffer after the call: each element reduced by the tree of
/// the module docs (only block `r` of rank `r` is defined).
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let fold = Fold::new(n, count);
    let order = fold.tree(0, 1);
    vec![fold_reference(inputs, op, &[(0..count, order)]); n]
}

/// Recursive-halving reduce-scatter, in place: on return block `r` of
/// rank `r`'s `buf` (see [`crate::layout::block_range`]) holds the
/// reduction of every rank's block `r`; the rest of `buf` is scratch.
/// Works for any world size and count; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    schedule::run(fabric, buf, op, params.tag, |n, count, r| {
        Fold::new(n, count).reduce_scatter_steps(r)
    })
    .await
}

/// This algorithm's use of the shared [`Fold`].
impl Fold {
    /// Rank `r`'s steps.
    fn reduce_scatter_steps(&self, r: Rank) -> Vec<Step> {
        let whole = 0..self.count;
        let Some(i) = self.new_rank(r) else {
            // A folded rank hands its buffer over and gets its block back.
            let block = blocks_range(self.count, self.n, r, 1);
            return vec![
                Step::Move {
                    send: Some(Part::one(r + 1, whole)),
                    recv: None,
                },
                Step::Move {
                    send: None,
                    recv: Some((Part::one(r + 1, block), Combine::Copy)),
                },
            ];
        };
        let mut steps = Vec::new();
        if i < self.extra {
            // The sender is the lower rank, hence the left operand.
            let recv = Part::one(r - 1, whole);
            steps.push(Step::Move {
                send: None,
                recv: Some((recv, Combine::IncomingLeft)),
            });
        }
        let mut lo = 0;
        let mut m = self.p / 2;
        while m > 0 {
            let peer = self.rank_of(i ^ m);
            let mid = lo + m;
            let (keep, give, combine) = if i & m == 0 {
                ((lo, mid), (mid, mid + m), Combine::IncomingRight)
            } else {
                ((mid, mid + m), (lo, mid), Combine::IncomingLeft)
            };
            steps.push(Step::exchange(
                Part::one(peer, self.owned(give.0, give.1)),
                Part::one(peer, self.owned(keep.0, keep.1)),
                combine,
            ));
            lo = keep.0;
            m /= 2;
        }
        steps.push(Step::Divide {
            range: self.owned(i, i + 1),
            ranks: self.n,
        });
        if i < self.extra {
            let block = blocks_range(self.count, self.n, r - 1, 1);
            steps.push(Step::Move {
                send: Some(Part::one(r - 1, block)),
                recv: None,
            });
        }
        steps
    }

    /// The input of new rank `a` after the fold-in.
    fn leaf(&self, a: usize) -> Order {
        if a < self.extra {
            Order::combine(Order::Rank(2 * a), Order::Rank(2 * a + 1))
        } else {
            Order::Rank(a + self.extra)
        }
    }

    /// `T(a, m)` of the module docs: what the exchanges at distances
    /// below `m` combine, for new ranks agreeing with `a` on those bits.
    fn tree(&self, a: usize, m: usize) -> Order {
        if m >= self.p {
            return self.leaf(a);
        }
        let lower = self.tree(a & !m, 2 * m);
        let upper = self.tree(a | m, 2 * m);
        Order::combine(lower, upper)
    }
}

/// The recursive-halving reduce-scatter, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RecursiveHalving;

impl CollectiveAlgorithm for RecursiveHalving {
    fn name(&self) -> &str {
        "recursive_halving"
    }

    fn collective(&self) -> Collective {
        Collective::ReduceScatter
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}
