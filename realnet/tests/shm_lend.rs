//! `Fabric::exchange_in_place` on shared memory lends the sent part of the
//! caller's buffer: the peer copies it straight out of this rank's memory.
//! The exchange must not return before the peer has it (the caller may
//! then overwrite it), and an exchange abandoned while the part is lent
//! fails the rank, so the peer never delivers bytes read from memory the
//! caller took back.
#![cfg(not(loom))]

use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use algorithms::any_fabric::{INLINE_FUTURE_BYTES, INLINE_LEND_FUTURE_BYTES};
use algorithms::{Collective, Fabric, Payload, ReduceOp, Shape, Tag};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::tcp::{TcpFabric, TcpOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

fn options(job_id: u64) -> ShmOptions {
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

fn begin(f: &ShmFabric) {
    let ring = algorithms::catalogue_algorithm(Collective::Allreduce, "ring");
    f.begin_call(CallId::new(1, &ring)).unwrap();
}

/// Rank `r`'s values: distinct per rank and element.
fn values(r: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (r * 1_000_000 + i) as f32).collect()
}

#[test]
fn a_lent_part_is_copied_before_the_exchange_returns() {
    // 64 KiB parts, several exchanges back to back: each rank sends the
    // first half of its buffer and sums the peer's into the second half,
    // then scribbles over the half it lent, as a caller may once the
    // exchange returned. A peer that copied later would sum the scribbles.
    let n = 16 << 10;
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            s.spawn(move || {
                let f = ShmFabric::connect(b, &options(700)).unwrap();
                let (me, peer) = (f.rank(), 1 - f.rank());
                begin(&f);
                for round in 0..8 {
                    let mut v = values(me, n);
                    v.extend(vec![round as f32; n]);
                    let mut buf = Payload::from_vec(v);
                    f.block_on(f.exchange_in_place(
                        peer,
                        peer,
                        Tag(round),
                        &mut buf,
                        0..n,
                        n..2 * n,
                        Some(ReduceOp::Sum),
                    ))
                    .unwrap();
                    let scribble = Payload::from_vec(vec![-1.0f32; n]);
                    buf.copy_from(0..n, &scribble).unwrap();
                    let got = &buf.as_slice::<f32>().unwrap()[n..];
                    let want: Vec<f32> = values(peer, n)
                        .into_iter()
                        .map(|x| x + round as f32)
                        .collect();
                    assert_eq!(got, &want[..], "rank {me} round {round}");
                }
                f.finish().unwrap();
            });
        }
    });
}

#[test]
fn copies_land_in_place_and_two_ranks_swap_one_block_exactly() {
    // 64 KiB parts, rounds back to back with new values each round: an
    // exchange that copies (its part posted, the peer's lent part copied
    // straight into it), a swap of one block (the same range sent and
    // received: the peer must get the block as it was before the call),
    // and a receive that copies (`recv_combine`) of a part the peer lends
    // with `send_from`. A copy landing in the wrong place, a stale round
    // or a swap that overwrote the lent block before the peer read it
    // shows as a wrong value.
    let n = 16 << 10;
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            s.spawn(move || {
                let f = ShmFabric::connect(b, &options(705)).unwrap();
                let (me, peer) = (f.rank(), 1 - f.rank());
                begin(&f);
                let round_values = |r: usize, round: usize| -> Vec<f32> {
                    values(r, n).into_iter().map(|x| x + round as f32).collect()
                };
                for round in 0..6 {
                    let tag = |k: u64| Tag(round as u64 * 4 + k);
                    let mut v = round_values(me, round);
                    v.extend(vec![-1.0f32; n]);
                    let mut buf = Payload::from_vec(v);
                    f.block_on(f.exchange_in_place(
                        peer,
                        peer,
                        tag(0),
                        &mut buf,
                        0..n,
                        n..2 * n,
                        None,
                    ))
                    .unwrap();
                    let got = &buf.as_slice::<f32>().unwrap()[n..];
                    assert_eq!(got, &round_values(peer, round)[..], "exchange {round}");
                    let mut swap = Payload::from_vec(round_values(me, round + 100));
                    f.block_on(f.exchange_in_place(
                        peer,
                        peer,
                        tag(1),
                        &mut swap,
                        0..n,
                        0..n,
                        None,
                    ))
                    .unwrap();
                    let got = swap.as_slice::<f32>().unwrap();
                    assert_eq!(got, &round_values(peer, round + 100)[..], "swap {round}");
                    let mut into = Payload::from_vec(vec![-1.0f32; 2 * n]);
                    if me == 0 {
                        let from = Payload::from_vec(round_values(me, round + 200));
                        f.block_on(f.send_from(peer, tag(2), &from, 0..n)).unwrap();
                    } else {
                        f.block_on(f.recv_combine(peer, tag(2), &mut into, n..2 * n, None))
                            .unwrap();
                        let got = into.as_slice::<f32>().unwrap();
                        assert_eq!(&got[n..], &round_values(peer, round + 200)[..]);
                        assert!(got[..n].iter().all(|x| *x == -1.0), "outside the part");
                    }
                }
                f.finish().unwrap();
            });
        }
    });
}

#[test]
fn two_joined_receives_of_one_tag_each_get_one_of_the_messages() {
    // Two receives that copy (`recv_combine`) from one peer with one tag,
    // joined, the one made second polled first: the peer lends two 64 KiB
    // messages. One receive posts its part and the first message lands
    // there; whichever receive the mailbox hands the first message to,
    // the two buffers must between them hold both messages (none lost, as
    // a receive taking the landed message's stand-in would copy nothing
    // and the posting one would then drop the second message).
    let n = 16 << 10;
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            s.spawn(move || {
                let f = ShmFabric::connect(b, &options(706)).unwrap();
                let (me, peer) = (f.rank(), 1 - f.rank());
                begin(&f);
                if me == 0 {
                    for k in 0..2 {
                        let from = Payload::from_vec(values(10 + k, n));
                        f.block_on(f.send_from(peer, Tag(9), &from, 0..n)).unwrap();
                    }
                } else {
                    let mut first = Payload::from_vec(vec![-1.0f32; n]);
                    let mut second = Payload::from_vec(vec![-1.0f32; n]);
                    let a = f.recv_combine(peer, Tag(9), &mut first, 0..n, None);
                    let b = f.recv_combine(peer, Tag(9), &mut second, 0..n, None);
                    let (b, a) = f.block_on(futures_util::future::join(b, a));
                    a.unwrap();
                    b.unwrap();
                    let mut got = [
                        first.as_slice::<f32>().unwrap()[0],
                        second.as_slice::<f32>().unwrap()[0],
                    ];
                    got.sort_by(f32::total_cmp);
                    assert_eq!(got, [values(10, 1)[0], values(11, 1)[0]]);
                    let whole = |p: &Payload| {
                        let v = p.as_slice::<f32>().unwrap();
                        v == &values(10, n)[..] || v == &values(11, n)[..]
                    };
                    assert!(whole(&first) && whole(&second));
                }
                f.finish().unwrap();
            });
        }
    });
}

#[test]
fn an_exchange_abandoned_while_lending_fails_the_rank_and_its_peer() {
    let n = 16 << 10;
    let group = LocalBootstrap::group(2);
    let (lent, ready) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let lender = &group[0];
        let peer = &group[1];
        s.spawn(move || {
            let f = ShmFabric::connect(lender, &options(701)).unwrap();
            if !f.attaches_to(1) {
                eprintln!("process_vm_readv refused here: nothing is lent");
                lent.send(()).unwrap();
                return;
            }
            begin(&f);
            let mut buf = Payload::from_vec(values(0, 2 * n));
            {
                let exchange = f.exchange_in_place(1, 1, Tag(0), &mut buf, 0..n, n..2 * n, None);
                let mut exchange = pin!(exchange);
                let mut cx = Context::from_waker(Waker::noop());
                // The part is lent and its header is in the ring; the peer
                // has not run, so nothing arrived and nothing was copied.
                assert!(exchange.as_mut().poll(&mut cx).is_pending());
            }
            let fatal = f.mailbox().fatal().expect("the rank failed");
            assert!(
                fatal.to_string().contains("lent"),
                "the error says why: {fatal}"
            );
            lent.send(()).unwrap();
            // The buffer lives on until the peer is done with the job.
            std::thread::sleep(Duration::from_millis(200));
            drop(buf);
        });
        s.spawn(move || {
            let f = ShmFabric::connect(peer, &options(701)).unwrap();
            ready.recv().unwrap();
            if !f.attaches_to(0) {
                return;
            }
            begin(&f);
            let got = f.block_on(f.recv(0, Tag(0), Shape::new(algorithms::DType::F32, n)));
            let e = got.expect_err("bytes of an abandoned loan are not delivered");
            assert!(e.to_string().contains("rank 0"), "names the lender: {e}");
        });
    });
}

#[test]
fn a_pipelined_ring_lends_every_send_and_sums_exactly() {
    // 4 KiB chunks of a 30,000-float buffer on 3 ranks: 3 chunks per
    // segment, so the ring's first sends (before anything arrives) lend
    // their part alone (`send_from`), the rest within exchanges. Integer
    // values: the sums are exact whatever the order.
    let n = 30_000;
    let ranks = 3;
    let group = LocalBootstrap::group(ranks);
    let ring = algorithms::catalogue_algorithm(Collective::Allreduce, "ring");
    let params = algorithms::Params {
        chunk_bytes: 4096,
        ..algorithms::Params::default()
    };
    std::thread::scope(|s| {
        for b in &group {
            let (ring, params) = (ring.clone(), params);
            s.spawn(move || {
                let f = ShmFabric::connect(b, &options(702)).unwrap();
                let me = f.rank();
                for call in 1..=3u64 {
                    f.begin_call(CallId::new(call, &ring)).unwrap();
                    let mut buf = Payload::from_vec(values(me, n));
                    f.block_on(ring.run(&f, &mut buf, ReduceOp::Sum, &params))
                        .unwrap();
                    let inputs: Vec<Vec<f32>> = (0..ranks).map(|r| values(r, n)).collect();
                    let want: Vec<f32> =
                        (0..n).map(|i| inputs.iter().map(|v| v[i]).sum()).collect();
                    assert_eq!(buf.as_slice::<f32>().unwrap(), &want[..], "rank {me}");
                }
                f.finish().unwrap();
            });
        }
    });
}

/// The sizes of `f`'s two lending futures (created, never polled).
fn lend_future_sizes<F: Fabric>(f: &F) -> [usize; 2] {
    let mut buf = Payload::from_vec(vec![0.0f32; 8]);
    let sending = std::mem::size_of_val(&f.send_from(0, Tag(0), &buf, 0..4));
    let exchanging =
        std::mem::size_of_val(&f.exchange_in_place(0, 0, Tag(0), &mut buf, 0..4, 4..8, None));
    [sending, exchanging]
}

/// The size of `f`'s `recv_combine` future (created, never polled).
fn combine_future_size<F: Fabric>(f: &F) -> usize {
    let mut buf = Payload::from_vec(vec![0.0f32; 8]);
    std::mem::size_of_val(&f.recv_combine(0, Tag(0), &mut buf, 0..4, None))
}

#[test]
fn the_lending_futures_fit_inline_so_the_registry_path_lends() {
    // An algorithm reached through the registry runs on an `AnyFabric`,
    // which runs the defaults (a copy) for futures larger than its inline
    // space.
    let group = LocalBootstrap::group(1);
    let shm = ShmFabric::connect(&group[0], &options(703)).unwrap();
    let sizes = lend_future_sizes(&shm);
    assert!(
        sizes.iter().all(|s| *s <= INLINE_LEND_FUTURE_BYTES),
        "shm {sizes:?} > {INLINE_LEND_FUTURE_BYTES}"
    );
    // A receive that combines gets the other operations' inline space
    // (beyond it, a heap allocation per message).
    let combine = combine_future_size(&shm);
    assert!(combine <= INLINE_FUTURE_BYTES, "shm {combine}");
    shm.finish().unwrap();
    let group = LocalBootstrap::group(1);
    let opts = TcpOptions {
        job: JobOptions {
            job_id: 704,
            ..JobOptions::default()
        },
        ..TcpOptions::default()
    };
    let tcp = TcpFabric::connect(&group[0], &opts).unwrap();
    let sizes = lend_future_sizes(&tcp);
    assert!(
        sizes.iter().all(|s| *s <= INLINE_LEND_FUTURE_BYTES),
        "tcp {sizes:?} > {INLINE_LEND_FUTURE_BYTES}"
    );
    let combine = combine_future_size(&tcp);
    assert!(combine <= INLINE_FUTURE_BYTES, "tcp {combine}");
    tcp.finish().unwrap();
}

/// Lets `f` make progress for `how_long` with no receive of its own
/// waiting (so a posted part may claim what arrives).
fn progress_for(f: &ShmFabric, how_long: Duration) {
    let until = std::time::Instant::now() + how_long;
    f.block_on(std::future::poll_fn(|cx| {
        if std::time::Instant::now() >= until {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }));
}

#[test]
fn a_forgotten_receive_never_writes_its_part() {
    // A receive future forgotten (`mem::forget`: its guard never runs)
    // right after it posted its part for a lent copy. The peer's matching
    // message then arrives while rank 0 only makes progress: nothing may
    // be written to that part (the caller could have freed it). The
    // message is claimed and waits for a copy that never comes, which the
    // job's timeout reports; the part keeps its bytes.
    let n = 4096;
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            s.spawn(move || {
                let mut opts = options(705);
                opts.job.timeout = Duration::from_secs(2);
                let f = ShmFabric::connect(b, &opts).unwrap();
                let (me, peer) = (f.rank(), 1 - f.rank());
                begin(&f);
                if me == 0 {
                    let mut buf = Payload::from_vec(vec![7.0f32; n]);
                    std::mem::forget(f.recv_combine(peer, Tag(1), &mut buf, 0..n, None));
                    // Progress alone for a while: the peer's message arrives.
                    progress_for(&f, Duration::from_millis(500));
                    assert!(
                        buf.as_slice::<f32>().unwrap().iter().all(|x| *x == 7.0),
                        "a forgotten receive's part was written"
                    );
                } else {
                    let buf = Payload::from_vec(values(me, n));
                    // Never copied: the lender gives up at the timeout.
                    let _ = f.block_on(f.send_from(peer, Tag(1), &buf, 0..n));
                }
                let _ = f.finish();
            });
        }
    });
}

#[test]
fn a_receive_dropped_after_its_message_was_claimed_hands_it_back() {
    // Rank 0 posts a part, lets progress claim the peer's lent message for
    // it, then drops the receive before polling it: the message goes the
    // usual way, to the mailbox, and a later receive of that key gets it
    // whole (nothing lost, nothing written to the dropped receive's part).
    let n = 4096;
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        for b in &group {
            s.spawn(move || {
                let f = ShmFabric::connect(b, &options(706)).unwrap();
                let (me, peer) = (f.rank(), 1 - f.rank());
                begin(&f);
                if me == 0 {
                    let mut buf = Payload::from_vec(vec![7.0f32; n]);
                    let posted = f.recv_combine(peer, Tag(1), &mut buf, 0..n, None);
                    progress_for(&f, Duration::from_millis(300));
                    drop(posted);
                    assert!(buf.as_slice::<f32>().unwrap().iter().all(|x| *x == 7.0));
                    let got = f
                        .block_on(f.recv(peer, Tag(1), Shape::new(algorithms::DType::F32, n)))
                        .unwrap();
                    assert_eq!(got.as_slice::<f32>().unwrap(), &values(peer, n)[..]);
                } else {
                    let buf = Payload::from_vec(values(me, n));
                    f.block_on(f.send_from(peer, Tag(1), &buf, 0..n)).unwrap();
                }
                f.finish().unwrap();
            });
        }
    });
}
