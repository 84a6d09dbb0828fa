//! With ideal links, the simulated time of ring allreduce equals its
//! closed-form cost to the picosecond (see `algorithms::ring` for the
//! derivation):
//!
//! `T = M·t + α + ⌊(M-1)/W⌋·max(0, α - (W-1)·t)`, `M = 2(N-1)·K`,
//!
//! which is the textbook `2(N-1)·α + 2(N-1)/N · n/B` when each segment is
//! one chunk, and `2(N-1)/N · n/B + α` once the pipeline hides the latency.

use algorithms::{Collective, DType, Params, Payload, ReduceOp, Tag, Time, catalogue_algorithm};
use engine::{WorldConfig, run};

use crate::support::link;

/// One simulated configuration.
#[derive(Clone, Copy)]
struct Case {
    n: usize,
    count: usize,
    chunk_bytes: u64,
    slots: usize,
    latency_ps: u64,
    bw: u64,
    reduce_bw: Option<f64>,
}

/// Simulates a phantom f32 ring allreduce and returns when the last rank
/// finished.
fn simulate(c: Case) -> Time {
    let config = WorldConfig::new(
        c.n,
        engine::network::NetworkConfig::Ideal(link(c.latency_ps, c.bw)),
    )
    .reduce_bytes_per_s(c.reduce_bw);
    let ring = &catalogue_algorithm(Collective::Allreduce, "ring");
    let exec = run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, c.count);
        let params = Params {
            chunk_bytes: c.chunk_bytes,
            slots: c.slots,
            tag: Tag(0),
            ..Params::default()
        };
        ring.run(&fabric, &mut buf, ReduceOp::Sum, &params).await
    });
    assert!(exec.deadlock.is_none());
    let finished: Vec<Time> = exec
        .finished_at
        .iter()
        .map(|t| t.expect("finished"))
        .collect();
    *finished.iter().max().expect("at least one rank")
}

/// The closed form, in picoseconds, for `K` chunks of `chunk_bytes` per
/// segment and `slots` slots.
fn closed_form_ps(n: u64, k: u64, slots: u64, chunk_bytes: u64, latency_ps: u64, bw: u64) -> u64 {
    let m = 2 * (n - 1) * k;
    let w = slots.clamp(1, k);
    let t = chunk_bytes * 1_000_000_000_000 / bw;
    assert_eq!(
        t * bw,
        chunk_bytes * 1_000_000_000_000,
        "test sizes keep t whole"
    );
    let exposed = latency_ps.saturating_sub((w - 1) * t);
    m * t + latency_ps + (m - 1) / w * exposed
}

#[test]
fn one_chunk_per_segment_is_the_textbook_formula() {
    // 25 GB/s (40 ps per byte), 2 us latency.
    let (alpha, bw) = (2_000_000u64, 25_000_000_000u64);
    for n in [2usize, 3, 4, 8, 16, 32] {
        for seg_elems in [1usize, 256, 65_536] {
            let count = n * seg_elems;
            let bytes = 4 * count as u64;
            let case = Case {
                n,
                count,
                chunk_bytes: u64::MAX,
                slots: 8,
                latency_ps: alpha,
                bw,
                reduce_bw: None,
            };
            let got = simulate(case);
            // 2(N-1)·α + 2(N-1)/N · n/B, with n/N = one segment.
            let seg_bytes = bytes / n as u64;
            let textbook = 2 * (n as u64 - 1) * (alpha + seg_bytes * 1_000_000_000_000 / bw);
            assert_eq!(got.as_ps(), textbook, "n={n} bytes={bytes}");
            assert_eq!(
                got.as_ps(),
                closed_form_ps(n as u64, 1, 8, seg_bytes, alpha, bw)
            );
        }
    }
}

#[test]
fn chunked_pipelines_match_the_max_plus_closed_form() {
    let bw = 100_000_000_000u64; // 10 ps per byte
    for n in [2u64, 3, 5, 8] {
        for k in [2u64, 3, 8, 33] {
            for slots in [1u64, 2, 4, 8, 64] {
                for (chunk_bytes, alpha) in [(4_096u64, 1_000_000u64), (65_536, 100_000), (4, 7)] {
                    let case = Case {
                        n: n as usize,
                        count: (n * k * chunk_bytes / 4) as usize,
                        chunk_bytes,
                        slots: slots as usize,
                        latency_ps: alpha,
                        bw,
                        reduce_bw: None,
                    };
                    let want = closed_form_ps(n, k, slots, chunk_bytes, alpha, bw);
                    assert_eq!(
                        simulate(case).as_ps(),
                        want,
                        "n={n} k={k} slots={slots} chunk={chunk_bytes} alpha={alpha}"
                    );
                }
            }
        }
    }
}

#[test]
fn latency_is_hidden_once_the_window_covers_it() {
    // 8 ranks, 64 MiB, 512 KiB chunks, 8 slots, 2 us latency, 100 GB/s:
    // 7 chunks take 36.7 us on the wire, far more than 2 us, so the link is
    // never idle and T = 2(N-1)/N · n/B + α.
    let (n, bytes, alpha, bw) = (8u64, 64u64 << 20, 2_000_000u64, 100_000_000_000u64);
    let case = Case {
        n: n as usize,
        count: (bytes / 4) as usize,
        chunk_bytes: 512 << 10,
        slots: 8,
        latency_ps: alpha,
        bw,
        reduce_bw: None,
    };
    let ps_per_byte = 1_000_000_000_000 / bw;
    assert_eq!(
        simulate(case).as_ps(),
        2 * (n - 1) * (bytes / n) * ps_per_byte + alpha
    );
}

#[test]
fn reduction_cost_adds_one_gamma_term_per_reduce_scatter_step() {
    // K = 1: T = 2(N-1)(α + t) + (N-1)·γ·(n/N).
    let (alpha, bw, reduce_bw) = (1_000_000u64, 50_000_000_000u64, 200_000_000_000u64);
    for n in [2u64, 4, 7] {
        let seg_bytes = 4_000u64;
        let case = Case {
            n: n as usize,
            count: (n * seg_bytes / 4) as usize,
            chunk_bytes: u64::MAX,
            slots: 8,
            latency_ps: alpha,
            bw,
            reduce_bw: Some(reduce_bw as f64),
        };
        let t = seg_bytes * 1_000_000_000_000 / bw;
        let gamma = seg_bytes * 1_000_000_000_000 / reduce_bw;
        assert_eq!(
            simulate(case).as_ps(),
            2 * (n - 1) * (alpha + t) + (n - 1) * gamma,
            "n={n}"
        );
    }
}
