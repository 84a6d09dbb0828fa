//! Reduce-scatter around the ring `r -> r+1 (mod N)`.
//!
//! # Schedule
//! There are `N-1` steps. At step `s`, rank `r` sends block
//! `(r - s - 1) mod N` to `r+1` and receives block `(r - s - 2) mod N` from
//! `r-1`, which it reduces into its own copy; the send is joined with the
//! receive. The block received at step `s` is the one sent at step
//! `s + 1`, so after the last step rank `r` holds the complete block `r`.
//! Blocks follow [`crate::layout::block_range`]; an empty block (count
//! below `N`) still travels as a zero-byte message, so every rank runs the
//! same schedule. Chunking (`chunk_bytes`) is not used.
//!
//! # Reduction order (floating point)
//! Block `j` starts at rank `j+1` and travels `j+1, j+2, ..., j+N (mod N)`;
//! each rank computes `received ⊕ local`, so every element of block `j` is
//! the left fold `((x_{j+1} ⊕ x_{j+2}) ⊕ ...) ⊕ x_j` over ranks taken
//! cyclically from `j+1`. For [`ReduceOp::Avg`] rank `j`, which completes
//! the sum, divides it by `N` once.
//!
//! # Cost (ideal links)
//! Every step moves and reduces one block of `n/N` bytes, and all ranks
//! move in lockstep, so
//!
//! ```text
//! T = (N-1)·(α + n/(N·B) + n·γ/N)
//! ```
//!
//! exactly (per-step terms rounded up to a picosecond) when `N` divides
//! the count; with uneven blocks [`cost_ps`] uses the largest block.

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::Collective;
use crate::collective::Params;
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::layout::block_range;
use crate::payload::Payload;
use crate::reference::{Order, fold_reference};
use crate::schedule::{self, Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "(N-1)·(α + n/(N·B) + n·γ/N)";

/// Modelled time of one call in picoseconds under ideal links: the closed
/// form of the module docs with the largest block (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let bytes = (block_range(count, n, 0).len() * dtype.size_bytes()) as u64;
    let step = model.message_ps(bytes) + model.reduce_ps(bytes);
    (n as u64 - 1) * step
}

/// Every rank's buffer after the call: block `j` folded over ranks
/// `j+1, ..., j+N (mod N)` (only block `r` of rank `r` is defined).
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let parts: Vec<_> = (0..n)
        .map(|j| {
            let order = Order::left_fold((1..=n).map(|s| (j + s) % n));
            (block_range(count, n, j), order)
        })
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// Ring reduce-scatter, in place: on return block `r` of rank `r`'s `buf`
/// (see [`crate::layout::block_range`]) holds the reduction of every
/// rank's block `r`; the rest of `buf` is scratch. Works for any world size
/// and count; see the module docs.
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

/// Rank `r`'s steps: `N-1` ring steps, then the average's division of the
/// block it completed.
fn steps(n: usize, count: usize, r: Rank) -> Vec<Step> {
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let block = |j: usize| block_range(count, n, j % n);
    let mut steps: Vec<Step> = (0..n - 1)
        .map(|s| {
            let send = Part::one(next, block(r + 2 * n - s - 1));
            let recv = Part::one(prev, block(r + 2 * n - s - 2));
            Step::exchange(send, recv, Combine::IncomingLeft)
        })
        .collect();
    steps.push(Step::Divide {
        range: block(r),
        ranks: n,
    });
    steps
}

/// The ring reduce-scatter, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Ring;

impl CollectiveAlgorithm for Ring {
    fn name(&self) -> &str {
        "ring"
    }

    fn collective(&self) -> Collective {
        Collective::ReduceScatter
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("ring")
    }
}
