//! Soundness of the checker's per-branch refinement: the branches a call
//! joins with `algorithms::branches::join_branches` (NCCL's channels) are
//! separate units of the dependence relation, so their completions on one
//! rank commute unless they share a channel or a send slot (see
//! `checker::world::World::branching`). On small multi-branch programs
//! (two rings on their own tags, two rings on one tag, the NCCL ring,
//! CollNet Direct and NVLS tree, faults) the DPOR search reaches exactly
//! the naive search's outcomes, and exactly those of the same program
//! joining its branches with a plain `join_all` (for these programs: under
//! `eager:K` a branch has its own slots and `join_all`'s futures share the
//! pair's, a difference `check_connections` shows); programs built to break
//! the assumption (a branch that selects over another branch's receive
//! and its own, branches that read the rank's clock, a `try_join` whose
//! branch fails first) make the search fall back, reaching every outcome.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use algorithms::branches::{join_branches, try_join_branches};
use algorithms::layout::block_range;
use algorithms::nccl::ring::channel_tag;
use algorithms::{
    Algorithm, Collective, CollectiveError, Fabric, Payload, Shape, Tag, catalogue_algorithm,
};
use checker::demo::{RingPairing, unchunked_ring};
use checker::explore::{Reduction, SearchStats};
use checker::spec::{Buffering, CheckScenario, Point};
use futures_util::future::{Either, join_all, select};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_naive_outcomes, call, faults, outcomes, point, program,
};

const BUFFERINGS: [Buffering; 3] = [RENDEZVOUS, EAGER1, Buffering::Unbounded];

/// How a test algorithm joins its two branches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// `join_branches`: the checker sees the branches.
    Branches,
    /// `futures_util::future::join_all`: one unit.
    Plain,
}

/// An allreduce that runs the unchunked ring on each half of the buffer
/// at once, each half on its own tag (`shared_tag`: both on the call's
/// tag, so their messages meet in one channel), the halves joined as
/// `how` says.
fn two_rings(how: How, pairing: RingPairing, shared_tag: bool) -> Algorithm {
    let name = format!("two_rings_{how:?}_{pairing:?}_{shared_tag}");
    Algorithm::from_fn(
        &name,
        Collective::Allreduce,
        move |fabric, buf, op, params| {
            Box::pin(async move {
                let count = buf.len();
                let halves: Vec<_> = (0..2).map(|c| block_range(count, 2, c)).collect();
                let runs = halves.iter().enumerate().map(|(c, range)| {
                    let mut part = buf.extract(range.clone());
                    let mut params = *params;
                    if !shared_tag {
                        params.tag = channel_tag(params.tag, c);
                    }
                    let fabric = &fabric;
                    async move {
                        unchunked_ring(fabric, &mut part, op, &params, pairing, false).await?;
                        Ok::<_, CollectiveError>(part)
                    }
                });
                let outputs = match how {
                    How::Branches => join_branches(&fabric, runs).await,
                    How::Plain => join_all(runs).await,
                };
                for (range, out) in halves.into_iter().zip(outputs) {
                    buf.copy_from(range, &out?)?;
                }
                Ok(())
            })
        },
    )
}

fn one(algorithm: Algorithm) -> CheckScenario {
    program(vec![call(0, algorithm)])
}

/// DPOR reaches exactly the naive search's outcomes at `at`; returns its
/// counters.
fn same_as_naive(name: &str, program: CheckScenario, at: Point) -> SearchStats {
    assert_naive_outcomes(name, program, at).1
}

/// Two rings on their own tags, joined as branches: the naive search's
/// outcomes, with the refinement used, and the outcomes (in no more
/// schedules) of the same program joined with `join_all`.
#[test]
fn two_ring_branches_reach_the_naive_outcomes() {
    for pairing in [RingPairing::Exchange, RingPairing::Joined] {
        for buffering in BUFFERINGS {
            let at = point(2, 4, 1, buffering);
            let name = format!("two ring branches {pairing:?} N=2 {buffering}");
            let branches = one(two_rings(How::Branches, pairing, false));
            let stats = same_as_naive(&name, branches.clone(), at);
            assert!(
                stats.branches_independent && !stats.branches_fallback,
                "{name}: {stats:?}"
            );
            let plain = Rc::new(one(two_rings(How::Plain, pairing, false)));
            let (joined, plain_stats) = outcomes(&plain, at, Reduction::Dpor);
            let (seen, _) = outcomes(&Rc::new(branches), at, Reduction::Dpor);
            assert_eq!(seen, joined, "{name}: outcomes differ from join_all's");
            assert!(
                stats.schedules <= plain_stats.schedules,
                "{name}: {} schedules, join_all {}",
                stats.schedules,
                plain_stats.schedules
            );
            println!(
                "{name}: branches {} schedules, join_all {}",
                stats.schedules, plain_stats.schedules
            );
        }
    }
}

/// DPOR reaches the same outcomes with the branches joined by
/// `join_branches` as with `join_all` (a search the soundness tests check
/// against the naive one), where the naive search cannot finish; returns
/// the two searches' counters.
fn same_as_join_all(
    name: &str,
    branches: CheckScenario,
    plain: CheckScenario,
    at: Point,
) -> (SearchStats, SearchStats) {
    let (seen, stats) = outcomes(&Rc::new(branches), at, Reduction::Dpor);
    let (joined, plain_stats) = outcomes(&Rc::new(plain), at, Reduction::Dpor);
    assert!(stats.complete() && plain_stats.complete(), "{name}");
    assert_eq!(seen, joined, "{name}: outcomes differ from join_all's");
    println!(
        "{name}: branches {} schedules, join_all {}, {} outcomes",
        stats.schedules,
        plain_stats.schedules,
        seen.len()
    );
    (stats, plain_stats)
}

/// Three ranks under rendezvous, where the naive search does not finish:
/// the outcomes of `join_all` (9,624 schedules) in one schedule. (With
/// the branches' send and receive joined, or without rendezvous,
/// `join_all`'s search takes from 260,000 schedules to more than 400,000.)
#[test]
fn two_ring_branches_on_three_ranks() {
    let name = "two ring branches N=3 rendezvous";
    let (stats, plain) = same_as_join_all(
        name,
        one(two_rings(How::Branches, RingPairing::Exchange, false)),
        one(two_rings(How::Plain, RingPairing::Exchange, false)),
        point(3, 6, 1, RENDEZVOUS),
    );
    assert!(stats.branches_independent, "{name}: {stats:?}");
    assert!(stats.schedules < plain.schedules, "{name}");
}

/// Two branches on one tag: their messages meet in one channel (which
/// receive gets which message is a real difference), and the search
/// orders them.
#[test]
fn branches_sharing_a_tag_are_ordered() {
    for buffering in BUFFERINGS {
        let at = point(2, 4, 1, buffering);
        let name = format!("two ring branches, one tag, N=2 {buffering}");
        let p = one(two_rings(How::Branches, RingPairing::Joined, true));
        let stats = same_as_naive(&name, p.clone(), at);
        assert!(stats.branches_independent, "{name}: {stats:?}");
        let plain = one(two_rings(How::Plain, RingPairing::Joined, true));
        let (joined, _) = outcomes(&Rc::new(plain), at, Reduction::Dpor);
        let (seen, _) = outcomes(&Rc::new(p), at, Reduction::Dpor);
        assert_eq!(seen, joined, "{name}");
    }
}

/// Faults strike branches: a crash, a timeout, a loss.
#[test]
fn branches_under_faults() {
    let cases = [
        ("crash", faults(0, None, 1, 0)),
        ("timeout", faults(0, None, 0, 1)),
        ("drop", faults(1, None, 0, 0)),
    ];
    for (what, budget) in cases {
        for buffering in [RENDEZVOUS, Buffering::Unbounded] {
            let mut p = one(two_rings(How::Branches, RingPairing::Exchange, false));
            p.faults = budget;
            same_as_naive(
                &format!("two ring branches N=2 {buffering} {what}"),
                p,
                point(2, 2, 1, buffering),
            );
        }
    }
}

/// The catalogue's multi-channel NCCL algorithms at sizes the naive search
/// finishes.
#[test]
fn nccl_channels_reach_the_naive_outcomes() {
    let cases = [
        ("nccl_ring", 2, 4),
        ("nccl_collnet_direct", 2, 4),
        ("nccl_nvls_tree", 2, 4),
    ];
    for (name, n, count) in cases {
        for buffering in BUFFERINGS {
            let p = program(vec![call(
                0,
                catalogue_algorithm(Collective::Allreduce, name),
            )]);
            let stats = same_as_naive(
                &format!("{name} N={n} {buffering}"),
                p,
                point(n, count, 1, buffering),
            );
            assert!(!stats.branches_fallback, "{name}: {stats:?}");
        }
    }
}

/// Each rank sends its first element to the other rank on two tags and
/// receives the other's on both, one tag per branch; `observe` decides
/// what the call does with the two branches, and the result records what
/// it observed (element 1 copied over element 0 when the observation says
/// "second").
fn observer(name: &str, observe: Observe) -> Algorithm {
    Algorithm::from_fn(
        name,
        Collective::Allreduce,
        move |fabric, buf, _op, params| {
            Box::pin(async move {
                let other = 1 - fabric.rank();
                let mine = buf.extract(0..1);
                let shape = Shape::new(mine.shape().dtype, 1);
                let tag = |c: usize| channel_tag(params.tag, c);
                let second = match observe {
                    Observe::CrossSelect => cross_select(&fabric, other, &mine, shape, tag).await?,
                    Observe::Clock => {
                        let runs = (0..2).map(|c| {
                            let (fabric, mine) = (&fabric, mine.clone());
                            async move {
                                swap(fabric, other, tag(c), mine, shape).await?;
                                Ok::<_, CollectiveError>(fabric.now())
                            }
                        });
                        let mut times = Vec::new();
                        for t in join_branches(&fabric, runs).await {
                            times.push(t?);
                        }
                        times[0] > times[1]
                    }
                    Observe::FailFirst => {
                        let runs = (0..2).map(|c| {
                            let (fabric, mine) = (&fabric, mine.clone());
                            async move {
                                swap(fabric, other, tag(c), mine, shape).await?;
                                Err::<(), _>(CollectiveError::InvalidRoot {
                                    root: c,
                                    world_size: 2,
                                })
                            }
                        });
                        try_join_branches(&fabric, runs).await?;
                        false
                    }
                };
                if second {
                    let first = buf.extract(1..2);
                    buf.copy_from(0..1, &first)?;
                }
                Ok(())
            })
        },
    )
}

/// Sends `mine` to `other` and receives its element on `tag`, both at once.
async fn swap<F: Fabric>(
    fabric: &F,
    other: usize,
    tag: Tag,
    mine: Payload,
    shape: Shape,
) -> Result<(), CollectiveError> {
    let (sent, got) = futures_util::join!(
        fabric.send(other, tag, mine),
        fabric.recv(other, tag, shape)
    );
    sent?;
    got?;
    Ok(())
}

/// What [`observer`] observes.
#[derive(Clone, Copy, Debug)]
enum Observe {
    /// Branch 1 selects over branch 0's receive and its own.
    CrossSelect,
    /// Each branch reads the clock once its receive is done.
    Clock,
    /// `try_join_branches` of two branches that both fail: the call's
    /// error is the first to fail.
    FailFirst,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Branch 0 posts a receive (polling it once) and hands it to branch 1,
/// which selects over it and its own: whether branch 0's arrived first.
async fn cross_select<F: Fabric>(
    fabric: &F,
    other: usize,
    mine: &Payload,
    shape: Shape,
    tag: impl Fn(usize) -> Tag,
) -> Result<bool, CollectiveError> {
    type Recv<'a> = Boxed<'a, Result<Payload, algorithms::FabricError>>;
    let slot: RefCell<Option<Recv<'_>>> = RefCell::new(None);
    let (slot, tag) = (&slot, &tag);
    let first: Boxed<'_, Result<bool, CollectiveError>> = Box::pin(async move {
        let mut recv: Recv<'_> = Box::pin(fabric.recv(other, tag(0), shape));
        let _ = futures_util::poll!(recv.as_mut());
        *slot.borrow_mut() = Some(recv);
        fabric.send(other, tag(0), mine.clone()).await?;
        Ok(false)
    });
    let second: Boxed<'_, Result<bool, CollectiveError>> = Box::pin(async move {
        let theirs = slot.borrow_mut().take().expect("branch 0 polled first");
        let own = Box::pin(fabric.recv(other, tag(1), shape));
        let (sent, arrived_second) =
            futures_util::join!(fabric.send(other, tag(1), mine.clone()), async move {
                match select(theirs, own).await {
                    Either::Left((got, rest)) => {
                        got?;
                        rest.await?;
                        Ok::<_, CollectiveError>(false)
                    }
                    Either::Right((got, rest)) => {
                        got?;
                        rest.await?;
                        Ok(true)
                    }
                }
            });
        sent?;
        arrived_second
    });
    let mut out = join_branches(fabric, vec![first, second]).await;
    let second = out.pop().expect("two branches")?;
    out.pop().expect("two branches")?;
    Ok(second)
}

/// Programs whose branches observe each other: the search notices, falls
/// back, and reaches every outcome the naive search does (both
/// observations among them).
#[test]
fn branches_observing_each_other_fall_back() {
    let cases = [
        ("cross_select", Observe::CrossSelect),
        ("clocked_branches", Observe::Clock),
        ("fail_first", Observe::FailFirst),
    ];
    for (name, observe) in cases {
        for buffering in BUFFERINGS {
            let label = format!("{name} N=2 {buffering}");
            let p = one(observer(name, observe));
            let at = point(2, 2, 1, buffering);
            let (naive, dpor) = assert_naive_outcomes(&label, p.clone(), at);
            assert!(
                !dpor.branches_independent && dpor.branches_fallback,
                "{label}: {dpor:?}"
            );
            let (seen, _) = outcomes(&Rc::new(p), at, Reduction::Naive);
            assert!(
                seen.len() > 1,
                "{label}: the program observes nothing ({} outcome, naive {} schedules)",
                seen.len(),
                naive.schedules
            );
        }
    }
}

/// A call whose branches are used as one unit (a clock property): the
/// refinement is off, the outcomes the same.
#[test]
fn a_clock_property_keeps_branches_whole() {
    let mut p = one(two_rings(How::Branches, RingPairing::Exchange, false));
    p.asserts
        .push(checker::spec::Assertion::MaxSteps { steps: 100 });
    let stats = same_as_naive("two ring branches max_steps", p, point(2, 4, 1, EAGER1));
    assert!(
        !stats.branches_independent && !stats.branches_fallback,
        "{stats:?}"
    );
}

/// The same calls, issued concurrently: calls and branches both units.
#[test]
fn concurrent_calls_of_branches() {
    for buffering in [RENDEZVOUS, Buffering::Unbounded] {
        let two_calls = |how| {
            let mut p = program(vec![
                call(0, two_rings(how, RingPairing::Exchange, false)),
                call(1, two_rings(how, RingPairing::Exchange, false)),
            ]);
            p.concurrent = true;
            p
        };
        let (stats, _) = same_as_join_all(
            &format!("two calls of two branches N=2 {buffering}"),
            two_calls(How::Branches),
            two_calls(How::Plain),
            point(2, 4, 1, buffering),
        );
        assert!(
            stats.branches_independent && stats.calls_independent,
            "{stats:?}"
        );
    }
}
