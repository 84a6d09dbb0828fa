//! An outbox's lanes as separate units of the search.
//!
//! An outbox ([`algorithms::outbox::Outbox`], which the double binary tree
//! allreduce keeps its sends in) runs the sends of one flow in lanes, one
//! per destination and tag, each starting its next queued send when the
//! previous one completes, while the flow itself (the *main flow*) goes on
//! receiving. Under rendezvous every send completion wakes the rank, so
//! with the rank as one unit a lane's send completion and the main flow's
//! receive completion conflict, and in a tree every rank has both in
//! flight at once: the tree on 8 ranks under rendezvous did not finish in
//! 200,000 schedules. But nothing of a lane's successful completion
//! reaches the main flow: the lane only starts the send the main flow
//! queued next on it, and the main flow never waits for a send but in a
//! flush. So each lane ([`Part::Lane`]) and the main flow ([`Part::Main`])
//! are units of their own, as branches are (see
//! [`branches`](super::branches)), with one relation more: the main flow
//! *feeds* its lanes (a step of the main flow may start a lane's send, the
//! one it queued while the lane was free; [`Unit::feeds`](super::Unit::feeds)).
//!
//! # Why a lane's completion and a main-flow step commute
//! Take a step `c` completing lane `l`'s send and a step `d` of the main
//! flow (a receive it completes, after which it queues sends and posts
//! its next receive). If `d` queues a send on `l`: in the order `c, d` the
//! lane is free when `d` queues it, and `d` starts it; in the order
//! `d, c` it waits in the queue and `c` starts it. Either way, after both
//! the same sends are in flight with the same payloads (the main flow
//! computed them from what `d` received, not from `c`), the main flow is
//! in the same state, and the lane has started its next send. What
//! differs is which step posted that send, the world's global operation
//! ids (bookkeeping, not state), and the order of the posts within a
//! pair: under `eager:K` that order decides which waiting send gets a
//! freed slot, and there the posts on the pair's slots by two units
//! conflict as for branches and calls ([`Post`](super::Post)s, critical
//! when a send took the last slot or found none). The world attributes
//! the send to lane `l` whichever step posted it, so its later delivery
//! is `l`'s. Two steps of one lane, or of the main flow, conflict as
//! before; the rank's end, a crash and a notice change the whole rank.
//!
//! The main flow observes the lanes at two points, which the outbox tells
//! ([`Branching::LanesSeen`]): a flush that found every send complete,
//! whose step changes the whole flow and, if it is the step that
//! completed the last lane's send, follows every lane's last completion
//! (as a join's end follows its branches' ends; a flush observed in a
//! later step, after a step of the main flow, follows nothing of the
//! lanes: that step could have come first), and a failed
//! send whose error the main flow receives, whose step changes the whole
//! flow (so it conflicts with every lane's completions and their orders
//! are explored: which send failed first is a completion order; a send
//! fails only at its post or in a step that changes its whole rank anyway,
//! a notice that its peer stopped or a loss). Which
//! lane completion ends a flush is not known before the step (a step's
//! predicted effect is what sleep sets compare), so while the main flow
//! waits for its lanes (a flush pending, [`Branching::LanesAwaited`],
//! until the flow drives its lanes alongside a receive again: a flush
//! dropped by a `select` keeps it, which only adds conflicts), every lane
//! completion also changes the main flow: it conflicts with
//! whatever else the main flow waits for (a flush raced against a
//! receive in a `select`), and the lanes' last completions are ordered
//! among themselves (a few orders per rank, at the end of a call).
//!
//! # Assumption, checked
//! Tied to the per-branch refinement (on and off with it,
//! [`Units::branches`](super::Units::branches); a breach makes the search
//! run again without either):
//! - the main flow posts only during a step that completed one of its own
//!   operations (or changed the whole flow), and a lane only during one of
//!   its own steps or one of its main flow's: anything else moved on
//!   something it did not observe (the unexplained posts of
//!   [`Effect`](super::Effect));
//! - an operation a lane posted is waited for by that lane, and a lane
//!   waits for no other operation;
//! - no clock is read while an outbox is open (every part moves it);
//! - one outbox at a time per flow, and a lane entered only inside its
//!   outbox, one at a time.
//!
//! As for branches, state shared outside the fabric is out of sight: a
//! `start` function that records completion order in a cell the main
//! flow reads when its own receives complete would break the refinement
//! unseen (`check_lanes`' `state_shared_outside_the_fabric_is_not_seen`
//! pins it: two outcomes naively, one found, no fallback). The outbox's
//! own code shares nothing of the kind, and its `start` functions must not
//! either (the catalogue's only send).

use std::collections::BTreeMap;

use algorithms::Rank;
use algorithms::branches::Branching;

use super::{Branch, OpId, Part, World};

/// Which flow an outbox belongs to: rank, concurrent call, branch.
type Flow = (Rank, Option<usize>, Branch);

/// An open outbox as the world follows it.
#[derive(Debug, Default)]
struct OpenOutbox {
    /// The step of each lane's latest completion (`None`: before the
    /// first step).
    ends: BTreeMap<u16, Option<usize>>,
    /// Whether the main flow waits for the lanes (a flush pending).
    awaited: bool,
}

/// The outboxes open and the lane being polled.
#[derive(Debug, Default)]
pub(super) struct Outboxes {
    /// Per flow with an open outbox.
    open: BTreeMap<Flow, OpenOutbox>,
    /// The lane being polled, and its flow.
    now: Option<(Flow, u16)>,
    /// Whether an outbox was ever opened in this execution.
    pub(super) used: bool,
}

impl Outboxes {
    /// Whether `rank` has an outbox open.
    pub(super) fn open_on(&self, rank: Rank) -> bool {
        self.open.keys().any(|f| f.0 == rank)
    }
}

impl World {
    /// The part of its flow that `rank`'s call `call` polls now: a lane,
    /// the main flow of an open outbox, or the whole flow.
    pub(super) fn part_now(&self, rank: Rank, call: Option<usize>) -> Part {
        let flow = (rank, call, self.branch_now);
        match self.outboxes.now {
            Some((f, lane)) if f == flow => Part::Lane(lane),
            _ if self.outboxes.open.contains_key(&flow) => Part::Main,
            _ => Part::Whole,
        }
    }

    /// Notes that `op` completed, if a lane posted it: the step its lane
    /// last completed something.
    pub(super) fn lane_done(&mut self, op: OpId) {
        if let Part::Lane(lane) = self.op_part[op] {
            let flow = (self.op_rank[op], self.op_call[op], self.op_branch[op]);
            if let Some(outbox) = self.outboxes.open.get_mut(&flow) {
                outbox.ends.insert(lane, self.step);
            }
        }
    }

    /// The main flow of `op`'s outbox, if a lane posted `op` and the main
    /// flow waits for the lanes: completing `op` may end its wait (see
    /// the module docs).
    pub(super) fn awaiting_main(&self, op: OpId) -> Option<Part> {
        let Part::Lane(_) = self.op_part[op] else {
            return None;
        };
        let flow = (self.op_rank[op], self.op_call[op], self.op_branch[op]);
        let outbox = self.outboxes.open.get(&flow)?;
        outbox.awaited.then_some(Part::Main)
    }

    /// What an outbox of `rank`'s call `call` tells the fabric (see the
    /// module docs); `Some` for the opening (the world listens).
    pub(super) fn lanes(
        &mut self,
        rank: Rank,
        call: Option<usize>,
        event: Branching,
    ) -> Option<u64> {
        let flow = (rank, call, self.branch_now);
        match event {
            Branching::LanesOpen => {
                self.outboxes.used = true;
                if self
                    .outboxes
                    .open
                    .insert(flow, OpenOutbox::default())
                    .is_some()
                {
                    self.break_branches(rank, || "two outboxes open in one flow".into());
                }
                return Some(0);
            }
            Branching::LaneEnter { lane } => {
                if self.outboxes.now.is_some() || !self.outboxes.open.contains_key(&flow) {
                    self.break_branches(rank, || {
                        format!("lane {lane} entered outside its outbox or inside another lane")
                    });
                }
                let lane = u16::try_from(lane).unwrap_or(u16::MAX);
                self.outboxes.now = Some((flow, lane));
            }
            Branching::LaneLeave => self.outboxes.now = None,
            Branching::LanesSeen { all_done } if self.branches_independent => {
                let unit = self.unit(rank, call, self.branch_now, Part::Whole);
                self.effect.touch(unit);
                // Only the step that completed a lane's last send is the
                // flush's own: the main flow can observe the flush later,
                // after a step of its own (a select over the flush and a
                // receive, then another flush), and that step may move
                // before the lanes' ends.
                let step = self.step;
                if all_done
                    && let Some(outbox) = self.outboxes.open.get(&flow)
                    && outbox.ends.values().any(|&end| end == step)
                {
                    let ends = outbox.ends.values().flatten();
                    let others = ends.filter(|&&end| Some(end) != step);
                    self.extra_causes.extend(others.copied());
                }
            }
            Branching::LanesAwaited { waiting } => {
                if let Some(outbox) = self.outboxes.open.get_mut(&flow) {
                    outbox.awaited = waiting;
                }
            }
            Branching::LanesClose => {
                self.outboxes.open.remove(&flow);
            }
            _ => {}
        }
        None
    }
}
