//! What the layers above shared memory cost per small allreduce: two
//! ranks on threads of this process, pinned to CPUs 0 and 1, run an 8 B
//! (two `f32`) sum allreduce again and again, in turn through the
//! registry (`Algorithm::run`: the boxed future, `AnyFabric`, recursive
//! doubling's futures), inline (`Algorithm::run_inline` pinned in place,
//! as `sim bench` runs it: recursive doubling's future on the fabric
//! itself) and bare
//! (`send_copy`, `exchange`, the reduction and `recycle` called on the
//! fabric itself: the same messages, the same result). Prints nanoseconds
//! per call of each, three rounds each.
//!
//! A benchmark, not a test: run it on an otherwise idle machine, e.g.
//! `cargo run --release -p realnet --example shm_layers -- 200000`.

use std::pin::pin;
use std::time::Instant;

use algorithms::{Collective, DType, Fabric, Params, Payload, ReduceOp, Shape, Tag};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

/// Rounds of each way.
const ROUNDS: usize = 3;

fn main() {
    let iters: u64 = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 200_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: shm_layers [CALLS_PER_ROUND (a positive integer)]");
            std::process::exit(2);
        }
    };
    let opts = ShmOptions {
        job: JobOptions {
            job_id: u64::from(std::process::id()),
            ..JobOptions::default()
        },
        ..ShmOptions::default()
    };
    let group = LocalBootstrap::group(2);
    let algorithm = algorithms::catalogue_algorithm(Collective::Allreduce, "recursive_doubling");
    let times = std::thread::scope(|s| {
        let ranks: Vec<_> = group
            .iter()
            .enumerate()
            .map(|(rank, bootstrap)| {
                let (opts, algorithm) = (&opts, &algorithm);
                s.spawn(move || {
                    pin(rank);
                    let f = ShmFabric::connect(bootstrap, opts).expect("connect");
                    let times = rounds(&f, algorithm, iters);
                    let _ = f.finish();
                    times
                })
            })
            .collect();
        let times: Vec<_> = ranks
            .into_iter()
            .map(|r| r.join().expect("a rank"))
            .collect();
        times[0].clone()
    });
    for (way, ns) in times {
        println!("{:>8}: {ns:.1} ns per call", way.name());
    }
}

/// How a round runs its calls.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// `Algorithm::run`.
    Registry,
    /// `Algorithm::run_inline`.
    Inline,
    /// The fabric's operations called here.
    Bare,
}

impl Way {
    /// The ways, in the order the rounds take them.
    const ALL: [Way; 3] = [Way::Registry, Way::Inline, Way::Bare];

    /// Its name in the output.
    fn name(self) -> &'static str {
        match self {
            Way::Registry => "registry",
            Way::Inline => "inline",
            Way::Bare => "bare",
        }
    }
}

/// This rank's rounds, taking the ways in turn: (way, ns per call).
fn rounds(f: &ShmFabric, algorithm: &algorithms::Algorithm, iters: u64) -> Vec<(Way, f64)> {
    let peer = 1 - f.rank();
    let params = Params::default();
    let shape = Shape::new(DType::F32, 2);
    let mut buf = Payload::from_vec(vec![1.0f32, 2.0]);
    let mut seq = 1;
    let mut times = Vec::new();
    for round in 0..Way::ALL.len() * ROUNDS {
        let way = Way::ALL[round % Way::ALL.len()];
        let start = Instant::now();
        for _ in 0..iters {
            f.begin_call(CallId::new(seq, algorithm)).expect("begin");
            seq += 1;
            match way {
                Way::Registry => f
                    .block_on(algorithm.run(f, &mut buf, ReduceOp::Sum, &params))
                    .expect("allreduce"),
                // Pinned in place, as the bench driver does.
                Way::Inline => f
                    .block_on(pin!(algorithm.run_inline(
                        f,
                        &mut buf,
                        ReduceOp::Sum,
                        &params
                    )))
                    .expect("allreduce"),
                Way::Bare => {
                    let out = f.send_copy(&buf, 0..2);
                    let got = f
                        .block_on(f.exchange(peer, out, peer, shape, Tag(0)))
                        .expect("exchange");
                    // Lower rank's part on the left, as recursive doubling does.
                    if f.rank() == 0 {
                        buf.reduce_from_right(0..2, &got, ReduceOp::Sum)
                    } else {
                        buf.reduce_from(0..2, &got, ReduceOp::Sum)
                    }
                    .expect("same shape");
                    f.recycle(got);
                }
            }
            // Doubling every call: start again before it overflows.
            if buf.as_slice::<f32>().expect("floats")[0] > 1e30 {
                buf = Payload::from_vec(vec![1.0f32, 2.0]);
            }
        }
        times.push((way, start.elapsed().as_nanos() as f64 / iters as f64));
    }
    times
}

/// Pins this thread to `cpu` (where it cannot, it runs unpinned).
fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("cannot pin rank to CPU {cpu}: {e}");
    }
}
