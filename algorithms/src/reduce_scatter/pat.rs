//! Reduce-scatter by Parallel Aggregated Trees (PAT, NCCL 2.23+): the
//! mirror image of [`crate::allgather::pat`], reducing at every hop.
//!
//! # Schedule
//! Rank `q`'s contribution to block `j` travels backwards from `q` to `j`
//! along the set bits of `s = q - j (mod N)`, lowest first
//! ([`crate::pat`]). Dimensions run from `d = 0` up; across dimension `d`,
//! rank `r` sends to `r - 2^d` its partial results of blocks
//! `r - 2^d - t` for every offset `t` made of bits above `d` with
//! `t + 2^d ≤ N-1`, and receives from `r + 2^d` the partial results of
//! blocks `r - t`, reducing each into its own as `local ⊕ incoming`. After
//! the last dimension, block `r` holds the reduction of every rank's block
//! `r` (other blocks are scratch); for [`ReduceOp::Avg`] rank `r` divides
//! it by `N` once. Messages are aggregated or cut into pieces by
//! `chunk_bytes` as in the allgather ([`crate::pat::Packing`]), one
//! message at a time, each sent joined with the matching receive.
//!
//! # Reduction order (floating point)
//! Before dimension `d`, rank `j + t` holds for block `j` the partial
//! `T(t, d)` over the ranks `j + t + v`, `v < 2^d` (and `t + v < N`);
//! crossing dimension `d` makes `T(t, d+1) = T(t, d) ⊕ T(t + 2^d, d)` when
//! `t + 2^d < N`. So block `j` is the balanced binary tree over the ranks
//! `j, j+1, ..., j+N-1 (mod N)` in that cyclic order: neighbours paired
//! first, the lower offset always the left operand
//! ([`crate::pat::block_order`]); [`reference()`] evaluates exactly that.
//!
//! # Cost (ideal links)
//! As the allgather's, plus a reduction of every received message:
//! with `N` dividing the buffer, `c_d` blocks of `b = n/N` bytes crossing
//! dimension `d`, `A` blocks per message (or `P` pieces per block),
//!
//! ```text
//! T = Σ_d ⌈c_d/A⌉·α + (N-1)·b·(1/B + γ)    (A ≥ 1, P = 1)
//! T = Σ_d c_d·(P·α + b·(1/B + γ))           (P > 1)
//! ```
//!
//! evaluated message by message by [`cost_ps`] (the largest block when
//! blocks are uneven).

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::layout::block_range;
use crate::pat::{self, Packing};
use crate::payload::Payload;
use crate::reference::fold_reference;
use crate::schedule;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "Σ_d ⌈c_d/A⌉·α + (N-1)·n/N·(1/B + γ), Σ_d c_d = N-1, A = blocks per chunk; small: ⌈log2 N⌉·α + (N-1)/N·n·(1/B + γ)";

/// The packing of a call: from the largest block and the chunk size.
fn packing(n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> Packing {
    Packing::new(block_range(count, n, 0).len(), elem_bytes, chunk_bytes)
}

/// Modelled time of one call in picoseconds under ideal links: the
/// closed form of the module docs with the largest block (zero for
/// `N = 1` or an empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes();
    let largest = block_range(count, n, 0).len();
    let packing = packing(n, count, elem, params.chunk_bytes);
    pat::cost_ps(model, n, largest, elem, packing, true)
}

/// Every rank's buffer after the call, bit for bit in block `r` of rank
/// `r`: each block reduced in PAT's order (module docs).
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let parts: Vec<_> = (0..n)
        .map(|j| (block_range(count, n, j), pat::block_order(n, j)))
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// PAT reduce-scatter, in place: on return block `r` of rank `r`'s `buf`
/// holds the reduction of every rank's block `r`. Works for any world size
/// and count; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let elem = buf.shape().dtype.size_bytes();
    schedule::run(fabric, buf, op, params.tag, |n, count, r| {
        let packing = packing(n, count, elem, params.chunk_bytes);
        pat::reduce_scatter_steps(n, r, packing, |j| block_range(count, n, j))
    })
    .await
}

/// The PAT reduce-scatter, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Pat;

impl CollectiveAlgorithm for Pat {
    fn name(&self) -> &str {
        "pat"
    }

    fn collective(&self) -> Collective {
        Collective::ReduceScatter
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Block
    }

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
        let per_rank = packing(n, count, elem_bytes, chunk_bytes).messages(n);
        (n as u64).saturating_mul(per_rank)
    }
}
