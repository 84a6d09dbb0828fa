//! Ring allreduce equals the sequential reference that follows its
//! documented reduction order, bit for bit, for random world sizes, counts,
//! dtypes, operators and chunk sizes.

use algorithms::payload::IntoBuffer;
use algorithms::reference::ring_allreduce_reference;
use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Tag, catalogue_algorithm};
use engine::{WorldConfig, run};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::link;

/// A float of random sign and mantissa with magnitude in `[2^-3, 2^3)`, or
/// zero: a product of 32 such values stays within f32's normal range and a
/// sum never overflows, so no NaN or infinity arises and the comparison is
/// about reduction order, not about NaN payloads.
fn float_bits(rng: &mut ChaCha8Rng) -> f64 {
    if rng.random_ratio(1, 16) {
        return 0.0;
    }
    let mantissa = 1.0 + rng.random::<f64>();
    let exponent = rng.random_range(-3..3);
    let sign = if rng.random::<bool>() { -1.0 } else { 1.0 };
    sign * mantissa * 2f64.powi(exponent)
}

fn draw(rng: &mut ChaCha8Rng, dtype: DType, count: usize) -> Payload {
    fn ints<T: IntoBuffer>(rng: &mut ChaCha8Rng, count: usize) -> Payload {
        Payload::from_vec(
            (0..count)
                .map(|_| T::from_i64(rng.next_u64() as i64))
                .collect::<Vec<T>>(),
        )
    }
    match dtype {
        DType::F32 => Payload::from_vec(
            (0..count)
                .map(|_| float_bits(rng) as f32)
                .collect::<Vec<_>>(),
        ),
        DType::F64 => Payload::from_vec((0..count).map(|_| float_bits(rng)).collect::<Vec<_>>()),
        DType::I32 => ints::<i32>(rng, count),
        DType::I64 => ints::<i64>(rng, count),
        DType::U8 => ints::<u8>(rng, count),
        // Not in DType::ALL, so never drawn by these tests; leaves work.
        DType::Sym => ints::<algorithms::symbolic::Sym>(rng, count),
    }
}

fn check(
    n: usize,
    count: usize,
    dtype: DType,
    op: ReduceOp,
    chunk_bytes: u64,
    slots: usize,
    seed: u64,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let inputs: Vec<Payload> = (0..n).map(|_| draw(&mut rng, dtype, count)).collect();
    let expected = ring_allreduce_reference(&inputs, op);
    let config = WorldConfig::new(
        n,
        engine::network::NetworkConfig::Ideal(link(1_000_000, 10_000_000_000)),
    )
    .reduce_bytes_per_s(Some(50e9));
    let ring = &catalogue_algorithm(Collective::Allreduce, "ring");
    let exec = run(config, |fabric| {
        let mut buf = inputs[fabric.rank()].clone();
        async move {
            let params = Params {
                chunk_bytes,
                slots,
                tag: Tag(3),
                ..Params::default()
            };
            ring.run(&fabric, &mut buf, op, &params).await.map(|()| buf)
        }
    });
    assert!(
        exec.deadlock.is_none(),
        "ring allreduce deadlocked: {:?}",
        exec.deadlock
    );
    for (rank, out) in exec.outputs.into_iter().enumerate() {
        let buf = out.expect("finished").expect("no error");
        let wrong = buf.count_wrong(&expected);
        assert_eq!(
            wrong, 0,
            "rank {rank}: {wrong} of {count} elements differ (n={n} {dtype} {op} chunk={chunk_bytes} seed={seed})"
        );
    }
}

fn dtype_and_op() -> impl Strategy<Value = (DType, ReduceOp)> {
    (
        prop::sample::select(DType::ALL.to_vec()),
        prop::sample::select(ReduceOp::ALL.to_vec()),
    )
        .prop_filter("avg is for floats only", |(d, op)| op.supports(*d))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn ring_allreduce_matches_its_reference(
        n in 1usize..=32,
        count in prop_oneof![0usize..=40, 0usize..=10_000],
        (dtype, op) in dtype_and_op(),
        chunk_bytes in prop_oneof![1u64..=64, 1u64..=40_000],
        slots in 1usize..=10,
        seed in any::<u64>(),
    ) {
        check(n, count, dtype, op, chunk_bytes, slots, seed);
    }
}

#[test]
fn every_dtype_and_op_on_awkward_shapes() {
    // Deterministic corners: count below N, count not divisible by N,
    // chunks of one element, a world of one and of two.
    for dtype in DType::ALL {
        for op in ReduceOp::ALL.into_iter().filter(|op| op.supports(dtype)) {
            for (n, count, chunk) in [
                (1, 5, 4),
                (2, 1, 1),
                (7, 3, 8),
                (5, 101, 12),
                (32, 33, u64::MAX),
            ] {
                check(n, count, dtype, op, chunk, 8, 99);
                check(n, count, dtype, op, chunk, 1, 98);
            }
        }
    }
}

#[test]
fn an_unsupported_op_is_an_error_not_a_wrong_result() {
    let config = WorldConfig::new(
        2,
        engine::network::NetworkConfig::Ideal(link(0, 1_000_000_000)),
    );
    let ring = &catalogue_algorithm(Collective::Allreduce, "ring");
    let exec = run(config, |fabric| async move {
        let mut buf = Payload::from_vec(vec![1i32, 2, 3]);
        ring.run(&fabric, &mut buf, ReduceOp::Avg, &Params::default())
            .await
    });
    for out in exec.outputs {
        let err = out.expect("finished").expect_err("avg on int32 fails");
        assert_eq!(
            err.to_string(),
            "reduction `avg` is not defined for dtype `int32`"
        );
    }
}
