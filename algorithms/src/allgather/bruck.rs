//! Allgather by Bruck's algorithm: `⌈log2 N⌉` steps for any `N`.
//!
//! # Schedule
//! Rank `r` holds the blocks `r, r+1, ..., r+d-1 (mod N)` before the step
//! at distance `d = 1, 2, 4, ...` (`d < N`). At that step it sends its
//! first `c = min(d, N - d)` blocks, `r .. r+c-1 (mod N)`, to rank
//! `r - d`, and receives blocks `r+d .. r+d+c-1 (mod N)` from rank `r + d`
//! (send joined with receive), so afterwards it holds `d + c` consecutive
//! blocks; the last step completes all `N`.
//!
//! Textbook Bruck works on a rotated copy of the buffer and rotates it
//! back at the end. Here every block is written straight to its final
//! place; a run of blocks that wraps past the end of the buffer travels as
//! one message made of its two ranges, so nothing is rotated and the
//! message count is the same. Chunking (`chunk_bytes`) is not used.
//! Nothing is reduced.
//!
//! # Cost (ideal links)
//! All ranks move in lockstep, so with `N` dividing the buffer of `n`
//! bytes
//!
//! ```text
//! T = Σ_{k < ⌈log2 N⌉} (α + c_k · n/(N·B)),   c_k = min(2^k, N - 2^k)
//! ```
//!
//! `= ⌈log2 N⌉·α + (N-1)/N · n/B` up to rounding. [`cost_ps`] evaluates the
//! schedule exactly in the ideal-link model (also for uneven blocks).

use std::ops::Range;

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::layout::blocks_range;
use crate::payload::Payload;
use crate::schedule::{self, Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str =
    "Σ_k (α + c_k·n/(N·B)), c_k = min(2^k, N-2^k), k < ⌈log2 N⌉ = ⌈log2 N⌉·α + (N-1)/N·n/B";

/// Modelled time of one call in picoseconds under ideal links: the
/// schedule of the module docs evaluated exactly (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    schedule::cost(model, n, count, dtype.size_bytes(), |r| steps(n, count, r))
}

/// Every rank's buffer after the call: block `j` from rank `j`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Allgather, inputs, 0)
}

/// Bruck allgather, in place: on entry block `r` of rank `r`'s `buf` (see
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

/// Rank `r`'s steps, one per distance `d = 1, 2, 4, ... < N`.
fn steps(n: usize, count: usize, r: Rank) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        let c = d.min(n - d);
        let send = Part {
            peer: (r + n - d) % n,
            ranges: circular(count, n, r, c),
        };
        let recv = Part {
            peer: (r + d) % n,
            ranges: circular(count, n, r + d, c),
        };
        steps.push(Step::exchange(send, recv, Combine::Copy));
        d *= 2;
    }
    steps
}

/// The elements of blocks `first, first+1, ..., first+blocks-1 (mod N)`:
/// one range, or two when the run wraps past block `N-1`.
fn circular(count: usize, n: usize, first: usize, blocks: usize) -> Vec<Range<usize>> {
    let first = first % n;
    if first + blocks <= n {
        return vec![blocks_range(count, n, first, blocks)];
    }
    let head = n - first;
    vec![
        blocks_range(count, n, first, head),
        blocks_range(count, n, 0, blocks - head),
    ]
}

/// Bruck's allgather, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Bruck;

impl CollectiveAlgorithm for Bruck {
    fn name(&self) -> &str {
        "bruck"
    }

    fn collective(&self) -> Collective {
        Collective::Allgather
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}
