//! Failures on the shared-memory fabric are reported, naming the rank,
//! within a short time and never as a hang: a rank that drops its fabric
//! without finishing, one that marks itself failed, one that hangs, ranks
//! of different jobs and ranks calling different collectives.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use algorithms::{Collective, Fabric, FabricError, Params, ReduceOp};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{Bootstrap, CallId, Endpoint, JobOptions, LocalBootstrap};

fn options(job_id: u64, timeout: Duration) -> ShmOptions {
    ShmOptions {
        job: JobOptions {
            job_id,
            timeout,
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ring_bytes: 1 << 16,
        ..ShmOptions::default()
    }
}

/// One ring allreduce of `count` elements on `f` as call `seq`.
fn allreduce(f: &ShmFabric, seq: u64, count: usize) -> Result<(), FabricError> {
    f.begin_call(CallId::new(
        seq,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))?;
    let mut buf = realnet::selftest::input(f.rank(), count);
    f.block_on(
        algorithms::catalogue_algorithm(Collective::Allreduce, "ring").run(
            f,
            &mut buf,
            ReduceOp::Sum,
            &Params::default(),
        ),
    )
    .map_err(|e| match e {
        algorithms::CollectiveError::Fabric(f) => f,
        other => FabricError::Transport {
            rank: f.rank(),
            reason: other.to_string(),
        },
    })
}

/// Runs `n` ranks; rank `odd` does `odd_one` instead of allreduces, the
/// others allreduce until one fails. Returns the others' errors and how
/// long the slowest took.
fn survivors<F>(n: usize, odd: usize, options: &ShmOptions, odd_one: F) -> (Vec<String>, Duration)
where
    F: Fn(ShmFabric) + Sync,
{
    let group = LocalBootstrap::group(n);
    let start = Instant::now();
    let errors = std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                let odd_one = &odd_one;
                s.spawn(move || {
                    let f = ShmFabric::connect(b, options).expect("connect");
                    if f.rank() == odd {
                        odd_one(f);
                        return None;
                    }
                    for seq in 1..1_000_000 {
                        if let Err(e) = allreduce(&f, seq, 1000) {
                            return Some(e.to_string());
                        }
                    }
                    None
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    (errors, start.elapsed())
}

#[test]
fn a_rank_that_drops_its_fabric_mid_job_is_named_by_every_other_rank() {
    let opts = options(301, Duration::from_secs(60));
    let (errors, took) = survivors(4, 2, &opts, |f| {
        for seq in 1..=5 {
            allreduce(&f, seq, 1000).unwrap();
        }
        drop(f);
    });
    assert_eq!(errors.len(), 3, "{errors:?}");
    for e in &errors {
        assert!(e.contains("rank 2") && e.contains("without finish"), "{e}");
    }
    assert!(took < Duration::from_secs(10), "reported after {took:?}");
}

#[test]
fn a_rank_that_marks_itself_failed_passes_its_reason_on() {
    let opts = options(302, Duration::from_secs(60));
    let (errors, took) = survivors(3, 1, &opts, |f| {
        allreduce(&f, 1, 1000).unwrap();
        f.fail("the input file is unreadable");
        assert!(f.finish().is_err(), "a failed rank does not finish cleanly");
    });
    assert_eq!(errors.len(), 2, "{errors:?}");
    for e in &errors {
        assert!(
            e.contains("rank 1") && e.contains("the input file is unreadable"),
            "{e}"
        );
    }
    assert!(took < Duration::from_secs(10), "reported after {took:?}");
}

#[test]
fn a_hung_rank_is_caught_by_the_timeout() {
    let opts = options(303, Duration::from_millis(400));
    let (errors, took) = survivors(2, 1, &opts, |f| {
        // Alive (it holds its lock) but never takes part.
        std::thread::sleep(Duration::from_millis(1500));
        drop(f);
    });
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("timed out waiting on rank 1"),
        "{}",
        errors[0]
    );
    assert!(took < Duration::from_secs(10), "reported after {took:?}");
}

#[test]
fn ranks_of_different_jobs_refuse_the_segment() {
    let group = LocalBootstrap::group(2);
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = group
            .iter()
            .map(|b| {
                s.spawn(move || {
                    let job = 400 + b.rank() as u64;
                    match ShmFabric::connect(b, &options(job, Duration::from_secs(5))) {
                        Ok(_) => String::new(),
                        Err(e) => e.to_string(),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for e in &errors {
        assert!(
            e.contains("rank 1: refusing segment")
                && e.contains("belongs to job 0x190, not job 0x191"),
            "{e}"
        );
    }
}

#[test]
fn ranks_calling_different_collectives_fail_clearly() {
    let opts = options(304, Duration::from_secs(2));
    let (errors, _) = survivors(2, 1, &opts, |f| {
        f.begin_call(CallId::new(
            1,
            &algorithms::catalogue_algorithm(Collective::Broadcast, "chain"),
        ))
        .unwrap();
        let mut buf = realnet::selftest::input(f.rank(), 1000);
        let r = f.block_on(
            algorithms::catalogue_algorithm(Collective::Broadcast, "chain").run(
                &f,
                &mut buf,
                ReduceOp::Sum,
                &Params::default(),
            ),
        );
        assert!(r.is_err());
    });
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].contains("called different collectives"),
        "{}",
        errors[0]
    );
}

#[test]
fn a_bad_ring_size_is_refused_by_every_rank() {
    let group = LocalBootstrap::group(2);
    let opts = ShmOptions {
        ring_bytes: 5000,
        ..options(305, Duration::from_secs(5))
    };
    std::thread::scope(|s| {
        for b in &group {
            let opts = &opts;
            s.spawn(move || {
                let e = ShmFabric::connect(b, opts)
                    .err()
                    .expect("refused")
                    .to_string();
                assert!(e.contains("ring_bytes 5000 is not a power of two"), "{e}");
            });
        }
    });
}

#[test]
fn nothing_is_left_in_the_directory() {
    let dir = std::env::temp_dir().join(format!("realnet-shm-leak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opts = ShmOptions {
        dir: dir.clone(),
        ..options(306, Duration::from_secs(5))
    };
    let group = LocalBootstrap::group(3);
    std::thread::scope(|s| {
        for b in &group {
            let opts = &opts;
            s.spawn(move || {
                let f = ShmFabric::connect(b, opts).unwrap();
                allreduce(&f, 1, 100).unwrap();
                f.finish().unwrap();
            });
        }
    });
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    std::fs::remove_dir(&dir).unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// Rank 0 of a job whose other ranks never show up: every allgather fails.
struct Deserted;

impl Bootstrap for Deserted {
    fn rank(&self) -> usize {
        0
    }

    fn world_size(&self) -> usize {
        2
    }

    fn allgather(&self, _mine: &[u8]) -> Result<Vec<Vec<u8>>, realnet::BootstrapError> {
        Err(realnet::BootstrapError {
            rank: 0,
            reason: "rank 1 did not join".into(),
        })
    }
}

#[test]
fn a_failed_bootstrap_leaves_no_segment_behind() {
    let dir = std::env::temp_dir().join(format!("realnet-shm-deserted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opts = ShmOptions {
        dir: dir.clone(),
        ..options(307, Duration::from_secs(5))
    };
    let e = ShmFabric::connect(&Deserted, &opts).err().expect("fails");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.to_string().contains("rank 1 did not join"), "{e}");
    assert!(left.is_empty(), "{left:?}");
}
