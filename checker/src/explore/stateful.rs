//! The stateful search: a depth-first search with sleep sets that stores
//! every state it reaches in a visited-state table, keyed by the fabric's
//! state and what each program unit has observed
//! ([`World::state_key`](crate::world::World::state_key)), and does not
//! explore a stored state again unless Godefroid's condition asks for it.
//!
//! # Why
//! Where two concurrent calls really contend (tag_reuse_fixed under
//! `eager:1`: both rings' sends on a pair share its one eager slot), which
//! call's send takes the slot first is real nondeterminism, and DPOR runs
//! every order of those sends: 2,157,495 schedules on 3 ranks, far more
//! on 4. But the orders converge: each call sees the same completions of
//! its own operations, in the same steps, and the fabric ends in the same
//! state. A table of visited states merges them (Godefroid's state
//! caching, "Partial-Order Methods for the Verification of Concurrent
//! Systems", LNCS 1032, 1996, ch. 5-6): 6,178 states on 3 ranks, 172,886
//! on 4, each reachable state once (see [`explore`](super) for how that
//! was measured).
//!
//! A program's state hides in its futures, which cannot be compared; but
//! a unit (a rank, or one of its concurrent calls under the per-call
//! refinement) is deterministic given what it observed, so the key holds
//! each unit's observation history (see `world/state.rs` for what is in
//! the key and what is left out as the search's bookkeeping).
//!
//! # Why it stays sound
//! DPOR's backtrack sets are not combined with the table: DPOR adds a
//! backtrack point when a step races with a later one on the explored
//! path, and a pruned state's subtree, not re-explored, would add none, so
//! races reached only through it would be missed (Yang, Chen,
//! Gopalakrishnan and Kirby, "Efficient stateful dynamic partial order
//! reduction", SPIN 2008, show the incompleteness and the extra bookkeeping
//! that fixes it). This search takes every enabled choice that is not
//! asleep, so it needs no race detection. Its sleep sets are DPOR's
//! (the same independence, [`Effect::may_conflict`], and the same waking
//! of a choice a fresh one could be disabled by), with Godefroid's
//! condition for state caching (thesis, section 5.3): a state is stored
//! with its sleep set; reached again with a sleep set that holds the
//! stored one, it is pruned; otherwise the choices asleep then and awake
//! now are taken, and the stored set shrinks to the intersection. The
//! state space is acyclic (every step delivers, loses, starts, stops or
//! notifies something for good), so no cycle proviso is needed. Every
//! terminal state (outcome, deadlock, error, leftover messages) is then
//! reached and checked, and verdicts are those of the stateless searches
//! (tested: every soundness test that compares DPOR with the naive search
//! compares this search too).
//!
//! # When
//! It stores every state DPOR's classes pass through, many more than
//! DPOR's one schedule per class where calls do not contend, so
//! [`exhaustive`](super::exhaustive) runs DPOR first and switches to this
//! search only when DPOR has run
//! [`Bounds::stateful_after`](crate::spec::Bounds::stateful_after) schedules
//! (default [`STATEFUL_AFTER`]) of a program of concurrent calls (the
//! per-call refinement on) without finishing: its
//! schedules so far were checked, and the stateful search checks its
//! states anew. [`Reduction::Stateful`](super::Reduction::Stateful) forces
//! it (tests, measurements). Tested by `check_stateful`'s
//! `the_switch_to_the_stateful_search_keeps_every_outcome` with small
//! bounds. Not with a delay bound (which counts
//! deviations along one path: a state first reached over a longer path
//! would be pruned on a shorter one). Properties are read at the end of a
//! schedule from its final state (the world and the ranks' results), never
//! from the path, so one path to each terminal state is enough; with a
//! depth bound a state is cut at the depth it was first reached, which the
//! search reports as incomplete anyway. A counterexample is the path the
//! search took to the failing state: it replays, but need not be the
//! shortest. The cap (`max_schedules`) bounds the states stored.
//!
//! The per-call assumption is checked on every step as under DPOR
//! ([`World::independence_broken`](crate::world::World::independence_broken));
//! a breach restarts the search with whole ranks as units, whose histories
//! assume nothing. What the fabric cannot see (calls sharing mutable state
//! outside it) the key cannot see either: the same contract as the
//! per-call refinement's (see [`explore`](super)).
//!
//! [`Effect::may_conflict`]: crate::effect::Effect::may_conflict

use std::collections::{BTreeSet, HashMap};

use super::dpor::Searched;
use super::races::{Before, sleep_after};
use super::{Control, SearchError, SearchStats, Target};
use crate::exec::Execution;
use crate::spec::Assertion;
use crate::world::{Choice, Effect, Units};

/// DPOR schedules after which [`exhaustive`](super::exhaustive) switches a
/// program of concurrent calls to the stateful search.
pub const STATEFUL_AFTER: u64 = 20_000;

/// A state on the current path with its choices.
struct Frame {
    enabled: Vec<Choice>,
    /// Which instance of each enabled choice it is.
    instances: Vec<(u64, u64)>,
    /// The predicted effect of each enabled choice.
    effects: Vec<Effect>,
    /// The choices to take from here, in order.
    todo: Vec<Choice>,
    /// The next of them to take.
    next: usize,
    /// The sleep set: the choices asleep on arrival, and those already
    /// taken from here before the current one.
    sleep: BTreeSet<Choice>,
}

/// Runs `prefix` from the start, keeping what units observe.
fn replay_observed(
    target: &Target<'_>,
    path: &[Choice],
    units: Units,
) -> Result<Execution, SearchError> {
    let mut exec = Execution::start_observed(target.program, target.point, target.faults, units);
    for (step, &choice) in path.iter().enumerate() {
        if !exec.enabled().contains(&choice) {
            return Err(SearchError::Diverged { step, choice });
        }
        exec.apply(choice);
    }
    Ok(exec)
}

/// Explores every state reachable after `prefix` once (see the module
/// docs), calling `visit` on each terminal one.
pub(super) fn search(
    target: &Target<'_>,
    prefix: &[Choice],
    units: Units,
    visit: &mut impl FnMut(&Execution) -> Control,
) -> Result<Searched, SearchError> {
    let clocks = target
        .program
        .asserts
        .iter()
        .any(|a| matches!(a, Assertion::MaxSteps { .. }));
    let mut stats = SearchStats::default();
    // Each stored state's sleep set (Godefroid's condition).
    let mut visited: HashMap<u128, Vec<Choice>> = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut path: Vec<Choice> = prefix.to_vec();
    let base = prefix.len();
    let mut exec = replay_observed(target, &path, units)?;
    stats.steps += path.len() as u64;
    loop {
        {
            let world = exec.world.borrow();
            if world.independence_broken.is_some() {
                return Ok(Searched::Broken { calls: true });
            }
            if world.branches_broken.is_some() {
                return Ok(Searched::Broken { calls: false });
            }
            stats.branches_independent |= world.joined_branches();
        }
        let cut = exec.steps.len() >= target.bounds.max_depth;
        let enabled = if cut { Vec::new() } else { exec.enabled() };
        let (instances, effects): (Vec<(u64, u64)>, Vec<Effect>) = {
            let world = exec.world.borrow();
            enabled
                .iter()
                .map(|&c| (world.instance(c), world.predict(c)))
                .unzip()
        };
        let sleep = match frames.last() {
            Some(parent) => {
                let done = &exec.steps.last().expect("a step per frame").effect;
                let before = Before {
                    enabled: &parent.enabled,
                    instances: &parent.instances,
                    effects: &parent.effects,
                };
                let asleep = parent.sleep.iter().copied();
                sleep_after(&before, asleep, done, &enabled, &instances, &effects)
            }
            None => BTreeSet::new(),
        };
        let key = exec.state_key(clocks);
        let todo: Vec<Choice> = match visited.get_mut(&key) {
            None => {
                let asleep = sleep.iter().filter(|c| enabled.contains(c));
                visited.insert(key, asleep.copied().collect());
                stats.states += 1;
                if cut {
                    stats.depth_cut += 1;
                }
                if enabled.is_empty() {
                    stats.schedules += 1;
                    if visit(&exec) == Control::Stop {
                        stats.stopped = true;
                        return Ok(Searched::Done(stats));
                    }
                }
                let todo: Vec<Choice> = enabled
                    .iter()
                    .copied()
                    .filter(|c| !sleep.contains(c))
                    .collect();
                if todo.is_empty() && !enabled.is_empty() {
                    stats.sleep_blocked += 1;
                }
                todo
            }
            Some(stored) => {
                // Taken before: every enabled choice not asleep then.
                // Left now: those asleep then but not now; the state keeps
                // the choices asleep both times.
                stats.revisits += 1;
                let todo: Vec<Choice> = stored
                    .iter()
                    .copied()
                    .filter(|c| !sleep.contains(c) && enabled.contains(c))
                    .collect();
                stored.retain(|c| sleep.contains(c));
                todo
            }
        };
        let expanded = !todo.is_empty();
        if expanded {
            frames.push(Frame {
                enabled,
                instances,
                effects,
                todo,
                next: 0,
                sleep,
            });
        }
        stats.peak_nodes = stats.peak_nodes.max(frames.len() as u64);
        // The next choice: the first of the state just reached, else the
        // next one left at the deepest state that has one.
        while frames.last().is_some_and(|f| f.next == f.todo.len()) {
            frames.pop();
        }
        let Some(frame) = frames.last_mut() else {
            return Ok(Searched::Done(stats));
        };
        if stats.states >= target.bounds.max_schedules {
            stats.schedule_cap_hit = true;
            stats.explored_ppm = Some((explored_fraction(&frames) * 1e6) as u32);
            return Ok(Searched::Done(stats));
        }
        if frame.next > 0 {
            // The choice taken before falls asleep for the later ones.
            frame.sleep.insert(frame.todo[frame.next - 1]);
        }
        let choice = frame.todo[frame.next];
        frame.next += 1;
        if expanded {
            path.push(choice);
            exec.apply(choice);
            stats.steps += 1;
        } else {
            path.truncate(base + frames.len() - 1);
            path.push(choice);
            exec = replay_observed(target, &path, units)?;
            stats.steps += path.len() as u64;
        }
    }
}

/// How far the search has got: each frame's finished choices as that
/// share of its subtree, every subtree assumed as large as its siblings
/// (pruned revisits make later ones smaller, so this underestimates).
fn explored_fraction(frames: &[Frame]) -> f64 {
    let mut fraction = 0.0;
    let mut weight = 1.0;
    for f in frames {
        let total = f.todo.len().max(1) as f64;
        let finished = f.next.saturating_sub(1) as f64;
        fraction += weight * finished / total;
        weight /= total;
    }
    fraction.min(1.0)
}
