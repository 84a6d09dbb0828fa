//! Bruck's alltoall (Bruck, Ho, Kipnis, Upfal and Weathersby, 1997):
//! `⌈log2 N⌉` steps instead of `N - 1`, at the price of sending each block
//! up to `⌈log2 N⌉` times. Works for every `N`, not only powers of two.
//!
//! # Schedule
//! The buffer holds `N` equal blocks of `count / N` elements; block `j` is
//! for rank `j`.
//! 1. **Rotation.** Rank `r` rotates its blocks so that index `i` holds the
//!    block for rank `r + i (mod N)`: `tmp[i] = buf[(r + i) mod N]`.
//! 2. **Steps.** For `k = 0..⌈log2 N⌉`, rank `r` packs every index `i` with
//!    bit `k` set into one message, sends it to `r + 2^k (mod N)`,
//!    concurrently receives the same indices from `r - 2^k (mod N)` and
//!    unpacks them into those indices. A block at index `i` thus moves
//!    forward by the binary digits of `i`, `i` ranks in all, and stays at
//!    index `i`: afterwards index `i` of rank `r` holds the block that rank
//!    `r - i` sent to `r`.
//! 3. **Inverse rotation.** `buf[j] = tmp[(r - j) mod N]`.
//!
//! Every message carries the call's tag: the partners `r - 2^k` of the
//! different steps are distinct ranks (as `2^k < N`), so a receive can only
//! match the message of its own step.
//!
//! # Cost (ideal links)
//! Step `k` sends `m_k` blocks of `b` bytes, where `m_k` is the number of
//! indices in `0..N` with bit `k` set:
//! `m_k = ⌊N / 2^(k+1)⌋ · 2^k + max(0, N mod 2^(k+1) - 2^k)`.
//! Every rank runs the same schedule, so all start step `k` together, and a
//! step waits for its message before the next begins; local rotations and
//! packing cost nothing. Hence
//!
//! ```text
//! T = Σ_{k < ⌈log2 N⌉} (α + m_k · b / B)
//!   = ⌈log2 N⌉ · α + (N/2) · log2 N · n/(N·B)   for N a power of two
//! ```

use std::ops::Range;

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::{Payload, Shape};

use super::pairwise::check_count;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str =
    "Σ_{k<⌈log2 N⌉} (α + m_k·n/(N·B)), m_k = #{i < N : bit k of i set}; N = 2^p: p·α + (p/2)·n/B";

/// Bruck alltoall, in place: on entry block `j` is this rank's data for
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
    let r = fabric.rank();
    let mut tmp = permute(buf, n, |i| (r + i) % n)?;
    for k in 0..steps(n) {
        step(fabric, &mut tmp, k, params).await?;
    }
    *buf = permute(&tmp, n, |j| (r + n - j) % n)?;
    Ok(())
}

/// Step `k`: exchange the indices with bit `k` set with the ranks `2^k`
/// ahead (to) and behind (from).
async fn step<F: Fabric>(
    fabric: &F,
    tmp: &mut Payload,
    k: u32,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let r = fabric.rank();
    let distance = 1usize << k;
    let indices: Vec<usize> = (0..n).filter(|i| i & distance != 0).collect();
    let outgoing = pack(tmp, n, &indices)?;
    let expect = outgoing.shape();
    let (to, from) = ((r + distance) % n, (r + n - distance) % n);
    let received = fabric
        .exchange(to, outgoing, from, expect, params.tag)
        .await?;
    unpack(tmp, n, &indices, &received)
}

/// The elements of block `i` when the buffer holds `n` equal blocks.
fn block(buf: &Payload, n: usize, i: usize) -> Range<usize> {
    let len = buf.len() / n;
    i * len..(i + 1) * len
}

/// A new buffer whose block `i` is block `source(i)` of `buf`.
fn permute(
    buf: &Payload,
    n: usize,
    source: impl Fn(usize) -> usize,
) -> Result<Payload, CollectiveError> {
    let shape = buf.shape();
    let mut out = Payload::zeros(shape.dtype, shape.count, buf.is_phantom());
    for i in 0..n {
        out.copy_from(block(buf, n, i), &buf.extract(block(buf, n, source(i))))?;
    }
    Ok(out)
}

/// The blocks at `indices`, one after another in one message.
fn pack(buf: &Payload, n: usize, indices: &[usize]) -> Result<Payload, CollectiveError> {
    let len = buf.len() / n;
    let mut out = Payload::zeros(buf.shape().dtype, indices.len() * len, buf.is_phantom());
    for (slot, &i) in indices.iter().enumerate() {
        out.copy_from(slot * len..(slot + 1) * len, &buf.extract(block(buf, n, i)))?;
    }
    Ok(out)
}

/// Writes the blocks of a message built by [`pack`] back to `indices`.
fn unpack(
    buf: &mut Payload,
    n: usize,
    indices: &[usize],
    message: &Payload,
) -> Result<(), CollectiveError> {
    let len = buf.len() / n;
    for (slot, &i) in indices.iter().enumerate() {
        let range = block(buf, n, i);
        buf.copy_from(range, &message.extract(slot * len..(slot + 1) * len))?;
    }
    Ok(())
}

/// `⌈log2 N⌉`, the number of steps (zero for one rank).
fn steps(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// `m_k`: how many indices in `0..n` have bit `k` set, i.e. how many blocks
/// step `k` sends. Each full period of `2^(k+1)` indices contributes `2^k`,
/// and the partial period its part above `2^k`.
fn blocks_in_step(n: usize, k: u32) -> usize {
    let half = 1usize << k;
    let period = half << 1;
    n / period * half + (n % period).saturating_sub(half)
}

/// Modelled time of one call under ideal links: the sum over the
/// `⌈log2 N⌉` steps of `α + m_k·b/B` (zero for `N = 1` or an empty
/// buffer). Exact for every count that is a multiple of `N`.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let block_elems = count / n;
    (0..steps(n))
        .map(|k| {
            let bytes = Shape::new(dtype, blocks_in_step(n, k) * block_elems).bytes();
            model.message_ps(bytes)
        })
        .fold(0u64, u64::saturating_add)
}

/// Every rank's buffer after the call: block `j` is rank `j`'s block `r`.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Alltoall, inputs, params.root)
}

/// Bruck's alltoall, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Bruck;

impl CollectiveAlgorithm for Bruck {
    fn name(&self) -> &str {
        "bruck"
    }

    fn collective(&self) -> Collective {
        Collective::Alltoall
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_in_step_counts_set_bits() {
        for n in 1..70 {
            for k in 0..7 {
                let want = (0..n).filter(|i| i & (1 << k) != 0).count();
                assert_eq!(blocks_in_step(n, k), want, "n={n} k={k}");
            }
        }
    }
}
