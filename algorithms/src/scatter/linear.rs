//! Linear scatter: the root sends block `j` of its buffer straight to
//! rank `j`.
//!
//! # Schedule
//! One step. The root posts `N - 1` sends, block `j` (as split by
//! [`block_range`]) to rank `j` for every `j ≠ root`; every other rank `r`
//! receives block `r` from the root into its own block `r`. The root's own
//! block is already in place, so it sends nothing to itself.
//!
//! # Cost (ideal links)
//! Every ordered rank pair has its own link and sends are eager, so the
//! root's `N - 1` messages leave at time zero on `N - 1` different links and
//! travel in parallel. The call ends when the last one arrives:
//!
//! ```text
//! T = max_{j ≠ root} (α + b_j / B) = α + n / (N·B)   when N divides the count
//! ```
//!
//! where `b_j` is the size of block `j` in bytes. `N = 1` and an empty buffer
//! move nothing and cost zero.

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::layout::block_range;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "α + n/(N·B) (all N-1 blocks leave the root at once on separate links)";

/// Linear scatter, in place: on return rank `r`'s block `r` holds the
/// root's block `r`; the rest of a non-root buffer is left as it was.
/// All ranks must call it with buffers of the same shape and the same
/// parameters. Works for any world size (1 is a no-op) and any count,
/// including zero.
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
    let r = fabric.rank();
    if r == params.root {
        send_blocks(fabric, buf, params).await
    } else {
        receive_own_block(fabric, buf, params).await
    }
}

/// The root's part: one message per other rank. Sends are eager, so
/// awaiting them in turn does not serialise them on the wire.
async fn send_blocks<F: Fabric>(
    fabric: &F,
    buf: &Payload,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let others = (0..n).filter(|&j| j != params.root);
    for j in others {
        let block = buf.extract(block_range(buf.len(), n, j));
        fabric.send(j, params.tag, block).await?;
    }
    Ok(())
}

/// A non-root's part: block `r` from the root, into block `r`.
async fn receive_own_block<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    params: &Params,
) -> Result<(), CollectiveError> {
    let own = block_range(buf.len(), fabric.world_size(), fabric.rank());
    let expect = Shape::new(buf.shape().dtype, own.len());
    let block = fabric.recv(params.root, params.tag, expect).await?;
    buf.copy_from(own, &block)?;
    Ok(())
}

/// Modelled time of one call under ideal links: the slowest of the root's
/// parallel messages, `max_{j ≠ root} (α + b_j/B)` (zero for `N = 1` or an
/// empty buffer). Exact for every count.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    slowest_direct_message(model, n, count, dtype, params.root)
}

/// The arrival time of the slowest of the messages between `root` and
/// every other rank, all posted at time zero on separate links.
fn slowest_direct_message(
    model: &CostModel,
    n: usize,
    count: usize,
    dtype: DType,
    root: Rank,
) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    (0..n)
        .filter(|&j| j != root)
        .map(|j| model.message_ps(Shape::new(dtype, block_range(count, n, j).len()).bytes()))
        .max()
        .unwrap_or(0)
}

/// Every rank's buffer after the call: block `r` of rank `r` is the root's.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Scatter, inputs, params.root)
}

/// The linear scatter, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Linear;

impl CollectiveAlgorithm for Linear {
    fn name(&self) -> &str {
        "linear"
    }

    fn collective(&self) -> Collective {
        Collective::Scatter
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::two_per_rank(n)
    }
}
