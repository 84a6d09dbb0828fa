//! Pipelined chain reduce: the buffer is cut into chunks that stream along
//! the chain `root+N-1, root+N-2, ..., root (mod N)` towards the root, every
//! rank reducing its own chunk into the partial result and forwarding it,
//! with credit-based flow control bounding the chunks in flight per link.
//!
//! # Data layout
//! The buffer of `count` elements is cut into `K` chunks of `chunk_elems =
//! chunk_bytes / elem_size` elements (at least one, at most `count`); the
//! last chunk may be shorter.
//!
//! # Schedule
//! Ranks are numbered along the chain, `p = (r - root) mod N`; data flow
//! from `p + 1` to `p`, so rank `N - 1` is the head of the chain and the
//! root its end. For each chunk `i` in order, rank `p < N - 1` receives the
//! partial result of chunk `i` from `p + 1` and reduces it into its own
//! chunk; rank `p > 0` then sends its chunk to `p - 1`. `W = min(slots, K)`
//! is the window, like NCCL's `NCCL_STEPS` slots per connection: a sender
//! may have at most `W` chunks on a link that the receiver has not taken
//! yet. The receiver returns a credit (a zero-byte message tagged
//! `params.tag.phase(0)`) for chunk `i` as soon as it has taken it, before
//! reducing, and the sender waits for the credit of chunk `i - W` before
//! sending chunk `i`. Credits are only sent for chunks `i < K - W`, the ones
//! a later send waits for, so none is left over when the call returns.
//! Data carry `params.tag`.
//!
//! # Reduction order (floating point)
//! The received partial result is the left operand
//! ([`Payload::reduce_from`]), so with `x_p` the input of chain position
//! `p` every element of the root's result is the left fold
//! `((x_{N-1} ⊕ x_{N-2}) ⊕ ...) ⊕ x_0` along the chain, and for
//! [`ReduceOp::Avg`] that sum divided by `N` once, by the root.
//! [`reference()`] evaluates the same [`Order`] with [`fold_reference`].
//!
//! # Cost (ideal links)
//! Let `t = c / B` be the time to serialise a chunk of `c` bytes and `g`
//! the time to reduce one (`γ·c`). The head's link finishes chunk `i` at
//! `L_i`, the least solution of the max-plus system "a link sends chunks
//! back to back" (`L_i ≥ L_{i-1} + t`) and "chunk `i` is sent once the
//! credit of chunk `i - W` is back" (`L_i ≥ L_{i-W} + t + 2α`: the chunk's
//! latency plus the credit's). Its longest path takes either only unit
//! steps or as many `W`-steps as fit:
//!
//! ```text
//! L_{K-1} = K·t + ⌊(K - 1) / W⌋ · max(0, 2α - (W - 1)·t)
//! ```
//!
//! The first reducer (`p = N - 2`) finishes reducing the last chunk at
//! `L_{K-1} + g` if its compute engine keeps up with the link (`g ≤ t`),
//! and at `t + K·g` if reductions queue behind each other (the first chunk
//! arrives after `t`, then the engine is never idle). It sends every chunk
//! as soon as it is reduced, so the chunks leave it at least `max(t, g)`
//! apart, and every later rank receives them `α + t` later and reduces each
//! before the next arrives: by induction each further rank runs exactly
//! `α + t + g` behind its predecessor, and credits return just in time.
//! The root finishes reducing the last chunk at
//!
//! ```text
//! T = max(L_{K-1} + g, t + K·g) + α + (N - 2)·(α + t + g)
//! ```
//!
//! With `K = 1` this is `(N - 1)·(α + n/B + γ·n)`; with a window that
//! hides the credit round trip and no reduction cost it is
//! `(K + N - 2)·t + (N - 1)·α`. It is exact when the chunk divides the
//! buffer and either `K = 1`, `g ≤ t`, or the window hides the credit
//! round trip (`(W - 1)·t ≥ 2α`). When reductions are slower than the link
//! *and* the window binds, a rank returns credits only when it gets round
//! to a chunk, which slows its sender further; the real time is then
//! larger than this formula.

use crate::algorithm::{Chunking, CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::layout::ChainPlan as Plan;
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "max(K·t + ⌊(K-1)/W⌋·max(0, 2α-(W-1)·t) + g, t + K·g) + α + (N-2)(α+t+g), t = chunk/B, g = γ·chunk, W = min(slots, K); K = 1: (N-1)(α + n/B + γ·n)";

/// Pipelined chain reduce, in place: on return the root's `buf` holds the
/// reduction of all ranks' inputs (other ranks' buffers are scratch). All
/// ranks must call it with buffers of the same shape, the same `op` and the
/// same parameters. Works for any world size (1 is a no-op) and any count,
/// including zero.
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
    let plan = Plan::new(shape.count, shape.dtype.size_bytes(), params);
    let p = (fabric.rank() + n - params.root) % n;
    let upstream = (p + 1 < n).then(|| (fabric.rank() + 1) % n);
    let downstream = (p > 0).then(|| (fabric.rank() + n - 1) % n);
    let link = Link {
        data: params.tag,
        credit: params.tag.phase(0),
    };
    for i in 0..plan.chunks {
        if let Some(upstream) = upstream {
            reduce_chunk(fabric, buf, op, &plan, i, upstream, link).await?;
        }
        match downstream {
            Some(downstream) => pass_chunk(fabric, buf, &plan, i, downstream, link).await?,
            None if op == ReduceOp::Avg => buf.divide(plan.chunk(i), n),
            None => {}
        }
    }
    Ok(())
}

/// The tags of one call: data and credits.
#[derive(Clone, Copy, Debug)]
struct Link {
    data: Tag,
    credit: Tag,
}

/// Receives the partial result of chunk `i` from `upstream`, returns the
/// credit for its slot if a later send of `upstream` waits for it, and
/// reduces it into `buf` (the received value on the left).
async fn reduce_chunk<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    plan: &Plan,
    i: usize,
    upstream: Rank,
    link: Link,
) -> Result<(), CollectiveError> {
    let range = plan.chunk(i);
    let dtype = buf.shape().dtype;
    let incoming = fabric
        .recv(upstream, link.data, Shape::new(dtype, range.len()))
        .await?;
    // The credit goes before the reduction so that the sender's window
    // does not wait on this rank's compute engine.
    if i + plan.window < plan.chunks {
        let credit = Payload::phantom(dtype, 0);
        fabric.send(upstream, link.credit, credit).await?;
    }
    buf.reduce_from(range, &incoming, op)?;
    let bytes = incoming.shape().bytes();
    fabric.compute(Work::Reduce { bytes }).await?;
    Ok(())
}

/// Sends chunk `i` of `buf` to `downstream` once the slot of chunk `i - W`
/// is free.
async fn pass_chunk<F: Fabric>(
    fabric: &F,
    buf: &Payload,
    plan: &Plan,
    i: usize,
    downstream: Rank,
    link: Link,
) -> Result<(), CollectiveError> {
    if i >= plan.window {
        let expect = Shape::new(buf.shape().dtype, 0);
        fabric.recv(downstream, link.credit, expect).await?;
    }
    let part = buf.extract(plan.chunk(i));
    fabric.send(downstream, link.data, part).await?;
    Ok(())
}

/// Modelled time of one call under ideal links: the closed form of the
/// module docs with `t` and `g` for a full chunk (exact when the chunk
/// divides the buffer and `K = 1`, reductions keep up with the link, or
/// the window hides the credit round trip).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let elem = dtype.size_bytes();
    let plan = Plan::new(count, elem, params);
    let chunk_bytes = (plan.chunk_elems * elem) as u64;
    let t = model.wire_ps(chunk_bytes);
    let g = model.reduce_ps(chunk_bytes);
    let alpha = model.latency_ps;
    let k = plan.chunks as u64;
    let w = plan.window as u64;
    let stall = (2 * alpha).saturating_sub((w - 1).saturating_mul(t));
    let head_link = k
        .saturating_mul(t)
        .saturating_add(((k - 1) / w).saturating_mul(stall));
    let hops = (n as u64 - 2).saturating_mul(alpha + t + g);
    let first_reduced = head_link
        .saturating_add(g)
        .max(t.saturating_add(k.saturating_mul(g)));
    first_reduced.saturating_add(hops).saturating_add(alpha)
}

/// Every rank's buffer after the call: the root holds the chain's
/// reduction (see the module docs for the order); other ranks' buffers are
/// scratch and are given as their inputs.
pub fn reference(inputs: &[Payload], op: ReduceOp, params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let root = params.root;
    let order = Order::left_fold((0..n).rev().map(|p| (p + root) % n));
    let mut out = inputs.to_vec();
    out[root] = fold_reference(inputs, op, &[(0..count, order)]);
    out
}

/// The pipelined chain reduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Chain;

impl CollectiveAlgorithm for Chain {
    fn name(&self) -> &str {
        "chain"
    }

    fn collective(&self) -> Collective {
        Collective::Reduce
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
