//! Soundness of the partial-order reduction of `sim check`: on small
//! cases, the outcomes the DPOR search reaches (each schedule's
//! [`Execution::fingerprint`]) are exactly those of the naive search over
//! every interleaving, and the DPOR search runs no more schedules. Each case
//! prints its schedule counts, DPOR against naive (the reduction factor):
//! `cargo test -p sim check_soundness -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;

use algorithms::{Algorithm, Collective, CollectiveAlgorithm, ReduceOp, catalogue_algorithm};
use checker::exec::Execution;
use checker::explore::{self, Control, Reduction, SearchStats, Target};
use checker::spec::{Axes, Bounds, Buffering, CallSpec, CheckScenario, Faults, Point, Search};
use checker::world::RankStatus;

/// The most schedules either search may run on one case: a naive search
/// that reaches it means the case is too big to compare (shrink it).
const SCHEDULES_MAX: u64 = 400_000;

pub(crate) const RENDEZVOUS: Buffering = Buffering::Eager(0);
pub(crate) const EAGER1: Buffering = Buffering::Eager(1);

pub(crate) fn call(index: usize, algorithm: Algorithm) -> CallSpec {
    CallSpec {
        id: format!("call{index}"),
        collective: algorithm.collective(),
        algorithm,
        op: ReduceOp::Sum,
        tag: index as u64,
    }
}

fn catalogue(index: usize, collective: Collective, name: &str) -> CallSpec {
    call(index, catalogue_algorithm(collective, name))
}

pub(crate) fn demo(algorithm: impl CollectiveAlgorithm) -> CallSpec {
    call(0, Algorithm::new(algorithm))
}

/// A program of `calls`, every rank in file order, exhaustive search.
pub(crate) fn program(calls: Vec<CallSpec>) -> CheckScenario {
    let default_order = (0..calls.len()).collect();
    CheckScenario {
        name: "soundness".into(),
        path: PathBuf::from("soundness.toml"),
        calls,
        order: BTreeMap::new(),
        default_order,
        concurrent: false,
        axes: Axes {
            world_size: vec![2],
            count: vec![2],
            chunks: vec![1],
            root: vec![0],
            in_place: vec![true],
            buffering: vec![Buffering::Eager(8)],
        },
        faults: Faults::default(),
        search: Search::Exhaustive,
        bounds: Bounds {
            max_schedules: SCHEDULES_MAX,
            ..Bounds::default()
        },
        check_cost: false,
        expect: None,
        asserts: Vec::new(),
        notes: Vec::new(),
    }
}

pub(crate) fn point(world_size: usize, count: usize, chunks: usize, buffering: Buffering) -> Point {
    Point {
        world_size,
        count,
        chunks,
        root: 0,
        in_place: true,
        buffering,
    }
}

pub(crate) fn ring() -> CallSpec {
    catalogue(0, Collective::Allreduce, "ring")
}

/// Every distinct outcome of one search, and its counters.
pub(crate) fn outcomes(
    program: &Rc<CheckScenario>,
    point: Point,
    reduction: Reduction,
) -> (BTreeSet<String>, SearchStats) {
    let target = Target {
        program,
        point,
        faults: program.faults,
        bounds: program.bounds,
    };
    let mut seen = BTreeSet::new();
    let stats = explore::exhaustive(&target, reduction, &[], |exec: &Execution| {
        seen.insert(exec.fingerprint());
        Control::Continue
    })
    .expect("the programs are deterministic under the checker's choices");
    (seen, stats)
}

/// Checks that the naive search and DPOR both finish at `point` and reach
/// exactly the same outcomes; prints their schedule counts and DPOR's
/// per-call counters; returns their counters, naive then DPOR.
pub(crate) fn assert_naive_outcomes(
    name: &str,
    program: CheckScenario,
    point: Point,
) -> (SearchStats, SearchStats) {
    let program = Rc::new(program);
    let (naive, naive_stats) = outcomes(&program, point, Reduction::Naive);
    assert!(
        naive_stats.complete(),
        "{name}: the naive search did not finish ({naive_stats:?}): shrink the case"
    );
    let (dpor, dpor_stats) = outcomes(&program, point, Reduction::Dpor);
    assert!(dpor_stats.complete(), "{name}: {dpor_stats:?}");
    println!(
        "{name}: DPOR {} schedules (+{} sleep-blocked), naive {}, factor {:.1}, {} outcomes, per-call {}, fallback {}, per-branch {}, fallback {}",
        dpor_stats.schedules,
        dpor_stats.sleep_blocked,
        naive_stats.schedules,
        naive_stats.schedules as f64 / dpor_stats.schedules.max(1) as f64,
        naive.len(),
        dpor_stats.calls_independent,
        dpor_stats.calls_fallback,
        dpor_stats.branches_independent,
        dpor_stats.branches_fallback
    );
    let missed: Vec<&String> = naive.difference(&dpor).collect();
    let extra: Vec<&String> = dpor.difference(&naive).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "{name}: DPOR missed {} of {} outcomes, e.g.\n{}\nand reached {} the naive search did not",
        missed.len(),
        naive.len(),
        missed.first().map_or("", |s| s.as_str()),
        extra.len()
    );
    assert_stateful_outcomes(name, &program, point, &naive);
    (naive_stats, dpor_stats)
}

/// Checks that the stateful search (a visited-state table, every enabled
/// choice taken) finishes at `point` and reaches exactly `expected` (the
/// naive search's outcomes); returns its counters.
pub(crate) fn assert_stateful_outcomes(
    name: &str,
    program: &Rc<CheckScenario>,
    point: Point,
    expected: &BTreeSet<String>,
) -> SearchStats {
    let (stateful, stats) = outcomes(program, point, Reduction::Stateful);
    assert!(stats.complete(), "{name}: stateful {stats:?}");
    println!(
        "{name}: stateful {} states stored, {} revisits, {} terminal",
        stats.states, stats.revisits, stats.schedules
    );
    assert_eq!(
        &stateful, expected,
        "{name}: the stateful search's outcomes differ from the naive search's"
    );
    stats
}

/// Checks that DPOR reaches exactly the naive search's outcomes, with no
/// more schedules; prints the two counts.
pub(crate) fn assert_sound(name: &str, program: CheckScenario, point: Point) {
    let (naive_stats, dpor_stats) = assert_naive_outcomes(name, program, point);
    assert!(
        dpor_stats.schedules <= naive_stats.schedules,
        "{name}: DPOR ran {} schedules, naive {}",
        dpor_stats.schedules,
        naive_stats.schedules
    );
}

#[test]
fn ring_allreduce_rendezvous() {
    assert_sound(
        "ring N=3 rendezvous",
        program(vec![ring()]),
        point(3, 3, 1, RENDEZVOUS),
    );
}

#[test]
fn ring_allreduce_eager_one_slot() {
    assert_sound(
        "ring N=3 eager:1",
        program(vec![ring()]),
        point(3, 3, 1, EAGER1),
    );
}

#[test]
fn ring_allreduce_unbounded() {
    assert_sound(
        "ring N=3 unbounded",
        program(vec![ring()]),
        point(3, 3, 1, Buffering::Unbounded),
    );
}

#[test]
fn arrival_order_sum() {
    for buffering in [EAGER1, RENDEZVOUS] {
        assert_sound(
            &format!("arrival_order_sum N=3 {buffering}"),
            program(vec![demo(checker::demo::ArrivalOrderSum)]),
            point(3, 2, 1, buffering),
        );
    }
}

#[test]
fn send_all_first() {
    for buffering in [EAGER1, RENDEZVOUS] {
        assert_sound(
            &format!("send_all_first N=3 {buffering}"),
            program(vec![demo(checker::demo::SendAllFirst)]),
            point(3, 3, 1, buffering),
        );
    }
}

#[test]
fn tag_reuse() {
    let mut p = program(vec![ring(), ring()]);
    p.calls[1].tag = 0;
    p.calls[1].id = "call1".into();
    p.concurrent = true;
    assert_sound("tag_reuse N=2 eager:1", p, point(2, 2, 1, EAGER1));
}

fn ring_with(faults: Faults) -> CheckScenario {
    let mut p = program(vec![ring()]);
    p.faults = faults;
    p
}

#[test]
fn ring_drop_without_retransmit() {
    let faults = Faults {
        drops: 1,
        ..Faults::default()
    };
    assert_sound(
        "ring N=2 drops=1",
        ring_with(faults),
        point(2, 2, 1, Buffering::Eager(8)),
    );
}

#[test]
fn ring_drop_with_retransmit() {
    let faults = Faults {
        drops: 1,
        retransmit: true,
        retry_count: 7,
        ..Faults::default()
    };
    assert_sound(
        "ring N=2 drops=1 retransmit",
        ring_with(faults),
        point(2, 2, 1, Buffering::Eager(8)),
    );
}

#[test]
fn ring_crash() {
    let faults = Faults {
        crashes: 1,
        ..Faults::default()
    };
    assert_sound(
        "ring N=2 crashes=1",
        ring_with(faults),
        point(2, 2, 1, Buffering::Eager(8)),
    );
}

#[test]
fn ring_timeout() {
    let faults = Faults {
        timeouts: 1,
        ..Faults::default()
    };
    assert_sound(
        "ring N=2 timeouts=1",
        ring_with(faults),
        point(2, 2, 1, Buffering::Eager(8)),
    );
}

#[test]
fn tree_allreduce() {
    assert_sound(
        "tree N=3 eager:1",
        program(vec![catalogue(0, Collective::Allreduce, "tree")]),
        point(3, 3, 1, EAGER1),
    );
}

#[test]
fn mismatched_call_order() {
    let mut p = program(vec![
        ring(),
        catalogue(1, Collective::Broadcast, "binomial"),
    ]);
    p.order.insert(0, vec![0, 1]);
    p.default_order = vec![1, 0];
    assert_sound(
        "mismatched order N=3",
        p,
        point(3, 3, 1, Buffering::Eager(8)),
    );
}

fn broadcast_with(faults: Faults) -> CheckScenario {
    let mut p = program(vec![catalogue(0, Collective::Broadcast, "binomial")]);
    p.faults = faults;
    p
}

/// A fault that the next step disables (here the delivery that satisfies
/// the receive it would fail) must be tried before that step, even when no
/// earlier step races with it.
#[test]
fn timeout_before_the_delivery_that_disables_it() {
    let faults = Faults {
        timeouts: 1,
        ..Faults::default()
    };
    assert_sound(
        "broadcast N=2 timeouts=1",
        broadcast_with(faults),
        point(2, 2, 1, Buffering::Unbounded),
    );
}

/// The same for a loss: the delivery of the only message disables its
/// drop.
#[test]
fn drop_before_the_delivery_that_disables_it() {
    let faults = Faults {
        drops: 1,
        ..Faults::default()
    };
    assert_sound(
        "broadcast N=2 drops=1",
        broadcast_with(faults),
        point(2, 2, 1, EAGER1),
    );
}

/// The same for a crash: the receiver's last delivery finishes it, which
/// disables its crash.
#[test]
fn crash_before_the_delivery_that_finishes_the_rank() {
    let faults = Faults {
        crashes: 1,
        ..Faults::default()
    };
    assert_sound(
        "broadcast N=3 crashes=1",
        broadcast_with(faults),
        point(3, 2, 1, EAGER1),
    );
}

/// A retransmitted loss that exhausts the retry budget stops the sender;
/// tried before the delivery.
#[test]
fn retry_exhaustion_before_the_delivery() {
    let faults = Faults {
        drops: 1,
        retransmit: true,
        retry_count: 0,
        ..Faults::default()
    };
    assert_sound(
        "broadcast N=2 drops=1 retry_count=0",
        broadcast_with(faults),
        point(2, 2, 1, EAGER1),
    );
}

/// Two faults of one kind share a budget: taking one disables the other.
#[test]
fn faults_sharing_a_budget() {
    let faults = Faults {
        timeouts: 2,
        ..Faults::default()
    };
    assert_sound(
        "send_all_first N=3 timeouts=2",
        {
            let mut p = program(vec![demo(checker::demo::SendAllFirst)]);
            p.faults = faults;
            p
        },
        point(3, 2, 1, Buffering::Unbounded),
    );
}

/// When two ranks fail, each tells the other only if the other is still
/// running: which fails first decides whether the second learns of the
/// first. The explorer must try the second failure first even though the
/// two timeouts touch different ranks.
#[test]
fn notice_to_a_rank_that_failed_first() {
    let faults = Faults {
        timeouts: 2,
        ..Faults::default()
    };
    assert_sound(
        "broadcast N=3 timeouts=2",
        broadcast_with(faults),
        point(3, 2, 1, EAGER1),
    );
}

/// A message whose retransmissions run out after its sender returned:
/// the sender stays finished (its program did return), and the receiver
/// learns that the message will never come instead of waiting forever.
#[test]
fn retry_exhaustion_after_the_sender_returned() {
    let faults = Faults {
        drops: 1,
        retransmit: true,
        retry_count: 0,
        ..Faults::default()
    };
    let program = Rc::new(broadcast_with(faults));
    let target = Target {
        program: &program,
        point: point(2, 2, 1, EAGER1),
        faults,
        bounds: program.bounds,
    };
    let mut exhausted = 0;
    let stats = explore::exhaustive(&target, Reduction::Dpor, &[], |exec: &Execution| {
        let world = exec.world.borrow();
        for (rank, state) in world.ranks.iter().enumerate() {
            if exec.results[rank].is_some() {
                assert!(
                    matches!(state.status, RankStatus::Finished(_)),
                    "rank {rank} returned but is {:?}",
                    state.status
                );
            }
            assert!(
                state.status != RankStatus::Running,
                "rank {rank} waits forever:\n{}",
                exec.fingerprint()
            );
        }
        if world.used[0] > 0 {
            exhausted += 1;
        }
        Control::Continue
    })
    .expect("deterministic");
    assert!(stats.complete());
    assert!(exhausted > 0, "no schedule lost the message");
}

pub(crate) fn faults(
    drops: usize,
    retransmit: Option<usize>,
    crashes: usize,
    timeouts: usize,
) -> Faults {
    Faults {
        drops,
        retransmit: retransmit.is_some(),
        retry_count: retransmit.unwrap_or(0),
        crashes,
        timeouts,
    }
}

/// A wider comparison than the tests above, too slow for every run:
/// `cargo test --release -p sim check_soundness::sweep -- --ignored --nocapture`
/// (`SWEEP_ONLY=text` keeps the cases whose name contains it).
#[test]
#[ignore]
fn sweep() {
    let mut mism = program(vec![
        ring(),
        catalogue(1, Collective::Broadcast, "binomial"),
    ]);
    mism.order.insert(0, vec![0, 1]);
    mism.default_order = vec![1, 0];
    let mut reuse = program(vec![ring(), ring()]);
    reuse.calls[1].tag = 0;
    reuse.concurrent = true;
    let mut concurrent = program(vec![ring(), ring()]);
    concurrent.concurrent = true;
    let bcast = catalogue(0, Collective::Broadcast, "binomial");
    let two = program(vec![
        bcast.clone(),
        catalogue(1, Collective::Reduce, "binomial"),
    ]);
    let single = |c: CallSpec| program(vec![c]);
    let fault_sets_a = [
        ("none", faults(0, None, 0, 0)),
        ("drop", faults(1, None, 0, 0)),
        ("drop retx7", faults(1, Some(7), 0, 0)),
        ("drop retx0", faults(1, Some(0), 0, 0)),
        ("crash", faults(0, None, 1, 0)),
        ("timeout", faults(0, None, 0, 1)),
        ("drop+crash", faults(1, None, 1, 0)),
        ("crash2", faults(0, None, 2, 0)),
        ("timeout2", faults(0, None, 0, 2)),
        ("drop2", faults(2, None, 0, 0)),
    ];
    let fault_sets_b = [
        ("none", faults(0, None, 0, 0)),
        ("crash", faults(0, None, 1, 0)),
        ("timeout", faults(0, None, 0, 1)),
        ("timeout+crash", faults(0, None, 1, 1)),
        ("drop+timeout", faults(1, None, 0, 1)),
        ("drop2 retx1+timeout", faults(2, Some(1), 0, 1)),
    ];
    let mut cases: Vec<(String, CheckScenario, Faults)> = Vec::new();
    for (name, p) in [
        ("ring", single(ring())),
        ("tree", single(catalogue(0, Collective::Allreduce, "tree"))),
        (
            "arrival_order_sum",
            single(demo(checker::demo::ArrivalOrderSum)),
        ),
        ("send_all_first", single(demo(checker::demo::SendAllFirst))),
        ("broadcast", single(bcast.clone())),
    ] {
        for (f, faults) in fault_sets_a {
            cases.push((format!("{name} {f}"), p.clone(), faults));
        }
    }
    for (name, p) in [
        ("mismatched", mism),
        ("tag_reuse", reuse),
        ("concurrent", concurrent),
        ("broadcast+reduce", two),
        ("buggy_ring", single(demo(checker::demo::BuggyRing))),
        (
            "rabenseifner",
            single(catalogue(0, Collective::Allreduce, "rabenseifner")),
        ),
    ] {
        for (f, faults) in fault_sets_b {
            cases.push((format!("{name} {f}"), p.clone(), faults));
        }
    }
    let only = std::env::var("SWEEP_ONLY").unwrap_or_default();
    let mut missed_cases = Vec::new();
    for (name, p, faults) in cases {
        for n in [2, 3] {
            for b in [
                RENDEZVOUS,
                EAGER1,
                Buffering::Eager(2),
                Buffering::Unbounded,
            ] {
                let name = format!("{name} N={n} {b}");
                if !name.contains(&only) {
                    continue;
                }
                let mut p = p.clone();
                p.faults = faults;
                p.bounds.max_schedules = 200_000;
                let p = Rc::new(p);
                let at = point(n, 2, 1, b);
                let (naive, naive_stats) = outcomes(&p, at, Reduction::Naive);
                if !naive_stats.complete() {
                    println!("{name}: too big for the naive search");
                    continue;
                }
                let (dpor, dpor_stats) = outcomes(&p, at, Reduction::Dpor);
                let missed = naive.difference(&dpor).count();
                println!(
                    "{name}: DPOR {} (+{} sleep-blocked), naive {}, {} outcomes, {missed} missed",
                    dpor_stats.schedules,
                    dpor_stats.sleep_blocked,
                    naive_stats.schedules,
                    naive.len()
                );
                if missed > 0 {
                    missed_cases.push(name);
                }
            }
        }
    }
    assert!(
        missed_cases.is_empty(),
        "DPOR missed outcomes: {missed_cases:?}"
    );
}
