//! Binomial-tree scatter: the root hands each subtree of a binomial tree
//! the blocks of its members in one message, and every rank passes on what
//! its own children need.
//!
//! # Tree
//! Ranks are numbered relative to the root, `v = (r - root) mod N`. The
//! parent of `v > 0` is `v` with its lowest set bit cleared; the children
//! of `v` are `v + m` for every power of two `m` below the lowest set bit
//! of `v` (below `N` for the root) with `v + m < N`. The subtree of `v` is
//! the relative ranks `v .. v + s(v)`, `s(v) = min(lowbit(v), N - v)`
//! (`s(0) = N`), so a subtree's blocks are consecutive in relative order.
//!
//! # Data layout
//! Block `j` ([`block_range`](crate::layout::block_range)) belongs to absolute rank `j`. The blocks of
//! relative ranks `v .. v + s` are absolute blocks `root + v, ...` taken
//! modulo `N`, which in the buffer are at most two contiguous runs (the
//! second when the run wraps past block `N - 1`). A subtree's message is
//! the two runs concatenated; a receiver unpacks them into the same
//! positions of its own buffer, which outside its block is scratch.
//!
//! # Schedule
//! A rank other than the root receives its subtree's blocks from its
//! parent, then sends each child the blocks of the child's subtree. Sends
//! are eager and every (sender, receiver) pair has its own link, so a
//! rank's sends to its children proceed in parallel. Every message carries
//! `params.tag`.
//!
//! # Cost (ideal links)
//! No link carries two messages, so rank `v` receives at the sum of
//! `α + b_u / B` over the edges `u` on its path from the root, where `b_u`
//! is the size of the subtree of `u` in bytes. [`cost_ps`] evaluates the
//! longest such path exactly. With `N = 2^k` and equal blocks of `n/N`
//! bytes the longest path halves the data at every hop:
//!
//! ```text
//! T = log2 N · α + (N - 1)/N · n/B
//! ```

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::binomial::{
    absolute, children, lowest_bit, pack, relative, runs_len, subtree_runs, unpack,
};

use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str =
    "⌈log2 N⌉·α + (N-1)/N·n/B (N a power of two; otherwise the longest root-to-leaf path)";

/// Binomial scatter, in place: the root's whole buffer is the input and on
/// return rank `r`'s block `r` holds the root's block `r` (the rest of a
/// non-root buffer is scratch). All ranks must call it with buffers of the
/// same shape and the same parameters; `op` is unused. Works for any world
/// size (1 is a no-op) and any count, including zero and counts below `N`.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let count = buf.len();
    if n == 1 || count == 0 {
        return Ok(());
    }
    let root = params.root;
    let me = relative(fabric.rank(), root, n);
    if me != 0 {
        let parent = absolute(me - lowest_bit(me), root, n);
        let runs = subtree_runs(count, n, root, me);
        let shape = Shape::new(buf.shape().dtype, runs_len(&runs));
        let incoming = fabric.recv(parent, params.tag, shape).await?;
        unpack(buf, &runs, &incoming)?;
    }
    for child in children(me, n) {
        let message = pack(buf, &subtree_runs(count, n, root, child))?;
        fabric
            .send(absolute(child, root, n), params.tag, message)
            .await?;
    }
    Ok(())
}

/// Modelled time of one call under ideal links: the longest path from the
/// root, each edge costing `α` plus the serialisation of the child's
/// subtree (exact for any `N` and any block sizes).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes() as u64;
    let mut arrival = vec![0u64; n];
    // Parents have smaller relative numbers, so one pass in order suffices.
    for v in 1..n {
        let bytes = runs_len(&subtree_runs(count, n, params.root, v)) as u64 * elem;
        let parent = v - lowest_bit(v);
        arrival[v] = arrival[parent].saturating_add(model.message_ps(bytes));
    }
    arrival.into_iter().max().unwrap_or(0)
}

/// Every rank's buffer after the call: block `r` from the root.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Scatter, inputs, params.root)
}

/// The binomial-tree scatter, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Binomial;

impl CollectiveAlgorithm for Binomial {
    fn name(&self) -> &str {
        "binomial"
    }

    fn collective(&self) -> Collective {
        Collective::Scatter
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::two_per_rank(n)
    }
}
