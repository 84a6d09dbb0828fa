//! A bidirectional ring allreduce, written once against `Fabric` and
//! registered so that simulation, model checking and real fabrics all run
//! it (see the README's "Write your own collective").
//!
//! The buffer's first half goes around the ring clockwise (`r -> r+1`),
//! the second half counter-clockwise (`r -> r-1`), at once and each at its
//! own pace: in each direction, `N-1` steps reduce (reduce-scatter) and
//! `N-1` copy (allgather). Half of each block's bytes travel on each direction of
//! every ring link, which matters where a link's two directions are
//! separate resources (rings, tori) and not where every GPU has its own
//! switch port (NVSwitch).
//!
//! [`BidirRingSendsFirst`] is the same algorithm with a planted bug: each
//! step waits for its send to complete before posting its receive. With
//! eager buffers that works; with rendezvous sends every rank waits in its
//! first send for a receive nobody has posted, and the model checker finds
//! the deadlock. [`BidirRingMirrored`] has another: each direction takes
//! its block positions from the other direction's formula (`r + k·d`
//! where the ring needs `r - k·d`), the same blocks on 2 ranks and wrong
//! ones from 3; the checker finds the wrong result and shrinks it to 3
//! ranks.

use std::ops::Range;

use algorithms::branches::join_branches;
use algorithms::collective::Params;
use algorithms::layout::block_range;
use algorithms::{
    AnyFabric, Collective, CollectiveAlgorithm, CollectiveError, CostModel, DType, Fabric, Payload,
    ReduceOp, Registry, Running, Shape, Work,
};

/// The catalogue and this example's three algorithms.
pub fn registry() -> Registry {
    Registry::builtin()
        .with(BidirRing)
        .and_then(|r| r.with(BidirRingSendsFirst))
        .and_then(|r| r.with(BidirRingMirrored))
        .expect("the example's names are new")
}

/// A bug planted in [`bidir_ring_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// None: the correct algorithm.
    None,
    /// Each send completes before its receive is posted.
    SendsFirst,
    /// Block positions mirrored: `r + k·d` where the ring needs `r - k·d`.
    Mirrored,
}

/// The bidirectional ring allreduce.
pub struct BidirRing;

impl CollectiveAlgorithm for BidirRing {
    fn name(&self) -> &str {
        "bidir_ring"
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
        Box::pin(async move { bidir_ring(&fabric, buf, op, params, false).await })
    }

    fn formula(&self) -> Option<&str> {
        Some(
            "2(N-1)·(α + n/(2N·B)) + (N-1)·γ·n/(2N); N = 2: 2·(α + n/(2B)) + γ·n/2 (both halves on the one link)",
        )
    }

    fn cost_ps(
        &self,
        model: &CostModel,
        n: usize,
        count: usize,
        dtype: DType,
        _params: &Params,
    ) -> Option<u64> {
        if n <= 1 || count == 0 {
            return Some(0);
        }
        // Exact when 2N divides the count (every block the same size).
        let block = (block_range(count - count / 2, n, 0).len() * dtype.size_bytes()) as u64;
        let (t, g) = (model.wire_ps(block), model.reduce_ps(block));
        let steps = 2 * (n as u64 - 1);
        if n == 2 {
            // Both directions share the one link each way, and the one
            // reduction engine: the two halves go step by step together.
            return Some(steps * (model.latency_ps + 2 * t) + (n as u64 - 1) * 2 * g);
        }
        Some(steps * (model.latency_ps + t) + (n as u64 - 1) * g)
    }
}

/// [`BidirRing`] with the planted bug: each send completes before its
/// receive is posted.
pub struct BidirRingSendsFirst;

impl CollectiveAlgorithm for BidirRingSendsFirst {
    fn name(&self) -> &str {
        "bidir_ring_sends_first"
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
        Box::pin(async move { bidir_ring(&fabric, buf, op, params, true).await })
    }
}

/// [`BidirRing`] with the planted mirrored-position bug ([`Bug::Mirrored`]).
pub struct BidirRingMirrored;

impl CollectiveAlgorithm for BidirRingMirrored {
    fn name(&self) -> &str {
        "bidir_ring_mirrored"
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
        Box::pin(async move { bidir_ring_with(&fabric, buf, op, params, Bug::Mirrored).await })
    }
}

/// One rank's bidirectional ring allreduce, in place on `buf`;
/// `sends_first` plants the bug of [`BidirRingSendsFirst`]. The two
/// halves go round independently (joined branches), so neither waits for
/// the other's slowest hop.
pub async fn bidir_ring<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
    sends_first: bool,
) -> Result<(), CollectiveError> {
    let bug = if sends_first {
        Bug::SendsFirst
    } else {
        Bug::None
    };
    bidir_ring_with(fabric, buf, op, params, bug).await
}

/// [`bidir_ring`] with `bug` planted.
pub async fn bidir_ring_with<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
    bug: Bug,
) -> Result<(), CollectiveError> {
    let (n, count) = (fabric.world_size(), buf.len());
    if n == 1 || count == 0 {
        return Ok(());
    }
    let (first, second) = (0..count / 2, count / 2..count);
    let mut cw = buf.extract(first.clone());
    let mut ccw = buf.extract(second.clone());
    let clockwise = Way {
        step: 1,
        tag: params.tag.phase(0),
    };
    let counter = Way {
        step: n - 1,
        tag: params.tag.phase(1),
    };
    // The two directions as branches of one join, which the model checker
    // explores as independent units (each with its own eager slots, as
    // two NCCL channels have their own connections); elsewhere a plain join.
    let ways = [
        one_way(fabric, &mut cw, op, clockwise, bug),
        one_way(fabric, &mut ccw, op, counter, bug),
    ];
    for way in join_branches(fabric, ways).await {
        way?;
    }
    buf.copy_from(first, &cw)?;
    buf.copy_from(second, &ccw)?;
    Ok(())
}

/// A direction round the ring: to rank `r + step` (mod N), with its tag.
#[derive(Clone, Copy)]
struct Way {
    step: usize,
    tag: algorithms::Tag,
}

/// A ring allreduce of `half` in one direction: `N-1` reduce-scatter
/// steps, then `N-1` allgather steps. At step `s` rank `r` sends block
/// `r - s·d` to `r + d` and receives block `r - (s+1)·d` from `r - d`
/// (`d` = ±1), reducing it in the first `N-1` steps and copying it after.
async fn one_way<F: Fabric>(
    fabric: &F,
    half: &mut Payload,
    op: ReduceOp,
    way: Way,
    bug: Bug,
) -> Result<(), CollectiveError> {
    let (n, r) = (fabric.world_size(), fabric.rank());
    let (to, from) = ((r + way.step) % n, (r + n - way.step) % n);
    // Block `r - k·d` for d = way.step (N - 1 is -1 mod N).
    let len = half.len();
    let back = match bug {
        // THE BUG: the step forward where the ring steps back.
        Bug::Mirrored => way.step,
        _ => n - way.step,
    };
    let block = |k: usize| -> Range<usize> { block_range(len, n, (r + back * k) % n) };
    // An average is a sum until it is complete, then divided once.
    let sum = if op == ReduceOp::Avg {
        ReduceOp::Sum
    } else {
        op
    };
    let dtype = half.shape().dtype;
    for s in 0..2 * (n - 1) {
        let (out, into) = (block(s), block(s + 1));
        let (outgoing, shape) = (half.extract(out), Shape::new(dtype, into.len()));
        let incoming = if bug == Bug::SendsFirst {
            // The bug: the receive is posted only once the send completed.
            fabric.send(to, way.tag, outgoing).await?;
            fabric.recv(from, way.tag, shape).await?
        } else {
            // Send and receive as one exchange (MPI_Sendrecv): the rank
            // only waits for both, which the model checker then knows.
            fabric.exchange(to, outgoing, from, shape, way.tag).await?
        };
        if s < n - 1 {
            half.reduce_from(into.clone(), &incoming, sum)?;
            let bytes = (into.len() * dtype.size_bytes()) as u64;
            fabric.compute(Work::Reduce { bytes }).await?;
            if s == n - 2 && op == ReduceOp::Avg {
                // This rank just completed the block.
                half.divide(into, n);
            }
        } else {
            half.copy_from(into, &incoming)?;
        }
    }
    Ok(())
}
