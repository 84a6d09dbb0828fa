//! An algorithm run inline on shared memory (`Algorithm::run_inline`, as
//! `sim bench` runs the catalogue's recursive doubling and rings) gives
//! the same bits as the same call through the registry (`Algorithm::run`)
//! and as the algorithm's reference, on floats whose sum depends on the
//! order.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::{Algorithm, Collective, Fabric, Params, Payload, ReduceOp};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

/// The catalogue's inline algorithms, each as (collective, name).
const INLINE: [(Collective, &str); 3] = [
    (Collective::Allreduce, "ring"),
    (Collective::Allreduce, "recursive_doubling"),
    (Collective::Allgather, "ring"),
];

/// Rank `rank`'s input of `count` floats: magnitudes far apart, so that
/// any other reduction order rounds differently.
fn input(rank: usize, count: usize) -> Payload {
    let values: Vec<f32> = (0..count)
        .map(|i| {
            let scale = [1.0e8f32, 1.0, -1.0e8, 3.0e-3, 7.5][(rank + i) % 5];
            scale * (1.0 + (rank * 31 + i) as f32 / 97.0)
        })
        .collect();
    Payload::from_vec(values)
}

/// The parameters the calls run with: the defaults (one chunk per
/// segment at these counts) and 64-byte chunks in a window of 2 slots,
/// so that a ring pipelines (sends alone, exchanges, receives alone).
fn params_variants() -> [Params; 2] {
    [
        Params::default(),
        Params {
            chunk_bytes: 64,
            slots: 2,
            ..Params::default()
        },
    ]
}

/// Every rank's results of `algorithm`'s calls on `counts` (for each of
/// [`params_variants`]) run each way on `n` thread ranks: (through the
/// registry, inline), by rank.
fn both_ways(
    algorithm: &Algorithm,
    n: usize,
    counts: &[usize],
    job_id: u64,
) -> Vec<Vec<(Payload, Payload)>> {
    let opts = ShmOptions {
        job: JobOptions {
            job_id,
            timeout: Duration::from_secs(20),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ..ShmOptions::default()
    };
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let ranks: Vec<_> = group
            .iter()
            .map(|b| {
                let opts = &opts;
                s.spawn(move || {
                    let f = ShmFabric::connect(b, opts).expect("connect");
                    let mut seq = 1;
                    let mut call = |inline: bool, count: usize, params: &Params| {
                        f.begin_call(CallId::new(seq, algorithm)).expect("begin");
                        seq += 1;
                        let mut buf = input(f.rank(), count);
                        let ran = if inline {
                            f.block_on(algorithm.run_inline(&f, &mut buf, ReduceOp::Sum, params))
                        } else {
                            f.block_on(algorithm.run(&f, &mut buf, ReduceOp::Sum, params))
                        };
                        ran.unwrap_or_else(|e| panic!("{algorithm:?}: {e}"));
                        buf
                    };
                    let mut out = Vec::new();
                    for params in &params_variants() {
                        for &count in counts {
                            out.push((call(false, count, params), call(true, count, params)));
                        }
                    }
                    f.finish().expect("finish");
                    out
                })
            })
            .collect();
        ranks
            .into_iter()
            .map(|r| r.join().expect("a rank"))
            .collect()
    })
}

/// A payload's floats as bits, so that equality is bit for bit.
fn bits(p: &Payload) -> Vec<u32> {
    p.as_slice::<f32>()
        .expect("floats")
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

#[test]
fn the_catalogues_inline_algorithms_are_recursive_doubling_and_the_rings() {
    let registry = algorithms::Registry::builtin();
    let inline: Vec<String> = registry
        .iter()
        .filter(|a| a.inline().is_some())
        .map(|a| format!("{a:?}"))
        .collect();
    assert_eq!(
        inline,
        [
            "allreduce ring",
            "allreduce recursive_doubling",
            "allgather ring"
        ]
    );
}

#[test]
fn inline_calls_give_the_registrys_bits_and_the_reference() {
    let counts = [2, 5, 300];
    for (a, &(collective, name)) in INLINE.iter().enumerate() {
        let algorithm = algorithms::catalogue_algorithm(collective, name);
        assert!(algorithm.inline().is_some(), "{algorithm:?} is inline");
        for n in [2, 3] {
            let job_id = 0x1_0000 + (a as u64) * 4 + n as u64 + u64::from(std::process::id()) * 16;
            let results = both_ways(&algorithm, n, &counts, job_id);
            let calls = params_variants()
                .into_iter()
                .flat_map(|params| counts.iter().map(move |&count| (params, count)));
            for (k, (params, count)) in calls.enumerate() {
                let inputs: Vec<Payload> = (0..n).map(|r| input(r, count)).collect();
                let want = algorithm
                    .reference(&inputs, ReduceOp::Sum, &params)
                    .expect("a reference");
                for (rank, results) in results.iter().enumerate() {
                    let (registry, inline) = &results[k];
                    let what = format!(
                        "{algorithm:?}, {n} ranks, {count} floats, {} B chunks, rank {rank}",
                        params.chunk_bytes
                    );
                    assert_eq!(bits(inline), bits(registry), "{what}");
                    assert_eq!(bits(inline), bits(&want[rank]), "{what}");
                }
            }
        }
    }
}

#[test]
fn a_users_algorithm_runs_through_the_registry() {
    let alone = algorithms::Algorithm::from_fn(
        "alone_inline_test",
        Collective::Allreduce,
        |_fabric, _buf, _op, _params| Box::pin(async { Ok(()) }),
    );
    assert_eq!(alone.inline(), None);
}
