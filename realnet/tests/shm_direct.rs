//! Shared memory's direct receives (`realnet/src/shm/direct.rs`) return
//! exactly what the mailbox would: messages of other tags that arrive
//! first, a wrong shape, a receive dropped after its message arrived, a
//! hung peer and a peer gone while a small receive waits.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use algorithms::{DType, Fabric, FabricError, Payload, Shape, Tag};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{CallId, Endpoint, JobOptions, LocalBootstrap};

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

fn call(seq: u64) -> CallId {
    CallId::new(
        seq,
        &algorithms::catalogue_algorithm(algorithms::Collective::Allreduce, "ring"),
    )
}

fn floats(values: &[f32]) -> Payload {
    Payload::from_vec(values.to_vec())
}

fn f32s(n: usize) -> Shape {
    Shape::new(DType::F32, n)
}

/// Runs rank 0 and rank 1 of a 2-rank job on threads; returns rank 0's result.
fn pair<T: Send>(
    opts: &ShmOptions,
    zero: impl FnOnce(&ShmFabric) -> T + Send,
    one: impl FnOnce(ShmFabric) + Send,
) -> T {
    let group = LocalBootstrap::group(2);
    std::thread::scope(|s| {
        let b1 = &group[1];
        let other = s.spawn(move || one(ShmFabric::connect(b1, opts).expect("connect")));
        let f = ShmFabric::connect(&group[0], opts).expect("connect");
        let out = zero(&f);
        // Rank 1 may still be waiting for rank 0's farewell.
        let _ = f.finish();
        drop(f);
        other.join().expect("rank 1");
        out
    })
}

#[test]
fn messages_of_other_tags_and_a_wrong_shape_are_received_as_the_mailbox_would() {
    let opts = options(901, Duration::from_secs(20));
    let got = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            // Tag 2 arrives first and waits in the mailbox; then tag 1,
            // then tag 3 with a shape the receive does not expect.
            let one = f.block_on(f.recv(1, Tag(1), f32s(2))).unwrap();
            let two = f.block_on(f.recv(1, Tag(2), f32s(1))).unwrap();
            let three = f.block_on(f.recv(1, Tag(3), f32s(2)));
            (one, two, three)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            f.block_on(async {
                f.send(0, Tag(2), floats(&[2.0])).await.unwrap();
                f.send(0, Tag(1), floats(&[1.0, 1.5])).await.unwrap();
                f.send(0, Tag(3), floats(&[3.0, 3.0, 3.0])).await.unwrap();
            });
            let _ = f.finish();
        },
    );
    assert_eq!(got.0.as_slice::<f32>().unwrap(), &[1.0, 1.5]);
    assert_eq!(got.1.as_slice::<f32>().unwrap(), &[2.0]);
    match got.2 {
        Err(FabricError::ShapeMismatch { expected, got, .. }) => {
            assert_eq!((expected, got), (f32s(2), f32s(3)));
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}

#[test]
fn a_receive_dropped_after_its_message_arrived_leaves_it_for_the_next() {
    let opts = options(902, Duration::from_secs(20));
    // Rank 1 sends only once rank 0's receive waits.
    let waiting = std::sync::Barrier::new(2);
    let again = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut cx = Context::from_waker(Waker::noop());
            {
                let mut recv = pin!(f.recv(1, Tag(7), f32s(1)));
                assert!(recv.as_mut().poll(&mut cx).is_pending());
                waiting.wait();
                // Progress hands the arrived message to the waiting
                // receive, which is then dropped before it is polled.
                let start = Instant::now();
                while !f.progress() {
                    assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
                }
            }
            f.block_on(f.recv(1, Tag(7), f32s(1))).unwrap()
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(7), floats(&[7.0]))).unwrap();
            f.block_on(f.send(0, Tag(7), floats(&[8.0]))).unwrap();
            let _ = f.finish();
        },
    );
    // Received by the second receive, not lost with the first.
    assert_eq!(again.as_slice::<f32>().unwrap(), &[7.0]);
}

/// A waker that notes it was woken.
struct Flag(std::sync::atomic::AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_receive_polled_from_another_context_is_woken_there() {
    let opts = options(905, Duration::from_secs(20));
    let waiting = std::sync::Barrier::new(2);
    let (woken, got) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let flag = std::sync::Arc::new(Flag(std::sync::atomic::AtomicBool::new(false)));
            let second = Waker::from(flag.clone());
            let mut recv = pin!(f.recv(1, Tag(5), f32s(1)));
            let first = &mut Context::from_waker(Waker::noop());
            assert!(recv.as_mut().poll(first).is_pending());
            // Polled again from another context (as a join may), before
            // the message is sent.
            assert!(
                recv.as_mut()
                    .poll(&mut Context::from_waker(&second))
                    .is_pending()
            );
            waiting.wait();
            let start = Instant::now();
            while !f.progress() {
                assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
            }
            let woken = flag.0.load(std::sync::atomic::Ordering::SeqCst);
            let got = match recv.as_mut().poll(&mut Context::from_waker(&second)) {
                std::task::Poll::Ready(p) => p.unwrap(),
                std::task::Poll::Pending => panic!("handed its message, yet pending"),
            };
            (woken, got)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(5), floats(&[5.0]))).unwrap();
            let _ = f.finish();
        },
    );
    assert!(woken, "the waker of the last poll was not woken");
    assert_eq!(got.as_slice::<f32>().unwrap(), &[5.0]);
}

#[test]
fn a_hung_peer_of_a_small_exchange_is_caught_by_the_timeout() {
    let opts = options(903, Duration::from_millis(400));
    let start = Instant::now();
    let err = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            f.block_on(f.exchange(1, floats(&[1.0, 2.0]), 1, f32s(2), Tag(0)))
                .unwrap_err()
        },
        |f| {
            // Alive (it holds its lock) but never answers.
            std::thread::sleep(Duration::from_millis(1500));
            drop(f);
        },
    );
    assert!(
        err.to_string().contains("timed out waiting on rank 1"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_peer_gone_during_a_small_exchange_is_named() {
    let opts = options(904, Duration::from_secs(30));
    let start = Instant::now();
    let err = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            f.block_on(f.exchange(1, floats(&[1.0, 2.0]), 1, f32s(2), Tag(0)))
                .unwrap_err()
        },
        |f| {
            std::thread::sleep(Duration::from_millis(200));
            // Dropped without finish(): a failure, which rank 0 must name.
            drop(f);
        },
    );
    assert!(err.to_string().contains("rank 1"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "reported after {:?}, not within the probe interval",
        start.elapsed()
    );
}

/// Polls `fut` once with a waker that does nothing; it must be pending.
fn poll_pending<F: Future>(fut: std::pin::Pin<&mut F>) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        fut.poll(&mut cx).is_pending(),
        "ready before anything was sent"
    );
}

/// Drives `f`'s progress until something moves.
fn progress_until_moved(f: &ShmFabric) {
    let start = Instant::now();
    while !f.progress() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing arrived");
    }
}

#[test]
fn a_receive_handed_its_message_but_not_polled_yet_holds_up_no_other_receive() {
    let opts = options(906, Duration::from_secs(2));
    let waiting = std::sync::Barrier::new(2);
    // Rank 1 has sent: rank 0's progress then moves its message at once,
    // with no idle round (nor probe) that could move the receive to the
    // mailbox first.
    let sent = std::sync::Barrier::new(2);
    let (first, second) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut first = pin!(f.recv(1, Tag(1), f32s(1)));
            poll_pending(first.as_mut());
            waiting.wait();
            sent.wait();
            // Progress hands tag 1's message to the first receive, which
            // is not polled again before a second receive waits.
            progress_until_moved(f);
            let second = f.block_on(f.recv(1, Tag(2), f32s(1)));
            let first = f.block_on(first);
            (first, second)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(1), floats(&[1.0]))).unwrap();
            f.block_on(f.send(0, Tag(2), floats(&[2.0]))).unwrap();
            sent.wait();
            let _ = f.finish();
        },
    );
    assert_eq!(second.unwrap().as_slice::<f32>().unwrap(), &[2.0]);
    assert_eq!(first.unwrap().as_slice::<f32>().unwrap(), &[1.0]);
}

#[test]
fn a_message_handed_to_a_receive_of_an_earlier_call_is_not_taken_as_the_next_calls() {
    let opts = options(907, Duration::from_secs(2));
    let waiting = std::sync::Barrier::new(2);
    // Rank 1 has sent: rank 0's progress then moves its message at once,
    // with no idle round (nor probe) that could move the receive to the
    // mailbox first.
    let sent = std::sync::Barrier::new(2);
    let (began, next) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let began;
            {
                let mut stale = pin!(f.recv(1, Tag(7), f32s(1)));
                poll_pending(stale.as_mut());
                waiting.wait();
                sent.wait();
                progress_until_moved(f);
                // The next call begins while call 1's receive, handed its
                // message, is still alive; it is dropped only then.
                began = f.begin_call(call(2));
            }
            (began, f.block_on(f.recv(1, Tag(7), f32s(1))))
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(7), floats(&[7.0]))).unwrap();
            sent.wait();
            f.begin_call(call(2)).unwrap();
            f.block_on(f.send(0, Tag(7), floats(&[8.0]))).unwrap();
            let _ = f.finish();
        },
    );
    // As the mailbox: call 1's message was never received.
    let err = began.expect_err("call 1's message was left unreceived");
    assert!(err.to_string().contains("never received"), "{err}");
    assert!(next.is_err(), "call 2 received {next:?}");
}

#[test]
fn a_receive_handed_its_message_before_the_rank_failed_returns_the_failure() {
    let opts = options(908, Duration::from_secs(2));
    let waiting = std::sync::Barrier::new(2);
    // Rank 1 has sent: rank 0's progress then moves its message at once,
    // with no idle round (nor probe) that could move the receive to the
    // mailbox first.
    let sent = std::sync::Barrier::new(2);
    let got = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut recv = pin!(f.recv(1, Tag(3), f32s(1)));
            poll_pending(recv.as_mut());
            waiting.wait();
            sent.wait();
            progress_until_moved(f);
            f.mailbox().fail_all(FabricError::Transport {
                rank: 0,
                reason: "failed on purpose".into(),
            });
            f.block_on(recv)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(3), floats(&[3.0]))).unwrap();
            sent.wait();
            let _ = f.finish();
        },
    );
    // As the mailbox, whose receives all return the rank's failure.
    let err = got.expect_err("the rank had failed");
    assert!(err.to_string().contains("failed on purpose"), "{err}");
}

#[test]
fn a_receive_waiting_in_the_mailbox_gets_the_first_message_of_its_key() {
    let opts = options(909, Duration::from_secs(2));
    let waiting = std::sync::Barrier::new(2);
    let (first, second) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut first = pin!(f.recv(1, Tag(4), f32s(1)));
            poll_pending(first.as_mut());
            // Idle rounds until it has moved to the mailbox (far more than
            // the direct receive waits), where it then waits.
            for _ in 0..20_000 {
                assert!(!f.progress(), "nothing was sent yet");
            }
            poll_pending(first.as_mut());
            // A second receive of the same key, begun after it.
            let mut second = pin!(f.recv(1, Tag(4), f32s(1)));
            poll_pending(second.as_mut());
            waiting.wait();
            // The first, polled alone, takes the first message (as the
            // mailbox would: the oldest message to the receive that asks).
            let first = f.block_on(first);
            (first, f.block_on(second))
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(4), floats(&[1.0]))).unwrap();
            f.block_on(f.send(0, Tag(4), floats(&[2.0]))).unwrap();
            let _ = f.finish();
        },
    );
    assert_eq!(first.unwrap().as_slice::<f32>().unwrap(), &[1.0]);
    assert_eq!(second.unwrap().as_slice::<f32>().unwrap(), &[2.0]);
}

#[test]
fn a_receive_that_starts_in_the_mailbox_is_not_held_up_by_a_message_handed_to_another() {
    let opts = options(910, Duration::from_secs(2));
    let waiting = std::sync::Barrier::new(2);
    // Rank 1 has sent: rank 0's progress then moves its message at once,
    // with no idle round (nor probe) that could move the receive to the
    // mailbox first.
    let sent = std::sync::Barrier::new(2);
    let (first, second, own) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut first = pin!(f.recv(1, Tag(1), f32s(1)));
            poll_pending(first.as_mut());
            waiting.wait();
            sent.wait();
            progress_until_moved(f);
            // A message to itself waits in the mailbox, so the next
            // receive starts there, while the first holds its message.
            f.block_on(f.send(0, Tag(9), floats(&[9.0]))).unwrap();
            let second = f.block_on(f.recv(1, Tag(2), f32s(1)));
            let first = f.block_on(first);
            (first, second, f.block_on(f.recv(0, Tag(9), f32s(1))))
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            waiting.wait();
            f.block_on(f.send(0, Tag(1), floats(&[1.0]))).unwrap();
            f.block_on(f.send(0, Tag(2), floats(&[2.0]))).unwrap();
            sent.wait();
            let _ = f.finish();
        },
    );
    assert_eq!(second.unwrap().as_slice::<f32>().unwrap(), &[2.0]);
    assert_eq!(first.unwrap().as_slice::<f32>().unwrap(), &[1.0]);
    assert_eq!(own.unwrap().as_slice::<f32>().unwrap(), &[9.0]);
}

#[test]
fn ranks_in_different_collectives_are_told_so_when_each_call_began_with_an_empty_mailbox() {
    // A call that begins with nothing in the mailbox tells it of the call
    // only when it is first used (no lock per call): the message of
    // another collective with the same sequence number must still be
    // judged against this call, not the one before.
    let opts = options(911, Duration::from_secs(5));
    let chain = |seq| {
        CallId::new(
            seq,
            &algorithms::catalogue_algorithm(algorithms::Collective::Broadcast, "chain"),
        )
    };
    let (first, second) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let first = f.block_on(f.recv(1, Tag(7), f32s(1)));
            // Rank 1's next message may already be in the mailbox (moved
            // there after a probe of the peers): then the call's beginning
            // reports it, as it always did.
            let second = f
                .begin_call(call(2))
                .and_then(|()| f.block_on(f.recv(1, Tag(7), f32s(1))));
            (first, second)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            f.block_on(f.send(0, Tag(7), floats(&[7.0]))).unwrap();
            f.begin_call(chain(2)).unwrap();
            f.block_on(f.send(0, Tag(7), floats(&[8.0]))).unwrap();
            let _ = f.finish();
        },
    );
    assert_eq!(first.unwrap().as_slice::<f32>().unwrap(), &[7.0]);
    let err = second.expect_err("rank 1 is in another collective");
    assert!(
        err.to_string().contains("called different collectives"),
        "{err}"
    );
}

#[test]
fn a_receive_waiting_in_the_mailbox_when_the_next_call_begins_is_woken_by_that_calls_message() {
    // A receive that outlived its call, waiting in the mailbox, matches
    // the messages of the rank's current call (as the mailbox's receives
    // do): when the next call's message arrives it must be woken, not left
    // waiting for the timeout (which would also mark its peer failed).
    let timeout = Duration::from_secs(3);
    let opts = options(912, timeout);
    let began = std::sync::Barrier::new(2);
    let done = std::sync::Barrier::new(2);
    let (got, waited, failure) = pair(
        &opts,
        |f| {
            f.begin_call(call(1)).unwrap();
            let mut stale = pin!(f.recv(1, Tag(7), f32s(1)));
            poll_pending(stale.as_mut());
            // Idle rounds until it has moved to the mailbox (far more than
            // the direct receive waits), where it then waits.
            for _ in 0..20_000 {
                assert!(!f.progress(), "nothing was sent yet");
            }
            poll_pending(stale.as_mut());
            f.begin_call(call(2)).unwrap();
            began.wait();
            let start = Instant::now();
            let got = f.block_on(stale);
            let waited = start.elapsed();
            let failure = f.mailbox().peer_failure(1);
            done.wait();
            (got, waited, failure)
        },
        |f| {
            f.begin_call(call(1)).unwrap();
            f.begin_call(call(2)).unwrap();
            began.wait();
            f.block_on(f.send(0, Tag(7), floats(&[8.0]))).unwrap();
            // Alive until rank 0 has its result.
            done.wait();
            let _ = f.finish();
        },
    );
    assert_eq!(got.unwrap().as_slice::<f32>().unwrap(), &[8.0]);
    assert!(failure.is_none(), "rank 1 was marked failed: {failure:?}");
    assert!(waited < timeout, "woken only by the timeout ({waited:?})");
}
