//! Tests of the demonstration algorithms: each misbehaves exactly as its
//! docs say on the simulator, and those that complete run on threads too.

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
        let expected =
            exact_reference(Collective::Allreduce, &inputs, ReduceOp::Sum, 0).expect("two ranks");
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
            let expected =
                exact_reference(Collective::Allgather, &inputs, ReduceOp::Sum, 0).expect("ranks");
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
            let expected = exact_reference(Collective::Allreduce, &inputs, op, 0).expect("ranks");
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
            .map(|r| Payload::from_vec((0..4).map(|i| (n * (r + i)) as f64).collect::<Vec<_>>()))
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
