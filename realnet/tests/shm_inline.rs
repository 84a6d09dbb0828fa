//! An algorithm run inline on shared memory (`Algorithm::run_inline`, as
//! `sim bench` runs the catalogue's recursive doubling) gives the same
//! bits as the same call through the registry (`Algorithm::run`) and as
//! the algorithm's reference, on floats whose sum depends on the order.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::{Collective, Fabric, Params, Payload, ReduceOp};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

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

/// Every rank's results of `counts` calls run each way on `n` thread
/// ranks: (through the registry, inline), by rank.
fn both_ways(n: usize, counts: &[usize], job_id: u64) -> Vec<Vec<(Payload, Payload)>> {
    let opts = ShmOptions {
        job: JobOptions {
            job_id,
            timeout: Duration::from_secs(20),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ..ShmOptions::default()
    };
    let algorithm = algorithms::catalogue_algorithm(Collective::Allreduce, "recursive_doubling");
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let ranks: Vec<_> = group
            .iter()
            .map(|b| {
                let (opts, algorithm) = (&opts, &algorithm);
                s.spawn(move || {
                    let f = ShmFabric::connect(b, opts).expect("connect");
                    let params = Params::default();
                    let mut seq = 1;
                    let mut call = |inline: bool, count: usize| {
                        f.begin_call(CallId::new(seq, algorithm)).expect("begin");
                        seq += 1;
                        let mut buf = input(f.rank(), count);
                        let ran = if inline {
                            f.block_on(algorithm.run_inline(&f, &mut buf, ReduceOp::Sum, &params))
                        } else {
                            f.block_on(algorithm.run(&f, &mut buf, ReduceOp::Sum, &params))
                        };
                        ran.expect("allreduce");
                        buf
                    };
                    let out: Vec<_> = counts
                        .iter()
                        .map(|&count| (call(false, count), call(true, count)))
                        .collect();
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

#[test]
fn recursive_doubling_is_the_catalogues_inline_algorithm() {
    let registry = algorithms::Registry::builtin();
    let inline: Vec<String> = registry
        .iter()
        .filter(|a| a.inline().is_some())
        .map(|a| format!("{a:?}"))
        .collect();
    assert_eq!(inline, ["allreduce recursive_doubling"]);
}

#[test]
fn inline_calls_give_the_registrys_bits_and_the_reference() {
    let counts = [2, 5, 300];
    for (n, job_id) in [(2, 0x1_0001), (3, 0x1_0002)] {
        let job_id = job_id + u64::from(std::process::id()) * 16;
        let results = both_ways(n, &counts, job_id);
        let algorithm =
            algorithms::catalogue_algorithm(Collective::Allreduce, "recursive_doubling");
        for (k, &count) in counts.iter().enumerate() {
            let inputs: Vec<Payload> = (0..n).map(|r| input(r, count)).collect();
            let want = algorithm
                .reference(&inputs, ReduceOp::Sum, &Params::default())
                .expect("a reference");
            for (rank, calls) in results.iter().enumerate() {
                let (registry, inline) = &calls[k];
                let bits = |p: &Payload| -> Vec<u32> {
                    p.as_slice::<f32>()
                        .expect("floats")
                        .iter()
                        .map(|x| x.to_bits())
                        .collect()
                };
                assert_eq!(
                    bits(inline),
                    bits(registry),
                    "{n} ranks, {count} floats, rank {rank}"
                );
                assert_eq!(
                    bits(inline),
                    bits(&want[rank]),
                    "{n} ranks, {count} floats, rank {rank}"
                );
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
