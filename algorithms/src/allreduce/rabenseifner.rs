//! Rabenseifner's allreduce: a recursive-halving reduce-scatter followed by
//! a recursive-doubling allgather among a power-of-two set of ranks, with
//! the standard fold-in and fold-out of the ranks beyond it (Rabenseifner,
//! "Optimization of collective reduction operations", ICCS 2004; Thakur,
//! Rabenseifner and Gropp, IJHPCA 2005; MPICH's
//! `MPIR_Allreduce_intra_reduce_scatter_allgather`).
//!
//! # Schedule
//! Let `p` be the largest power of two `<= N`, `rem = N - p` and
//! `L = log2 p`. The buffer is cut into `p` blocks by
//! [`crate::layout::block_range`]`(count, p, ·)`.
//! 1. **Fold-in** (tag `params.tag`). Among the first `2·rem` ranks, each
//!    even rank `2i` sends its whole buffer to `2i + 1`, which reduces it.
//!    Rank `2i + 1` becomes core `i`, rank `r >= 2·rem` core `r - rem`; the
//!    even ranks wait for step 4.
//! 2. **Reduce-scatter by recursive halving** (tag `params.tag.phase(0)`).
//!    Core `j` starts with blocks `0..p`. At step `k = 1..=L` it pairs with
//!    core `j XOR d`, `d = p / 2^k`: the lower core keeps the lower half of
//!    its current blocks and sends the upper half, the upper core the
//!    opposite, and each reduces the half it keeps. After `L` steps core
//!    `j` holds the complete reduction of block `j`; for
//!    [`ReduceOp::Avg`] it divides that block by `N` there, once.
//! 3. **Allgather by recursive doubling** (tag `params.tag.phase(1)`). At
//!    step `k = 0..L`, core `j` swaps all its `2^k` reduced blocks with core
//!    `j XOR 2^k` and copies what it receives.
//! 4. **Fold-out** (tag `params.tag`). Rank `2i + 1` sends the whole result
//!    to rank `2i`.
//!
//! # Reduction order (floating point)
//! In every halving exchange both partners compute `lower ⊕ upper`, with
//! `lower` the partial result of the partner with the lower core index; the
//! fold-in computes `x_{2i} ⊕ x_{2i+1}`. The order of block `b` is thus
//! `H(b, L)`, where `H(j, 0)` is core `j`'s fold-in leaf and
//! `H(j, k) = H(j with bit d cleared, k-1) ⊕ H(j with bit d set, k-1)`,
//! `d = p / 2^k`: a perfect binary tree whose innermost level combines cores
//! `p/2` apart and whose outermost combines neighbours. Each block is
//! reduced by one core only, so every rank ends with the same bits.
//!
//! # Cost (ideal links)
//! For `N = p` and `p` dividing the count, with `b` bytes per rank,
//! `t(x) = x/B` and `g(x) = γ·x`, all ranks stay in lockstep:
//!
//! ```text
//! T = Σ_{k=1..L} (α + t(b/2^k) + g(b/2^k)) + Σ_{k=1..L} (α + t(b/2^k))
//!   = 2L·α + 2(p-1)/p · t(b) + (p-1)/p · g(b)
//! ```
//!
//! With a fold (`N > p`) or uneven blocks, ranks drift apart; each step is
//! the max-plus recurrence `T_j' = max(T_j, T_peer + α + t(bytes in)) +
//! g(bytes reduced)` with FIFO links, which [`cost_ps`] evaluates step by
//! step with each rank's exact message sizes, plus the fold-in
//! (`α + t(b) + g(b)` for the folded ranks) and the fold-out (`α + t(b)`).
//! `chunk_bytes` is not used.

use std::ops::Range;

use super::recursive_doubling::{Fold, Link, Message, Timeline, exchange_reduce};
use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Tag};
use crate::layout::{block_range, blocks_range};
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "N = 2^L: 2L·α + 2(N-1)/N · n/B + (N-1)/N · γ·n; otherwise fold-in α + n/B + γ·n and fold-out α + n/B around the same among 2^⌊log2 N⌋ ranks (max-plus)";

/// Rabenseifner's allreduce, in place: on return every rank's `buf` holds
/// the reduction of all ranks' inputs, in the order of the module docs.
/// All ranks must call it with buffers of the same shape, the same `op` and
/// the same parameters. Works for any world size and any count, including
/// counts smaller than the number of ranks (empty blocks travel as
/// zero-byte messages).
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let shape = buf.shape();
    let n = fabric.world_size();
    let fold = Fold::new(n);
    let Some(core) = fold.fold_in(fabric, buf, op, params.tag).await? else {
        return fold.fold_out(fabric, buf, params.tag).await;
    };
    let plan = Plan {
        count: shape.count,
        fold,
    };
    reduce_scatter(fabric, buf, op, params.tag.phase(0), plan, core).await?;
    if op == ReduceOp::Avg {
        buf.divide(plan.block(core, 1), n);
    }
    allgather(fabric, buf, params.tag.phase(1), plan, core).await?;
    fold.fold_out(fabric, buf, params.tag).await
}

/// Modelled time of one call in picoseconds under ideal links: the
/// max-plus recurrence of the module docs, evaluated exactly with every
/// rank's own message sizes.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes() as u64;
    let fold = Fold::new(n);
    let plan = Plan { count, fold };
    let bytes = |range: Range<usize>| range.len() as u64 * elem;
    let mut timeline = Timeline::new(model, n);
    timeline.step(&fold.fold_in_messages(count as u64 * elem));
    for k in 1..=plan.steps() {
        let messages: Vec<Message> = (0..fold.p)
            .map(|j| {
                let (_, send) = plan.halving(j, k);
                Message {
                    from: fold.core_rank(j),
                    to: fold.core_rank(j ^ plan.halving_distance(k)),
                    bytes: bytes(send),
                    reduce: true,
                }
            })
            .collect();
        timeline.step(&messages);
    }
    for k in 0..plan.steps() {
        let messages: Vec<Message> = (0..fold.p)
            .map(|j| Message {
                from: fold.core_rank(j),
                to: fold.core_rank(j ^ (1 << k)),
                bytes: bytes(plan.block(j, 1 << k)),
                reduce: false,
            })
            .collect();
        timeline.step(&messages);
    }
    timeline.step(&fold.fold_out_messages(count as u64 * elem));
    timeline.finish()
}

/// Every rank's buffer after the call: block `b` folded in order `H(b, L)`
/// of the module docs, the same on every rank.
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    if n == 1 {
        return inputs.to_vec();
    }
    let fold = Fold::new(n);
    let steps = fold.p.ilog2();
    let parts: Vec<(Range<usize>, Order)> = (0..fold.p)
        .map(|b| (block_range(count, fold.p, b), halving_order(fold, b, steps)))
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// `H(j, k)`: the order in which core `j` has combined the blocks it holds
/// after `k` halving steps.
fn halving_order(fold: Fold, j: usize, k: u32) -> Order {
    if k == 0 {
        return fold.leaf(j);
    }
    let d = fold.p >> k;
    Order::combine(
        halving_order(fold, j & !d, k - 1),
        halving_order(fold, j | d, k - 1),
    )
}

/// The block bookkeeping of one call among the `p` core ranks.
#[derive(Clone, Copy, Debug)]
struct Plan {
    count: usize,
    fold: Fold,
}

impl Plan {
    /// `L = log2 p`, the number of halving (and of doubling) steps.
    fn steps(self) -> u32 {
        self.fold.p.ilog2()
    }

    /// The partner distance of halving step `k` (`1..=L`): `p / 2^k`.
    fn halving_distance(self, k: u32) -> usize {
        self.fold.p >> k
    }

    /// The elements of the `blocks` aligned blocks that contain block `j`.
    fn block(self, j: usize, blocks: usize) -> Range<usize> {
        let first = j & !(blocks - 1);
        blocks_range(self.count, self.fold.p, first, blocks)
    }

    /// At halving step `k`, the elements core `j` keeps (and reduces) and
    /// the elements it sends to its partner.
    fn halving(self, j: usize, k: u32) -> (Range<usize>, Range<usize>) {
        let d = self.halving_distance(k);
        let keep = self.block(j, d);
        let send = self.block(j ^ d, d);
        (keep, send)
    }
}

/// Recursive halving among the core ranks: on return core `core` holds
/// the complete reduction of block `core`.
async fn reduce_scatter<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    tag: Tag,
    plan: Plan,
    core: usize,
) -> Result<(), CollectiveError> {
    for k in 1..=plan.steps() {
        let peer = core ^ plan.halving_distance(k);
        let (keep, send) = plan.halving(core, k);
        let link = Link {
            peer: plan.fold.core_rank(peer),
            tag,
            lower: core < peer,
        };
        exchange_reduce(fabric, buf, send, keep, link, op).await?;
    }
    Ok(())
}

/// Recursive doubling among the core ranks: on return every core rank
/// holds every reduced block.
async fn allgather<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    tag: Tag,
    plan: Plan,
    core: usize,
) -> Result<(), CollectiveError> {
    let dtype = buf.shape().dtype;
    for k in 0..plan.steps() {
        let blocks = 1 << k;
        let peer = core ^ blocks;
        let mine = plan.block(core, blocks);
        let theirs = plan.block(peer, blocks);
        let to = plan.fold.core_rank(peer);
        let outgoing = buf.extract(mine);
        let expect = Shape::new(dtype, theirs.len());
        let received = fabric.exchange(to, outgoing, to, expect, tag).await?;
        buf.copy_from(theirs, &received)?;
    }
    Ok(())
}

/// Rabenseifner's allreduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Rabenseifner;

impl CollectiveAlgorithm for Rabenseifner {
    fn name(&self) -> &str {
        "rabenseifner"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_ends_with_the_own_block() {
        let plan = Plan {
            count: 10,
            fold: Fold::new(4),
        };
        // Step 1 (distance 2): core 1 keeps blocks 0..2, sends 2..4.
        assert_eq!(plan.halving(1, 1), (0..6, 6..10));
        // Step 2 (distance 1): core 1 keeps block 1.
        assert_eq!(plan.halving(1, 2), (3..6, 0..3));
        assert_eq!(plan.block(1, 1), block_range(10, 4, 1));
    }

    #[test]
    fn power_of_two_cost_matches_the_textbook() {
        let model = CostModel {
            latency_ps: 1000,
            bandwidth_bytes_per_s: 1e11,
            reduce_bytes_per_s: None,
        };
        // 4 ranks, 400 bytes: 4L·α/2 + 2·(3/4)·4000 ps.
        assert_eq!(
            cost_ps(&model, 4, 100, DType::F32, &Params::default()),
            4 * 1000 + 6000
        );
    }
}
