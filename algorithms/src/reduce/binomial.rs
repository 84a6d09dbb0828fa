//! Binomial-tree reduce: partial results flow up a binomial tree rooted
//! at the root, each rank combining its children's results into its own
//! buffer before passing it to its parent.
//!
//! # Tree
//! Ranks are numbered relative to the root, `v = (r - root) mod N`. The
//! parent of `v > 0` is `v` with its lowest set bit cleared; the children
//! of `v` are `c_m = v + m` for every power of two `m` below the lowest set
//! bit of `v` (below `N` for the root) with `v + m < N`. This is the tree
//! of MPICH's `MPIR_Reduce_intra_binomial` and works for any `N`.
//!
//! # Schedule
//! A rank receives the whole partial result of each child in increasing
//! `m` (the order in which they are ready: the subtree of `c_m` has depth
//! `log2 m`), reduces it into its buffer, and, unless it is the root,
//! sends its buffer to its parent. Every message carries `params.tag`.
//!
//! # Reduction order (floating point)
//! Each received partial result is the left operand
//! ([`Payload::reduce_from`]), so with `R(v)` the result of the subtree of
//! `v` and `x_v` its input,
//!
//! ```text
//! R(v) = R(c_M) ⊕ ( ... ⊕ (R(c_2) ⊕ (R(c_1) ⊕ x_v)))
//! ```
//!
//! for every element. The root's buffer is `R(0)`, and for
//! [`ReduceOp::Avg`] the root divides that sum by `N` once. [`reference()`]
//! builds the same [`Order`] and evaluates it with [`fold_reference`].
//!
//! # Cost (ideal links)
//! Every message is the whole buffer of `n` bytes and no link carries two
//! messages. A rank is ready to send at
//! `fold over children in increasing m: t ← max(t, ready(c) + α + n/B) + γ·n`
//! from `t = 0`, because its one compute engine reduces the children one at
//! a time; [`cost_ps`] evaluates this recursion exactly. With `N = 2^k`
//! every child's result arrives while the previous reduction is done or
//! later, and the critical path is the chain of largest subtrees:
//!
//! ```text
//! T = log2 N · (α + n/B + γ·n)
//! ```

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::binomial::{absolute, children, lowest_bit, relative};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Work};
use crate::payload::Payload;
use crate::reference::{Order, fold_reference};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str =
    "⌈log2 N⌉·(α + n/B + γ·n) (N a power of two; otherwise the longest leaf-to-root path)";

/// Binomial reduce, in place: on return the root's `buf` holds the
/// reduction of all ranks' inputs (other ranks' buffers are scratch). All
/// ranks must call it with buffers of the same shape, the same `op` and the
/// same parameters. Works for any world size (1 is a no-op) and any count,
/// including zero.
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
    let root = params.root;
    let me = relative(fabric.rank(), root, n);
    for child in children(me, n) {
        let from = absolute(child, root, n);
        let incoming = fabric.recv(from, params.tag, shape).await?;
        buf.reduce_from(0..shape.count, &incoming, op)?;
        let bytes = shape.bytes();
        fabric.compute(Work::Reduce { bytes }).await?;
    }
    if me != 0 {
        let parent = absolute(me - lowest_bit(me), root, n);
        fabric.send(parent, params.tag, buf.clone()).await?;
    } else if op == ReduceOp::Avg {
        buf.divide(0..shape.count, n);
    }
    Ok(())
}

/// Modelled time of one call under ideal links: the recursion of the
/// module docs over the whole tree (exact for any `N`).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let bytes = (count * dtype.size_bytes()) as u64;
    let hop = model.message_ps(bytes);
    let reduce = model.reduce_ps(bytes);
    let mut ready = vec![0u64; n];
    // Children have larger relative numbers, so one pass downwards finds
    // every child ready before its parent.
    for v in (0..n).rev() {
        ready[v] = children(v, n).fold(0u64, |t, c| {
            t.max(ready[c].saturating_add(hop)).saturating_add(reduce)
        });
    }
    ready[0]
}

/// Every rank's buffer after the call: the root holds the tree's reduction
/// (see the module docs for the order); other ranks' buffers are scratch
/// and are given as their inputs.
pub fn reference(inputs: &[Payload], op: ReduceOp, params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let mut out = inputs.to_vec();
    let order = subtree_order(0, n, params.root);
    out[params.root] = fold_reference(inputs, op, &[(0..count, order)]);
    out
}

/// The order in which the subtree of relative rank `v` combines its
/// members' inputs, in absolute ranks.
fn subtree_order(v: usize, n: usize, root: Rank) -> Order {
    children(v, n).fold(Order::Rank(absolute(v, root, n)), |acc, c| {
        Order::combine(subtree_order(c, n, root), acc)
    })
}

/// The binomial-tree reduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Binomial;

impl CollectiveAlgorithm for Binomial {
    fn name(&self) -> &str {
        "binomial"
    }

    fn collective(&self) -> Collective {
        Collective::Reduce
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::two_per_rank(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_puts_children_left_in_increasing_distance() {
        // N = 4, root 1: relative 0..4 are ranks 1, 2, 3, 0.
        let r = Order::Rank;
        let want = Order::combine(Order::combine(r(0), r(3)), Order::combine(r(2), r(1)));
        assert_eq!(subtree_order(0, 4, 1), want);
    }
}
