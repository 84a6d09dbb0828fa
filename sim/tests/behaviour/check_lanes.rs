//! Soundness of the checker's lanes: the sends an
//! `algorithms::outbox::Outbox` keeps in flight (one lane per destination
//! and tag) are units of their own, apart from the flow that queues them
//! (see `checker::world::lanes`). On the double binary tree allreduce (the
//! catalogue's outbox user) under rendezvous, one slot and unbounded
//! buffering, with and without a crash, and two trees issued concurrently
//! (calls and lanes both units), the DPOR search reaches exactly the naive
//! search's and the stateful search's outcomes; programs built
//! to observe the lanes (a flow that selects over a flush and a receive,
//! a lane that reads the clock) are caught: the first through the flush
//! the outbox reports, the second by falling back, and both reach every
//! outcome. One breach no fabric can see is pinned as the documented
//! limit: a `start` function that logs completion order in a cell the
//! flow reads when its own receive completes.

use std::cell::RefCell;
use std::pin::pin;
use std::rc::Rc;

use algorithms::outbox::Outbox;
use algorithms::{Algorithm, Collective, CollectiveError, Fabric, Shape, Tag, catalogue_algorithm};
use checker::explore::Reduction;
use checker::spec::{Buffering, CheckScenario, Point};
use futures_util::future::{Either, select};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_naive_outcomes, call, faults, outcomes, point, program,
};

const BUFFERINGS: [Buffering; 3] = [RENDEZVOUS, EAGER1, Buffering::Unbounded];

fn tree() -> CheckScenario {
    program(vec![call(
        0,
        catalogue_algorithm(Collective::Allreduce, "tree"),
    )])
}

/// DPOR (with lanes as units) reaches exactly the naive search's
/// outcomes (and the stateful search's) at `at`, using the lanes.
fn same_as_naive(name: &str, p: CheckScenario, at: Point) {
    let (naive, dpor) = assert_naive_outcomes(name, p, at);
    assert!(
        dpor.branches_independent && !dpor.branches_fallback,
        "{name}: {dpor:?}"
    );
    assert!(dpor.schedules <= naive.schedules, "{name}");
}

#[test]
fn tree_allreduce_with_lanes_reaches_the_naive_outcomes() {
    for buffering in BUFFERINGS {
        for n in [2, 3, 4] {
            let label = format!("tree N={n} {buffering}");
            same_as_naive(&label, tree(), point(n, n, 1, buffering));
        }
    }
    // Two chunks per half: a lane holds a second send while the first is
    // in flight.
    same_as_naive(
        "tree N=3 2 chunks rendezvous",
        tree(),
        point(3, 4, 2, RENDEZVOUS),
    );
}

#[test]
fn tree_allreduce_with_lanes_under_a_crash() {
    for buffering in [RENDEZVOUS, EAGER1] {
        let mut p = tree();
        p.faults = faults(0, None, 1, 0);
        let label = format!("tree N=3 crash=1 {buffering}");
        same_as_naive(&label, p, point(3, 3, 1, buffering));
    }
}

/// How [`lane_observer`] observes its lanes.
#[derive(Clone, Copy, Debug)]
enum Observe {
    /// Rank 0 selects over flushing its outbox and a receive: whether
    /// every send completed before rank 1's reply arrived.
    FlushOrReceive,
    /// Each lane reads the rank's clock before its send.
    ClockInLane,
}

/// Rank 0 queues its first element to ranks 1 and 2 (two lanes); each of
/// them receives it and replies, rank 1 first. Rank 0 then observes as
/// `observe` says; its result records the observation (element 1 copied
/// over element 0 when the reply came first).
fn lane_observer(name: &str, observe: Observe) -> Algorithm {
    Algorithm::from_fn(
        name,
        Collective::Allreduce,
        move |fabric, buf, _op, params| {
            Box::pin(async move {
                let mine = buf.extract(0..1);
                let shape = Shape::new(mine.shape().dtype, 1);
                let (data, reply) = (params.tag, Tag(params.tag.0 + 1));
                if fabric.rank() != 0 {
                    let got = fabric.recv(0, data, shape).await?;
                    fabric.send(0, reply, got).await?;
                    return Ok(());
                }
                let fabric = &fabric;
                let start = move |to, tag, payload| async move {
                    if let Observe::ClockInLane = observe {
                        fabric.now();
                    }
                    fabric.send(to, tag, payload).await
                };
                let mut outbox = Outbox::new(fabric);
                outbox.push(1, data, mine.clone());
                outbox.push(2, data, mine);
                let from_one = fabric.recv(1, reply, shape);
                let reply_first = match observe {
                    Observe::FlushOrReceive => {
                        match select(pin!(outbox.flush(&start)), pin!(from_one)).await {
                            Either::Left((flushed, recv)) => {
                                flushed?;
                                recv.await?;
                                false
                            }
                            Either::Right((got, _)) => {
                                got?;
                                true
                            }
                        }
                    }
                    Observe::ClockInLane => {
                        outbox.alongside(from_one, &start).await??;
                        false
                    }
                };
                outbox.flush(&start).await?;
                fabric.recv(2, reply, shape).await?;
                if reply_first {
                    let other = buf.extract(1..2);
                    buf.copy_from(0..1, &other)?;
                }
                Ok::<_, CollectiveError>(())
            })
        },
    )
}

/// Programs that observe their lanes: every outcome of the naive search
/// is reached, both observations among them where there are two.
#[test]
fn programs_observing_their_lanes_are_caught() {
    for buffering in BUFFERINGS {
        let label = format!("flush_or_receive N=3 {buffering}");
        let p = program(vec![call(
            0,
            lane_observer("flush_or_receive", Observe::FlushOrReceive),
        )]);
        let at = point(3, 2, 1, buffering);
        let (naive, dpor) = assert_naive_outcomes(&label, p.clone(), at);
        assert!(!dpor.branches_fallback, "{label}: {dpor:?}");
        if buffering == RENDEZVOUS {
            let (seen, _) = outcomes(&Rc::new(p), at, Reduction::Naive);
            assert!(
                seen.len() > 1,
                "{label}: the program observes nothing ({} outcome, naive {} schedules)",
                seen.len(),
                naive.schedules
            );
        }

        let label = format!("clock_in_lane N=3 {buffering}");
        let p = program(vec![call(
            0,
            lane_observer("clock_in_lane", Observe::ClockInLane),
        )]);
        let (_, dpor) = assert_naive_outcomes(&label, p, at);
        assert!(
            !dpor.branches_independent && dpor.branches_fallback,
            "{label}: {dpor:?}"
        );
    }
}

/// Rank 0 keeps its sends to ranks 1 and 2 in an outbox whose `start`
/// logs each completed send in a cell, and, once rank 1's reply has
/// arrived, reads the log: whether its send to rank 2 had completed.
fn logging_lanes() -> Algorithm {
    Algorithm::from_fn(
        "logging_lanes",
        Collective::Allreduce,
        |fabric, buf, _op, params| {
            Box::pin(async move {
                let mine = buf.extract(0..1);
                let shape = Shape::new(mine.shape().dtype, 1);
                let (data, reply) = (params.tag, Tag(params.tag.0 + 1));
                if fabric.rank() != 0 {
                    let got = fabric.recv(0, data, shape).await?;
                    if fabric.rank() == 1 {
                        fabric.send(0, reply, got).await?;
                    }
                    return Ok(());
                }
                let fabric = &fabric;
                let log: RefCell<Vec<usize>> = RefCell::new(Vec::new());
                let log = &log;
                let start = move |to, tag, payload| async move {
                    let sent = fabric.send(to, tag, payload).await;
                    log.borrow_mut().push(to);
                    sent
                };
                let mut outbox = Outbox::new(fabric);
                outbox.push(1, data, mine.clone());
                outbox.push(2, data, mine);
                outbox
                    .alongside(fabric.recv(1, reply, shape), &start)
                    .await??;
                let two_first = log.borrow().contains(&2);
                outbox.flush(&start).await?;
                if two_first {
                    let other = buf.extract(1..2);
                    buf.copy_from(0..1, &other)?;
                }
                Ok::<_, CollectiveError>(())
            })
        },
    )
}

/// The limit the lanes share with branches and concurrent calls: state
/// kept outside the fabric and read only when the flow's own operation
/// completes is invisible, so the search reaches one of the two outcomes
/// without falling back (the outbox's contract: its `start` function
/// shares nothing with the flow).
#[test]
fn state_shared_outside_the_fabric_is_not_seen() {
    let p = Rc::new(program(vec![call(0, logging_lanes())]));
    let at = point(3, 2, 1, RENDEZVOUS);
    let (naive, _) = outcomes(&p, at, Reduction::Naive);
    let (dpor, stats) = outcomes(&p, at, Reduction::Dpor);
    assert_eq!(naive.len(), 2, "the program observes the log");
    assert!(
        stats.branches_independent && !stats.branches_fallback,
        "{stats:?}"
    );
    assert_eq!(dpor.len(), 1, "the documented limit changed: {stats:?}");
    assert!(dpor.is_subset(&naive));
}

/// Two trees issued concurrently on every rank (calls and lanes both
/// units): the naive search's outcomes.
#[test]
fn concurrent_trees_with_lanes_reach_the_naive_outcomes() {
    let tree = || catalogue_algorithm(Collective::Allreduce, "tree");
    for buffering in BUFFERINGS {
        let mut p = program(vec![call(0, tree()), call(1, tree())]);
        p.concurrent = true;
        let label = format!("two trees N=2 {buffering}");
        let (_, dpor) = assert_naive_outcomes(&label, p, point(2, 2, 1, buffering));
        assert!(
            dpor.calls_independent && dpor.branches_independent,
            "{label}: {dpor:?}"
        );
    }
}
