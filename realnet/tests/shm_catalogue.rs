//! Every collective and algorithm of the catalogue gives correct results on
//! the shared-memory fabric, ranks being threads that each map the segment.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::{Fabric, Params};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{Endpoint, JobOptions, LocalBootstrap};

/// Options with tiny rings so that the larger counts stream through them
/// in pieces, and a test-sized timeout.
fn options(job_id: u64, attach_min_bytes: Option<usize>) -> ShmOptions {
    ShmOptions {
        job: JobOptions {
            job_id,
            timeout: Duration::from_secs(20),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ring_bytes: 4096,
        attach_min_bytes,
        ..ShmOptions::default()
    }
}

/// Runs the catalogue on `n` threads; returns how many pairs used attach.
fn catalogue(n: usize, counts: &[usize], options: &ShmOptions) -> usize {
    catalogue_chunked(n, counts, options, 6000)
}

/// [`catalogue`] with pipeline chunks of `chunk_bytes`.
fn catalogue_chunked(n: usize, counts: &[usize], options: &ShmOptions, chunk_bytes: u64) -> usize {
    let params = Params {
        chunk_bytes,
        ranks_per_node: 2,
        root: n - 1,
        ..Params::default()
    };
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                s.spawn(move || {
                    let f = ShmFabric::connect(b, options).expect("connect");
                    let calls = realnet::selftest::run_catalogue(&f, counts, &params, 1)
                        .unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(
                        calls,
                        (counts.len() * algorithms::Registry::builtin().len()) as u64
                    );
                    f.finish().expect("finish");
                    (0..n).filter(|p| f.attaches_to(*p)).count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn every_algorithm_is_correct_through_the_rings_on_2_to_8_ranks() {
    // 3000 x i32 = 12 KB blocks: larger than the 4 KiB ring, so they stream.
    for (job, n) in [2usize, 3, 4, 5, 8].into_iter().enumerate() {
        let attached = catalogue(n, &[1, 37, 3000], &options(100 + job as u64, None));
        assert_eq!(attached, 0, "attach disabled");
    }
}

#[test]
fn every_algorithm_is_correct_with_cross_memory_attach() {
    // Payloads of 1 KiB and more are copied out of the sender's memory.
    for (job, n) in [2usize, 3, 5].into_iter().enumerate() {
        let attached = catalogue(n, &[37, 3000], &options(200 + job as u64, Some(1024)));
        let cma_works = realnet_cma_allowed();
        if cma_works {
            assert_eq!(attached, n * (n - 1), "every pair attaches");
        } else {
            eprintln!("process_vm_readv refused here: the rings carried everything");
        }
    }
}

#[test]
fn recycled_message_buffers_carry_no_stale_data() {
    // Messages of 32 KiB and more go through each rank's buffer pool: sent
    // copies and received buffers are reused by later messages, larger
    // buffers for smaller messages. Counts shrink then grow again, so a
    // reused buffer holding an earlier message's values would show as
    // wrong elements; through the rings and through cross-memory attach.
    for (job, (n, attach)) in [(2usize, None), (3, None), (2, Some(1024)), (3, Some(1024))]
        .into_iter()
        .enumerate()
    {
        catalogue_chunked(
            n,
            &[30_000, 12_000, 30_001],
            &options(300 + job as u64, attach),
            64 << 10,
        );
    }
}

/// Whether this process may read its own memory with process_vm_readv
/// (sandboxes may forbid the syscall).
fn realnet_cma_allowed() -> bool {
    let group = LocalBootstrap::group(1);
    let f = ShmFabric::connect(&group[0], &options(299, Some(1))).unwrap();
    drop(f.finish());
    // A 1-rank job has no peer to probe; probe with a 2-rank job instead.
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        let h: Vec<_> = group
            .iter()
            .map(|b| {
                s.spawn(move || {
                    let f = ShmFabric::connect(b, &options(298, Some(1))).unwrap();
                    let a = f.attaches_to(1 - f.rank());
                    f.finish().unwrap();
                    a
                })
            })
            .collect();
        h.into_iter().all(|h| h.join().unwrap())
    })
}
