//! The failure behaviour of issue 7 over TCP: a rank that dies, a rank
//! that hangs, a corrupted frame, a length over the cap, ranks calling
//! different collectives, and clean exits that must not look like crashes.

use std::io::Read;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use algorithms::{
    Collective, CollectiveError, DType, Fabric, FabricError, Params, Payload, ReduceOp, Shape, Tag,
};
use realnet::frame::{Body, Header, Kind};
use realnet::selftest::input;
use realnet::tcp::TcpFabric;
use realnet::{CallId, Endpoint};

use crate::support::{JOB_ID, group, options, real_and_raw};

fn allreduce(f: &TcpFabric, seq: u64, count: usize) -> Result<Payload, CollectiveError> {
    f.begin_call(CallId::new(
        seq,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))?;
    let mut buf = input(f.rank(), count);
    f.block_on(
        algorithms::catalogue_algorithm(Collective::Allreduce, "ring").run(
            f,
            &mut buf,
            ReduceOp::Sum,
            &Params::default(),
        ),
    )?;
    Ok(buf)
}

#[test]
fn a_rank_that_dies_mid_allreduce_is_named_by_every_other_rank() {
    let timeout = Duration::from_secs(2);
    let fabrics = group(4, &options(timeout.as_millis() as u64));
    let everyone = Barrier::new(4);
    let survivors = Barrier::new(3);
    let errors: Vec<(String, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .into_iter()
            .map(|f| {
                let (everyone, survivors) = (&everyone, &survivors);
                s.spawn(move || {
                    allreduce(&f, 1, 4096).expect("the first allreduce is fine");
                    everyone.wait();
                    if f.rank() == 2 {
                        // Dies inside call 2: its sockets close without a bye.
                        f.begin_call(CallId::new(
                            2,
                            &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
                        ))
                        .unwrap();
                        drop(f);
                        return None;
                    }
                    let started = Instant::now();
                    let err = allreduce(&f, 2, 4096).expect_err("rank 2 is gone");
                    let took = started.elapsed();
                    // Stay connected until every survivor has its error, so
                    // that each one's error is about rank 2, not a survivor.
                    survivors.wait();
                    Some((err.to_string(), took))
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(errors.len(), 3);
    for (err, took) in &errors {
        assert!(
            err.contains("rank 2 (127.0.0.1:") && err.contains("died"),
            "{err}"
        );
        assert!(*took < timeout, "took {took:?}: {err}");
    }
}

#[test]
fn a_silent_rank_times_out_naming_it() {
    let fabrics = group(2, &options(300));
    let [f0, f1]: [TcpFabric; 2] = fabrics.try_into().ok().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            // Alive but silent: in the call, never sending.
            f1.begin_call(CallId::new(
                1,
                &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
            ))
            .unwrap();
            std::thread::sleep(Duration::from_millis(1200));
        });
        let started = Instant::now();
        let err = allreduce(&f0, 1, 64).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(
                &err,
                CollectiveError::Fabric(FabricError::Timeout {
                    rank: 0,
                    peer: 1,
                    ..
                })
            ),
            "{err}"
        );
        // Its heartbeats say it is alive: it is named as alive but silent,
        // after the timeout and one silence threshold (150 ms) more.
        assert!(err.to_string().contains("though rank 1 is alive"), "{err}");
        assert!(took < Duration::from_millis(1100), "took {took:?}");
    });
}

#[test]
fn a_corrupted_frame_is_reported_and_never_delivered() {
    let (fabric, mut raw) = real_and_raw(&options(2_000));
    let call = CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    );
    let mut bytes = Vec::new();
    raw.frame(
        5,
        call,
        Body::Payload(Payload::from_vec(vec![1i32, 2, 3, 4])),
    )
    .encode(&mut bytes);
    raw.write(&bytes);
    fabric.begin_call(call).unwrap();
    let shape = Shape::new(DType::I32, 4);
    let first = fabric.block_on(fabric.recv(0, Tag(5), shape)).unwrap();
    assert_eq!(first.as_slice::<i32>(), Some(&[1, 2, 3, 4][..]));
    bytes.clear();
    raw.frame(
        6,
        call,
        Body::Payload(Payload::from_vec(vec![5i32, 6, 7, 8])),
    )
    .encode(&mut bytes);
    // One flipped bit in the payload.
    bytes[70] ^= 0x04;
    raw.write(&bytes);
    let err = fabric
        .block_on(fabric.recv(0, Tag(6), shape))
        .unwrap_err()
        .to_string();
    assert!(err.contains("corrupt frame from rank 0"), "{err}");
    assert!(err.contains("payload checksum mismatch"), "{err}");
    // The connection was shut, so the sender learns of it too; the rank
    // sent it nothing but heartbeats.
    let mut rest = Vec::new();
    let _ = raw.stream.read_to_end(&mut rest);
    let mut decoder = realnet::frame::Decoder::new(realnet::frame::DEFAULT_FRAME_CAP);
    decoder.push(&rest);
    while let Some(frame) = decoder.next_frame().unwrap() {
        assert_eq!(frame.body, Body::Heartbeat, "{frame:?}");
    }
    assert_eq!(decoder.buffered(), 0, "{rest:?}");
    let at_finish = fabric.finish().unwrap_err().to_string();
    assert!(
        at_finish.contains("payload checksum mismatch"),
        "{at_finish}"
    );
}

#[test]
fn a_length_over_the_cap_is_refused_without_allocating() {
    let mut opts = options(2_000);
    opts.frame_cap = 1 << 20;
    let (fabric, mut raw) = real_and_raw(&opts);
    let call = CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    );
    // A valid header (its checksum is right) claiming 8 PiB of doubles:
    // allocating it would abort the test process.
    let header = Header {
        job_id: JOB_ID,
        src: 0,
        dst: 1,
        tag: Tag(5),
        seq: 1,
        call,
        kind: Kind::Data(DType::F64),
        count: 1 << 50,
        payload_crc: 0,
    };
    fabric.begin_call(call).unwrap();
    raw.write(&header.encode());
    let err = fabric
        .block_on(fabric.recv(0, Tag(5), Shape::new(DType::F64, 1 << 50)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("refused a frame from rank 0"), "{err}");
    assert!(
        err.contains("over the cap of 1048576 bytes (refused without reading it)"),
        "{err}"
    );
}

#[test]
fn a_message_over_the_cap_is_refused_at_the_sender_and_the_link_survives() {
    let mut opts = options(2_000);
    opts.frame_cap = 4096 + realnet::frame::HEADER_LEN as u64;
    let fabrics = group(2, &opts);
    std::thread::scope(|s| {
        for f in &fabrics {
            s.spawn(move || {
                if f.rank() == 0 {
                    let big = Payload::from_vec(vec![0u8; 4097]);
                    let err = f.block_on(f.send(1, Tag(1), big)).unwrap_err().to_string();
                    assert!(err.contains("over the frame cap of 4164 bytes"), "{err}");
                    assert!(err.contains("TcpOptions::frame_cap"), "{err}");
                }
                let sum = allreduce(f, 1, 1024).unwrap();
                assert_eq!(sum.as_slice::<i32>().unwrap()[3], 1000 + 2 * 3);
                f.finish().unwrap();
            });
        }
    });
}

#[test]
fn ranks_calling_different_collectives_fail_clearly() {
    let fabrics = group(2, &options(1_000));
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .into_iter()
            .map(|f| {
                s.spawn(move || {
                    realnet::selftest::run_mismatched_collectives(&f).expect("the ranks disagree")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        errors[1].contains("rank 0 is in call #1 (allreduce, ring) while this rank is in call #1 (broadcast, chain)"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("called different collectives"),
        "{errors:?}"
    );
    assert!(errors[0].contains("rank 1"), "{errors:?}");
}

#[test]
fn a_clean_finish_is_not_mistaken_for_a_crash() {
    let fabrics = group(3, &options(2_000));
    std::thread::scope(|s| {
        for f in fabrics {
            s.spawn(move || {
                for seq in 1..=3 {
                    let sum = allreduce(&f, seq, 300).unwrap();
                    assert_eq!(sum.as_slice::<i32>().unwrap()[7], 3000 + 3 * 7);
                }
                // Ranks reach the end at different times, and leave at
                // different times after it.
                std::thread::sleep(Duration::from_millis(100 * f.rank() as u64));
                f.finish().unwrap();
                std::thread::sleep(Duration::from_millis(50 * (2 - f.rank() as u64)));
                assert_eq!(f.mailbox().fatal(), None);
            });
        }
    });
}

#[test]
fn finish_names_a_rank_that_left_without_finishing() {
    let fabrics = group(2, &options(2_000));
    let [f0, f1]: [TcpFabric; 2] = fabrics.try_into().ok().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            allreduce(&f1, 1, 16).unwrap();
            drop(f1);
        });
        allreduce(&f0, 1, 16).unwrap();
        let started = Instant::now();
        let err = f0.finish().unwrap_err().to_string();
        assert!(err.contains("rank 1 (127.0.0.1:"), "{err}");
        assert!(err.contains("without saying goodbye"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
    });
}

#[test]
fn a_receive_names_the_first_rank_that_died_not_one_that_left_after_it() {
    let fabrics = group(3, &options(2_000));
    let [f0, f1, f2]: [TcpFabric; 3] = fabrics.try_into().ok().unwrap();
    f0.begin_call(CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))
    .unwrap();
    // Rank 1 dies first; rank 2 leaves once it noticed (as a rank does
    // whose collective failed).
    drop(f1);
    let deadline = Instant::now() + Duration::from_secs(2);
    while f0.mailbox().peer_failure(1).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(f2);
    let err = f0
        .block_on(f0.recv(2, Tag(0), Shape::new(DType::I32, 1)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank 1 (127.0.0.1:"), "{err}");
}

#[test]
fn a_rank_that_stops_on_an_error_tells_its_peers_why() {
    let fabrics = group(2, &options(5_000));
    let [f0, f1]: [TcpFabric; 2] = fabrics.try_into().ok().unwrap();
    f1.begin_call(CallId::new(
        1,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    ))
    .unwrap();
    // Rank 0 fails on its own (no peer died) and exits.
    f0.mailbox().fail_all(FabricError::Transport {
        rank: 0,
        reason: "the disk is on fire".into(),
    });
    drop(f0);
    let started = Instant::now();
    let err = f1
        .block_on(f1.recv(0, Tag(0), Shape::new(DType::I32, 1)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rank 0 (127.0.0.1:")
            && err.contains("stopped on an error: rank 0: the disk is on fire"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}
