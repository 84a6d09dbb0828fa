//! Tests of the rendezvous: rounds, strangers, duplicates, missing and stopped ranks, caps.

use super::*;

fn job(timeout_ms: u64) -> JobOptions {
    JobOptions {
        job_id: 42,
        token: "right".into(),
        timeout: Duration::from_millis(timeout_ms),
    }
}

/// Runs a job of `n` ranks: rank 0 serves on a fresh port, the others
/// join; each rank does `rounds` allgathers of `[rank, round]`.
fn run_job(n: usize, rounds: u8, job: &JobOptions) -> Vec<Result<Vec<Vec<Vec<u8>>>, String>> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut listener = Some(listener);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let l = if rank == 0 { listener.take() } else { None };
                let addr = addr.clone();
                s.spawn(move || {
                    let boot = match l {
                        Some(l) => TcpRendezvous::serve(l, n, job),
                        None => TcpRendezvous::join(&addr, rank, n, job),
                    }
                    .map_err(|e| e.to_string())?;
                    (0..rounds)
                        .map(|round| {
                            boot.allgather(&[rank as u8, round])
                                .map_err(|e| e.to_string())
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn ranks_exchange_bytes_through_rank_0() {
    for n in [1usize, 2, 5] {
        for (rank, result) in run_job(n, 3, &job(5000)).into_iter().enumerate() {
            let rounds = result.unwrap();
            for (round, all) in rounds.iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..n).map(|r| vec![r as u8, round as u8]).collect();
                assert_eq!(all, &want, "rank {rank} round {round}");
            }
        }
    }
}

#[test]
fn a_wrong_token_is_refused_while_the_real_job_completes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let good = job(5000);
    let bad_token = JobOptions {
        token: "wrong".into(),
        ..good.clone()
    };
    let bad_job = JobOptions {
        job_id: 41,
        ..good.clone()
    };
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let b = TcpRendezvous::serve(listener, 3, &good).unwrap();
            b.allgather(b"zero").unwrap()
        });
        // The impostors come first, claiming the real ranks; they learn
        // nothing of the job (its id is 42).
        for impostor in [&bad_token, &bad_job] {
            let e = TcpRendezvous::join(&addr, 1, 3, impostor)
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.ends_with("refused this rank: wrong job id or token"),
                "{e}"
            );
            assert!(e.contains(&addr), "{e}");
            // The address may hold "42" (port 42679): look past it.
            assert!(!e.replace(&addr, "").contains("42"), "{e}");
        }
        // A rank of the job with another world size is told why.
        let e = TcpRendezvous::join(&addr, 2, 4, &good).err().unwrap();
        assert!(e.to_string().contains("has 3"), "{e}");
        // Bytes that begin no hello get no answer at all.
        let mut junk = TcpStream::connect(&addr).unwrap();
        junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let _ = junk.read_to_end(&mut answer);
        assert!(answer.is_empty(), "{answer:?}");
        // A connection that never says anything does not hold them up.
        let _silent = TcpStream::connect(&addr).unwrap();
        let ranks: Vec<_> = (1..3)
            .map(|r| {
                let (addr, good) = (&addr, &good);
                s.spawn(move || {
                    let b = TcpRendezvous::join(addr, r, 3, good).unwrap();
                    b.allgather(format!("r{r}").as_bytes()).unwrap()
                })
            })
            .collect();
        let want = vec![b"zero".to_vec(), b"r1".to_vec(), b"r2".to_vec()];
        assert_eq!(server.join().unwrap(), want);
        for h in ranks {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

#[test]
fn a_duplicate_rank_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let good = job(5000);
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let b = TcpRendezvous::serve(listener, 3, &good).unwrap();
            b.allgather(b"0").unwrap()
        });
        let first = TcpRendezvous::join(&addr, 1, 3, &good).unwrap();
        let e = TcpRendezvous::join(&addr, 1, 3, &good).err().unwrap();
        assert!(e.to_string().contains("rank 1 already joined"), "{e}");
        let two = s.spawn(|| {
            let b = TcpRendezvous::join(&addr, 2, 3, &good).unwrap();
            b.allgather(b"2").unwrap()
        });
        assert_eq!(first.allgather(b"1").unwrap().len(), 3);
        assert_eq!(server.join().unwrap()[1], b"1");
        assert_eq!(two.join().unwrap()[2], b"2");
    });
}

#[test]
fn a_missing_rank_times_out_naming_it_on_every_side() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let short = job(300);
    std::thread::scope(|s| {
        let server = s.spawn(|| TcpRendezvous::serve(listener, 3, &short).err().unwrap());
        let one = TcpRendezvous::join(&addr, 1, 3, &short).unwrap();
        let e = server.join().unwrap().to_string();
        assert!(e.contains("rank(s) 2 did not join"), "{e}");
        // Rank 0 is gone: rank 1's round fails instead of hanging.
        let e = one.allgather(b"1").unwrap_err().to_string();
        assert!(e.contains(&addr), "{e}");
    });
    // Nobody listening at all: the joiner gives up at its timeout.
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let e = TcpRendezvous::join(&addr, 1, 2, &short).err().unwrap();
    assert!(e.to_string().contains("cannot reach rank 0"), "{e}");
}

#[test]
fn a_rank_that_stops_mid_round_is_named_to_the_others() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let short = job(400);
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let b = TcpRendezvous::serve(listener, 3, &short).unwrap();
            b.allgather(b"0").unwrap_err().to_string()
        });
        let one = s.spawn(|| {
            let b = TcpRendezvous::join(&addr, 1, 3, &short).unwrap();
            b.allgather(b"1").unwrap_err().to_string()
        });
        // Rank 2 joins, then never contributes.
        let two = TcpRendezvous::join(&addr, 2, 3, &short).unwrap();
        let e0 = server.join().unwrap();
        let e1 = one.join().unwrap();
        drop(two);
        assert!(e0.contains("rank 2"), "{e0}");
        assert!(
            e1.contains("rank 2") && e1.contains("ended the rendezvous"),
            "{e1}"
        );
    });
}

#[test]
fn oversized_lengths_are_refused_before_allocating() {
    let mut wire: &[u8] = &u32::MAX.to_le_bytes();
    let e = read_capped(&mut wire, ALLGATHER_BYTES_MAX).unwrap_err();
    assert!(e.to_string().contains("more than"), "{e}");
    let b = TcpRendezvous::connect(
        &RankEnv {
            rank: 0,
            world_size: 1,
            launcher: None,
            rendezvous: None,
            job: job(100),
            fabric: None,
        },
        &job(100),
    )
    .unwrap();
    let e = b.allgather(&vec![0; ALLGATHER_BYTES_MAX + 1]).unwrap_err();
    assert!(e.to_string().contains("exceeds"), "{e}");
    assert_eq!(b.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
}
