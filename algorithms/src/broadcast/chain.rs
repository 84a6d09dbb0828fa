//! Pipelined chain broadcast: the buffer is cut into chunks that stream
//! down the chain `root, root+1, ..., root+N-1 (mod N)`, every rank
//! forwarding a chunk as soon as it has it, with credit-based flow control
//! bounding the chunks in flight on each link.
//!
//! # Data layout
//! The buffer of `count` elements is cut into `K` chunks of `chunk_elems =
//! chunk_bytes / elem_size` elements (at least one, at most `count`); the
//! last chunk may be shorter.
//!
//! # Schedule
//! Ranks are numbered along the chain, `p = (r - root) mod N`. For each
//! chunk `i` in order, rank `p > 0` receives chunk `i` from `p - 1`, and
//! rank `p < N - 1` sends it to `p + 1`. `W = min(slots, K)` is the window,
//! like NCCL's `NCCL_STEPS` slots per connection: a sender may have at most
//! `W` chunks on a link that the receiver has not taken yet. The receiver
//! returns a credit (a zero-byte message tagged `params.tag.phase(0)`) for
//! chunk `i` as soon as it has taken it, and the sender waits for the
//! credit of chunk `i - W` before sending chunk `i`. Credits are only sent
//! for chunks `i < K - W`, the ones a later send waits for, so none is left
//! over when the call returns. Data carry `params.tag`.
//!
//! # Cost (ideal links)
//! Let `t = c / B` be the time to serialise a chunk of `c` bytes. The
//! root's link finishes chunk `i` at `L_i`, the least solution of the
//! max-plus system "a link sends chunks back to back" (`L_i ≥ L_{i-1} + t`)
//! and "chunk `i` is sent once the credit of chunk `i - W` is back"
//! (`L_i ≥ L_{i-W} + t + 2α`: the chunk's latency plus the credit's). Its
//! longest path takes either only unit steps or as many `W`-steps as fit:
//!
//! ```text
//! L_{K-1} = K·t + ⌊(K - 1) / W⌋ · max(0, 2α - (W - 1)·t)
//! ```
//!
//! Every further link obeys the same two constraints and in addition
//! receives chunk `i` at `α` after the previous link finished it, so by
//! induction it runs exactly `α + t` behind its predecessor, and its credits
//! return just in time for that. The last rank receives the last chunk at
//!
//! ```text
//! T = L_{K-1} + (N - 2)·(α + t) + α
//! ```
//!
//! With `K = 1` this is `(N - 1)·(α + n/B)`; with a window that hides the
//! credit round trip (`(W - 1)·t ≥ 2α`) it is `(K + N - 2)·t + (N - 1)·α`.
//! It is exact when the chunk divides the buffer (a shorter last chunk
//! makes the real time slightly smaller).

use crate::algorithm::{Chunking, CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag};
use crate::layout::ChainPlan as Plan;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "K·t + ⌊(K-1)/W⌋·max(0, 2α-(W-1)·t) + (N-2)(α+t) + α, t = chunk/B, W = min(slots, K); K = 1: (N-1)(α + n/B)";

/// Pipelined chain broadcast, in place: on return every rank's `buf` holds
/// the root's input. All ranks must call it with buffers of the same shape
/// and the same parameters; `op` is unused. Works for any world size (1 is
/// a no-op) and any count, including zero.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let count = buf.len();
    if n == 1 || count == 0 {
        return Ok(());
    }
    let plan = Plan::new(count, buf.shape().dtype.size_bytes(), params);
    let p = (fabric.rank() + n - params.root) % n;
    let prev = (p > 0).then(|| (fabric.rank() + n - 1) % n);
    let next = (p + 1 < n).then(|| (fabric.rank() + 1) % n);
    let credit = params.tag.phase(0);
    for i in 0..plan.chunks {
        if let Some(prev) = prev {
            take_chunk(fabric, buf, &plan, i, prev, params.tag, credit).await?;
        }
        if let Some(next) = next {
            // The slot of chunk `i - W` must be free before chunk `i` goes.
            if i >= plan.window {
                fabric
                    .recv(next, credit, Shape::new(buf.shape().dtype, 0))
                    .await?;
            }
            // Sent from the buffer: a real transport lends the chunk or
            // writes it out without a copy of its own.
            fabric
                .send_from(next, params.tag, buf, plan.chunk(i))
                .await?;
        }
    }
    Ok(())
}

/// Receives chunk `i` from `prev` into `buf` and, if a later send of
/// `prev` waits for it, returns the credit for its slot.
async fn take_chunk<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    plan: &Plan,
    i: usize,
    prev: Rank,
    tag: Tag,
    credit: Tag,
) -> Result<(), CollectiveError> {
    let range = plan.chunk(i);
    let dtype = buf.shape().dtype;
    let incoming = fabric
        .recv(prev, tag, Shape::new(dtype, range.len()))
        .await?;
    if i + plan.window < plan.chunks {
        fabric
            .send(prev, credit, Payload::phantom(dtype, 0))
            .await?;
    }
    buf.copy_from(range, &incoming)?;
    // Its memory serves the next chunks on a real transport.
    fabric.recycle(incoming);
    Ok(())
}

/// Modelled time of one call under ideal links: the closed form of the
/// module docs with `t` for a full chunk (exact when the chunk divides the
/// buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes();
    let plan = Plan::new(count, elem, params);
    let t = model.wire_ps((plan.chunk_elems * elem) as u64);
    let alpha = model.latency_ps;
    let k = plan.chunks as u64;
    let w = plan.window as u64;
    let stall = (2 * alpha).saturating_sub((w - 1).saturating_mul(t));
    let first_link = k
        .saturating_mul(t)
        .saturating_add(((k - 1) / w).saturating_mul(stall));
    let hops = (n as u64 - 2).saturating_mul(alpha + t);
    first_link.saturating_add(hops).saturating_add(alpha)
}

/// Every rank's buffer after the call: the root's input everywhere.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Broadcast, inputs, params.root)
}

/// The pipelined chain broadcast, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Chain;

impl CollectiveAlgorithm for Chain {
    fn name(&self) -> &str {
        "chain"
    }

    fn collective(&self) -> Collective {
        Collective::Broadcast
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn messages_bound(&self, n: usize, count: usize, elem: usize, chunk: u64) -> u64 {
        messages_bound::per_chunk(n, count, elem, chunk)
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("ring")
    }
}
