//! The stateful search: a depth-first search that takes every enabled
//! choice at each new state and prunes a state it has already stored in a
//! visited-state table, keyed by the fabric's state and what each program
//! unit has observed ([`World::state_key`](crate::world::World::state_key)).
//!
//! # Why, and why this simple
//! Where two concurrent calls really contend (tag_reuse_fixed under
//! `eager:1`: both rings' sends on a pair share its one eager slot), which
//! call's send takes the slot first is real nondeterminism, and DPOR runs
//! every order of those sends: 2,157,495 schedules on 3 ranks, far more
//! on 4. But the orders mostly converge: each call sees the same
//! completions of its own operations, in the same steps, and the fabric
//! ends in the same state. A table of visited states merges them
//! (Godefroid's state caching, "Partial-Order Methods for the
//! Verification of Concurrent Systems", LNCS 1032, 1996, ch. 5-6).
//!
//! A program's state hides in its futures, which cannot be compared; but
//! a unit (a rank, or one of its concurrent calls under the per-call
//! refinement) is deterministic given what it observed, so the key holds
//! each unit's observation history (see
//! [`world::state`](crate::world::World::state_key) for what is in the
//! key and what is left out as the search's bookkeeping).
//!
//! DPOR's backtrack sets are not combined with the table: DPOR adds a
//! backtrack point when a step races with a later one on the explored
//! path, and a pruned state's subtree, not re-explored, would add none, so
//! races reached only through it are missed (Yang, Chen, Gopalakrishnan
//! and Kirby, "Efficient stateful dynamic partial order reduction", SPIN
//! 2008, show the incompleteness and the extra bookkeeping that fixes it).
//! Expanding every enabled choice needs no such care: every reachable
//! state is stored once and every choice from it taken once, so every
//! terminal state (outcome, deadlock, error, leftover messages) is
//! reached and checked, and verdicts are those of the stateless searches.
//! Sleep sets are not used either (with a table they need Godefroid's
//! condition: a state is pruned only if the sleep set stored with it is a
//! subset of the current one).
//!
//! # When
//! Every reachable state is many more than DPOR's one schedule per class
//! where the calls do not contend, so [`exhaustive`](super::exhaustive)
//! runs DPOR first and switches to this search only when DPOR has run
//! [`STATEFUL_AFTER`] schedules of a program of concurrent calls without
//! finishing (its schedules so far were checked; the stateful search
//! checks its states anew). Not with a delay bound (which counts
//! deviations along one path: a state reached first over a longer path
//! would be pruned on a shorter one). Properties are read at the end of a
//! schedule from its final state (the world and the ranks' results), never
//! from the path, so one path to each terminal state is enough; with a
//! depth bound a state is cut at the depth it was first reached, which the
//! search reports as incomplete anyway. A counterexample is the path the
//! search took to the failing state: it replays, but need not be the
//! shortest.
//!
//! The per-call assumption is checked on every step as under DPOR
//! ([`World::independence_broken`](crate::world::World::independence_broken));
//! a breach restarts the search with whole ranks as units, whose histories
//! assume nothing. The cap (`max_schedules`) bounds the states stored.

use std::collections::HashSet;

use super::dpor::Searched;
use super::{Control, SearchError, SearchStats, Target};
use crate::exec::Execution;
use crate::spec::Assertion;
use crate::world::{Choice, Units};

/// DPOR schedules after which [`exhaustive`](super::exhaustive) switches a
/// program of concurrent calls to the stateful search.
pub const STATEFUL_AFTER: u64 = 20_000;

/// A state on the current path with its choices.
struct Frame {
    enabled: Vec<Choice>,
    /// The next choice to take.
    next: usize,
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
    let mut visited: HashSet<u128> = HashSet::new();
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
        let mut expanded = false;
        if visited.insert(exec.state_key(clocks)) {
            stats.states += 1;
            let cut = exec.steps.len() >= target.bounds.max_depth;
            let enabled = if cut { Vec::new() } else { exec.enabled() };
            if cut {
                stats.depth_cut += 1;
            }
            if enabled.is_empty() {
                stats.schedules += 1;
                if visit(&exec) == Control::Stop {
                    stats.stopped = true;
                    return Ok(Searched::Done(stats));
                }
            } else {
                frames.push(Frame { enabled, next: 0 });
                expanded = true;
            }
        } else {
            stats.revisits += 1;
        }
        stats.peak_nodes = stats.peak_nodes.max(frames.len() as u64);
        // The next choice: the first of a state just stored, else the next
        // one left at the deepest state that has one.
        while frames.last().is_some_and(|f| f.next == f.enabled.len()) {
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
        let choice = frame.enabled[frame.next];
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
        let total = f.enabled.len().max(1) as f64;
        let finished = f.next.saturating_sub(1) as f64;
        fraction += weight * finished / total;
        weight /= total;
    }
    fraction.min(1.0)
}
