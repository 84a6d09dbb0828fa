//! Rough numbers for the closing notes, not checks of speed (they still
//! check the results): run with
//! `cargo test -p realnet --release --test tcp -- --ignored --nocapture`.

use std::time::Instant;

use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Shape, Tag};
use realnet::tcp::TcpFabric;
use realnet::{CallId, Endpoint};

use crate::support::{group, options};

/// Seconds per ring allreduce of `count` i32 on each rank, over `calls`
/// calls after one warm-up; checks the sums.
fn seconds_per_allreduce(fabrics: &[TcpFabric], count: usize, calls: u64) -> f64 {
    let n = fabrics.len() as i32;
    let times: Vec<f64> =
        std::thread::scope(|s| {
            let handles: Vec<_> =
                fabrics
                    .iter()
                    .map(|f| {
                        s.spawn(move || {
                            let mut started = Instant::now();
                            for seq in 1..=calls + 1 {
                                if seq == 2 {
                                    started = Instant::now();
                                }
                                f.begin_call(CallId::new(
                                    seq,
                                    &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                                ))
                                .unwrap();
                                let mut buf = Payload::from_vec(vec![f.rank() as i32 + 1; count]);
                                f.block_on(
                                    algorithms::catalogue_algorithm(Collective::Allreduce, "ring")
                                        .run(f, &mut buf, ReduceOp::Sum, &Params::default()),
                                )
                                .unwrap();
                                let want = n * (n + 1) / 2;
                                assert!(buf.as_slice::<i32>().unwrap().iter().all(|x| *x == want));
                            }
                            let took = started.elapsed().as_secs_f64() / calls as f64;
                            f.finish().unwrap();
                            took
                        })
                    })
                    .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    times.into_iter().fold(0.0, f64::max)
}

/// Seconds for one way of a ping-pong of `count` i32 between two ranks.
fn seconds_one_way(fabrics: &[TcpFabric], count: usize, rounds: u64) -> f64 {
    let shape = Shape::new(DType::I32, count);
    let times: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .iter()
            .map(|f| {
                s.spawn(move || {
                    let peer = 1 - f.rank();
                    f.begin_call(CallId::new(
                        1,
                        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                    ))
                    .unwrap();
                    let mut msg = Payload::from_vec(vec![7i32; count]);
                    let started = Instant::now();
                    for _ in 0..rounds {
                        if f.rank() == 0 {
                            f.block_on(f.send(peer, Tag(1), msg)).unwrap();
                            msg = f.block_on(f.recv(peer, Tag(1), shape)).unwrap();
                        } else {
                            msg = f.block_on(f.recv(peer, Tag(1), shape)).unwrap();
                            f.block_on(f.send(peer, Tag(1), msg.clone())).unwrap();
                        }
                    }
                    assert_eq!(msg.as_slice::<i32>().unwrap()[count - 1], 7);
                    let took = started.elapsed().as_secs_f64() / (2 * rounds) as f64;
                    f.finish().unwrap();
                    took
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    times[0]
}

#[test]
#[ignore = "a measurement; run it in release with --ignored --nocapture"]
fn bandwidth_and_latency_on_loopback() {
    let fabrics = group(2, &options(60_000));
    let t = seconds_one_way(&fabrics, 16 << 20, 5);
    eprintln!(
        "2 ranks, 64 MiB one way (ping-pong): {:.1} ms, {:.2} GB/s",
        t * 1e3,
        (64 << 20) as f64 / t / 1e9
    );
    let fabrics = group(2, &options(60_000));
    let t = seconds_one_way(&fabrics, 2, 2000);
    eprintln!("2 ranks, 8 B one way (ping-pong): {:.1} us", t * 1e6);
    for n in [2usize, 4] {
        let fabrics = group(n, &options(60_000));
        let count = 16 << 20;
        let t = seconds_per_allreduce(&fabrics, count, 3);
        let bytes = (count * 4) as f64;
        let busbw = bytes / t * 2.0 * (n as f64 - 1.0) / n as f64 / 1e9;
        eprintln!(
            "{n} ranks, 64 MiB allreduce: {:.1} ms, busbw {busbw:.2} GB/s",
            t * 1e3
        );
        let fabrics = group(n, &options(60_000));
        let t = seconds_per_allreduce(&fabrics, 2, 1000);
        eprintln!("{n} ranks, 8 B allreduce: {:.1} us", t * 1e6);
    }
}
