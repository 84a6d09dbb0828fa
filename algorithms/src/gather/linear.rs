//! Linear gather: every rank sends its block straight to the root.
//!
//! # Schedule
//! One step. Every rank `r ≠ root` sends block `r` of its buffer (as split
//! by [`block_range`]) to the root; the root receives block `j` from every
//! rank `j ≠ root` into its own block `j`. The root's own block is already
//! in place.
//!
//! # Cost (ideal links)
//! Every ordered rank pair has its own link, so the `N - 1` messages leave
//! at time zero on `N - 1` different links and travel in parallel; the root
//! is done when the last one arrives:
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
use crate::fabric::Fabric;
use crate::layout::block_range;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "α + n/(N·B) (all N-1 blocks reach the root at once on separate links)";

/// Linear gather, in place: on entry block `r` of rank `r`'s buffer is its
/// contribution; on return the root's buffer holds block `j` from rank `j`
/// for every `j` (other ranks' buffers are unchanged). All ranks must call
/// it with buffers of the same shape and the same parameters. Works for any
/// world size (1 is a no-op) and any count, including zero.
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
    if fabric.rank() == params.root {
        receive_blocks(fabric, buf, params).await
    } else {
        send_own_block(fabric, buf, params).await
    }
}

/// A non-root's part: its own block, to the root.
async fn send_own_block<F: Fabric>(
    fabric: &F,
    buf: &Payload,
    params: &Params,
) -> Result<(), CollectiveError> {
    let own = block_range(buf.len(), fabric.world_size(), fabric.rank());
    fabric
        .send(params.root, params.tag, buf.extract(own))
        .await?;
    Ok(())
}

/// The root's part: block `j` from every other rank `j`. All messages are
/// already on their way in parallel, so receiving them in rank order ends
/// at the latest arrival, the same as receiving them in any other order.
async fn receive_blocks<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let dtype = buf.shape().dtype;
    for j in (0..n).filter(|&j| j != params.root) {
        let range = block_range(buf.len(), n, j);
        let block = fabric
            .recv(j, params.tag, Shape::new(dtype, range.len()))
            .await?;
        buf.copy_from(range, &block)?;
    }
    Ok(())
}

/// Modelled time of one call under ideal links: the slowest of the parallel
/// messages to the root, `max_{j ≠ root} (α + b_j/B)` (zero for `N = 1` or
/// an empty buffer). Exact for every count.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    (0..n)
        .filter(|&j| j != params.root)
        .map(|j| model.message_ps(Shape::new(dtype, block_range(count, n, j).len()).bytes()))
        .max()
        .unwrap_or(0)
}

/// Every rank's buffer after the call: the root's holds every rank's block.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Gather, inputs, params.root)
}

/// The linear gather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Linear;

impl CollectiveAlgorithm for Linear {
    fn name(&self) -> &str {
        "linear"
    }

    fn collective(&self) -> Collective {
        Collective::Gather
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::two_per_rank(n)
    }
}
