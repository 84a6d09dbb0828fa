//! A quick throughput and latency check of the shared-memory fabric (not a
//! benchmark: `sim bench` is). Ignored by default; run it in release:
//!
//! ```text
//! cargo test --release -p realnet --test shm_speed -- --ignored --nocapture
//! ```
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use algorithms::{Algorithm, Collective, DType, Params, Payload, ReduceOp};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, LocalBootstrap};

/// Mean seconds per allreduce of `bytes` on `n` thread ranks.
fn allreduce_secs(
    n: usize,
    bytes: usize,
    algorithm: Algorithm,
    iters: u64,
    options: &ShmOptions,
) -> f64 {
    let group = LocalBootstrap::group(n);
    let times: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                let algorithm = algorithm.clone();
                s.spawn(move || {
                    let f = ShmFabric::connect(b, options).unwrap();
                    let input = Payload::zeros(DType::F32, bytes / 4, false);
                    let params = Params::default();
                    let mut start = Instant::now();
                    let warmup = 3;
                    for seq in 1..=iters + warmup {
                        if seq == warmup + 1 {
                            start = Instant::now();
                        }
                        f.begin_call(CallId::new(seq, &algorithm)).unwrap();
                        let mut buf = input.clone();
                        f.block_on(algorithm.run(&f, &mut buf, ReduceOp::Sum, &params))
                            .unwrap();
                    }
                    let t = start.elapsed().as_secs_f64() / iters as f64;
                    f.finish().unwrap();
                    t
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    times.into_iter().fold(0.0, f64::max)
}

/// The same on [`realnet::LocalFabric`]: the algorithm's own cost.
fn local_secs(n: usize, bytes: usize, iters: u64) -> f64 {
    let fabrics = realnet::LocalFabric::group(n, &realnet::JobOptions::default());
    let times: Vec<f64> =
        std::thread::scope(|s| {
            let handles: Vec<_> =
                fabrics
                    .iter()
                    .map(|f| {
                        s.spawn(move || {
                            let input = Payload::zeros(DType::F32, bytes / 4, false);
                            let params = Params::default();
                            let mut start = Instant::now();
                            for seq in 1..=iters + 3 {
                                if seq == 4 {
                                    start = Instant::now();
                                }
                                f.begin_call(CallId::new(
                                    seq,
                                    &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                                ))
                                .unwrap();
                                let mut buf = input.clone();
                                f.block_on(
                                    algorithms::catalogue_algorithm(Collective::Allreduce, "ring")
                                        .run(f, &mut buf, ReduceOp::Sum, &params),
                                )
                                .unwrap();
                            }
                            start.elapsed().as_secs_f64() / iters as f64
                        })
                    })
                    .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    times.into_iter().fold(0.0, f64::max)
}

#[test]
#[ignore = "a timing check, run by hand in release"]
fn allreduce_speed() {
    let base = ShmOptions {
        job: realnet::JobOptions {
            timeout: Duration::from_secs(60),
            ..Default::default()
        },
        ..ShmOptions::default()
    };
    let no_cma = ShmOptions {
        attach_min_bytes: None,
        ..base.clone()
    };
    for (name, opts) in [("attach", &base), ("rings", &no_cma)] {
        for bytes in [1 << 20, 64 << 20] {
            let t = allreduce_secs(
                2,
                bytes,
                algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                if bytes > 1 << 24 { 10 } else { 100 },
                opts,
            );
            let busbw = bytes as f64 / t * Collective::Allreduce.busbw_factor(2) / 1e9;
            println!(
                "{name}: 2 ranks ring allreduce {bytes} B: {:.1} us, busbw {busbw:.2} GB/s",
                t * 1e6
            );
        }
    }
    for name in ["recursive_doubling", "ring"] {
        let alg = algorithms::catalogue_algorithm(Collective::Allreduce, name);
        let t = allreduce_secs(2, 8, alg.clone(), 20_000, &base);
        println!("2 ranks {alg} allreduce 8 B: {:.3} us", t * 1e6);
    }
    let t = local_secs(2, 64 << 20, 10);
    let busbw = (64 << 20) as f64 / t * Collective::Allreduce.busbw_factor(2) / 1e9;
    println!(
        "LocalFabric (no transport copy): 2 ranks ring allreduce 64 MiB: busbw {busbw:.2} GB/s"
    );
    let t = local_secs(2, 8, 20_000);
    println!(
        "LocalFabric (no transport copy): 2 ranks ring allreduce 8 B: {:.3} us",
        t * 1e6
    );
}
