//! The exhaustive search: stateless DPOR with sleep sets (or, with
//! [`Reduction::Naive`], every interleaving), run again without the
//! per-branch or per-call refinement when an execution breaks its
//! assumption. The race detection it relies on is in [`races`](super::races).

use std::collections::BTreeSet;

use super::races::{Before, add_disabled, add_races, record_hb, sleep_after};
use super::stateful;
use super::{Control, Reduction, SearchError, SearchStats, Target, replay_with};
use crate::exec::Execution;
use crate::program::Program;
use crate::spec::{Assertion, Bounds};
use crate::world::{Choice, Effect, Units};

/// Whether the search may treat the concurrent calls of each rank as
/// separate units: the program has several concurrent calls and no
/// property reads the ranks' clocks, which the calls share (see
/// [`effect`](crate::effect)).
pub fn calls_refinable(program: &Program) -> bool {
    program.concurrent
        && program.calls.len() > 1
        && !program
            .asserts
            .iter()
            .any(|a| matches!(a, Assertion::MaxSteps { .. }))
}

/// Whether the search may treat the branches of a call's joins as
/// separate units: no property reads the ranks' clocks, which the
/// branches share (see [`World::branching`](crate::world::World::branching)).
/// A program without joins of branches is searched the same either way.
pub fn branches_refinable(program: &Program) -> bool {
    !program
        .asserts
        .iter()
        .any(|a| matches!(a, Assertion::MaxSteps { .. }))
}

/// Explores every schedule of `target` (up to equivalence with
/// [`Reduction::Dpor`]), calling `visit` on each complete one.
/// Schedules extend `prefix`, which is never revisited.
///
/// With DPOR, the search first names the branches of every call's joins
/// ([`BRANCHES_REDUCTION`]) and, in a program of several concurrent calls,
/// each call ([`CALLS_REDUCTION`]) as units of their own; if some
/// execution breaks the per-branch assumption, the search starts again
/// without it (calls still as units), and if one breaks the per-call
/// assumption, with whole ranks, visiting schedules anew each time.
///
/// [`BRANCHES_REDUCTION`]: super::BRANCHES_REDUCTION
/// [`CALLS_REDUCTION`]: super::CALLS_REDUCTION
pub fn exhaustive(
    target: &Target<'_>,
    reduction: Reduction,
    prefix: &[Choice],
    mut visit: impl FnMut(&Execution) -> Control,
) -> Result<SearchStats, SearchError> {
    let dpor = reduction != Reduction::Naive;
    let calls = dpor && calls_refinable(target.program);
    let branches = dpor && branches_refinable(target.program);
    let mut units = Units { calls, branches };
    let mut fallback = (false, false);
    // The stateful search takes over a program of concurrent calls once
    // DPOR has run `stateful_after` schedules (see `stateful`).
    let switch = calls
        && target.bounds.delay_bound.is_none()
        && target.bounds.max_schedules > target.bounds.stateful_after;
    let mut stateful_after: Option<u64> = (reduction == Reduction::Stateful).then_some(0);
    // DPOR's counters before the switch, added to the stateful search's.
    let mut before = SearchStats::default();
    loop {
        let searched = match stateful_after {
            Some(_) => stateful::search(target, prefix, units, &mut visit)?,
            None if switch => {
                let capped = Target {
                    bounds: Bounds {
                        max_schedules: target.bounds.stateful_after,
                        ..target.bounds
                    },
                    ..*target
                };
                search(&capped, reduction, prefix, units, &mut visit)?
            }
            None => search(target, reduction, prefix, units, &mut visit)?,
        };
        match searched {
            Searched::Done(stats)
                if switch && stateful_after.is_none() && stats.schedule_cap_hit =>
            {
                stateful_after = Some(stats.schedules);
                before = stats;
            }
            Searched::Done(mut stats) => {
                stats.calls_independent = units.calls;
                stats.branches_independent &= units.branches;
                stats.calls_fallback = fallback.0;
                stats.branches_fallback = fallback.1;
                if stateful_after.is_some() {
                    stats.stateful_after = stateful_after;
                    stats.schedules += before.schedules;
                    stats.sleep_blocked += before.sleep_blocked;
                    stats.steps += before.steps;
                }
                return Ok(stats);
            }
            Searched::Broken { .. } if units == Units::default() => {
                unreachable!("whole ranks assume nothing of calls or branches")
            }
            Searched::Broken { calls: true } => {
                fallback = (true, fallback.1 || units.branches);
                units = Units::default();
            }
            Searched::Broken { calls: false } => {
                fallback.1 = true;
                units.branches = false;
            }
        }
    }
}

/// How one search ended.
pub(super) enum Searched {
    /// It ran to its end (or a bound, or was stopped).
    Done(SearchStats),
    /// An execution broke the per-call refinement's assumption (`calls`)
    /// or the per-branch one.
    Broken {
        /// Which.
        calls: bool,
    },
}

fn search(
    target: &Target<'_>,
    reduction: Reduction,
    prefix: &[Choice],
    units: Units,
    visit: &mut impl FnMut(&Execution) -> Control,
) -> Result<Searched, SearchError> {
    let mut stats = SearchStats::default();
    let mut stack: Vec<Node> = Vec::new();
    let mut path: Vec<Choice> = Vec::new();
    let base = prefix.len();
    loop {
        // Re-run the schedule so far.
        let mut full: Vec<Choice> = prefix.to_vec();
        full.extend(&path);
        let mut exec = replay_with(target, &full, units)?;
        stats.steps += full.len() as u64;
        if reduction == Reduction::Dpor && !path.is_empty() {
            // The step just switched to a backtrack choice is new.
            record_hb(&mut stack, &exec, base);
        }
        // Extend it with first choices.
        let mut blocked = false;
        loop {
            if exec.steps.len() >= target.bounds.max_depth {
                stats.depth_cut += 1;
                break;
            }
            let enabled = exec.enabled();
            let (instances, effects): (Vec<(u64, u64)>, Vec<Effect>) = {
                let world = exec.world.borrow();
                enabled
                    .iter()
                    .map(|&c| (world.instance(c), world.predict(c)))
                    .unzip()
            };
            if reduction == Reduction::Dpor {
                if let (Some(parent), Some(&taken)) = (stack.last_mut(), path.last()) {
                    add_disabled(parent, taken, &enabled, &instances);
                }
                add_races(&mut stack, &exec, base, &enabled, target.faults.any());
            }
            if enabled.is_empty() {
                break;
            }
            let (sleep, delays) = match stack.last() {
                Some(parent) => {
                    let taken = *path.last().expect("a node per path step");
                    let done = &exec.steps.last().expect("a step per node").effect;
                    let before = Before {
                        enabled: &parent.enabled,
                        instances: &parent.instances,
                        effects: &parent.effects,
                    };
                    let asleep = parent
                        .sleep
                        .iter()
                        .chain(parent.done.iter().filter(|&&c| c != taken))
                        .copied();
                    let sleep = sleep_after(&before, asleep, done, &enabled, &instances, &effects);
                    let deviated = parent.enabled.first() != Some(&taken);
                    (sleep, parent.delays + usize::from(deviated))
                }
                None => (BTreeSet::new(), 0),
            };
            let sleep: BTreeSet<Choice> = match reduction {
                Reduction::Dpor | Reduction::Stateful => sleep,
                Reduction::Naive => BTreeSet::new(),
            };
            let Some(&choice) = enabled.iter().find(|c| !sleep.contains(c)) else {
                blocked = true;
                break;
            };
            let backtrack = match reduction {
                Reduction::Dpor | Reduction::Stateful => BTreeSet::from([choice]),
                Reduction::Naive => enabled.iter().copied().collect(),
            };
            stack.push(Node {
                enabled,
                instances,
                effects,
                backtrack,
                done: BTreeSet::new(),
                sleep,
                delays,
                hb: Vec::new(),
            });
            path.push(choice);
            exec.apply(choice);
            stats.steps += 1;
            if reduction == Reduction::Dpor {
                record_hb(&mut stack, &exec, base);
            }
        }
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
        if blocked {
            stats.sleep_blocked += 1;
        } else {
            stats.schedules += 1;
            if visit(&exec) == Control::Stop {
                stats.stopped = true;
                return Ok(Searched::Done(stats));
            }
        }
        stats.peak_nodes = stats.peak_nodes.max(stack.len() as u64);
        if stats.schedules + stats.sleep_blocked >= target.bounds.max_schedules {
            let fraction = explored_fraction(&stack, &path);
            stats.schedule_cap_hit = next_branch(&mut stack, &mut path, target, &mut stats, false);
            if stats.schedule_cap_hit {
                stats.explored_ppm = Some((fraction * 1e6) as u32);
            }
            return Ok(Searched::Done(stats));
        }
        if !next_branch(&mut stack, &mut path, target, &mut stats, true) {
            return Ok(Searched::Done(stats));
        }
    }
}

/// Moves to the next unexplored branch (deepest first); false when none is
/// left. With `take` false, only says whether one is left.
fn next_branch(
    stack: &mut Vec<Node>,
    path: &mut Vec<Choice>,
    target: &Target<'_>,
    stats: &mut SearchStats,
    take: bool,
) -> bool {
    let mut depth = stack.len();
    while depth > 0 {
        let node = &mut stack[depth - 1];
        node.done.insert(path[depth - 1]);
        let mut next = None;
        for c in node.backtrack.iter() {
            if node.done.contains(c) || node.sleep.contains(c) {
                continue;
            }
            let deviates = node.enabled.first() != Some(c);
            let over = target
                .bounds
                .delay_bound
                .is_some_and(|bound| node.delays + usize::from(deviates) > bound);
            if over {
                stats.delay_pruned = true;
                continue;
            }
            next = Some(*c);
            break;
        }
        if let Some(c) = next {
            if take {
                stack.truncate(depth);
                path.truncate(depth);
                path[depth - 1] = c;
                stack[depth - 1].hb.clear();
            }
            return true;
        }
        depth -= 1;
    }
    if take {
        stack.clear();
        path.clear();
    }
    false
}

/// How far the search has got when stopped: each node's finished branches
/// count as that share of its subtree, every branch of a node assumed as
/// large as the others (the estimate progress bars of backtracking
/// searches use). DPOR may still add branches, so this overestimates.
fn explored_fraction(stack: &[Node], path: &[Choice]) -> f64 {
    let mut fraction = 0.0;
    let mut weight = 1.0;
    for (node, taken) in stack.iter().zip(path) {
        let total = node
            .backtrack
            .iter()
            .chain(node.done.iter())
            .filter(|c| !node.sleep.contains(c))
            .collect::<BTreeSet<_>>()
            .len()
            .max(1) as f64;
        let finished = node.done.iter().filter(|&c| c != taken).count() as f64;
        fraction += weight * finished / total;
        weight /= total;
    }
    (fraction + weight).min(1.0)
}

/// A node of the exhaustive search: the state before one step.
pub(super) struct Node {
    pub(super) enabled: Vec<Choice>,
    /// Which instance of each enabled choice it is ([`World::instance`](crate::world::World::instance)).
    pub(super) instances: Vec<(u64, u64)>,
    /// The predicted effect of each enabled choice (for sleep sets).
    pub(super) effects: Vec<Effect>,
    pub(super) backtrack: BTreeSet<Choice>,
    pub(super) done: BTreeSet<Choice>,
    pub(super) sleep: BTreeSet<Choice>,
    /// Deviations from the first enabled choice before this node.
    pub(super) delays: usize,
    /// The steps that happen before the step taken here.
    pub(super) hb: Vec<u64>,
}
