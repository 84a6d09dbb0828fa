//! Every (collective, algorithm) pair of the catalogue, checked the same
//! way:
//! - against its sequential reference, bit for bit, on every rank, for
//!   random world sizes 1..=64, counts, dtypes, ops, roots, chunk sizes,
//!   slots and ranks per node, in place and out of place;
//! - against its closed-form cost, to the picosecond, under ideal links on
//!   a fixed grid of world sizes and sizes where the formula is exact.
//!
//! One test per pair per property (`<collective>_<algorithm>_matches_reference`,
//! `<collective>_<algorithm>_closed_form`), so a pair can be run alone.

use algorithms::collective::defined_output;
use algorithms::payload::IntoBuffer;
use algorithms::{
    Algorithm, Collective, CostModel, DType, Fabric, Params, Payload, ReduceOp, Registry, Tag,
    Time, catalogue_algorithm,
};
use engine::{WorldConfig, run};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::support::link;

/// A float of random sign and mantissa with magnitude in `[2^-3, 2^3)`, or
/// zero (including `-0.0`): products of 64 stay finite and non-NaN, so a
/// comparison is about reduction order only.
fn float(rng: &mut ChaCha8Rng) -> f64 {
    match rng.random_range(0..16) {
        0 => 0.0,
        1 => -0.0,
        _ => {
            let mantissa = 1.0 + rng.random::<f64>();
            let sign = if rng.random::<bool>() { -1.0 } else { 1.0 };
            sign * mantissa * 2f64.powi(rng.random_range(-3..3))
        }
    }
}

/// One rank's random input.
pub fn draw(rng: &mut ChaCha8Rng, dtype: DType, count: usize) -> Payload {
    fn ints<T: IntoBuffer>(rng: &mut ChaCha8Rng, count: usize) -> Payload {
        Payload::from_vec(
            (0..count)
                .map(|_| T::from_i64(rng.next_u64() as i64))
                .collect::<Vec<T>>(),
        )
    }
    match dtype {
        DType::F32 => Payload::from_vec((0..count).map(|_| float(rng) as f32).collect::<Vec<_>>()),
        DType::F64 => Payload::from_vec((0..count).map(|_| float(rng)).collect::<Vec<_>>()),
        DType::I32 => ints::<i32>(rng, count),
        DType::I64 => ints::<i64>(rng, count),
        DType::U8 => ints::<u8>(rng, count),
        // Not in DType::ALL, so never drawn by these tests; leaves work.
        DType::Sym => ints::<algorithms::symbolic::Sym>(rng, count),
    }
}

/// One randomised check of a pair.
#[derive(Clone, Debug)]
pub struct Case {
    /// World size.
    pub n: usize,
    /// Full element count.
    pub count: usize,
    /// Element type.
    pub dtype: DType,
    /// Reduction.
    pub op: ReduceOp,
    /// Algorithm parameters.
    pub params: Params,
    /// In place or out of place.
    pub in_place: bool,
    /// Input seed.
    pub seed: u64,
}

/// Runs `case` in the simulator and compares every rank's defined output
/// with the reference, bit for bit.
pub fn check_reference(algorithm: &Algorithm, case: &Case) {
    let collective = algorithm.collective();
    let Case {
        n,
        count,
        dtype,
        op,
        params,
        in_place,
        seed,
    } = case.clone();
    let count = if collective == Collective::Alltoall {
        count / n * n
    } else {
        count
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let inputs: Vec<Payload> = (0..n).map(|_| draw(&mut rng, dtype, count)).collect();
    // The NCCL algorithms' reduction order depends on the fabric's
    // channels: they are checked on integers, where any order is exact.
    let expected = algorithm
        .reference(&inputs, op, &params)
        .or_else(|| {
            assert!(
                !matches!(dtype, DType::F32 | DType::F64),
                "no reference for floats"
            );
            algorithms::collective::exact_reference(collective, &inputs, op, params.root)
        })
        .expect("in the catalogue");
    let config = WorldConfig::new(
        n,
        engine::network::NetworkConfig::Ideal(link(1_000_000, 10_000_000_000)),
    )
    .reduce_bytes_per_s(Some(50e9));
    let exec = run(config, |fabric| {
        let input = inputs[fabric.rank()].clone();
        async move {
            let r = fabric.rank();
            if in_place {
                let mut buf = input;
                algorithm.run(&fabric, &mut buf, op, &params).await?;
                Ok((buf, defined_output(collective, r, n, count, params.root)))
            } else {
                // Out of place: the input is this rank's block for
                // allgather and gather, the whole buffer otherwise.
                let own = algorithms::layout::block_range(count, n, r);
                let arg = match collective {
                    Collective::Allgather | Collective::Gather => input.extract(own.clone()),
                    _ => input.clone(),
                };
                let before = arg.clone();
                let out = algorithm
                    .run_out_of_place(&fabric, &arg, count, op, &params)
                    .await?;
                assert_eq!(arg, before, "out of place must not modify the input");
                // Outputs of reduce-scatter and scatter are just block r.
                let (full, range) = match collective {
                    Collective::ReduceScatter | Collective::Scatter => {
                        let mut full = inputs_placeholder(&out, count);
                        full.copy_from(own.clone(), &out).expect("block fits");
                        (full, own)
                    }
                    _ => (out, defined_output(collective, r, n, count, params.root)),
                };
                Ok::<_, algorithms::CollectiveError>((full, range))
            }
        }
    });
    assert!(
        exec.deadlock.is_none(),
        "{collective} {algorithm} deadlocked on {case:?}:\n{}",
        exec.deadlock.unwrap()
    );
    for (r, out) in exec.outputs.into_iter().enumerate() {
        let (buf, range) = out
            .expect("finished")
            .unwrap_or_else(|e| panic!("rank {r}: {e} on {case:?}"));
        let got = buf.extract(range.clone());
        let want = expected[r].extract(range.clone());
        let wrong = got.count_wrong(&want);
        assert_eq!(
            wrong,
            0,
            "{collective} {algorithm}: rank {r}, {wrong} of {} elements differ on {case:?}",
            range.len()
        );
    }
}

/// A zero buffer of `count` elements shaped like `like`.
fn inputs_placeholder(like: &Payload, count: usize) -> Payload {
    Payload::zeros(like.shape().dtype, count, like.is_phantom())
}

/// The time the last rank finishes a phantom f32 call of `count` elements.
pub fn simulate_time(
    algorithm: &Algorithm,
    n: usize,
    count: usize,
    model: &CostModel,
    params: &Params,
) -> Time {
    let collective = algorithm.collective();
    let config = WorldConfig::new(
        n,
        engine::network::NetworkConfig::Ideal(
            topologies::LinkSpec::new(model.latency_ps, model.bandwidth_bytes_per_s).unwrap(),
        ),
    )
    .reduce_bytes_per_s(model.reduce_bytes_per_s);
    let exec = run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, count);
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, params)
            .await
    });
    assert!(
        exec.deadlock.is_none(),
        "{collective} {algorithm} deadlocked"
    );
    for out in &exec.outputs {
        if let Some(Err(e)) = out {
            panic!("{collective} {algorithm} failed: {e}");
        }
    }
    exec.finished_at
        .iter()
        .map(|t| t.expect("finished"))
        .max()
        .unwrap_or(Time::ZERO)
}

/// The closed-form grid: world sizes (powers of two and not), block sizes,
/// single-chunk and multi-chunk pipelines, with and without reduction cost,
/// two roots and two node sizes. Every pair's `cost_ps` must equal the
/// simulated time on all of it.
pub fn check_closed_form(algorithm: &Algorithm) {
    let collective = algorithm.collective();
    let bw = 100_000_000_000u64; // 10 ps per byte
    let mut checked = 0;
    for n in [1usize, 2, 3, 4, 5, 6, 7, 8, 12, 16] {
        for block in [1usize, 64, 1024] {
            for (chunk_bytes, reduce) in [(u64::MAX, None), (u64::MAX, Some(400e9)), (256, None)] {
                for (root, ranks_per_node) in [(0, 2), (n - 1, 4)] {
                    for latency_ps in [1_000_000u64, 5_000] {
                        let model = CostModel {
                            latency_ps,
                            bandwidth_bytes_per_s: bw as f64,
                            reduce_bytes_per_s: reduce,
                        };
                        let params = Params {
                            chunk_bytes,
                            slots: 4,
                            tag: Tag(0),
                            root,
                            ranks_per_node,
                            ..Params::default()
                        };
                        let count = n * block;
                        let got = simulate_time(algorithm, n, count, &model, &params).as_ps();
                        let want = algorithm
                            .cost_ps(&model, n, count, DType::F32, &params)
                            .expect("in the catalogue");
                        assert_eq!(
                            got, want,
                            "{collective} {algorithm}: simulated {got} ps, formula {want} ps for n={n} count={count} {params:?} {model:?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 0);
}

fn case_strategy(collective: Collective) -> impl Strategy<Value = Case> {
    let dtypes = prop::sample::select(DType::ALL.to_vec());
    let ops = prop::sample::select(ReduceOp::ALL.to_vec());
    (
        1usize..=64,
        prop_oneof![0usize..=8, 0usize..=200, 0usize..=3000],
        dtypes,
        ops,
        any::<prop::sample::Index>(),
        prop_oneof![1u64..=64, 1u64..=4096, Just(u64::MAX)],
        1usize..=9,
        1usize..=9,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            move |(
                n,
                count,
                dtype,
                op,
                root,
                chunk_bytes,
                slots,
                ranks_per_node,
                in_place,
                seed,
            )| {
                let op = if op.supports(dtype) {
                    op
                } else {
                    ReduceOp::Sum
                };
                let _ = collective;
                Case {
                    n,
                    count,
                    dtype,
                    op,
                    params: Params {
                        chunk_bytes,
                        slots,
                        tag: Tag(11),
                        root: root.index(n),
                        ranks_per_node,
                        ..Params::default()
                    },
                    in_place,
                    seed,
                }
            },
        )
}

macro_rules! catalogue_tests {
    ($($name:ident: $coll:ident, $alg:literal;)*) => {
        $(
            mod $name {
                use super::*;

                proptest! {
                    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

                    #[test]
                    fn matches_reference(case in case_strategy(Collective::$coll)) {
                        check_reference(&catalogue_algorithm(Collective::$coll, $alg), &case);
                    }
                }

                #[test]
                fn closed_form() {
                    check_closed_form(&catalogue_algorithm(Collective::$coll, $alg));
                }
            }
        )*

        /// The list above and the NCCL algorithms' below cover the whole
        /// catalogue.
        #[test]
        fn every_catalogue_entry_is_tested() {
            let tested = [$((Collective::$coll, $alg)),*];
            for e in Registry::builtin().iter() {
                let nccl = NCCL_TESTED.contains(&(e.collective(), e.name()));
                assert!(nccl || tested.contains(&(e.collective(), e.name())), "{e:?} has no tests");
            }
        }
    };
}

catalogue_tests! {
    allreduce_ring: Allreduce, "ring";
    allreduce_recursive_doubling: Allreduce, "recursive_doubling";
    allreduce_rabenseifner: Allreduce, "rabenseifner";
    allreduce_tree: Allreduce, "tree";
    allreduce_hierarchical: Allreduce, "hierarchical";
    reduce_scatter_ring: ReduceScatter, "ring";
    reduce_scatter_recursive_halving: ReduceScatter, "recursive_halving";
    reduce_scatter_pat: ReduceScatter, "pat";
    allgather_ring: Allgather, "ring";
    allgather_recursive_doubling: Allgather, "recursive_doubling";
    allgather_bruck: Allgather, "bruck";
    allgather_pat: Allgather, "pat";
    broadcast_binomial: Broadcast, "binomial";
    broadcast_chain: Broadcast, "chain";
    reduce_binomial: Reduce, "binomial";
    reduce_chain: Reduce, "chain";
    alltoall_pairwise: Alltoall, "pairwise";
    alltoall_bruck: Alltoall, "bruck";
    barrier_dissemination: Barrier, "dissemination";
    gather_binomial: Gather, "binomial";
    gather_linear: Gather, "linear";
    scatter_binomial: Scatter, "binomial";
    scatter_linear: Scatter, "linear";
    sendrecv_direct: SendRecv, "direct";
}

#[test]
fn alltoall_rejects_a_count_that_does_not_split_evenly() {
    for algorithm in Registry::builtin().of(Collective::Alltoall) {
        let config = WorldConfig::new(
            3,
            engine::network::NetworkConfig::Ideal(link(1_000, 1_000_000_000)),
        );
        let exec = run(config, |fabric| async move {
            let mut buf = Payload::from_vec(vec![0i32; 7]);
            algorithm
                .run(&fabric, &mut buf, ReduceOp::Sum, &Params::default())
                .await
        });
        for out in exec.outputs {
            let err = out
                .expect("returns at once")
                .expect_err("7 elements do not split over 3 ranks");
            assert!(
                err.to_string()
                    .contains("alltoall of 7 elements on 3 ranks"),
                "{algorithm}: {err}"
            );
        }
    }
}

#[test]
fn no_rank_leaves_a_barrier_before_the_last_one_enters() {
    // Rank `late` computes for 1 ms before entering; nobody may leave
    // before then.
    let late_ps = 1_000_000_000u64;
    for n in [2usize, 3, 5, 8, 13] {
        for late in [0, n / 2, n - 1] {
            let config = WorldConfig::new(
                n,
                engine::network::NetworkConfig::Ideal(link(1_000, 1_000_000_000)),
            )
            .reduce_bytes_per_s(Some(1e9));
            let exec = run(config, |fabric| async move {
                if fabric.rank() == late {
                    // 1e6 bytes at 1 GB/s: 1 ms of local work.
                    fabric
                        .compute(algorithms::Work::Reduce { bytes: 1_000_000 })
                        .await?;
                }
                let mut buf = Payload::phantom(DType::U8, 0);
                catalogue_algorithm(Collective::Barrier, "dissemination")
                    .run(&fabric, &mut buf, ReduceOp::Sum, &Params::default())
                    .await
            });
            for (r, t) in exec.finished_at.iter().enumerate() {
                let t = t.expect("finished").as_ps();
                assert!(
                    t >= late_ps,
                    "n={n}: rank {r} left at {t} ps, before rank {late} entered at {late_ps} ps"
                );
            }
        }
    }
}

/// The NCCL algorithms, checked against the order-independent reference
/// on integers (their reduction order follows the fabric's channels).
const NCCL_TESTED: [(Collective, &str); 13] = [
    (Collective::Allreduce, "nccl_ring"),
    (Collective::Allreduce, "nccl_tree"),
    (Collective::Allgather, "nccl_ring"),
    (Collective::ReduceScatter, "nccl_ring"),
    (Collective::Broadcast, "nccl_ring"),
    (Collective::Reduce, "nccl_ring"),
    (Collective::Allgather, "nccl_pat"),
    (Collective::ReduceScatter, "nccl_pat"),
    (Collective::SendRecv, "nccl_sendrecv"),
    (Collective::Allreduce, "nccl_nvls"),
    (Collective::Allreduce, "nccl_nvls_tree"),
    (Collective::Allreduce, "nccl_collnet_direct"),
    (Collective::Allreduce, "nccl_collnet_chain"),
];

/// Cases for an NCCL algorithm: integer types, counts up to several of
/// LL's 32 KiB steps, every protocol, 0 (all) to 5 channels.
fn nccl_case_strategy() -> impl Strategy<Value = Case> {
    (
        1usize..=12,
        prop_oneof![0usize..=8, 0usize..=3000, 20_000usize..=70_000],
        prop::sample::select(vec![DType::I32, DType::I64, DType::U8]),
        prop::sample::select(ReduceOp::ALL.to_vec()),
        any::<prop::sample::Index>(),
        prop::sample::select(algorithms::nccl::Protocol::ALL.to_vec()),
        0usize..=5,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(n, count, dtype, op, root, protocol, channels, in_place, seed)| Case {
                n,
                count,
                dtype,
                op: if op.supports(dtype) {
                    op
                } else {
                    ReduceOp::Sum
                },
                params: Params {
                    tag: Tag(5),
                    root: root.index(n),
                    protocol,
                    channels,
                    ..Params::default()
                },
                in_place,
                seed,
            },
        )
}

mod nccl_algorithms {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn match_the_exact_reference(case in nccl_case_strategy(), which in 0usize..NCCL_TESTED.len()) {
            let (collective, name) = NCCL_TESTED[which];
            check_reference(&catalogue_algorithm(collective, name), &case);
        }
    }
}
