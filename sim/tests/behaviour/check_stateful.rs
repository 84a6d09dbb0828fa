//! The checker's stateful search (a visited-state table keyed by the
//! fabric's state and each unit's observations; `checker::explore`'s
//! `stateful` module). Every soundness test that compares DPOR with the
//! naive search (`check_soundness::assert_naive_outcomes`) compares the
//! stateful search too; here: concurrent calls contending for a pair's
//! send slot on 3 ranks (the contention tag_reuse_fixed has), the tag reuse
//! bug found with a counterexample that replays, and the per-call
//! refinement's stated limit, which the stateful search shares.

use std::rc::Rc;

use algorithms::{Collective, catalogue_algorithm};
use checker::exec::Execution;
use checker::explore::{self, Control, Reduction, Target};
use checker::properties::{Baseline, evaluate};
use checker::spec::{Buffering, CheckScenario, Verdict};
use checker::world::{Choice, Units};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_stateful_outcomes, call, outcomes, point, program, ring,
};

fn concurrent_rings(shared_tag: bool) -> CheckScenario {
    let mut p = program(vec![ring(), call(1, ring().algorithm)]);
    p.concurrent = true;
    if shared_tag {
        p.calls[1].tag = 0;
    }
    p
}

/// Two concurrent rings with their own tags on 2 ranks, and a ring
/// beside a broadcast on 3: under `eager:1` their sends contend for each
/// pair's slot (tag_reuse_fixed's contention). The stateful search reaches
/// exactly DPOR's outcomes under every buffering and stores each state
/// once.
#[test]
fn contending_calls_match_dpor() {
    let rings = Rc::new(concurrent_rings(false));
    let mut beside = program(vec![
        ring(),
        call(1, catalogue_algorithm(Collective::Broadcast, "binomial")),
    ]);
    beside.concurrent = true;
    let beside = Rc::new(beside);
    for buffering in [
        EAGER1,
        Buffering::Eager(2),
        RENDEZVOUS,
        Buffering::Unbounded,
    ] {
        for (name, p, n) in [("two rings", &rings, 2), ("ring + broadcast", &beside, 3)] {
            let at = point(n, n, 1, buffering);
            let (dpor, dpor_stats) = outcomes(p, at, Reduction::Dpor);
            assert!(dpor_stats.complete(), "{buffering}: {dpor_stats:?}");
            let name = format!("{name} N={n} {buffering}");
            let stats = assert_stateful_outcomes(&name, p, at, &dpor);
            assert!(stats.calls_independent, "{name}: {stats:?}");
            if n == 2 {
                // Small enough for every interleaving.
                let (naive, naive_stats) = outcomes(p, at, Reduction::Naive);
                assert!(naive_stats.complete(), "{name}: {naive_stats:?}");
                assert_eq!(naive, dpor, "{name}");
            }
            println!(
                "{name}: DPOR {} schedules, stateful {} states",
                dpor_stats.schedules, stats.states
            );
        }
    }
}

/// The exhaustive search switches a program of concurrent calls from DPOR
/// to the stateful search once DPOR has run `stateful_after` schedules
/// without finishing, and still reaches exactly DPOR's (and on 2 ranks the
/// naive search's) outcomes; a program DPOR finishes within the bound is
/// never switched. (Two rings on 3 ranks are too many schedules for DPOR
/// alone in a debug test: a ring beside a broadcast stands in.)
#[test]
fn the_switch_to_the_stateful_search_keeps_every_outcome() {
    let mut switched = 0;
    let mut beside = program(vec![
        ring(),
        call(1, catalogue_algorithm(Collective::Broadcast, "binomial")),
    ]);
    beside.concurrent = true;
    for (what, program, n, stateful_after) in [
        ("two rings", concurrent_rings(false), 2, 3),
        ("ring + broadcast", beside.clone(), 3, 2),
        ("ring + broadcast", beside, 3, 1_000),
    ] {
        let mut p = program;
        p.bounds.stateful_after = stateful_after;
        let p = Rc::new(p);
        let at = point(n, n, 1, EAGER1);
        let name = format!("{what} N={n} eager:1, switch after {stateful_after}");
        let mut unswitched = (*p).clone();
        unswitched.bounds.stateful_after = u64::MAX;
        let (plain, plain_stats) = outcomes(&Rc::new(unswitched), at, Reduction::Dpor);
        assert!(plain_stats.complete(), "{name}: {plain_stats:?}");
        assert_eq!(plain_stats.stateful_after, None, "{name}");
        let (dpor, dpor_stats) = outcomes(&p, at, Reduction::Dpor);
        assert!(dpor_stats.complete(), "{name}: {dpor_stats:?}");
        let ran = plain_stats.schedules + plain_stats.sleep_blocked;
        if ran > stateful_after {
            let after = dpor_stats.stateful_after.unwrap_or_else(|| {
                panic!(
                    "{name}: DPOR alone runs {ran} schedules and it did not switch: {dpor_stats:?}"
                )
            });
            assert!(after <= stateful_after, "{name}: {dpor_stats:?}");
            assert!(dpor_stats.states > 0, "{name}: {dpor_stats:?}");
            switched += 1;
        } else {
            assert_eq!(dpor_stats.stateful_after, None, "{name}: {dpor_stats:?}");
        }
        assert_eq!(
            dpor, plain,
            "{name}: the switched search's outcomes differ from DPOR's"
        );
        if n == 2 {
            let (naive, naive_stats) = outcomes(&p, at, Reduction::Naive);
            assert!(naive_stats.complete(), "{name}: {naive_stats:?}");
            assert_eq!(naive, dpor, "{name}");
        }
        println!(
            "{name}: {} schedules, {} states, switched after {:?}; DPOR alone {} schedules",
            dpor_stats.schedules,
            dpor_stats.states,
            dpor_stats.stateful_after,
            plain_stats.schedules
        );
    }
    assert!(
        switched >= 2,
        "the small bounds switched only {switched} case(s)"
    );
}

/// The state key names a pending exchange by its call and the call's own
/// count of operations, never by the order in which the schedule posted
/// it: two ranks that start their rings in either order reach one state
/// and get one key, under every buffering, while a different state (the
/// other call started on rank 1) gets another. (Keyed in the order of
/// global operation ids, such states were stored once per posting order:
/// 209,708 states for tag_reuse_fixed on 3 ranks under `eager:1` instead
/// of 6,178.)
#[test]
fn a_state_reached_by_posting_in_another_order_has_one_key() {
    let p = Rc::new(concurrent_rings(false));
    let units = Units {
        calls: true,
        branches: false,
    };
    for buffering in [EAGER1, RENDEZVOUS, Buffering::Unbounded] {
        let at = point(2, 2, 1, buffering);
        let key = |choices: &[Choice]| {
            let mut exec = Execution::start_observed(&p, at, p.faults, units);
            for &c in choices {
                assert!(
                    exec.enabled().contains(&c),
                    "{buffering}: {c} is not enabled"
                );
                exec.apply(c);
            }
            exec.state_key(false)
        };
        let start = |rank, call| Choice::Start { rank, call };
        let one_order = key(&[start(0, 0), start(1, 0)]);
        let other_order = key(&[start(1, 0), start(0, 0)]);
        assert_eq!(one_order, other_order, "{buffering}");
        let other_state = key(&[start(0, 0), start(1, 1)]);
        assert_ne!(one_order, other_state, "{buffering}");
    }
}

/// The tag reuse bug (two concurrent rings on one tag) is found by the
/// stateful search on 2 and 3 ranks under one eager slot, and the path it
/// took to the wrong result replays to the same state.
#[test]
fn tag_reuse_is_found_and_its_counterexample_replays() {
    for n in [2, 3] {
        let p = Rc::new(concurrent_rings(true));
        let at = point(n, n, 1, EAGER1);
        let target = Target {
            program: &p,
            point: at,
            faults: p.faults,
            bounds: p.bounds,
        };
        let mut baseline = Baseline::default();
        let mut found: Option<(Vec<Choice>, String, Verdict)> = None;
        let stats = explore::exhaustive(&target, Reduction::Stateful, &[], |exec| {
            match evaluate(&p, at, exec, false, &mut baseline) {
                Some(v) => {
                    let choices = exec.steps.iter().map(|s| s.choice).collect();
                    found = Some((choices, exec.fingerprint(), v.verdict));
                    Control::Stop
                }
                None => Control::Continue,
            }
        })
        .expect("the search runs");
        let (choices, fingerprint, verdict) =
            found.unwrap_or_else(|| panic!("N={n}: the bug was not found: {stats:?}"));
        assert!(
            [Verdict::WrongResult, Verdict::Error].contains(&verdict),
            "N={n}: {verdict:?}"
        );
        assert!(stats.stopped && stats.states > 0, "N={n}: {stats:?}");
        let replayed = explore::replay(&target, &choices).expect("the counterexample replays");
        assert_eq!(replayed.fingerprint(), fingerprint, "N={n}");
        let again = evaluate(&p, at, &replayed, false, &mut Baseline::default());
        assert_eq!(again.map(|v| v.verdict), Some(verdict), "N={n}");
    }
}
