//! Ring allreduce: a reduce-scatter followed by an allgather around the
//! ring `r -> r+1 (mod N)`, chunked and pipelined.
//!
//! # Data layout
//! The buffer of `count` elements is cut into `N` segments; segment `j`
//! holds `count / N` elements, plus one if `j < count % N`. Each segment is
//! cut into `K` chunks of at most `chunk_elems` elements, where `K` is what
//! the largest segment needs; a chunk of a shorter segment may be empty and
//! is still sent (as a zero-byte message), so every rank runs the same
//! schedule.
//!
//! # Schedule
//! There are `S = 2(N-1)` steps. At step `s`, rank `r` sends segment
//! `(r - s) mod N` to `r+1` and receives segment `(r - s - 1) mod N` from
//! `r-1`. In the first `N-1` steps (reduce-scatter) the received chunk is
//! reduced into the local buffer; afterwards (allgather) it is copied, and
//! every received chunk is forwarded at the next step.
//!
//! Chunks stream through the ring. Number the `M = S·K` chunks a rank
//! sends `i = s·K + k`; it receives the same numbering. The rank runs
//! `M + W - 1` rounds; round `i` sends chunk `i` *concurrently with*
//! receiving chunk `i - W + 1` (one [`Fabric::exchange`]), then processes what it
//! received. `W = min(slots, K)` is the pipeline depth, like NCCL's
//! `NCCL_STEPS` slots per connection: at most `W` chunks of a rank are
//! ahead of what it has received, so messages in flight per link stay
//! bounded whatever the buffer size. Sending and receiving concurrently,
//! never "all sends first", is what lets a back-end with rendezvous or
//! finitely buffered sends run the same code (with `W = 1` a rendezvous
//! send always finds its receive posted).
//!
//! # Reduction order (floating point)
//! Segment `j` starts at rank `j` and travels `j, j+1, ..., j+N-1 (mod N)`;
//! each rank computes `received ⊕ local`. The result for an element of
//! segment `j` is therefore the left fold
//! `((x_j ⊕ x_{j+1}) ⊕ x_{j+2}) ⊕ ... ⊕ x_{j+N-1}` over ranks taken
//! cyclically from `j`, and for [`ReduceOp::Avg`] that sum divided by `N`
//! once, by the rank that completes the segment.
//! [`crate::reference::ring_allreduce_reference`] reproduces it bit for bit.
//!
//! # Cost (ideal links)
//! With per-pair links of latency `α` and bandwidth `B`, chunks of `c`
//! bytes (`t = c / B` to serialise one), `K` chunks per segment, pipeline
//! depth `W`, no reduction cost and `N` dividing the buffer evenly, the
//! completion time is
//!
//! ```text
//! T = M·t + α + ⌊(M - 1) / W⌋ · max(0, α - (W - 1)·t),   M = 2(N - 1)·K
//! ```
//!
//! the longest path through the max-plus system "a link sends chunks back
//! to back in order" (`L_i ≥ L_{i-1} + t`) and "chunk `i` is sent once chunk
//! `i - W` has arrived" (`L_i ≥ L_{i-W} + t + α`). With `K = 1` this is the
//! textbook `2(N-1)·(α + n/(N·B))`; when the window hides the latency
//! (`(W-1)·t ≥ α`) it is the bandwidth-optimal `2(N-1)/N · n/B + α`. With a
//! reduction cost `γ` per byte and `K = 1`, add `(N-1)·γ·n/N`.

use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Work};
use crate::layout::block_range;
use crate::payload::Payload;
use crate::reference::ring_allreduce_reference;

/// NCCL's `NCCL_STEPS`: the number of slots per connection (`src/include/device.h`).
pub const NCCL_STEPS: usize = 8;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "M·t + α + ⌊(M-1)/W⌋·max(0, α-(W-1)·t), M = 2(N-1)·K, t = chunk/B, W = min(slots, K); K = 1: 2(N-1)(α + n/(N·B)) + (N-1)·γ·n/N";

/// Number of messages one call sends in total over all ranks: each of the
/// `N` ranks sends `K` chunks at each of `2(N-1)` steps (zero for `N = 1`
/// or an empty buffer).
pub fn messages(count: usize, world_size: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
    if world_size <= 1 || count == 0 {
        return 0;
    }
    let plan = Plan::new(count, world_size, elem_bytes, chunk_bytes);
    let n = world_size as u64;
    n.saturating_mul(2 * (n - 1))
        .saturating_mul(plan.chunks_per_segment as u64)
}

/// Modelled time of one call under ideal links: the closed form of the
/// module docs with `t` for the largest chunk, plus one reduction of a
/// segment's worth of chunks per reduce-scatter step (exact for `K = 1` or
/// no reduction cost, when `N` divides the count and the chunk divides a
/// segment).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes();
    let plan = Plan::new(count, n, elem, params.chunk_bytes);
    let k = plan.chunks_per_segment as u64;
    let m = 2 * (n as u64 - 1).saturating_mul(k);
    let w = (params.slots.max(1) as u64).min(k);
    let chunk_bytes = (plan.chunk_elems * elem) as u64;
    let t = model.wire_ps(chunk_bytes);
    let alpha = model.latency_ps;
    let exposed = alpha.saturating_sub((w - 1).saturating_mul(t));
    let seg_bytes = (block_range(count, n, 0).len() * elem) as u64;
    let gamma = (n as u64 - 1).saturating_mul(model.reduce_ps(seg_bytes));
    // Saturating: absurd link parameters must give a huge cost, not a panic.
    m.saturating_mul(t)
        .saturating_add(alpha)
        .saturating_add(((m - 1) / w).saturating_mul(exposed))
        .saturating_add(gamma)
}

/// Every rank's buffer after the call: the ring's reduction order.
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    vec![ring_allreduce_reference(inputs, op); inputs.len()]
}

/// The chunking of one ring allreduce: segment bounds and chunk size.
#[derive(Clone, Copy, Debug)]
struct Plan {
    count: usize,
    world_size: usize,
    chunk_elems: usize,
    chunks_per_segment: usize,
}

impl Plan {
    fn new(count: usize, world_size: usize, elem_bytes: usize, chunk_bytes: u64) -> Plan {
        let largest = block_range(count, world_size, 0).len();
        // Never more than a segment, so chunk arithmetic cannot overflow.
        let chunk_elems = usize::try_from(chunk_bytes / elem_bytes as u64)
            .unwrap_or(usize::MAX)
            .clamp(1, largest.max(1));
        Plan {
            count,
            world_size,
            chunk_elems,
            chunks_per_segment: largest.div_ceil(chunk_elems),
        }
    }

    /// Elements of chunk `k` of segment `j` (possibly empty).
    fn chunk(&self, j: usize, k: usize) -> Range<usize> {
        let seg = block_range(self.count, self.world_size, j);
        let start = seg
            .start
            .saturating_add(k.saturating_mul(self.chunk_elems))
            .min(seg.end);
        let end = start.saturating_add(self.chunk_elems).min(seg.end);
        start..end
    }
}

/// Ring allreduce, in place: on return every rank's `buf` holds the
/// reduction of all ranks' inputs. All ranks must call it with buffers of
/// the same shape, the same `op` and the same parameters.
///
/// Works for any world size (1 is a no-op) and any count, including zero
/// and counts smaller than the world size. See the module docs for the
/// schedule, the reduction order and the cost.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let shape = buf.shape();
    let n = fabric.world_size();
    let r: Rank = fabric.rank();
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let plan = Plan::new(shape.count, n, shape.dtype.size_bytes(), params.chunk_bytes);
    let steps = 2 * (n - 1);
    let k_max = plan.chunks_per_segment;
    let total = steps * k_max;
    let window = params.slots.clamp(1, k_max);
    // Segment sent at step s; the one received at step s is sent at s + 1.
    let seg_sent = |s: usize| (r + n - s % n) % n;
    // Chunk i of the stream is chunk i % K of the segment of step i / K.
    let sent_range = |i: usize| plan.chunk(seg_sent(i / k_max), i % k_max);
    let received_range = |i: usize| plan.chunk(seg_sent(i / k_max + 1), i % k_max);

    for round in 0..total + window - 1 {
        let sending = round < total;
        let receiving = round.checked_sub(window - 1);
        // Reduce-scatter steps reduce what arrives, allgather steps copy it.
        let combine = |i: usize| (i / k_max < n - 1).then_some(op);
        // Sending and receiving together: one exchange within the buffer
        // (one completion, whose halves a model checker need not order; a
        // real transport may lend the sent part instead of copying it); a
        // receive alone combines straight into the buffer.
        let received = match (sending, receiving) {
            (true, Some(i)) => {
                fabric
                    .exchange_in_place(
                        next,
                        prev,
                        params.tag,
                        buf,
                        sent_range(round),
                        received_range(i),
                        combine(i),
                    )
                    .await?;
                Some(i)
            }
            (true, None) => {
                fabric
                    .send_from(next, params.tag, buf, sent_range(round))
                    .await?;
                None
            }
            (false, Some(i)) => {
                fabric
                    .recv_combine(prev, params.tag, buf, received_range(i), combine(i))
                    .await?;
                Some(i)
            }
            (false, None) => None,
        };
        let Some(i) = received else {
            continue;
        };
        if combine(i).is_some() {
            let range = received_range(i);
            let bytes = (range.len() * shape.dtype.size_bytes()) as u64;
            fabric.compute(Work::Reduce { bytes }).await?;
            if i / k_max == n - 2 && op == ReduceOp::Avg {
                buf.divide(range, n);
            }
        }
    }
    Ok(())
}

/// The ring allreduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Ring;

impl CollectiveAlgorithm for Ring {
    fn name(&self) -> &str {
        "ring"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Block
    }

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("ring")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_tile_each_segment() {
        let plan = Plan::new(103, 4, 4, 40); // 10 elements per chunk
        assert_eq!(plan.chunks_per_segment, 3); // largest segment has 26
        assert_eq!(plan.chunk(0, 0), 0..10);
        assert_eq!(plan.chunk(0, 2), 20..26);
        assert_eq!(plan.chunk(3, 2), 98..103); // the last segment has 25
        assert_eq!(messages(103, 4, 4, 40), 4 * 6 * 3);
        assert_eq!(messages(0, 4, 4, 40), 0);
        let tiny = Plan::new(2, 4, 8, 1); // count < N, chunk below one element
        assert_eq!(tiny.chunk_elems, 1);
        assert_eq!(tiny.chunk(3, 0), 2..2);
    }
}
