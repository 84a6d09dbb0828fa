//! The verbs fabric on this machine's RDMA device (feature `verbs`).
//!
//! With a device (real InfiniBand/RoCE, or Soft-RoCE: `rdma link add rxe0
//! type rxe netdev eth0`) every catalogue collective runs over queue pairs
//! between threads of this process. Without one, the tests that need it
//! print "no RDMA device: skipping ..." and check instead that connecting
//! fails on every rank with the clear error. Set `REALNET_VERBS_DEVICE` to
//! pick a device.
#![cfg(feature = "verbs")]

use std::time::Duration;

use algorithms::{Fabric, Params, Payload, Tag};
use realnet::verbs::{VerbsFabric, VerbsOptions, device_names};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

fn options(timeout: Duration) -> VerbsOptions {
    let job = JobOptions {
        job_id: 7,
        token: "verbs-test".into(),
        timeout,
    };
    VerbsOptions::from_env(job).expect("REALNET_VERBS_* variables are valid")
}

/// Connects `n` ranks (threads) and runs `body` on each; `None` without a device.
fn with_group<T: Send>(
    n: usize,
    options: &VerbsOptions,
    body: impl Fn(&VerbsFabric) -> T + Sync,
) -> Vec<Result<T, String>> {
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                let body = &body;
                s.spawn(move || {
                    VerbsFabric::connect(b, options)
                        .map(|f| body(&f))
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn skip(what: &str) -> bool {
    match device_names() {
        Ok(names) => {
            eprintln!("RDMA devices: {}", names.join(", "));
            false
        }
        Err(e) => {
            eprintln!("no RDMA device: skipping {what} ({e})");
            true
        }
    }
}

#[test]
fn without_a_device_every_rank_fails_with_a_clear_error() {
    if device_names().is_ok() {
        eprintln!("an RDMA device exists: the no-device error cannot be observed here");
        return;
    }
    let results = with_group(3, &options(Duration::from_secs(5)), |_| ());
    assert_eq!(results.len(), 3);
    for (rank, r) in results.iter().enumerate() {
        let e = r.as_ref().unwrap_err();
        assert!(e.starts_with(&format!("rank {rank}: verbs: ")), "{e}");
        assert!(e.contains("no RDMA device found"), "{e}");
        assert!(
            e.contains("ibv_devices"),
            "the error says how to check: {e}"
        );
    }
}

#[test]
fn a_missing_named_device_is_named_with_what_exists() {
    let opts = VerbsOptions {
        device: Some("no_such_hca9".into()),
        ..options(Duration::from_secs(5))
    };
    let results = with_group(2, &opts, |_| ());
    let e = results[0].as_ref().unwrap_err();
    match device_names() {
        Ok(names) => {
            assert!(
                e.contains("RDMA device \"no_such_hca9\" not found; available: "),
                "{e}"
            );
            assert!(e.contains(&names[0]), "{e}");
        }
        Err(_) => assert!(e.contains("no RDMA device found"), "{e}"),
    }
}

#[test]
fn every_catalogue_algorithm_is_correct_over_verbs() {
    if skip("every_catalogue_algorithm_is_correct_over_verbs") {
        return;
    }
    let small_slots = VerbsOptions {
        slot_bytes: 256,
        slots: 2,
        ..options(Duration::from_secs(30))
    };
    for n in [2usize, 3, 5] {
        let params = Params {
            chunk_bytes: 64,
            ranks_per_node: 2,
            root: n - 1,
            ..Params::default()
        };
        // Small slots so that messages are chunked and credits run out.
        let results = with_group(n, &small_slots, |f| {
            let calls = realnet::selftest::run_catalogue(f, &[1, 37, 1000], &params, 1)?;
            f.finish().map_err(|e| e.to_string())?;
            Ok::<u64, String>(calls)
        });
        for r in results {
            let calls = r.unwrap().unwrap();
            assert_eq!(calls, 3 * algorithms::Registry::builtin().len() as u64);
        }
    }
}

#[test]
fn a_big_message_streams_through_the_slots() {
    if skip("a_big_message_streams_through_the_slots") {
        return;
    }
    let opts = options(Duration::from_secs(30));
    let count = 3 << 20; // 12 MiB of i32: about 96 slots of 128 KiB
    let results = with_group(2, &opts, |f| {
        f.begin_call(CallId::new(
            1,
            &algorithms::catalogue_algorithm(algorithms::Collective::Broadcast, "chain"),
        ))
        .unwrap();
        let got = if f.rank() == 0 {
            let p = Payload::from_vec((0..count as i32).collect::<Vec<_>>());
            f.block_on(f.send(1, Tag(5), p)).unwrap();
            None
        } else {
            let shape = algorithms::Shape::new(algorithms::DType::I32, count);
            Some(f.block_on(f.recv(0, Tag(5), shape)).unwrap())
        };
        f.finish().unwrap();
        got
    });
    let got = results[1].as_ref().unwrap().as_ref().unwrap();
    let want: Vec<i32> = (0..count as i32).collect();
    assert_eq!(got.as_slice::<i32>(), Some(&want[..]));
}

#[test]
fn a_rank_that_disappears_is_reported_by_name() {
    if skip("a_rank_that_disappears_is_reported_by_name") {
        return;
    }
    let opts = options(Duration::from_secs(2));
    let results = with_group(2, &opts, |f| {
        if f.rank() == 1 {
            return String::new(); // drops its queue pairs without a Bye
        }
        f.begin_call(CallId::new(
            1,
            &algorithms::catalogue_algorithm(algorithms::Collective::Allreduce, "ring"),
        ))
        .unwrap();
        let shape = algorithms::Shape::new(algorithms::DType::I32, 1);
        let r = f.block_on(async {
            f.send(1, Tag(1), Payload::from_vec(vec![1i32])).await?;
            f.recv(1, Tag(1), shape).await
        });
        r.unwrap_err().to_string()
    });
    let e = results[0].as_ref().unwrap();
    assert!(e.contains("rank 1"), "{e}");
}
