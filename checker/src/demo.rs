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
mod tests {
    use super::*;
    use algorithms::collective::exact_reference;
    use algorithms::{DType, FabricError, Rank};
    use realnet::{Endpoint, JobOptions, LocalFabric};
    use topologies::LinkSpec;

    use engine::network::NetworkConfig;
    use engine::world::WorldConfig;

    /// Rank `r`'s input: distinct powers of two over all ranks, so that two
    /// sums of different sets of input elements never coincide.
    fn input(r: Rank, count: usize) -> Payload {
        Payload::from_vec(
            (0..count)
                .map(|i| 1i64 << (r * count + i))
                .collect::<Vec<_>>(),
        )
    }

    fn inputs(n: usize, count: usize) -> Vec<Payload> {
        (0..n).map(|r| input(r, count)).collect()
    }

    /// Runs `algorithm` on `inputs.len()` simulated ranks (ideal links,
    /// reductions at 1 GB/s). Rank `r` first computes `head_start[r]` bytes'
    /// worth (if given), which delays everything it sends. `None` for a
    /// rank that never finished.
    fn simulate(
        algorithm: &Algorithm,
        inputs: &[Payload],
        op: ReduceOp,
        head_start: &[u64],
    ) -> Vec<Option<Result<Payload, CollectiveError>>> {
        let config = WorldConfig::new(
            inputs.len(),
            NetworkConfig::Ideal(LinkSpec::new(1_000_000, 1e10).expect("valid link")),
        )
        .reduce_bytes_per_s(Some(1e9));
        let exec = engine::run(config, |fabric| {
            let mut buf = inputs[fabric.rank()].clone();
            let delay = head_start.get(fabric.rank()).copied().unwrap_or(0);
            async move {
                if delay > 0 {
                    fabric.compute(Work::Reduce { bytes: delay }).await?;
                }
                algorithm
                    .run(&fabric, &mut buf, op, &Params::default())
                    .await?;
                Ok(buf)
            }
        });
        exec.outputs
    }

    /// The outputs of a run in which every rank finished without error.
    fn finished(outputs: Vec<Option<Result<Payload, CollectiveError>>>) -> Vec<Payload> {
        outputs
            .into_iter()
            .enumerate()
            .map(|(r, out)| match out {
                Some(Ok(buf)) => buf,
                other => panic!("rank {r} did not finish cleanly: {other:?}"),
            })
            .collect()
    }

    fn wrong_per_rank(outputs: &[Payload], expected: &[Payload]) -> Vec<usize> {
        outputs
            .iter()
            .zip(expected)
            .map(|(o, e)| o.count_wrong(e))
            .collect()
    }

    #[test]
    fn buggy_ring_is_right_for_two_ranks() {
        for count in [1, 2, 7, 12] {
            let inputs = inputs(2, count);
            let expected = exact_reference(Collective::Allreduce, &inputs, ReduceOp::Sum, 0)
                .expect("two ranks");
            let outputs = finished(simulate(
                &Algorithm::new(BuggyRing),
                &inputs,
                ReduceOp::Sum,
                &[],
            ));
            assert_eq!(wrong_per_rank(&outputs, &expected), [0, 0], "count {count}");
        }
    }

    /// Traced by hand for N = 3: at step 0 rank `r` adds rank `r-1`'s block
    /// `r-1` into its block `r+1`, at step 1 rank `r+1`'s untouched block
    /// `r` into its block `r`, and the allgather then spreads the blocks
    /// each rank holds after step 0 that the ring expects after step 1. So
    /// every rank ends with block `j` holding `x_{j+1}[block j+1] +
    /// x_{j+2}[block j]`: two ranks' contributions, one from the wrong
    /// block. Every element is wrong on every rank, though the ranks agree.
    #[test]
    fn buggy_ring_is_wrong_for_three_ranks_in_every_element() {
        let (n, count) = (3, 6);
        let inputs = inputs(n, count);
        let expected =
            exact_reference(Collective::Allreduce, &inputs, ReduceOp::Sum, 0).expect("three ranks");
        let outputs = finished(simulate(
            &Algorithm::new(BuggyRing),
            &inputs,
            ReduceOp::Sum,
            &[],
        ));
        assert_eq!(wrong_per_rank(&outputs, &expected), [count; 3]);
        let x = |r: usize, i: usize| inputs[r % n].as_slice::<i64>().expect("data")[i];
        let len = count / n;
        let predicted: Vec<i64> = (0..count)
            .map(|i| {
                let (j, k) = (i / len, i % len);
                x(j + 1, ((j + 1) % n) * len + k) + x(j + 2, i)
            })
            .collect();
        for out in &outputs {
            assert_eq!(out.as_slice::<i64>(), Some(&predicted[..]));
        }
    }

    #[test]
    fn buggy_ring_is_wrong_for_four_and_five_ranks() {
        for n in [4, 5] {
            let inputs = inputs(n, 2 * n);
            let expected =
                exact_reference(Collective::Allreduce, &inputs, ReduceOp::Sum, 0).expect("ranks");
            let outputs = finished(simulate(
                &Algorithm::new(BuggyRing),
                &inputs,
                ReduceOp::Sum,
                &[],
            ));
            let wrong = wrong_per_rank(&outputs, &expected);
            assert!(
                wrong.iter().all(|&w| w > 0),
                "N = {n}: wrong per rank {wrong:?}"
            );
        }
    }

    /// With 7 elements on 3 ranks the blocks hold 3, 2 and 2: rank 1's
    /// first receive expects block 2 (2 elements) while rank 0 sends block 0
    /// (3 elements).
    #[test]
    fn buggy_ring_fails_with_a_shape_mismatch_on_uneven_blocks() {
        let outputs = simulate(
            &Algorithm::new(BuggyRing),
            &inputs(3, 7),
            ReduceOp::Sum,
            &[],
        );
        match &outputs[1] {
            Some(Err(CollectiveError::Fabric(FabricError::ShapeMismatch {
                from: 0,
                expected,
                got,
                ..
            }))) => {
                assert_eq!((expected.count, got.count), (2, 3));
            }
            other => panic!("rank 1 should fail with a shape mismatch: {other:?}"),
        }
    }

    #[test]
    fn send_all_first_gathers_every_block_with_eager_sends() {
        for n in 2..=5 {
            for count in [1, 7, 12] {
                let inputs = inputs(n, count);
                let expected = exact_reference(Collective::Allgather, &inputs, ReduceOp::Sum, 0)
                    .expect("ranks");
                let outputs = finished(simulate(
                    &Algorithm::new(SendAllFirst),
                    &inputs,
                    ReduceOp::Sum,
                    &[],
                ));
                assert_eq!(
                    wrong_per_rank(&outputs, &expected),
                    vec![0; n],
                    "N = {n}, count {count}"
                );
            }
        }
    }

    #[test]
    fn arrival_order_sum_is_exact_on_integers() {
        for n in 2..=5 {
            for op in [ReduceOp::Sum, ReduceOp::Max] {
                let inputs = inputs(n, 12);
                let expected =
                    exact_reference(Collective::Allreduce, &inputs, op, 0).expect("ranks");
                // Ranks send latest first, so rank 0 adds them in reverse.
                let head_start: Vec<u64> = (0..n as u64).map(|r| (n as u64 - r) * 10_000).collect();
                for delays in [&[][..], &head_start[..]] {
                    let outputs = finished(simulate(
                        &Algorithm::new(ArrivalOrderSum),
                        &inputs,
                        op,
                        delays,
                    ));
                    assert_eq!(
                        wrong_per_rank(&outputs, &expected),
                        vec![0; n],
                        "N = {n}, {op}"
                    );
                }
            }
        }
    }

    /// `1 + 1e8 = 1e8` and `-1e8 + 2 = -1e8` in `f32` (the spacing there is
    /// 8), so adding `1e8, -1e8, 1` to rank 0's `1` in that order gives 1,
    /// and in the reverse order 0.
    #[test]
    fn arrival_order_sum_adds_in_the_order_buffers_arrive() {
        let values = [1.0f32, 1e8, -1e8, 1.0];
        let inputs: Vec<Payload> = values.iter().map(|&v| Payload::from_vec(vec![v])).collect();
        let in_rank_order = [0, 10_000, 20_000, 30_000];
        let reversed = [0, 30_000, 20_000, 10_000];
        for (delays, sum) in [(in_rank_order, 1.0f32), (reversed, 0.0)] {
            let outputs = finished(simulate(
                &Algorithm::new(ArrivalOrderSum),
                &inputs,
                ReduceOp::Sum,
                &delays,
            ));
            for out in &outputs {
                assert_eq!(out.as_slice::<f32>(), Some(&[sum][..]), "delays {delays:?}");
            }
        }
    }

    #[test]
    fn demos_that_complete_run_on_threads() {
        let n = 4;
        let inputs = inputs(n, 9);
        for (algorithm, collective) in [
            (Algorithm::new(SendAllFirst), Collective::Allgather),
            (Algorithm::new(ArrivalOrderSum), Collective::Allreduce),
        ] {
            assert_eq!(algorithm.collective(), collective);
            let expected = exact_reference(collective, &inputs, ReduceOp::Sum, 0).expect("ranks");
            let fabrics = LocalFabric::group(n, &JobOptions::default());
            let outputs: Vec<Payload> = std::thread::scope(|s| {
                let handles: Vec<_> = fabrics
                    .iter()
                    .map(|f| {
                        let mut buf = inputs[f.rank()].clone();
                        let algorithm = &algorithm;
                        s.spawn(move || {
                            let params = Params::default();
                            f.block_on(algorithm.run(f, &mut buf, ReduceOp::Sum, &params))
                                .expect("the demo completes");
                            assert_eq!(f.finish(), Ok(()));
                            buf
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("rank thread"))
                    .collect()
            });
            assert_eq!(
                wrong_per_rank(&outputs, &expected),
                vec![0; n],
                "{}",
                algorithm.name()
            );
        }
    }

    #[test]
    fn reductions_refuse_an_average_of_integers() {
        for algorithm in [Algorithm::new(BuggyRing), Algorithm::new(ArrivalOrderSum)] {
            for out in simulate(&algorithm, &inputs(3, 6), ReduceOp::Avg, &[]) {
                assert!(
                    matches!(
                        out,
                        Some(Err(CollectiveError::UnsupportedOp {
                            op: ReduceOp::Avg,
                            dtype: DType::I64
                        }))
                    ),
                    "{}: {out:?}",
                    algorithm.name()
                );
            }
        }
    }

    /// Small whole numbers whose sums are multiples of `N`, so the average
    /// is exact in any order.
    #[test]
    fn averages_divide_once_by_the_world_size() {
        for (algorithm, n) in [
            (Algorithm::new(ArrivalOrderSum), 3),
            (Algorithm::new(ArrivalOrderSum), 4),
            (Algorithm::new(BuggyRing), 2),
        ] {
            let inputs: Vec<Payload> = (0..n)
                .map(|r| {
                    Payload::from_vec((0..4).map(|i| (n * (r + i)) as f64).collect::<Vec<_>>())
                })
                .collect();
            let expected =
                exact_reference(Collective::Allreduce, &inputs, ReduceOp::Avg, 0).expect("ranks");
            let outputs = finished(simulate(&algorithm, &inputs, ReduceOp::Avg, &[]));
            assert_eq!(
                wrong_per_rank(&outputs, &expected),
                vec![0; n],
                "{}",
                algorithm.name()
            );
        }
    }
}
