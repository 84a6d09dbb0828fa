use super::*;
use algorithms::{Collective, DType};
use futures_util::task::noop_waker;

fn poll(m: &Mailbox, src: Rank, tag: u64, count: usize) -> Poll<Result<Payload, FabricError>> {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    m.poll_recv(src, Tag(tag), Shape::new(DType::I32, count), &mut cx)
}

fn ar(seq: u64) -> CallId {
    CallId::new(
        seq,
        &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
    )
}

#[test]
fn matches_by_source_tag_and_call_in_order() {
    let m = Mailbox::new(0, 3, Duration::from_secs(5));
    m.begin_call(ar(1)).unwrap();
    m.deliver(2, Tag(7), ar(2), Payload::from_vec(vec![9i32]));
    m.deliver(1, Tag(7), ar(1), Payload::from_vec(vec![1i32]));
    m.deliver(1, Tag(7), ar(1), Payload::from_vec(vec![2i32]));
    assert!(
        poll(&m, 2, 7, 1).is_pending(),
        "call 2's message waits for call 2"
    );
    let Poll::Ready(Ok(p)) = poll(&m, 1, 7, 1) else {
        panic!()
    };
    assert_eq!(p.as_slice::<i32>(), Some(&[1][..]));
    let Poll::Ready(Ok(p)) = poll(&m, 1, 7, 1) else {
        panic!()
    };
    assert_eq!(p.as_slice::<i32>(), Some(&[2][..]));
    m.begin_call(ar(2)).unwrap();
    let Poll::Ready(Ok(p)) = poll(&m, 2, 7, 1) else {
        panic!()
    };
    assert_eq!(p.as_slice::<i32>(), Some(&[9][..]));
    assert!(matches!(poll(&m, 1, 7, 2), Poll::Pending));
    assert!(matches!(
        poll(&m, 5, 7, 1),
        Poll::Ready(Err(FabricError::PeerOutOfRange { peer: 5, .. }))
    ));
}

#[test]
fn a_different_collective_fails_the_rank_naming_the_sender() {
    let m = Mailbox::new(0, 2, Duration::from_secs(5));
    m.begin_call(ar(1)).unwrap();
    assert!(poll(&m, 1, 0, 1).is_pending());
    m.deliver(
        1,
        Tag(0),
        CallId::new(
            1,
            &algorithms::catalogue_algorithm(Collective::Broadcast, "chain"),
        ),
        Payload::from_vec(vec![1i32]),
    );
    let Poll::Ready(Err(e)) = poll(&m, 1, 0, 1) else {
        panic!()
    };
    let text = e.to_string();
    assert!(
        text.contains("rank 1 is in call #1 (broadcast, chain)"),
        "{text}"
    );
    assert!(text.contains("call #1 (allreduce, ring)"), "{text}");
}

#[test]
fn a_different_collective_that_arrived_early_is_caught_at_the_call() {
    let m = Mailbox::new(0, 2, Duration::from_secs(5));
    m.deliver(
        1,
        Tag(0),
        CallId::new(
            1,
            &algorithms::catalogue_algorithm(Collective::Broadcast, "chain"),
        ),
        Payload::from_vec(vec![1i32]),
    );
    let e = m.begin_call(ar(1)).unwrap_err();
    assert!(
        e.to_string().contains("called different collectives"),
        "{e}"
    );
}

#[test]
fn a_message_left_from_an_earlier_call_is_an_error() {
    let m = Mailbox::new(0, 2, Duration::from_secs(5));
    m.begin_call(ar(1)).unwrap();
    m.deliver(1, Tag(0), ar(1), Payload::from_vec(vec![1i32]));
    let e = m.begin_call(ar(2)).unwrap_err();
    assert!(e.to_string().contains("never received"), "{e}");
}

#[test]
fn a_silent_peer_is_named_whoever_the_receive_waited_for() {
    let m = Mailbox::new(2, 3, Duration::from_millis(10));
    m.begin_call(ar(1)).unwrap();
    assert!(poll(&m, 1, 4, 1).is_pending());
    let later = Instant::now() + Duration::from_millis(50);
    let silent = PeerSilence::Silent {
        peer: 0,
        silent: Duration::from_millis(2500),
    };
    assert!(m.expire_with(later, || silent));
    let Poll::Ready(Err(e @ FabricError::Timeout { peer: 0, .. })) = poll(&m, 1, 4, 1) else {
        panic!("the rank fails naming rank 0")
    };
    let text = e.to_string();
    assert!(
        text.contains("rank 0 stopped responding: nothing heard from it for 2.5 s"),
        "{text}"
    );
    assert!(text.contains("rank 1 is alive"), "{text}");
}

#[test]
fn a_live_peer_gets_one_threshold_more_then_is_named_as_alive() {
    let m = Mailbox::new(0, 2, Duration::from_millis(100));
    m.begin_call(ar(1)).unwrap();
    let start = Instant::now();
    assert!(poll(&m, 1, 0, 1).is_pending());
    let heard = PeerSilence::AllHeard {
        threshold: Duration::from_millis(100),
    };
    assert!(!m.expire_with(start + Duration::from_millis(150), || heard));
    assert!(poll(&m, 1, 0, 1).is_pending());
    assert!(m.expire_with(start + Duration::from_millis(250), || heard));
    let Poll::Ready(Err(e @ FabricError::Timeout { peer: 1, .. })) = poll(&m, 1, 0, 1) else {
        panic!("rank 1 named")
    };
    assert!(e.to_string().contains("though rank 1 is alive"), "{e}");
}

#[test]
fn failures_and_timeouts_end_waiting_receives() {
    let m = Mailbox::new(0, 3, Duration::from_millis(10));
    m.begin_call(ar(1)).unwrap();
    assert!(poll(&m, 1, 0, 1).is_pending());
    assert!(poll(&m, 2, 0, 1).is_pending());
    m.fail_peer(
        1,
        FabricError::Transport {
            rank: 0,
            reason: "rank 1 closed its connection".into(),
        },
    );
    assert!(matches!(
        poll(&m, 1, 0, 1),
        Poll::Ready(Err(FabricError::Transport { .. }))
    ));
    assert!(!m.expire(Instant::now()));
    assert!(m.expire(Instant::now() + Duration::from_millis(50)));
    let Poll::Ready(Err(FabricError::Timeout { peer: 2, .. })) = poll(&m, 2, 0, 1) else {
        panic!()
    };
}

/// A waker that counts its wake-ups.
struct Counter(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Counter {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (std::sync::Arc<Counter>, Waker) {
    let c = std::sync::Arc::new(Counter(0.into()));
    (c.clone(), Waker::from(c))
}

fn poll_with(m: &Mailbox, src: Rank, tag: u64, w: &Waker) -> Poll<Result<Payload, FabricError>> {
    m.poll_recv(
        src,
        Tag(tag),
        Shape::new(DType::I32, 1),
        &mut Context::from_waker(w),
    )
}

#[test]
fn every_waiting_receive_is_woken_whichever_waker_came_last() {
    let m = Mailbox::new(0, 3, Duration::from_secs(5));
    m.begin_call(ar(1)).unwrap();
    let (a, wa) = counter();
    let (b, wb) = counter();
    // `wa` is kept, then replaced by `wb`: the first receive still wakes `wa`.
    assert!(poll_with(&m, 1, 0, &wa).is_pending());
    assert!(poll_with(&m, 2, 0, &wb).is_pending());
    // A second receive of the same key with another waker wakes both.
    assert!(poll_with(&m, 2, 0, &wa).is_pending());
    m.deliver(1, Tag(0), ar(1), Payload::from_vec(vec![1i32]));
    assert_eq!(a.0.load(Ordering::SeqCst), 1);
    assert_eq!(b.0.load(Ordering::SeqCst), 0);
    m.deliver(2, Tag(0), ar(1), Payload::from_vec(vec![2i32]));
    assert_eq!(a.0.load(Ordering::SeqCst), 2);
    assert_eq!(b.0.load(Ordering::SeqCst), 1);
    // The same waker again: kept, woken by a failure.
    assert!(poll_with(&m, 1, 1, &wb).is_pending());
    assert!(poll_with(&m, 2, 1, &wb).is_pending());
    m.fail_peer(
        1,
        FabricError::Transport {
            rank: 0,
            reason: "gone".into(),
        },
    );
    assert_eq!(b.0.load(Ordering::SeqCst), 2);
    m.fail_all(FabricError::Transport {
        rank: 0,
        reason: "over".into(),
    });
    assert_eq!(b.0.load(Ordering::SeqCst), 3);
    assert_eq!(a.0.load(Ordering::SeqCst), 2);
}

#[test]
fn the_flags_say_whether_a_message_or_a_receive_waits() {
    let m = Mailbox::new(0, 3, Duration::from_secs(5));
    m.begin_call(ar(1)).unwrap();
    assert!(!m.holds_messages() && !m.has_waiters());
    assert!(poll(&m, 1, 7, 1).is_pending());
    assert!(m.has_waiters() && !m.holds_messages());
    assert!(poll(&m, 2, 7, 1).is_pending());
    m.deliver(1, Tag(7), ar(1), Payload::from_vec(vec![1i32]));
    assert!(m.holds_messages());
    assert!(m.has_waiters(), "the receive from rank 2 still waits");
    m.deliver(2, Tag(7), ar(1), Payload::from_vec(vec![2i32]));
    assert!(!m.has_waiters());
    assert!(poll(&m, 1, 7, 1).is_ready());
    assert!(m.holds_messages(), "rank 2's message is still there");
    assert!(poll(&m, 2, 7, 1).is_ready());
    assert!(!m.holds_messages());
    assert!(poll(&m, 1, 8, 1).is_pending());
    m.fail_all(FabricError::Transport {
        rank: 0,
        reason: "stop".into(),
    });
    assert!(
        !m.has_waiters(),
        "a failure wakes and forgets every receive"
    );
}
