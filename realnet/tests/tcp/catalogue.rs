//! Every collective and algorithm of the catalogue gives correct results
//! over TCP, for powers of two and not, small and multi-megabyte messages.

use std::time::Instant;

use algorithms::Params;
use realnet::Endpoint;
use realnet::selftest::run_catalogue;
use realnet::tcp::TcpFabric;

use crate::support::{group, options};

/// Runs the catalogue on every rank of `fabrics` and finishes cleanly.
fn run_on_all(fabrics: &[TcpFabric], counts: &[usize], params: &Params) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .iter()
            .map(|f| {
                s.spawn(move || {
                    let calls = run_catalogue(f, counts, params, 1).unwrap();
                    f.finish().unwrap();
                    calls
                })
            })
            .collect();
        let calls: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(calls.iter().all(|c| *c == calls[0]), "{calls:?}");
        calls[0]
    })
}

#[test]
fn every_catalogue_algorithm_is_correct_over_tcp() {
    for n in [2usize, 3, 4, 5, 8] {
        let started = Instant::now();
        let fabrics = group(n, &options(5_000));
        let params = Params {
            chunk_bytes: 16,
            ranks_per_node: 2,
            root: n - 1,
            ..Params::default()
        };
        let calls = run_on_all(&fabrics, &[1, 37], &params);
        assert_eq!(calls, 2 * algorithms::Registry::builtin().len() as u64);
        for f in &fabrics {
            assert!(f.refusals().is_empty(), "{:?}", f.refusals());
        }
        eprintln!("{n} ranks: {:?}", started.elapsed());
    }
}

#[test]
fn multi_megabyte_messages_arrive_whole_and_correct() {
    // 768 Ki elements of i32 = 3 MiB per rank: frames of up to 3 MiB (the
    // tree and direct algorithms send whole buffers), read in several of
    // the reader's 1 MiB pieces, and many frames per pipeline. (The time
    // goes into the algorithms' own arithmetic and the references, not
    // the transport: LocalFabric takes as long.)
    let fabrics = group(3, &options(10_000));
    let params = Params {
        chunk_bytes: 1 << 20,
        ranks_per_node: 3,
        root: 1,
        ..Params::default()
    };
    let calls = run_on_all(&fabrics, &[3 << 18], &params);
    assert_eq!(calls, algorithms::Registry::builtin().len() as u64);
}
