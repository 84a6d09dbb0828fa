//! Soundness of the checker's per-call refinement: the concurrent calls of
//! a rank are separate units of the dependence relation, so steps of
//! different calls commute unless they share a channel (a tag) or a send
//! slot (see `checker::effect`). On small programs built to stress it (two
//! calls sharing a slot, sharing a tag, a call that observes its own
//! completion order, faults, every buffering) the DPOR search reaches
//! exactly the naive search's outcomes; programs that break its
//! assumption (a call reading the rank's clock, a call moving when
//! another call's operation completes) make the search fall back to
//! whole ranks, with the same outcomes; the tag reuse bug is still found
//! on 2 and 3 ranks; and the refinement's stated limit holds as stated
//! (calls sharing a counter outside the fabric, read when their own
//! receives complete, lose an outcome unseen).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use algorithms::{Algorithm, Collective, Fabric, catalogue_algorithm};
use checker::explore::{Reduction, SearchStats};
use checker::run::{Options, check};
use checker::spec::{Buffering, CallSpec, CheckScenario, Point, Verdict};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_naive_outcomes, call, demo, faults, point, program, ring,
};

const BUFFERINGS: [Buffering; 3] = [RENDEZVOUS, EAGER1, Buffering::Unbounded];

/// `calls` issued concurrently on every rank (each rank chooses their
/// order), each call with its own tag unless a test says otherwise.
fn concurrent(calls: Vec<CallSpec>) -> CheckScenario {
    let mut p = program(calls);
    p.concurrent = true;
    p
}

/// DPOR reaches exactly the naive search's outcomes, with the per-call
/// refinement, at `n` ranks and 2 elements.
fn assert_same_outcomes(name: &str, program: CheckScenario, n: usize, buffering: Buffering) {
    let stats = same_outcomes(name, program, point(n, 2, 1, buffering));
    assert!(
        stats.calls_independent,
        "{name}: the per-call refinement was not used: {stats:?}"
    );
}

/// DPOR reaches exactly the naive search's outcomes at `at`; returns
/// DPOR's counters (to see which reductions it used).
fn same_outcomes(name: &str, program: CheckScenario, at: Point) -> SearchStats {
    assert_naive_outcomes(name, program, at).1
}

fn broadcast(index: usize) -> CallSpec {
    call(
        index,
        catalogue_algorithm(Collective::Broadcast, "binomial"),
    )
}

/// Two rings with their own tags: every message of one call and one of
/// the other on a pair share the pair's send slots (one under eager:1).
#[test]
fn two_rings_sharing_send_slots() {
    for buffering in BUFFERINGS {
        assert_same_outcomes(
            &format!("two rings N=2 {buffering}"),
            concurrent(vec![ring(), call(1, ring().algorithm)]),
            2,
            buffering,
        );
    }
}

/// Two calls on one tag (the tag reuse bug): their messages and receives
/// share channels, so their steps conflict; every outcome, wrong results
/// included, is reached.
#[test]
fn two_rings_sharing_a_tag() {
    for buffering in BUFFERINGS {
        let mut p = concurrent(vec![ring(), call(1, ring().algorithm)]);
        p.calls[1].tag = 0;
        assert_same_outcomes(&format!("tag reuse N=2 {buffering}"), p, 2, buffering);
    }
}

/// Calls of different shapes: a ring allreduce beside a binomial
/// broadcast, whose messages share its pair's slots.
#[test]
fn a_ring_beside_a_broadcast() {
    for buffering in BUFFERINGS {
        assert_same_outcomes(
            &format!("ring + broadcast N=2 {buffering}"),
            concurrent(vec![ring(), broadcast(1)]),
            2,
            buffering,
        );
    }
}

/// A call that observes the order in which its own receives complete
/// (`arrival_order_sum`, select-like code) beside a broadcast whose
/// messages share its pairs' slots.
#[test]
fn a_completion_order_observer_beside_a_broadcast() {
    let observer = call(0, demo(checker::demo::ArrivalOrderSum).algorithm);
    for buffering in [RENDEZVOUS, EAGER1] {
        let stats = same_outcomes(
            &format!("arrival_order_sum + broadcast N=3 {buffering}"),
            concurrent(vec![observer.clone(), broadcast(1)]),
            point(3, 1, 1, buffering),
        );
        assert!(stats.calls_independent, "{stats:?}");
    }
}

/// Faults striking one of two concurrent calls: a crash, a loss (lost for
/// good, or retransmitted until the retry budget runs out), a timeout.
#[test]
fn concurrent_calls_with_faults() {
    let cases = [
        ("crash", faults(0, None, 1, 0), RENDEZVOUS),
        ("crash", faults(0, None, 1, 0), EAGER1),
        ("drop", faults(1, None, 0, 0), EAGER1),
        ("drop retransmitted", faults(1, Some(0), 0, 0), EAGER1),
        ("timeout", faults(0, None, 0, 1), Buffering::Unbounded),
    ];
    for (name, faults, buffering) in cases {
        let mut p = concurrent(vec![broadcast(0), broadcast(1)]);
        p.faults = faults;
        let stats = same_outcomes(
            &format!("two broadcasts N=2 {name} {buffering}"),
            p,
            point(2, 2, 1, buffering),
        );
        assert!(stats.calls_independent, "{stats:?}");
    }
    let mut p = concurrent(vec![ring(), broadcast(1)]);
    p.faults = faults(0, None, 1, 0);
    assert_same_outcomes("ring + broadcast N=2 crash", p, 2, RENDEZVOUS);
}

/// The ring, after reading the rank's clock ([`Fabric::now`], which every
/// call of the rank moves): its result says whether a message had arrived
/// when it started.
fn clocked_ring() -> Algorithm {
    Algorithm::from_fn(
        "clocked_ring",
        Collective::Allreduce,
        |fabric, buf, op, params| {
            Box::pin(async move {
                let early = fabric.now().0 > 0;
                let ring = catalogue_algorithm(Collective::Allreduce, "ring");
                ring.run(&fabric, buf, op, params).await?;
                if early {
                    let first = buf.extract(0..1);
                    buf.copy_from(1..2, &first)?;
                }
                Ok(())
            })
        },
    )
}

/// The ring, started only when the rank's task is polled again after its
/// first poll: it moves when another call's operation completes, without
/// one of its own (as code polling state outside the fabric would).
fn polled_ring() -> Algorithm {
    Algorithm::from_fn(
        "polled_ring",
        Collective::Allreduce,
        |fabric, buf, op, params| {
            Box::pin(async move {
                PollAgain(false).await;
                let ring = catalogue_algorithm(Collective::Allreduce, "ring");
                ring.run(&fabric, buf, op, params).await
            })
        },
    )
}

/// Pending at its first poll without arranging a wake-up, ready at the
/// next.
struct PollAgain(bool);

impl Future for PollAgain {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

/// Programs that break the refinement's assumption: the search notices
/// and falls back to whole ranks, reaching every outcome.
#[test]
fn calls_observing_each_other_fall_back_to_whole_ranks() {
    let breakers: [(&str, CallSpec); 2] = [
        ("clocked ring", call(1, clocked_ring())),
        ("polled ring", call(1, polled_ring())),
    ];
    for (name, breaker) in breakers {
        for buffering in [RENDEZVOUS, EAGER1] {
            let p = concurrent(vec![ring(), breaker.clone()]);
            let at = point(2, 2, 1, buffering);
            let stats = same_outcomes(&format!("ring + {name} N=2 {buffering}"), p, at);
            assert!(
                !stats.calls_independent && stats.calls_fallback,
                "{name} {buffering}: {stats:?}"
            );
        }
    }
}

/// A `max_steps` assertion reads the ranks' clocks, which calls share:
/// the refinement is not used at all.
#[test]
fn a_clock_property_keeps_whole_ranks() {
    let mut p = concurrent(vec![ring(), call(1, ring().algorithm)]);
    p.asserts
        .push(checker::spec::Assertion::MaxSteps { steps: 100 });
    let stats = same_outcomes("two rings N=2 max_steps", p, point(2, 2, 1, EAGER1));
    assert!(
        !stats.calls_independent && !stats.calls_fallback,
        "{stats:?}"
    );
}

/// `scenarios/check/tag_reuse.toml` at 2 and at 3 ranks, each searched
/// alone: the bug is found at both (at 3 ranks with 2 elements the first
/// mix-up the search meets is a receive of the wrong length, an error).
#[test]
fn tag_reuse_is_found_on_two_and_three_ranks() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/check/tag_reuse.toml");
    let registry = algorithms::Registry::builtin();
    for n in [2, 3] {
        let mut p = checker::scenario::load(&path, &registry).expect("the scenario loads");
        p.axes.world_size = vec![n];
        let report = check(
            &Rc::new(p),
            Options {
                compare_naive: false,
                no_shrink: true,
            },
        )
        .expect("the search runs");
        let found = [Verdict::WrongResult, Verdict::Error];
        assert!(
            found.contains(&report.verdict),
            "N={n}: {:?}",
            report.verdict
        );
        if n == 2 {
            assert_eq!(report.verdict, Verdict::WrongResult);
        }
        assert!(
            report.points[0].stats.calls_independent,
            "N={n}: {:?}",
            report.points[0].stats
        );
    }
}

thread_local! {
    /// Receives completed by [`logged_receive`] on this thread, every
    /// call of every execution: state two calls share outside the fabric.
    static RECEIVED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Rank 0 sends its first element to rank 1; rank 1 receives it and
/// bumps a counter its other call bumps too (outside the fabric). Every
/// execution completes both calls of rank 1, so the counter is even when
/// one starts: the call that completes second finds it odd and writes the
/// element it received into its result.
fn logged_receive() -> Algorithm {
    Algorithm::from_fn(
        "logged_receive",
        Collective::Allreduce,
        |fabric, buf, _op, params| {
            Box::pin(async move {
                let first = buf.extract(0..1);
                if fabric.rank() == 0 {
                    fabric.send(1, params.tag, first).await?;
                } else {
                    let got = fabric.recv(0, params.tag, first.shape()).await?;
                    let second = RECEIVED.with(|r| {
                        let n = r.get();
                        r.set(n + 1);
                        n % 2 == 1
                    });
                    if second {
                        buf.copy_from(1..2, &got)?;
                    }
                }
                Ok(())
            })
        },
    )
}

/// The limit of the per-call refinement, stated in `checker::explore`:
/// calls that share state outside the fabric and read it only when their
/// own operations complete are not seen. Here rank 1's two calls learn
/// which of them completed second through a shared counter: every
/// interleaving reaches both outcomes, the refined search (which sees two
/// independent receives) one, without falling back. Should the checker
/// learn to see such sharing, this test changes with it.
#[test]
fn state_shared_outside_the_fabric_is_not_seen() {
    let p = Rc::new(concurrent(vec![
        call(0, logged_receive()),
        call(1, logged_receive()),
    ]));
    let at = point(2, 2, 1, Buffering::Unbounded);
    let (naive, naive_stats) = super::check_soundness::outcomes(&p, at, Reduction::Naive);
    let (dpor, stats) = super::check_soundness::outcomes(&p, at, Reduction::Dpor);
    assert!(naive_stats.complete() && stats.complete(), "{stats:?}");
    assert_eq!(naive.len(), 2, "{naive:?}");
    assert!(
        stats.calls_independent && !stats.calls_fallback,
        "{stats:?}"
    );
    assert_eq!(dpor.len(), 1, "{dpor:?}");
    assert!(dpor.is_subset(&naive));
    // The stateful search rests on the same assumption (its sleep sets use
    // the per-call independence, its key each call's own observations), so
    // it misses the same outcome.
    let (stateful, stats) = super::check_soundness::outcomes(&p, at, Reduction::Stateful);
    assert!(stats.complete() && stats.calls_independent, "{stats:?}");
    assert_eq!(stateful, dpor);
}
