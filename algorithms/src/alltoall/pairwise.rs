//! Pairwise-exchange alltoall.
//!
//! # Schedule
//! The buffer holds `N` equal blocks of `count / N` elements; block `j` is
//! for rank `j`. There are `N - 1` steps. At step `s = 1..N-1` rank `r`
//! sends block `(r + s) mod N` to rank `r + s` and, concurrently, receives
//! from rank `r - s` the block that rank `r - s` addressed to `r`, which
//! belongs in block `(r - s) mod N`. Block `r` (what `r` sends itself) stays
//! where it is.
//!
//! This shifted schedule is used rather than XOR pairing (`r ⊕ s`) because
//! it works for every `N`, not only powers of two, with the same cost: each
//! step uses one link per rank and every link is used once.
//!
//! Working in place needs care: the block received at step `s` goes to
//! slot `r - s`, which this rank sends from at step `N - s`. When
//! `N - s > s` that send has not happened yet, so the received block is
//! held aside and written when step `N - s` has taken a copy of the slot;
//! at most `⌊(N - 1) / 2⌋` blocks are held at once.
//!
//! Every message carries the call's tag: the partners `r - s` of the
//! different steps are distinct ranks, so a receive can only match the
//! message of its own step.
//!
//! # Cost (ideal links)
//! Every rank runs the same schedule, so all start step `s` together. A
//! step's message goes on a link used by no other step and is waited for
//! before the next step, so each step takes one message time `α + b/B`
//! with `b` the block size in bytes:
//!
//! ```text
//! T = (N - 1) · (α + n / (N·B))
//! ```

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::layout::block_range;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "(N-1)·(α + n/(N·B))";

/// Pairwise alltoall, in place: on entry block `j` is this rank's data for
/// rank `j`; on return block `j` holds what rank `j` sent to this rank.
/// All ranks must call it with buffers of the same shape and the same
/// parameters. The count must be a multiple of the world size (zero is
/// allowed and moves nothing); otherwise it returns
/// [`CollectiveError::InvalidCount`].
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    check_count(buf.len(), n)?;
    if n == 1 || buf.is_empty() {
        return Ok(());
    }
    // Blocks received before their slot was sent from, by slot.
    let mut held: Vec<Option<Payload>> = vec![None; n];
    for s in 1..n {
        step(fabric, buf, s, &mut held, params).await?;
    }
    Ok(())
}

/// Step `s`: send slot `r + s`, receive slot `r - s`, and place what can be
/// placed without overwriting data still to be sent. A block whose slot
/// has been sent from (or is sent from by this very step: two ranks
/// swapping) lands in place in one [`Fabric::exchange_in_place`], which
/// a real transport serves without copying the sent block out first; a
/// block held aside travels by [`Fabric::exchange`] of the slot's
/// [`Fabric::send_copy`]. Either is the default's same copy and exchange.
async fn step<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    s: usize,
    held: &mut [Option<Payload>],
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let r = fabric.rank();
    let (to, from) = ((r + s) % n, (r + n - s) % n);
    let count = buf.len();
    let (sent, received) = (block_range(count, n, to), block_range(count, n, from));
    // Slot `from` is sent from at step `n - s`; until then, hold its block.
    if n - s > s {
        let expect = Shape::new(buf.shape().dtype, count / n);
        let outgoing = fabric.send_copy(buf, sent.clone());
        let block = fabric
            .exchange(to, outgoing, from, expect, params.tag)
            .await?;
        held[from] = Some(block);
    } else {
        fabric
            .exchange_in_place(to, from, params.tag, buf, sent.clone(), received, None)
            .await?;
    }
    // Slot `to` has now been sent from, so a block held for it can land.
    if let Some(early) = held[to].take() {
        buf.copy_from(sent, &early)?;
        fabric.recycle(early);
    }
    Ok(())
}

/// Rejects a count that does not split into `n` equal blocks.
pub(crate) fn check_count(count: usize, n: usize) -> Result<(), CollectiveError> {
    if count.is_multiple_of(n) {
        return Ok(());
    }
    Err(CollectiveError::InvalidCount {
        collective: Collective::Alltoall,
        count,
        world_size: n,
        why: "the count must be a multiple of the world size (N equal blocks)",
    })
}

/// Modelled time of one call under ideal links: `N - 1` steps of one
/// message of a block each (zero for `N = 1` or an empty buffer). Exact
/// for every count that is a multiple of `N`.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let block_bytes = Shape::new(dtype, count / n).bytes();
    (n as u64 - 1).saturating_mul(model.message_ps(block_bytes))
}

/// Every rank's buffer after the call: block `j` is rank `j`'s block `r`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Alltoall, inputs, params.root)
}

/// The pairwise-exchange alltoall, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Pairwise;

impl CollectiveAlgorithm for Pairwise {
    fn name(&self) -> &str {
        "pairwise"
    }

    fn collective(&self) -> Collective {
        Collective::Alltoall
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }
}
