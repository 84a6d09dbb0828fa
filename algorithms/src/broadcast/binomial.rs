//! Binomial-tree broadcast: the root's buffer reaches every rank along a
//! binomial tree rooted at the root, one whole-buffer message per edge.
//!
//! # Tree
//! Ranks are numbered relative to the root, `v = (r - root) mod N`. The
//! parent of `v > 0` is `v` with its lowest set bit cleared; the children
//! of `v` are `v + m` for every power of two `m` below the lowest set bit
//! of `v` (below `N` for the root) with `v + m < N`. This is the tree of
//! MPICH's `MPIR_Bcast_intra_binomial` and works for any `N`, not only
//! powers of two.
//!
//! # Schedule
//! A rank other than the root receives the whole buffer from its parent,
//! then sends it to each of its children. Sends are eager and every
//! (sender, receiver) pair has its own link, so a rank's sends to its
//! children proceed in parallel. Every message carries `params.tag`.
//!
//! # Cost (ideal links)
//! Rank `v` receives after one message per set bit of `v`, each costing
//! `α + n/B` for a buffer of `n` bytes, because it is reached along the
//! path that adds its set bits one at a time. The last rank to finish is
//! the one with the most set bits among `0..N`, which is `⌊log2 N⌋` of
//! them, so
//!
//! ```text
//! T = ⌊log2 N⌋ · (α + n/B)
//! ```
//!
//! exactly (there is no reduction and no link carries two messages).

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::binomial::{absolute, children, lowest_bit, relative};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::Payload;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "⌊log2 N⌋·(α + n/B)";

/// Binomial broadcast, in place: on return every rank's `buf` holds the
/// root's input. All ranks must call it with buffers of the same shape and
/// the same parameters; `op` is unused. Works for any world size (1 is a
/// no-op) and any count, including zero.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    if n == 1 || buf.is_empty() {
        return Ok(());
    }
    let root = params.root;
    let me = relative(fabric.rank(), root, n);
    let all = 0..buf.len();
    if me != 0 {
        let parent = absolute(me - lowest_bit(me), root, n);
        fabric
            .recv_combine(parent, params.tag, buf, all.clone(), None)
            .await?;
    }
    // Sent from the buffer itself: a real transport lends it or writes it
    // out without a copy of its own (the default copies it, as a clone).
    for child in children(me, n) {
        let to = absolute(child, root, n);
        fabric.send_from(to, params.tag, buf, all.clone()).await?;
    }
    Ok(())
}

/// Modelled time of one call under ideal links: `⌊log2 N⌋` hops of one
/// whole-buffer message each (exact).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let bytes = (count * dtype.size_bytes()) as u64;
    u64::from(n.ilog2()).saturating_mul(model.message_ps(bytes))
}

/// Every rank's buffer after the call: the root's input everywhere.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Broadcast, inputs, params.root)
}

/// The binomial-tree broadcast, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Binomial;

impl CollectiveAlgorithm for Binomial {
    fn name(&self) -> &str {
        "binomial"
    }

    fn collective(&self) -> Collective {
        Collective::Broadcast
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
    fn tree_reaches_every_rank_once() {
        for n in 1..40 {
            let mut reached = vec![0; n];
            reached[0] = 1;
            for v in 0..n {
                for c in children(v, n) {
                    assert_eq!(c - lowest_bit(c), v);
                    reached[c] += 1;
                }
            }
            assert!(reached.iter().all(|&k| k == 1), "n = {n}");
        }
    }
}
