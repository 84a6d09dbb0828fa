//! `finish` while a peer is still copying a large message out of this
//! rank's memory (cross-memory attach): the peer that copied everything
//! and finished must not be blamed for leaving messages behind.
#![cfg(not(loom))]

use std::time::Duration;

use algorithms::{Collective, DType, Fabric, Payload, Shape, Tag};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

#[test]
fn a_peer_that_copied_everything_then_finished_is_not_blamed() {
    let n = 4;
    let opts = ShmOptions {
        job: JobOptions {
            job_id: 900,
            timeout: Duration::from_secs(10),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ring_bytes: 1 << 16,
        ..ShmOptions::default()
    };
    let big = 2 << 20;
    for _ in 0..5 {
        let group = LocalBootstrap::group(n);
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .iter()
                .map(|b| {
                    let opts = &opts;
                    s.spawn(move || {
                        let f = ShmFabric::connect(b, opts).unwrap();
                        assert!(f.rank() != 0 || f.attaches_to(1), "no attach here");
                        f.begin_call(CallId::new(
                            1,
                            &algorithms::catalogue_algorithm(Collective::Broadcast, "chain"),
                        ))
                        .unwrap();
                        match f.rank() {
                            // Rank 1 copies 8 MiB out of rank 0 while rank 0
                            // is busy in `finish` pulling what ranks 2 and 3
                            // stream at it (it never receives those: ranks 2
                            // and 3 may rightly complain).
                            0 => f
                                .block_on(f.send(1, Tag(1), Payload::zeros(DType::I32, big, false)))
                                .unwrap(),
                            1 => {
                                f.block_on(f.recv(0, Tag(1), Shape::new(DType::I32, big)))
                                    .unwrap();
                            }
                            _ => {
                                for _ in 0..100 {
                                    let p = Payload::zeros(DType::I32, 4096, false);
                                    f.block_on(f.send(0, Tag(2), p)).unwrap();
                                }
                            }
                        }
                        f.finish().err().map(|e| e.to_string())
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect()
        });
        for e in &errors {
            assert!(
                !e.contains("rank 1 finished before receiving everything"),
                "{errors:?}"
            );
        }
    }
}
