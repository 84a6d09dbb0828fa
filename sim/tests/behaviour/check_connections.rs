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

/// Both ranks run two channels against each other: channel 0 sends two
/// messages and receives two, channel 1 one of each; then a send and a
/// receive outside the join on the pair's own pool. Sends of one channel
/// contend for its slots (which of two waiting sends gets a freed slot is
/// decided in send order), and receiving rank `observer` selects over its
/// two channels' first receives in the parent, recording which came first
/// (so arrival order across channels is an outcome).
fn contending_channels(observer: Option<usize>) -> Algorithm {
    Algorithm::from_fn(
        &format!("contending_channels_{observer:?}"),
        Collective::Allreduce,
        move |fabric, buf, _op, _params| {
            Box::pin(async move {
                let me = fabric.rank();
                let peer = 1 - me;
                let mine = buf.extract(0..1);
                let shape = mine.shape();
                let mut first = None;
                if observer == Some(me) {
                    // Both channels' first sends of the peer, received in
                    // arrival order.
                    let a = Box::pin(fabric.recv(peer, Tag(10), shape));
                    let b = Box::pin(fabric.recv(peer, Tag(11), shape));
                    first = Some(match select(a, b).await {
                        Either::Left((x, rest)) => (0, x?, rest.await?),
                        Either::Right((y, rest)) => (1, rest.await?, y?),
                    });
                }
                let channel0 = async {
                    if observer == Some(peer) {
                        fabric.send(peer, Tag(10), mine.clone()).await?;
                    }
                    fabric.send(peer, Tag(0), mine.clone()).await?;
                    fabric.send(peer, Tag(0), mine.clone()).await?;
                    let x = fabric.recv(peer, Tag(0), shape).await?;
                    let y = fabric.recv(peer, Tag(0), shape).await?;
                    Ok::<_, CollectiveError>(vec![x, y])
                };
                let channel1 = async {
                    if observer == Some(peer) {
                        fabric.send(peer, Tag(11), mine.clone()).await?;
                    }
                    fabric.send(peer, Tag(1), mine.clone()).await?;
                    Ok::<_, CollectiveError>(vec![fabric.recv(peer, Tag(1), shape).await?])
                };
                let channels: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = _>>>> =
                    vec![Box::pin(channel0), Box::pin(channel1)];
                let mut got: Vec<Payload> = Vec::new();
                for done in join_branches(&fabric, channels).await {
                    got.extend(done?);
                }
                fabric.send(peer, Tag(5), mine.clone()).await?;
                got.push(fabric.recv(peer, Tag(5), shape).await?);
                if let Some((which, _, _)) = first {
                    // What was observed lands in the result.
                    if which == 1 {
                        buf.copy_from(0..1, &got[0])?;
                    }
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
    for observer in [None, Some(1)] {
        for buffering in [
            RENDEZVOUS,
            EAGER1,
            Buffering::Eager(2),
            Buffering::Unbounded,
        ] {
            let name = format!("contending channels, observer {observer:?}, {buffering}");
            let (_, dpor) = assert_naive_outcomes(
                &name,
                one(contending_channels(observer)),
                point(2, 2, 1, buffering),
            );
            assert!(dpor.complete(), "{name}: {dpor:?}");
        }
    }
}
