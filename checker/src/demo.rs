//! The demonstration algorithms of `sim check` ([`BuggyRing`],
//! [`SendAllFirst`], [`ArrivalOrderSum`]): one wrong, one that deadlocks
//! without eager buffering, one whose reduction order depends on the
//! schedule. They are registered like a user's algorithms, in the
//! registry `sim check` uses ([`with_demos`]), and nowhere else. Each is written against the [`Fabric`]
//! trait exactly like the catalogue's algorithms (no clock, no threads,
//! concurrency by joining futures) and follows the catalogue's in-place
//! buffer conventions (`algorithms::collective`), so the checker runs them
//! the same way and finds their bugs.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use algorithms::collective::reduction_is_trivial;
use algorithms::layout::block_range;
use algorithms::{
    Algorithm, AnyFabric, Collective, CollectiveAlgorithm, CollectiveError, Fabric, Params,
    Payload, ReduceOp, Registry, RegistryError, Running, Shape, Work,
};

/// The demonstration algorithms, as registry handles.
pub fn algorithms() -> [Algorithm; 3] {
    [
        Algorithm::new(BuggyRing),
        Algorithm::new(SendAllFirst),
        Algorithm::new(ArrivalOrderSum),
    ]
}

/// `registry` with the demonstration algorithms added (what `sim check`
/// resolves names in); an error if the registry already has one of their
/// names.
pub fn with_demos(registry: &Registry) -> Result<Registry, RegistryError> {
    let mut out = registry.clone();
    for demo in algorithms() {
        out.insert(demo)?;
    }
    Ok(out)
}

/// Ring allreduce with an off-by-one block index: at reduce-scatter step
/// `s` rank `r` reduces into block `(r - s + 1) mod N` instead of
/// `(r - s - 1) mod N`, right for 2 ranks, wrong from 3.
#[derive(Clone, Copy, Debug)]
pub struct BuggyRing;

impl CollectiveAlgorithm for BuggyRing {
    fn name(&self) -> &str {
        "buggy_ring"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { buggy_ring(&fabric, buf, op, params).await })
    }
}

/// Allgather in which every rank sends its block to every other rank
/// before receiving: it needs one eager slot per connection and deadlocks
/// with rendezvous sends.
#[derive(Clone, Copy, Debug)]
pub struct SendAllFirst;

impl CollectiveAlgorithm for SendAllFirst {
    fn name(&self) -> &str {
        "send_all_first"
    }

    fn collective(&self) -> Collective {
        Collective::Allgather
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        _op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { send_all_first(&fabric, buf, params).await })
    }
}

/// Allreduce through rank 0, which adds the buffers in the order they
/// arrive: right sums, but floating-point bits that depend on the schedule.
#[derive(Clone, Copy, Debug)]
pub struct ArrivalOrderSum;

impl CollectiveAlgorithm for ArrivalOrderSum {
    fn name(&self) -> &str {
        "arrival_order_sum"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { arrival_order_sum(&fabric, buf, op, params).await })
    }
}

/// [`BuggyRing`]'s program: [`unchunked_ring`] with the planted bug, each
/// step's send and receive futures joined.
async fn buggy_ring<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    unchunked_ring(fabric, buf, op, params, RingPairing::Joined, true).await
}

/// How each step of [`unchunked_ring`] sends and receives at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingPairing {
    /// The send's and the receive's futures joined by the algorithm.
    Joined,
    /// One [`Fabric::exchange`].
    Exchange,
}

/// The catalogue's ring allreduce, unchunked (`algorithms::allreduce::ring`
/// with one chunk per segment and a window of one): at step `s` rank `r`
/// sends block `(r - s) mod N` to `r + 1` and receives block
/// `(r - s - 1) mod N` from `r - 1`, reducing it in the first `N - 1`
/// steps and copying it in the last `N - 1`. Tests of the checker use it
/// with either [`RingPairing`] to compare what the two explore.
///
/// With `off_by_one` it is [`BuggyRing`]: at reduce-scatter step `s` rank
/// `r` reduces what it receives into block `(r - s + 1) mod N` instead of
/// `(r - s - 1) mod N`. The two are the same block for `N = 2`, so the
/// sums are right there; from `N = 3` on the partial sums land in the
/// wrong blocks and the result is wrong. When `N` does not divide the
/// count, the wrong block may also differ in length from the one sent,
/// and that receive fails with a shape mismatch.
pub async fn unchunked_ring<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
    pairing: RingPairing,
    off_by_one: bool,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let shape = buf.shape();
    let n = fabric.world_size();
    let r = fabric.rank();
    let next = (r + 1) % n;
    let prev = (r + n - 1) % n;
    let block = |j: usize| block_range(shape.count, n, j % n);
    for s in 0..2 * (n - 1) {
        // Send block `(r - s) mod N`, receive block `(r - s - 1) mod N`.
        let sent = r + 2 * n - s;
        let mut received = r + 2 * n - s - 1;
        if off_by_one && s < n - 1 {
            received = r + 2 * n - s + 1; // THE BUG: `+ 1` where the ring has `- 1`.
        }
        let range = block(received);
        let expect = Shape::new(shape.dtype, range.len());
        let outgoing = buf.extract(block(sent));
        let incoming = match pairing {
            RingPairing::Exchange => {
                fabric
                    .exchange(next, outgoing, prev, expect, params.tag)
                    .await?
            }
            RingPairing::Joined => {
                let (sent, incoming) = futures_util::join!(
                    fabric.send(next, params.tag, outgoing),
                    fabric.recv(prev, params.tag, expect)
                );
                sent?;
                incoming?
            }
        };
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

/// Allgather in which rank `r` first sends its block to every other rank,
/// `r+1, r+2, ...` (mod `N`), awaiting each send before the next, and only
/// then receives every other rank's block in the same order. Every rank
/// sends before it receives, so it completes only while each send finds a
/// free eager slot; with rendezvous sends every rank waits in its first
/// send for a receiver that is itself waiting in a send: a deadlock.
async fn send_all_first<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    params: &Params,
) -> Result<(), CollectiveError> {
    let shape = buf.shape();
    let n = fabric.world_size();
    if n == 1 || buf.is_empty() {
        return Ok(());
    }
    let r = fabric.rank();
    let mine = block_range(shape.count, n, r);
    for k in 1..n {
        fabric
            .send((r + k) % n, params.tag, buf.extract(mine.clone()))
            .await?;
    }
    for k in 1..n {
        let from = (r + k) % n;
        let range = block_range(shape.count, n, from);
        let expect = Shape::new(shape.dtype, range.len());
        let block = fabric.recv(from, params.tag, expect).await?;
        buf.copy_from(range, &block)?;
    }
    Ok(())
}

/// Allreduce through rank 0: every other rank sends it its whole buffer
/// (phase 0 of the call's tag) and receives the result (phase 1). Rank 0
/// posts all `N-1` receives at once and reduces each buffer into its own as
/// it arrives (`acc = incoming ⊕ acc`), then sends the result to ranks
/// `1, 2, ...` in turn. The sums are right for any schedule, but the
/// reduction order, and so the floating-point bits, follows the arrival
/// order. For [`ReduceOp::Avg`] rank 0 divides by `N` once, at the end.
async fn arrival_order_sum<F: Fabric>(
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
    let whole = 0..shape.count;
    let (gather, broadcast) = (params.tag.phase(0), params.tag.phase(1));
    if fabric.rank() != 0 {
        fabric.send(0, gather, buf.extract(whole.clone())).await?;
        let result = fabric.recv(0, broadcast, shape).await?;
        buf.copy_from(whole, &result)?;
        return Ok(());
    }
    let mut pending: Vec<_> = (1..n)
        .map(|j| Some(Box::pin(fabric.recv(j, gather, shape))))
        .collect();
    loop {
        let arrived = arrivals(&mut pending).await;
        if arrived.is_empty() {
            break;
        }
        for incoming in arrived {
            let incoming = incoming?;
            buf.reduce_from(whole.clone(), &incoming, op)?;
            let bytes = incoming.shape().bytes();
            fabric.compute(Work::Reduce { bytes }).await?;
        }
    }
    if op == ReduceOp::Avg {
        buf.divide(whole.clone(), n);
    }
    for j in 1..n {
        fabric
            .send(j, broadcast, buf.extract(whole.clone()))
            .await?;
    }
    Ok(())
}

/// Waits until at least one of the pending futures in `slots` completes
/// and returns the outputs of all that have, emptying their slots (an
/// empty list at once when no slot is pending). Every pending future is
/// polled at each wake-up, so all of them are posted at the first poll;
/// outputs that became ready between the same two polls come in slot
/// order. Under an executor that polls a rank after each delivery (the
/// simulator does) that is the arrival order.
async fn arrivals<Fut: Future>(slots: &mut [Option<Pin<Box<Fut>>>]) -> Vec<Fut::Output> {
    std::future::poll_fn(|cx| {
        let mut ready = Vec::new();
        let mut pending = false;
        for slot in slots.iter_mut() {
            let Some(fut) = slot else { continue };
            match fut.as_mut().poll(cx) {
                Poll::Ready(out) => {
                    ready.push(out);
                    *slot = None;
                }
                Poll::Pending => pending = true,
            }
        }
        if ready.is_empty() && pending {
            Poll::Pending
        } else {
            Poll::Ready(ready)
        }
    })
    .await
}

#[cfg(test)]
mod tests;
