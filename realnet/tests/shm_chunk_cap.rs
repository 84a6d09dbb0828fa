//! On shared memory the tuner's pipeline chunk is capped so that the
//! chunks a receiver reads ahead of reducing them stay in cache
//! (`Endpoint::chunk_bytes_max`); a chunk the user names is used as named,
//! and the capped allreduce still computes the right sums.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::cost::CostModel;
use algorithms::{Collective, Params, Registry, catalogue_algorithm};
use realnet::bench::{AlgorithmChoice, BenchOptions, BenchRow, run_bench};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{Endpoint, JobOptions, LocalBootstrap};

fn shm_options(job_id: u64) -> ShmOptions {
    ShmOptions {
        job: JobOptions {
            job_id,
            timeout: Duration::from_secs(20),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ring_bytes: 1 << 16,
        attach_min_bytes: Some(1024),
        ..ShmOptions::default()
    }
}

/// A 1 MiB float sum allreduce on 2 thread ranks of shared memory, each
/// rank's rows and its fabric's cap for `options.params.slots`.
fn bench(job_id: u64, options: &BenchOptions) -> Vec<(Vec<BenchRow>, Option<u64>)> {
    let group = LocalBootstrap::group(2);
    let shm = shm_options(job_id);
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                let shm = &shm;
                s.spawn(move || {
                    let f = ShmFabric::connect(b, shm).unwrap();
                    let (rows, _) = run_bench(&f, options, 1, |_| {}).unwrap();
                    let cap = f.chunk_bytes_max(options.params.slots);
                    f.finish().unwrap();
                    (rows, cap)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn options(algorithm: AlgorithmChoice, slots: usize) -> BenchOptions {
    BenchOptions {
        collective: Collective::Allreduce,
        algorithm,
        min_bytes: 1 << 20,
        max_bytes: 1 << 20,
        iters: 2,
        warmup: 1,
        params: Params {
            chunk_bytes: 512 << 10,
            slots,
            ..Params::default()
        },
        ..BenchOptions::default()
    }
}

#[test]
fn the_tuners_chunk_is_capped_and_a_named_chunk_is_not() {
    // Slots enough that the cap (4 MiB over the slots, at least 64 KiB)
    // falls below any chunk the tuner would pick for the ring.
    let slots = 64;
    let ring = catalogue_algorithm(Collective::Allreduce, "ring");
    let tuned = AlgorithmChoice::Tuned {
        model: CostModel {
            latency_ps: 1_000_000,
            bandwidth_bytes_per_s: 10e9,
            reduce_bytes_per_s: None,
        },
        allowed: vec![ring.clone()],
        fallback: Registry::builtin()
            .of(Collective::Allreduce)
            .cloned()
            .collect(),
    };
    let tuned = options(tuned, slots);
    let (_, tuners_params, _) = tuned.select(2, (1 << 20) / 4);
    for (rows, cap) in bench(71_001, &tuned) {
        let cap = cap.expect("shared memory caps the chunk");
        assert_eq!(cap, 64 << 10);
        let row = &rows[0];
        assert!(row.tuned);
        assert_eq!(row.wrong, Some(0), "{row:?}");
        assert_eq!(
            row.chunk_bytes,
            tuners_params.chunk_bytes.min(cap),
            "{row:?}"
        );
        assert!(row.chunk_bytes < tuners_params.chunk_bytes, "{row:?}");
    }
    let named = options(AlgorithmChoice::Fixed(ring), slots);
    for (rows, _) in bench(71_002, &named) {
        let row = &rows[0];
        assert!(!row.tuned);
        assert_eq!(row.wrong, Some(0), "{row:?}");
        assert_eq!(row.chunk_bytes, 512 << 10, "{row:?}");
    }
}
