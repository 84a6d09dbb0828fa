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
//! receiving chunk `i - W + 1` (futures joined), then processes what it
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

use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::payload::{Payload, Shape};

/// Parameters of [`ring_allreduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingAllreduce {
    /// Largest chunk in bytes; rounded down to whole elements, at least one.
    pub chunk_bytes: u64,
    /// Pipeline depth: how many chunks a rank may send ahead of what it has
    /// received (at least one).
    pub slots: usize,
    /// The tag every message of this collective carries.
    pub tag: Tag,
}

/// NCCL's `NCCL_STEPS`: the number of slots per connection (`src/include/device.h`).
pub const NCCL_STEPS: usize = 8;

impl Default for RingAllreduce {
    /// 512 KiB chunks (NCCL's default 4 MiB `NCCL_BUFFSIZE` divided into
    /// its 8 `NCCL_STEPS`), 8 slots, tag 0.
    fn default() -> Self {
        RingAllreduce {
            chunk_bytes: 512 * 1024,
            slots: NCCL_STEPS,
            tag: Tag(0),
        }
    }
}

/// The elements of segment `j` when `count` elements are split among
/// `world_size` ranks: the first `count % world_size` segments get one more.
pub fn segment_range(count: usize, world_size: usize, j: usize) -> Range<usize> {
    let base = count / world_size;
    let rem = count % world_size;
    let start = j * base + j.min(rem);
    let len = base + usize::from(j < rem);
    start..start + len
}

/// Number of messages one ring allreduce call sends in total over all
/// ranks: each of the `N` ranks sends `K` chunks at each of `2(N-1)` steps
/// (zero for `N = 1` or an empty buffer).
pub fn ring_allreduce_messages(
    count: usize,
    world_size: usize,
    elem_bytes: usize,
    chunk_bytes: u64,
) -> u64 {
    if world_size <= 1 || count == 0 {
        return 0;
    }
    let plan = Plan::new(count, world_size, elem_bytes, chunk_bytes);
    let n = world_size as u64;
    n.saturating_mul(2 * (n - 1))
        .saturating_mul(plan.chunks_per_segment as u64)
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
        let largest = segment_range(count, world_size, 0).len();
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
        let seg = segment_range(self.count, self.world_size, j);
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
pub async fn ring_allreduce<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: RingAllreduce,
) -> Result<(), CollectiveError> {
    let shape = buf.shape();
    if !op.supports(shape.dtype) {
        return Err(CollectiveError::UnsupportedOp {
            op,
            dtype: shape.dtype,
        });
    }
    let n = fabric.world_size();
    if n == 1 || shape.count == 0 {
        return Ok(());
    }
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
        let outgoing = (round < total).then(|| buf.extract(sent_range(round)));
        let receiving = round.checked_sub(window - 1);
        let send = async {
            match outgoing {
                Some(part) => fabric.send(next, params.tag, part).await,
                None => Ok(()),
            }
        };
        let recv = async {
            match receiving {
                Some(i) => {
                    let expect = Shape::new(shape.dtype, received_range(i).len());
                    fabric.recv(prev, params.tag, expect).await.map(Some)
                }
                None => Ok(None),
            }
        };
        let (sent, received) = futures_util::join!(send, recv);
        sent?;
        let (Some(i), Some(incoming)) = (receiving, received?) else {
            continue;
        };
        let range = received_range(i);
        let s = i / k_max;
        if s < n - 1 {
            buf.reduce_from(range.clone(), &incoming, op)?;
            let bytes = incoming.shape().bytes();
            fabric.compute(Work::Reduce { bytes }).await?;
            if s == n - 2 && op == ReduceOp::Avg {
                buf.divide(range, n);
            }
        } else {
            buf.copy_from(range, &incoming)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_buffer_in_order() {
        for count in 0..40 {
            for n in 1..9 {
                let mut next = 0;
                for j in 0..n {
                    let seg = segment_range(count, n, j);
                    assert_eq!(seg.start, next);
                    next = seg.end;
                }
                assert_eq!(next, count);
            }
        }
    }

    #[test]
    fn chunks_tile_each_segment() {
        let plan = Plan::new(103, 4, 4, 40); // 10 elements per chunk
        assert_eq!(plan.chunks_per_segment, 3); // largest segment has 26
        assert_eq!(plan.chunk(0, 0), 0..10);
        assert_eq!(plan.chunk(0, 2), 20..26);
        assert_eq!(plan.chunk(3, 2), 98..103); // the last segment has 25
        assert_eq!(ring_allreduce_messages(103, 4, 4, 40), 4 * 6 * 3);
        assert_eq!(ring_allreduce_messages(0, 4, 4, 40), 0);
        let tiny = Plan::new(2, 4, 8, 1); // count < N, chunk below one element
        assert_eq!(tiny.chunk_elems, 1);
        assert_eq!(tiny.chunk(3, 0), 2..2);
    }
}
