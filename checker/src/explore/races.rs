//! Race detection for the DPOR search: which earlier steps happen before
//! each step (vector of bits per node), which races to reverse, and which
//! sleeping choices a step wakes.

use std::collections::BTreeSet;

use super::dpor::Node;
use crate::exec::Execution;
use crate::world::{Choice, Effect};

/// Records which earlier steps happen before the step just applied (its
/// causes, the earlier steps it conflicts with, and theirs), and schedules
/// the reversal of its race: the latest earlier step it conflicts with that
/// does not happen before it by causality.
pub(super) fn record_hb(stack: &mut [Node], exec: &Execution, base: usize) {
    let j = exec.steps.len() - 1;
    let local = j - base;
    let step = &exec.steps[j];
    let past = causal_past(stack, &step.causes.after, base);
    let mut hb = past.clone();
    let mut race = None;
    for i in (0..local).rev() {
        if !exec.steps[base + i].effect.conflicts(&step.effect) {
            continue;
        }
        if race.is_none() && !bit(&past, i) {
            race = Some(i);
        }
        if bit(&hb, i) {
            continue;
        }
        set_bit(&mut hb, i);
        let earlier = stack[i].hb.clone();
        union(&mut hb, &earlier);
    }
    let node = &stack[local];
    let at = node.enabled.iter().position(|&c| c == step.choice);
    let instance = node.instances[at.expect("the step taken was enabled")];
    stack[local].hb = hb;
    if let Some(i) = race {
        schedule(&mut stack[i], step.choice, instance);
    }
    unsent_notice_races(stack, exec, base);
}

/// Races of the notices the step just applied could not send because
/// their target had stopped: each would have been a choice had the target
/// stopped later, so the latest step that changed the target (its last,
/// typically) races with it (Flanagan and Godefroid's check of a disabled
/// transition). Such a notice is never enabled, so the race is reversed
/// by trying every choice enabled before that step.
fn unsent_notice_races(stack: &mut [Node], exec: &Execution, base: usize) {
    let j = exec.steps.len() - 1;
    let local = j - base;
    for &(from, to) in &exec.steps[j].effect.unsent_notices {
        let notice = Effect::on_rank(to);
        let past = causal_past(stack, &[j], base);
        let race = (0..local)
            .rev()
            .find(|&i| !bit(&past, i) && notice.may_conflict(&exec.steps[base + i].effect));
        if let Some(i) = race {
            schedule(&mut stack[i], Choice::Notify { from, to }, (0, 0));
        }
    }
}

/// The choices enabled before a step, with which instance each was and
/// its predicted effect: what both searches keep of a state on their path.
pub(super) struct Before<'a> {
    /// The choices enabled then.
    pub(super) enabled: &'a [Choice],
    /// Which instance of each it was.
    pub(super) instances: &'a [(u64, u64)],
    /// The predicted effect of each.
    pub(super) effects: &'a [Effect],
}

/// The sleep set on arrival after a step (whose executed effect is
/// `done`) from the state `before`, as DPOR computes it: the choices of
/// `asleep` (asleep there, or explored there before) that commute with the
/// step, and that no choice the step enabled (or made a new instance of)
/// could be disabled by ([`disturbs`]).
pub(super) fn sleep_after(
    before: &Before<'_>,
    asleep: impl Iterator<Item = Choice>,
    done: &Effect,
    enabled: &[Choice],
    instances: &[(u64, u64)],
    effects: &[Effect],
) -> BTreeSet<Choice> {
    // The choices enabled now that were not, or not as the same instance.
    let fresh: Vec<(Choice, &Effect)> = enabled
        .iter()
        .zip(instances)
        .zip(effects)
        .filter(|&((c, i), _)| {
            !before
                .enabled
                .iter()
                .zip(before.instances)
                .any(|(p, pi)| p == c && pi == i)
        })
        .map(|((&c, _), e)| (c, e))
        .collect();
    asleep
        .filter(|&q| {
            let at = before.enabled.iter().position(|&c| c == q);
            at.is_some_and(|i| {
                let predicted = &before.effects[i];
                !predicted.may_conflict(done)
                    && !fresh.iter().any(|&(r, e)| disturbs(q, predicted, r, e))
            })
        })
        .collect()
}

/// Whether a sleeping choice `q` may disable the choice `r` that the step
/// just taken enabled. A sleeping choice was explored from an earlier
/// state, before that step; had it been taken here instead, it could
/// disable `r`, and the schedules in which `r` never happens would then be
/// missed (they differ from every schedule explored with `q` earlier, in
/// which `r` did not exist yet). So such a `q` wakes up. Deliveries and
/// starts are disabled only by faults; notices and faults by any step that
/// stops their rank or takes their message or receive; faults of one kind
/// also share a budget.
fn disturbs(q: Choice, q_effect: &Effect, r: Choice, r_effect: &Effect) -> bool {
    let disableable = q.is_fault() || r.is_fault() || matches!(r, Choice::Notify { .. });
    if !disableable {
        return false;
    }
    let same_kind = std::mem::discriminant(&q) == std::mem::discriminant(&r) && q.is_fault();
    same_kind
        || q_effect
            .touched_ranks()
            .any(|x| r_effect.touched_ranks().any(|y| y == x))
}

/// Choices enabled before the step just taken from `parent` that it
/// disabled, or whose instance it changed (it took their message or
/// receive, used up their fault budget, stopped their rank): no later
/// state of this schedule can take them, so no later race check would see
/// them, and they are tried here, before that step (Flanagan and
/// Godefroid's race of a disabled transition with the step that disabled
/// it).
pub(super) fn add_disabled(
    parent: &mut Node,
    taken: Choice,
    enabled: &[Choice],
    instances: &[(u64, u64)],
) {
    let mut disabled = Vec::new();
    for (&q, inst) in parent.enabled.iter().zip(&parent.instances) {
        if q == taken || parent.backtrack.contains(&q) || parent.sleep.contains(&q) {
            continue;
        }
        let still = enabled
            .iter()
            .zip(instances)
            .any(|(&c, i)| c == q && i == inst);
        if !still {
            disabled.push(q);
        }
    }
    parent.backtrack.extend(disabled);
}

/// Adds `choice` to a node's backtrack set if that same instance of it
/// was enabled there, or else every choice enabled there.
fn schedule(node: &mut Node, choice: Choice, instance: (u64, u64)) {
    let here = node
        .enabled
        .iter()
        .zip(&node.instances)
        .any(|(&c, &i)| c == choice && i == instance);
    if here {
        node.backtrack.insert(choice);
    } else {
        let all: Vec<Choice> = node.enabled.clone();
        node.backtrack.extend(all);
    }
}

/// The steps (local indices) that happen before something caused by
/// `causes`: the causes and everything before them.
fn causal_past(stack: &[Node], causes: &[usize], base: usize) -> Vec<u64> {
    let mut past: Vec<u64> = Vec::new();
    for &c in causes {
        if c >= base {
            set_bit(&mut past, c - base);
            union(&mut past, &stack[c - base].hb);
        }
    }
    past
}

/// Race detection for choices that may never be taken (Flanagan and
/// Godefroid's check of every next transition): faults, and when faults
/// may disable them, everything else. A delivery, start or notice stays
/// enabled until taken when no fault can strike, so its races are found
/// when it is taken ([`record_hb`]).
pub(super) fn add_races(
    stack: &mut [Node],
    exec: &Execution,
    base: usize,
    enabled: &[Choice],
    faults: bool,
) {
    let local_len = exec.steps.len() - base;
    let world = exec.world.borrow();
    for &q in enabled {
        if !faults && !q.is_fault() {
            continue;
        }
        let predicted = world.predict(q);
        let past = causal_past(stack, &world.pending_causes(q), base);
        let race = (0..local_len)
            .rev()
            .find(|&i| !bit(&past, i) && predicted.may_conflict(&exec.steps[base + i].effect));
        if let Some(i) = race {
            schedule(&mut stack[i], q, world.instance(q));
        }
    }
}

fn bit(set: &[u64], i: usize) -> bool {
    set.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

fn set_bit(set: &mut Vec<u64>, i: usize) {
    if set.len() <= i / 64 {
        set.resize(i / 64 + 1, 0);
    }
    set[i / 64] |= 1 << (i % 64);
}

fn union(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a |= b;
    }
}
