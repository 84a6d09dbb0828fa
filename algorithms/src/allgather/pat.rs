//! Allgather by Parallel Aggregated Trees (PAT, NCCL 2.23+): `⌈log2 N⌉`
//! aggregated messages at small sizes, `N-1` blocks at large ones, for any
//! `N`.
//!
//! # Schedule
//! Every rank is the root of a binomial broadcast of its own block: the
//! block that must reach the rank `s` ahead travels along the set bits of
//! `s`, highest first ([`crate::pat`]). Dimensions run from
//! `d = ⌈log2 N⌉ - 1` down to 0; across dimension `d`, rank `r` sends to
//! `r + 2^d` the blocks of ranks `r - t` for every offset `t` made of bits
//! above `d` with `t + 2^d ≤ N-1` (its own block and those it received
//! across higher dimensions), and receives from `r - 2^d` the blocks of
//! ranks `r - 2^d - t`, copied into place. Blocks follow
//! [`crate::layout::block_range`]; they travel aggregated into messages of
//! at most `chunk_bytes` (one message per dimension when every block of the
//! dimension fits one chunk), or cut into chunk-sized pieces when a block
//! is larger ([`crate::pat::Packing`]). Each message is sent joined with
//! the matching receive. Nothing is reduced.
//!
//! NCCL's PAT (`src/include/collectives.h:398-919` @b91894bd) keeps several
//! steps in flight and doubles its aggregation for its FIFO depth; this
//! one moves one message at a time, so its message counts are NCCL's
//! (§3 of the research notes: `1` per dimension at small sizes; `N/2,
//! N/4, ...` at large ones) but not its overlap.
//!
//! # Cost (ideal links)
//! All ranks move in lockstep (rotation symmetric), so with `N` dividing
//! the buffer, `c_d` blocks of `b = n/N` bytes crossing dimension `d`, `A`
//! blocks per message, or `P` pieces per block:
//!
//! ```text
//! T = Σ_d ⌈c_d/A⌉·α + (N-1)·b/B            (A ≥ 1, P = 1)
//! T = Σ_d c_d·(P·α + b/B)                   (P > 1)
//! ```
//!
//! with `Σ_d c_d = N-1`; at small sizes `⌈log2 N⌉·α + (N-1)/N·n/B`.
//! [`cost_ps`] evaluates it message by message (the wire term rounded per
//! message); with uneven blocks it uses the largest.

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::layout::block_range;
use crate::pat::{self, Packing};
use crate::payload::Payload;
use crate::schedule;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "Σ_d ⌈c_d/A⌉·α + (N-1)·n/(N·B), Σ_d c_d = N-1, A = blocks per chunk; small: ⌈log2 N⌉·α + (N-1)/N·n/B";

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
    pat::cost_ps(model, n, largest, elem, packing, false)
}

/// Every rank's buffer after the call: block `j` from rank `j`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Allgather, inputs, 0)
}

/// PAT allgather, in place: on entry block `r` of rank `r`'s `buf` holds
/// its contribution; on return every rank's `buf` holds block `j` of rank
/// `j` for every `j`. Works for any world size and count; see the module
/// docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let elem = buf.shape().dtype.size_bytes();
    schedule::run(fabric, buf, op, params.tag, |n, count, r| {
        let packing = packing(n, count, elem, params.chunk_bytes);
        pat::allgather_steps(n, r, packing, |j| block_range(count, n, j))
    })
    .await
}

/// Messages one call sends over all ranks.
fn messages(n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
    (n as u64).saturating_mul(packing(n, count, elem_bytes, chunk_bytes).messages(n))
}

/// The PAT allgather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Pat;

impl CollectiveAlgorithm for Pat {
    fn name(&self) -> &str {
        "pat"
    }

    fn collective(&self) -> Collective {
        Collective::Allgather
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Block
    }

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
        messages(n, count, elem_bytes, chunk_bytes)
    }
}
