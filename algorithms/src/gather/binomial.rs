//! Binomial-tree gather: every rank collects the blocks of its subtree of
//! a binomial tree and sends them to its parent in one message, so the
//! root ends with every block.
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
//! Block `j` ([`block_range`](crate::layout::block_range)) is absolute rank `j`'s input. The blocks of
//! relative ranks `v .. v + s` are absolute blocks `root + v, ...` taken
//! modulo `N`, which in the buffer are at most two contiguous runs (the
//! second when the run wraps past block `N - 1`). A subtree's message is
//! the two runs concatenated; the parent unpacks them into the same
//! positions of its own buffer, which outside its block is scratch.
//!
//! # Schedule
//! A rank receives the subtree of each child, smallest subtree first (the
//! order in which they are ready), then, unless it is the root, sends its
//! whole subtree to its parent. Every (sender, receiver) pair has its own
//! link, so children's messages arrive in parallel. Every message carries
//! `params.tag`.
//!
//! # Cost (ideal links)
//! No link carries two messages, so rank `v` sends at
//! `max over children c (send time of c + α + b_c / B)` (zero for a leaf),
//! where `b_c` is the size of the subtree of `c` in bytes; the call ends
//! when the root has received from all its children. [`cost_ps`] evaluates
//! this recursion exactly. With `N = 2^k` and equal blocks of `n/N` bytes
//! the critical path doubles the data at every hop:
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
    "⌈log2 N⌉·α + (N-1)/N·n/B (N a power of two; otherwise the longest leaf-to-root path)";

/// Binomial gather, in place: rank `r`'s block `r` is its input and on
/// return the root's buffer holds every rank's block (the rest of a
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
    for child in children(me, n) {
        let runs = subtree_runs(count, n, root, child);
        let shape = Shape::new(buf.shape().dtype, runs_len(&runs));
        let incoming = fabric
            .recv(absolute(child, root, n), params.tag, shape)
            .await?;
        unpack(buf, &runs, &incoming)?;
    }
    if me != 0 {
        let parent = absolute(me - lowest_bit(me), root, n);
        let message = pack(buf, &subtree_runs(count, n, root, me))?;
        fabric.send(parent, params.tag, message).await?;
    }
    Ok(())
}

/// Modelled time of one call under ideal links: the longest path from a
/// leaf to the root, each edge costing `α` plus the serialisation of the
/// sender's subtree (exact for any `N` and any block sizes).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes() as u64;
    let mut ready = vec![0u64; n];
    // Children have larger relative numbers, so one pass downwards suffices.
    for v in (1..n).rev() {
        let bytes = runs_len(&subtree_runs(count, n, params.root, v)) as u64 * elem;
        let parent = v - lowest_bit(v);
        let arrival = ready[v].saturating_add(model.message_ps(bytes));
        ready[parent] = ready[parent].max(arrival);
    }
    ready[0]
}

/// Every rank's buffer after the call: the root holds block `j` from rank
/// `j`; other ranks keep their input.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Gather, inputs, params.root)
}

/// The binomial-tree gather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Binomial;

impl CollectiveAlgorithm for Binomial {
    fn name(&self) -> &str {
        "binomial"
    }

    fn collective(&self) -> Collective {
        Collective::Gather
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::two_per_rank(n)
    }
}
