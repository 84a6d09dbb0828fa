//! The branches of a call's joins as separate units of the search.
//!
//! NCCL's algorithms run a call's channels as futures joined inside the
//! call ([`join_branches`](algorithms::branches::join_branches)): each
//! channel works on its own part of the buffer with its own tags, and the
//! call reads their results once every one has returned. A completion on
//! channel `c` wakes the rank, but only `c`'s future can move; so, as for
//! a rank's concurrent calls (see [`effect`](crate::effect)), the rank's
//! state is the product of its branches' states, and completing an
//! operation of one branch commutes with completing one of another unless
//! what they then do meets in shared state (a channel, when two branches
//! share a tag; a pair's eager send slots), which [`Post`](super::Post)s
//! name. Each branch is a [`Unit`](super::Unit) of its own, nested in its call
//! ([`Branch`]: its index in each enclosing join); the code of the call
//! outside its branches is the unit of the whole call (or rank), which
//! contains them, so its steps conflict with all of theirs.
//!
//! The join tells the fabric when it polls which branch
//! ([`Fabric::branching`](algorithms::Fabric::branching)), so every
//! operation is attributed to the branch that posted it. When the last
//! branch returns, the step that completed it also lets the call go on:
//! that step changes the whole call, and follows the steps at which every
//! other branch returned (the join waits for all and hands back their
//! outputs in index order, so the order in which they returned is not
//! observable), as a rank's end follows its calls' ends.
//!
//! # Assumption, checked
//! The refinement holds when a branch observes nothing of another branch
//! but through its own operations. What the checker can see of a breach
//! ends the refined search ([`World::branches_broken`]) and the explorer
//! searches again without it (concurrent calls still as units, if they
//! were), so the program is then explored completely:
//! - the rank's clock ([`Fabric::now`](algorithms::Fabric::now), moved by
//!   every branch) read inside a branch, or while branches of the rank
//!   run;
//! - a join that ends before every branch has returned: a
//!   [`try_join_branches`](algorithms::branches::try_join_branches) one of
//!   whose branches failed (which branch fails first, and what the others
//!   had done by then, is a completion order; reported whether or not the
//!   others had returned), or a join dropped by a `select` in its parent;
//! - a branch that waits for an operation another branch (or the call
//!   outside its branches) posted: it observes that operation's
//!   completion;
//! - a branch that posts during a step that completed none of its
//!   operations (nor one of a unit containing it): it moved on something
//!   else.
//!
//! The first two depend only on the branch's own history (or, for a
//! dropped join, on a step of its parent, which conflicts with every step
//! of its branches), so every schedule equivalent under the refinement
//! shows them, and the refined search, which runs one of each class, sees
//! them. The last two need state the branches share outside the fabric
//! (a future handed from one branch to another, a `Cell` both update);
//! they are caught when the schedule explored shows them, and a program
//! can hide such a breach from it: branches that share mutable state
//! outside the fabric and read it only when their own operations complete
//! (an arrival-order log kept in a `RefCell`) differ between equivalent
//! schedules in a way no fabric sees. That is the contract of
//! [`join_branches`](algorithms::branches::join_branches), stated there,
//! as concurrent calls must not share such state either; the catalogue's
//! branches share nothing mutable (each owns its part of the buffer).

use algorithms::Rank;
use algorithms::branches::Branching;

use super::{Branch, OpId, Part, RankStatus, World};

/// A join of branches as the world follows it.
#[derive(Debug)]
pub(super) struct JoinState {
    pub(super) rank: Rank,
    pub(super) call: Option<usize>,
    /// The branch that polls the join.
    pub(super) parent: Branch,
    /// The steps during which its branches returned (`None`: before the
    /// first step).
    pub(super) ends: Vec<Option<usize>>,
}

impl World {
    /// What a join of branches of `rank`'s call `call` tells the fabric
    /// ([`Fabric::branching`](algorithms::Fabric::branching)); returns a
    /// new join's id.
    pub fn branching(&mut self, rank: Rank, call: Option<usize>, event: Branching) -> Option<u64> {
        match event {
            Branching::Begin { branches } => {
                self.branch_joins.push(JoinState {
                    rank,
                    call,
                    parent: self.branch_now,
                    ends: Vec::new(),
                });
                self.live_branches[rank] += branches;
                let id = (self.branch_joins.len() - 1) as u64;
                self.observe_join(rank, call, id);
                return Some(id);
            }
            Branching::Enter { join, branch } => {
                let parent = self.join(join).map_or(self.branch_now, |j| j.parent);
                if parent != self.branch_now {
                    let now = self.branch_now;
                    self.break_branches(rank, || {
                        format!("a join begun in {parent} was polled from {now}")
                    });
                }
                self.branch_stack.push(self.branch_now);
                self.branch_now = parent.child(branch);
            }
            Branching::Leave { join, finished, .. } => {
                self.branch_now = self.branch_stack.pop().unwrap_or(Branch::ROOT);
                if finished {
                    let step = self.step;
                    if let Some(j) = self.join_mut(join) {
                        j.ends.push(step);
                    }
                    self.live_branches[rank] = self.live_branches[rank].saturating_sub(1);
                }
            }
            Branching::End { join } => {
                let j = self.join(join)?;
                let (rank, call, parent) = (j.rank, j.call, j.parent);
                let ends: Vec<usize> = j.ends.iter().flatten().copied().collect();
                if self.branches_independent {
                    // The call goes on once every branch has returned: a
                    // change to the unit holding them, after their ends.
                    let unit = self.unit(rank, call, parent, Part::Whole);
                    self.effect.touch(unit);
                    self.extra_causes.extend(ends);
                }
            }
            Branching::LanesOpen
            | Branching::LaneEnter { .. }
            | Branching::LaneLeave
            | Branching::LanesSeen { .. }
            | Branching::LanesAwaited { .. }
            | Branching::LanesClose => return self.lanes(rank, call, event),
            Branching::Abandon { unfinished, .. } => {
                self.live_branches[rank] = self.live_branches[rank].saturating_sub(unfinished);
                // A crashed rank's tasks are dropped whole.
                if self.ranks[rank].status == RankStatus::Running {
                    let step = self.step.map_or(0, |s| s + 1);
                    self.break_branches(rank, || {
                        format!(
                            "a join ended at step {step} with {unfinished} branch(es) not returned (a failed branch of try_join_branches, or a dropped join)"
                        )
                    });
                }
            }
        }
        None
    }

    /// Whether some call joined branches, or opened an outbox, in this
    /// execution (the per-branch refinement, lanes included, had a use).
    pub fn joined_branches(&self) -> bool {
        !self.branch_joins.is_empty() || self.outboxes.used
    }

    fn join(&self, id: u64) -> Option<&JoinState> {
        self.branch_joins.get(usize::try_from(id).ok()?)
    }

    fn join_mut(&mut self, id: u64) -> Option<&mut JoinState> {
        self.branch_joins.get_mut(usize::try_from(id).ok()?)
    }

    /// Records why the per-branch refinement does not hold for `rank`,
    /// when it is on.
    pub(super) fn break_branches(&mut self, rank: Rank, why: impl FnOnce() -> String) {
        if self.branches_independent {
            self.branches_broken
                .get_or_insert_with(|| format!("rank {rank}: {}", why()));
        }
    }

    /// Checks that the operation `op` is awaited by the branch that
    /// posted it.
    pub fn check_waiter(&mut self, op: OpId) {
        let (posted, now) = (self.op_branch[op], self.branch_now);
        let rank = self.op_rank[op];
        if self.branches_independent && posted != now {
            self.break_branches(rank, || {
                format!("{now} waited for an operation {posted} posted")
            });
        }
        let (posted, now) = (self.op_part[op], self.part_now(rank, self.op_call[op]));
        let lane = matches!(posted, Part::Lane(_)) || matches!(now, Part::Lane(_));
        if self.branches_independent && lane && posted != now {
            self.break_branches(rank, || {
                format!("{now:?} of an outbox waited for an operation {posted:?} posted")
            });
        }
    }

    /// The rank's clock, which every branch moves, was read: inside a
    /// branch, or while branches run, that observes their order.
    pub(super) fn branch_clock_read(&mut self, rank: Rank) {
        let now = self.branch_now;
        if now != Branch::ROOT || self.live_branches[rank] > 0 || self.outboxes.open_on(rank) {
            self.break_branches(rank, || {
                format!("the clock was read by {now} while branches or an outbox's lanes ran")
            });
        }
    }
}
