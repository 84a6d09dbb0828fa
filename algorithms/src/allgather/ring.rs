//! Allgather around the ring `r -> r+1 (mod N)`.
//!
//! # Schedule
//! There are `N-1` steps. At step `s`, rank `r` sends block `(r - s) mod N`
//! to `r+1` and receives block `(r - s - 1) mod N` from `r-1`, which it
//! stores; the send is joined with the receive, and every received block
//! is forwarded at the next step. Blocks follow
//! [`crate::layout::block_range`]; an empty block (count below `N`) still
//! travels as a zero-byte message, so every rank runs the same schedule.
//! Chunking (`chunk_bytes`) is not used. Nothing is reduced.
//!
//! # Cost (ideal links)
//! Every step moves one block of `n/N` bytes and all ranks move in
//! lockstep, so
//!
//! ```text
//! T = (N-1)·(α + n/(N·B))
//! ```
//!
//! exactly (the wire term rounded up to a picosecond) when `N` divides the
//! count; with uneven blocks [`cost_ps`] uses the largest block.

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::layout::block_range;
use crate::payload::Payload;
use crate::schedule::{self, Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "(N-1)·(α + n/(N·B))";

/// Modelled time of one call in picoseconds under ideal links: the closed
/// form of the module docs with the largest block (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let bytes = (block_range(count, n, 0).len() * dtype.size_bytes()) as u64;
    (n as u64 - 1) * model.message_ps(bytes)
}

/// Every rank's buffer after the call: block `j` from rank `j`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Allgather, inputs, 0)
}

/// Ring allgather, in place: on entry block `r` of rank `r`'s `buf` (see
/// [`crate::layout::block_range`]) holds its contribution; on return every
/// rank's `buf` holds block `j` of rank `j` for every `j`. Works for any
/// world size and count; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    schedule::run(fabric, buf, op, params.tag, |n, count, r| {
        steps(n, count, r)
    })
    .await
}

/// Rank `r`'s `N-1` ring steps.
fn steps(n: usize, count: usize, r: Rank) -> Vec<Step> {
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let block = |j: usize| block_range(count, n, j % n);
    (0..n - 1)
        .map(|s| {
            let send = Part::one(next, block(r + n - s));
            let recv = Part::one(prev, block(r + 2 * n - s - 1));
            Step::exchange(send, recv, Combine::Copy)
        })
        .collect()
}

/// The ring allgather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Ring;

impl CollectiveAlgorithm for Ring {
    fn name(&self) -> &str {
        "ring"
    }

    fn collective(&self) -> Collective {
        Collective::Allgather
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("ring")
    }
}
