//! The checker's eager slots per connection: under `eager:K` a send takes
//! one of `K` slots of its (src, dst) pair and channel, the channel being
//! the branch of the call's outermost `join_branches` it was posted from
//! (NCCL gives every channel its own connection and buffers), while sends
//! outside every join share one pool per pair (MPI's eager protocol).
//! The slots decide which send completes early, so they are part of what
//! the search explores: on programs built to make channels contend for
//! slots, and to observe arrival order across channels, the DPOR search
//! reaches exactly the naive search's outcomes.

use std::rc::Rc;

use algorithms::branches::join_branches;
use algorithms::{Algorithm, Collective, CollectiveError, Fabric, Payload, Tag};
use checker::explore::Reduction;
use checker::spec::{Buffering, CheckScenario};
use futures_util::future::{Either, join_all, select};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_naive_outcomes, call, outcomes, point, program,
};

/// How rank 0 joins its two channels' sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// `join_branches`: each branch is a channel with its own slots.
    Branches,
    /// `futures_util::future::join_all`: every send shares the pair's.
    Plain,
}

fn one(algorithm: Algorithm) -> CheckScenario {
    program(vec![call(0, algorithm)])
}

/// Whether some rank of the outcome never finished (a hang).
fn hangs(outcome: &str) -> bool {
    outcome.contains("Running")
}

/// Rank 0 sends on tag 0 from one channel, and on tags 1 then 2 from
/// another; rank 1 receives tag 2 first, then 1, then 0. With one slot
/// per pair the tag-0 message takes the slot, the tag-1 send waits for a
/// receive rank 1 posts only after tag 2, which is never sent: every
/// schedule hangs. With one slot per channel the tag-1 send is buffered
/// on its own channel, and every schedule completes.
fn crossed_channels(how: How) -> Algorithm {
    Algorithm::from_fn(
        &format!("crossed_channels_{how:?}"),
        Collective::Allreduce,
        move |fabric, buf, _op, _params| {
            Box::pin(async move {
                let one = buf.extract(0..1);
                let shape = one.shape();
                if fabric.rank() == 0 {
                    let first = async { fabric.send(1, Tag(0), one.clone()).await };
                    let second = async {
                        fabric.send(1, Tag(1), one.clone()).await?;
                        fabric.send(1, Tag(2), one.clone()).await
                    };
                    let channels: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = _>>>> =
                        vec![Box::pin(first), Box::pin(second)];
                    let done = match how {
                        How::Branches => join_branches(&fabric, channels).await,
                        How::Plain => join_all(channels).await,
                    };
                    for d in done {
                        d?;
                    }
                } else {
                    for tag in [2, 1, 0] {
                        fabric.recv(0, Tag(tag), shape).await?;
                    }
                }
                Ok::<_, CollectiveError>(())
            })
        },
    )
}

/// One slot per channel of a join, one per pair outside joins: the same
/// program hangs on every schedule with a plain `join_all` and completes
/// on every schedule with `join_branches`, under one eager slot; under
/// rendezvous and unbounded buffering the two agree.
#[test]
fn each_channel_of_a_join_has_its_own_slots() {
    let at = point(2, 2, 1, EAGER1);
    assert_naive_outcomes(
        "crossed channels, branches, eager:1",
        one(crossed_channels(How::Branches)),
        at,
    );
    let (seen, _) = outcomes(
        &Rc::new(one(crossed_channels(How::Branches))),
        at,
        Reduction::Dpor,
    );
    let (plain, _) = outcomes(
        &Rc::new(one(crossed_channels(How::Plain))),
        at,
        Reduction::Dpor,
    );
    assert!(
        !seen.is_empty() && !seen.iter().any(|o| hangs(o)),
        "{seen:?}"
    );
    assert!(
        !plain.is_empty() && plain.iter().all(|o| hangs(o)),
        "{plain:?}"
    );
    for buffering in [RENDEZVOUS, Buffering::Unbounded] {
        let at = point(2, 2, 1, buffering);
        let (seen, _) = outcomes(
            &Rc::new(one(crossed_channels(How::Branches))),
            at,
            Reduction::Dpor,
        );
        let (plain, _) = outcomes(
            &Rc::new(one(crossed_channels(How::Plain))),
            at,
            Reduction::Dpor,
        );
        assert_eq!(seen, plain, "{buffering}");
    }
}

/// Two channels between two ranks: on channel 0 rank 0 sends two
/// messages and then receives two, rank 1 receives two and then sends two
/// (under one slot, rank 0's second send waits for its channel's slot,
/// which rank 1's first receive frees); on channel 1 rank 0 sends one and
/// receives one, rank 1 the reverse; then, outside the join, rank 0 sends
/// two messages on the pair's own pool (under one slot the second waits
/// for rank 1's first receive) and rank 1 answers once. With
/// `observer`, rank 1 first selects over rank 0's two channels' first
/// messages (sent before anything else on each channel), recording which
/// came first in its result, so arrival order across channels is an
/// outcome.
fn contending_channels(observer: bool) -> Algorithm {
    Algorithm::from_fn(
        &format!("contending_channels_{observer}"),
        Collective::Allreduce,
        move |fabric, buf, _op, _params| {
            Box::pin(async move {
                let me = fabric.rank();
                let peer = 1 - me;
                let mine = buf.extract(0..1);
                let shape = mine.shape();
                let mut second_first = false;
                if observer && me == 1 {
                    let a = Box::pin(fabric.recv(0, Tag(10), shape));
                    let b = Box::pin(fabric.recv(0, Tag(11), shape));
                    second_first = match select(a, b).await {
                        Either::Left((x, rest)) => {
                            x?;
                            rest.await?;
                            false
                        }
                        Either::Right((y, rest)) => {
                            y?;
                            rest.await?;
                            true
                        }
                    };
                }
                let send = |tag: u64| fabric.send(peer, Tag(tag), mine.clone());
                let recv = |tag: u64| fabric.recv(peer, Tag(tag), shape);
                let channel0 = async {
                    let mut got = Vec::new();
                    if me == 0 {
                        if observer {
                            send(10).await?;
                        }
                        send(0).await?;
                        send(0).await?;
                        got.push(recv(0).await?);
                        got.push(recv(0).await?);
                    } else {
                        got.push(recv(0).await?);
                        got.push(recv(0).await?);
                        send(0).await?;
                        send(0).await?;
                    }
                    Ok::<_, CollectiveError>(got)
                };
                let channel1 = async {
                    let mut got = Vec::new();
                    if me == 0 {
                        if observer {
                            send(11).await?;
                        }
                        send(1).await?;
                        got.push(recv(1).await?);
                    } else {
                        got.push(recv(1).await?);
                        send(1).await?;
                    }
                    Ok::<_, CollectiveError>(got)
                };
                let channels: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = _>>>> =
                    vec![Box::pin(channel0), Box::pin(channel1)];
                let mut got: Vec<Payload> = Vec::new();
                for done in join_branches(&fabric, channels).await {
                    got.extend(done?);
                }
                if me == 0 {
                    send(5).await?;
                    send(5).await?;
                    got.push(recv(6).await?);
                } else {
                    got.push(recv(5).await?);
                    got.push(recv(5).await?);
                    send(6).await?;
                }
                if second_first {
                    // What was observed lands in the result.
                    buf.copy_from(0..1, &got[0])?;
                }
                Ok(())
            })
        },
    )
}

/// Contending sends within a channel, sends on the pair's own pool after
/// the join, and an observer of arrival order across channels: DPOR
/// reaches the naive search's outcomes under every buffering.
#[test]
fn contending_channels_reach_the_naive_outcomes() {
    for observer in [false, true] {
        for buffering in [
            RENDEZVOUS,
            EAGER1,
            Buffering::Eager(2),
            Buffering::Unbounded,
        ] {
            let name = format!("contending channels, observer {observer}, {buffering}");
            let (naive, dpor) = assert_naive_outcomes(
                &name,
                one(contending_channels(observer)),
                point(2, 2, 1, buffering),
            );
            assert!(dpor.complete(), "{name}: {dpor:?}");
            assert!(dpor.branches_independent, "{name}: {dpor:?}");
            assert!(naive.schedules > 1, "{name}: nothing to reorder");
            if observer {
                let program = Rc::new(one(contending_channels(observer)));
                let (seen, _) = outcomes(&program, point(2, 2, 1, buffering), Reduction::Dpor);
                assert_eq!(seen.len(), 2, "{name}: both arrival orders are outcomes");
            }
        }
    }
}
