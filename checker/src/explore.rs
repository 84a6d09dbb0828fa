//! The search over schedules: exhaustive with dynamic partial-order
//! reduction (Flanagan and Godefroid's DPOR with sleep sets), naive
//! exhaustive (every interleaving, to measure what the reduction prunes),
//! or seeded random walks and PCT. Every search goes through the same
//! [`Execution`] and the same choice interface.
//!
//! Stateless: to reach a state again the explorer re-runs the schedule's
//! prefix from the start. Where DPOR does not finish on a program of
//! concurrent calls, a stateful search takes over
//! ([`STATEFUL_AFTER`]; the module `stateful`): sleep sets and a table of
//! visited states keyed by the fabric and each unit's observations. Two steps conflict when they change the same
//! rank, or when one frees a send slot that a send of the other needed
//! ([`Effect::conflicts`]); a delivery also happens after the step that
//! sent its message and the step that posted its receive.
//!
//! # Exchanges: completion-order nondeterminism a rank cannot observe
//! Under rendezvous (or a full eager slot) a delivery also completes its
//! sender's send, so in a ring every rank's send and receive of one step
//! complete in the two orders, and adjacent deliveries are dependent
//! through the rank in between: the ring allreduce on 4 ranks had
//! 2,985,984 schedules, all equivalent. Most of that nondeterminism is
//! invisible: the rank only joins the two futures. ISP/DAMPI's POE
//! reduction for MPI (Vakkalanka, Gopalakrishnan and Kirby, CAV 2008)
//! rests on the same fact: only wildcard receives and completion-order
//! observations (`MPI_Waitany`, `MPI_Test`) are real nondeterminism. A
//! program says that it only joins by using
//! [`Fabric::exchange`](algorithms::Fabric::exchange) (MPI's
//! `MPI_Sendrecv`): one operation whose halves complete separately
//! ([`Effect::halves`]) but wake the rank once. Two steps that complete
//! different halves of one exchange commute (the same state after both,
//! whichever came first), so they do not conflict; a half conflicts with
//! anything else done to its rank (its other operations, a crash, a
//! notice) and with any step completing the same half (a delivery and a
//! timeout of one receive). The step that completes an exchange causally
//! follows the one that completed its other half (the rank runs only
//! after both), so what the rank does next is ordered after both. The
//! reduction assumes nothing about the program: code that observes
//! completion order (selects over a receive and an exchange, polls
//! futures one by one) uses separate operations, whose completions wake
//! the rank and conflict as before, and is explored as before (tests:
//! `check_exchange` compares outcome sets with the naive search and with
//! the same program joining its own futures). With it the ring on 4 ranks
//! under rendezvous is one schedule, its pipelined form too.
//!
//! The same holds for every joint operation of the world
//! ([`World::post_joint`](super::world::World::post_joint)): a framed exchange
//! ([`Fabric::exchange_framed`](algorithms::Fabric::exchange_framed),
//! which `Framed` makes of every exchange, so the NCCL ring, PAT and p2p
//! pipelines) and each in-network operation, whose messages between the
//! members are the checker's model of the switch (the algorithm sees one
//! future, as it would of a switch). A part conflicts with the others only
//! when both would wake the rank, which only the last part does. Tested
//! by `check_joint`: outcome sets equal the naive search's, the framed
//! exchange's equal those of the framed send and receive joined, faults
//! strike the parts, and a rank that observes whether an in-network
//! reduction or another receive completed first still reaches both
//! outcomes.
//!
//! # Concurrent calls: a rank's calls as separate units
//! Two calls issued concurrently on a rank (`concurrent = true`) are
//! independent futures joined by the rank's program; a step of one and a
//! step of the other commute unless the calls meet in state they share (a
//! channel, when they use one tag; a pair's eager send slots; the rank's
//! end, crash or notices). [`effect`](super::effect) names those
//! [`Unit`](super::effect::Unit)s and
//! [`Resource`](super::effect::Resource)s, as DPOR tools for threads name
//! threads and shared variables (Flanagan and Godefroid, POPL 2005). The
//! refinement assumes a call observes nothing of the others but through
//! its own operations. The world checks, on every step, what the fabric
//! can see of a breach: a call that moves (posts) without one of its
//! operations completing, or reads the rank's clock; [`exhaustive`] then
//! searches again with whole ranks ([`SearchStats::calls_fallback`]). The
//! first step that breaks the assumption follows only steps for which the
//! refinement holds, and the refined search runs a representative of every
//! class of such prefixes, in which that call reaches the same state and
//! breaks it too.
//!
//! What the fabric cannot see, it cannot check: calls whose algorithms
//! share mutable state outside the fabric (an `Rc<RefCell<..>>` captured by
//! both, a global) are caught only when that state makes a call post
//! without one of its own operations completing. A call that reads such
//! state only when its own operations complete (a log of arrival order
//! both calls append to, read back into the result) can differ between
//! schedules the refinement treats as equivalent, and the search then
//! misses outcomes without noticing (`check_calls`'
//! `state_shared_outside_the_fabric_is_not_seen` shows one: two
//! interleavings' outcomes, one found). That is the contract of concurrent
//! calls (as of `join_branches`' branches): they share nothing mutable
//! outside the fabric. A program that must share such state runs its
//! calls one after another (`concurrent = false`), or adds a `max_steps`
//! assertion, which keeps whole ranks.
//!
//! With the refinement tag_reuse_fixed's two rings are one schedule on 3
//! and 4 ranks under rendezvous and unbounded buffering; under one eager
//! slot per pair (MPI's eager protocol buffers per pair whatever the tag)
//! the two calls' sends contend for the slot (which send gets it decides
//! which exchange may complete first, a real difference), and DPOR
//! stays large; the stateful search verifies it (see below).
//!
//! # Branches of a call: NCCL's channels as units
//! NCCL's algorithms run a call's channels as futures joined inside the
//! call, each on its own part of the buffer and its own tags. Whole ranks
//! as units order one channel's completions against another's on the same
//! rank although no channel observes them: the NCCL ring on 4 ranks did
//! not finish in 20,000 schedules. A call that joins futures which only
//! join says so with
//! [`join_branches`](algorithms::branches::join_branches) (as a program
//! says it only joins a send and a receive with `Fabric::exchange`); the
//! join tells the fabric which branch it polls, so each operation is
//! attributed to its branch, and each branch becomes a unit nested in its
//! call, exactly as concurrent calls are units of their rank (Flanagan and
//! Godefroid's threads; ISP's POE argument that only completion-order
//! observations are real nondeterminism). The step in which the last
//! branch returns lets the call go on, so it changes the whole call and
//! causally follows every branch's end. The assumption (branches observe
//! nothing of each other but through their own operations; they only
//! join) is checked on every step, and a search that finds it broken is
//! run again without it ([`SearchStats::branches_fallback`]); see
//! [`World::branching`](super::world::World::branching) for what is
//! checked, and what no fabric can see (state two branches share outside
//! it). Tested by `check_branches`: outcome sets equal the naive search's
//! and `join_all`'s for multi-branch rings (tags apart and shared), the
//! NCCL ring, CollNet Direct and NVLS tree, under faults, and programs
//! that observe another branch's completion (a select over another
//! branch's receive, the clock read in a branch, a `try_join` whose branch
//! fails) fall back and reach both observations.
//!
//! # Lanes of an outbox: sends in flight apart from the receives
//! The double binary tree keeps its sends in flight in an `Outbox`
//! (`algorithms/src/outbox.rs`) while it receives: one lane per
//! destination and tag, each starting its next queued send when the
//! previous one completes. With the rank as one unit, every send
//! completion (under rendezvous, each delivery of the rank's messages)
//! conflicted with every receive completion of the rank: the tree took
//! 600, 2,978 and 35,640 schedules on 4, 5 and 6 ranks under rendezvous
//! and did not finish in 200,000 on 8. Nothing of a lane's successful
//! completion reaches the flow that queues the sends, but the next send it
//! lets the lane start; so the outbox tells the fabric which lane it polls
//! ([`Branching`](algorithms::branches::Branching)'s lane events), and
//! each lane and the flow without its lanes are units of their own (a
//! [`Part`](super::effect::Part) of the flow), as a call's branches are
//! (Flanagan and Godefroid's threads again; the commutation argument, and
//! where the flow does observe its lanes (a flush, a failed send), are in
//! `world/lanes.rs`). The assumption is checked as for
//! branches, with the same fallback. Tested by `check_lanes`: the tree on
//! 2 and 3 ranks under every buffering, with a crash, reaches exactly the
//! naive and the stateful search's outcomes; a flow that selects over a
//! flush and a receive (a completion-order observer) reaches both
//! outcomes without falling back; a lane that reads the clock falls back.
//! The tree under rendezvous is now one schedule on 4, 5 and 8 ranks, two
//! on 6.
//!
//! # Eager slots per connection
//! Under `eager:K` the slots a send may take belong to its connection
//! ([`Connection`](super::world::Connection)): the pair, and the branch of
//! the call's outermost join it was posted from. NCCL gives each channel
//! its own connection to each peer, with its own `NCCL_STEPS` buffers
//! (`struct ncclChannelPeer`, `src/include/device.h`;
//! `ncclTransportP2pConnect`, `src/transport.cc`; NVIDIA/nccl commit
//! 5067397c2676d5aed50042fc39e5c8ee96eb0027), so the channels of one call
//! never wait for each other's buffers. With one pool per pair, as before,
//! the channels of nccl_ring, nccl_nvls_tree and nccl_collnet_direct raced
//! for one slot: real nondeterminism of that model (which channel's send
//! completes early), but not of NCCL, and more than 200,000 schedules from
//! 4 ranks on under `eager:1`; per connection each is one schedule. Sends
//! outside every join (the catalogue's MPI-style algorithms, concurrent
//! calls' rings) keep one pool per pair. This changes the model, not the
//! reduction: the naive search and DPOR see the same slots (tested by
//! `check_connections`, with programs whose channels contend for their
//! own slots and a rank that observes arrival order across channels).
//!
//! # tag_reuse_fixed under `eager:1`: the states, measured
//! Under one eager slot per pair the two calls' sends contend for the
//! slot (above): real nondeterminism. DPOR runs 2,157,495 schedules on 3
//! ranks; the orders converge to equal states, and the stateful search
//! (module `stateful`) that takes over after [`STATEFUL_AFTER`] DPOR
//! schedules merges them. It stored 209,708 states on 3 ranks and
//! 3,000,000 on 4 at the cap without finishing (980 s, 513 MiB). Where
//! they came from was measured on 3 ranks (counters, not kept): all
//! 209,708 were distinct in the fabric part of the key alone, so none
//! differed only in its units' histories, and a key keeping only what can
//! affect a unit's future (its position instead of its history: each
//! call's count of operations) merged nothing either (209,708 again). The
//! duplicates were in the fabric part: the pending joint operations (a
//! ring step is one exchange) were hashed in the order of their global
//! operation ids, that is in the order the schedule had posted them across
//! units, so one state reached along paths that posted the ranks'
//! exchanges in different orders had several keys. Named by their unit and
//! the unit's own index and listed in that order (`world/state.rs`), they
//! merge: 6,178 states on 3 ranks and 172,886 on 4, exactly the reachable
//! states of an independent model of the protocol (each unit's step and
//! which halves of its exchange are done, each pair's messages in send
//! order with their slots; a breadth-first count in a script, not kept).
//! This is not a reduction and assumes nothing of the program: the world
//! only looks joint operations up by id and compares ids for equality
//! along one execution (which instance a choice is), never orders them,
//! so two states whose keys now agree have the same futures up to a
//! renaming of those ids. Verified since: 3 ranks from 6,178 stored
//! states, 4 ranks from 172,886 (`sim check-bench --suite targets`; the
//! figures are in the README).
//!
//! Not done, and why. Persistent (stubborn) sets in the stateful search
//! (Godefroid, LNCS 1032, ch. 4; Peled's ample sets, conditions C0-C2; no
//! cycle proviso, the state space being acyclic) would visit only some of
//! those states while keeping every terminal one. Computing one needs an
//! over-approximation of what each unit may post later, and the world
//! knows nothing of a program's future: a unit woken on rank `r` may post
//! on any channel of `r` and take any of `r`'s slots. With that, every
//! choice that completes an operation of rank `r` is dependent with every
//! other that may wake a unit of `r` (the two calls of a rank contend for
//! its slots, and freeing a slot completes the oldest waiting send of
//! either call), a delivery touches two adjacent ranks, and the closure
//! runs around the ring: the set is every enabled choice. Smaller sets
//! need each call's footprint (its peers, tags, and that it only
//! exchanges, whose send halves commute with a freed slot) declared by
//! the algorithm or learnt from a run and checked on every post, with a
//! fallback whose soundness under a selective search must still be shown.
//! Rank-rotation symmetry with the calls swapped would divide the states
//! by at most 8 on 4 ranks and needs the symbolic inputs renamed with the
//! ranks and every property shown invariant. Neither is needed for this
//! target now; the key is where 4 ranks were lost.
//!
//! [`Effect::conflicts`]: crate::effect::Effect::conflicts
//! [`Effect::halves`]: crate::effect::Effect::halves

mod dpor;
mod races;
mod random;
mod stateful;
mod stats;

use std::rc::Rc;

use super::exec::Execution;
use super::program::Program;
use super::spec::{Bounds, Buffering, Faults, Point};
use super::world::{Choice, Units};

pub use dpor::{branches_refinable, calls_refinable, exhaustive};
pub use random::random;
pub use stateful::STATEFUL_AFTER;
pub use stats::{
    BRANCHES_REDUCTION, CALLS_REDUCTION, REDUCTIONS, SearchStats, estimate_naive, reductions,
};

/// What to do after a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Explore further.
    Continue,
    /// Stop the search.
    Stop,
}

/// How the exhaustive search reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// DPOR with sleep sets; for a program of concurrent calls, the
    /// stateful search once DPOR has run
    /// [`Bounds::stateful_after`](crate::spec::Bounds::stateful_after)
    /// schedules (default [`STATEFUL_AFTER`]) without finishing.
    Dpor,
    /// The stateful search from the start (with the units DPOR would
    /// name): for tests and measurements.
    Stateful,
    /// None: every interleaving (for small cases and measurements).
    Naive,
}

/// An error of the search itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// Replaying a prefix did not reproduce it: some program is not
    /// deterministic given the checker's choices.
    #[error(
        "replaying step {step} ({choice}) found it disabled: the program is not deterministic under the checker's choices"
    )]
    Diverged {
        /// The step.
        step: usize,
        /// Its choice.
        choice: Choice,
    },
}

/// The inputs every search needs.
pub struct Target<'a> {
    /// The program.
    pub program: &'a Rc<Program>,
    /// The parameter point.
    pub point: Point,
    /// The fault budget.
    pub faults: Faults,
    /// The bounds.
    pub bounds: Bounds,
}

impl Target<'_> {
    fn start(&self) -> Execution {
        Execution::start(self.program, self.point, self.faults)
    }

    fn start_with(&self, units: Units) -> Execution {
        Execution::start_with(self.program, self.point, self.faults, units)
    }

    fn buffering(&self) -> Buffering {
        self.point.buffering
    }
}

/// Runs `prefix` from the start, checking that each choice is enabled.
pub fn replay(target: &Target<'_>, prefix: &[Choice]) -> Result<Execution, SearchError> {
    replay_with(target, prefix, Units::default())
}

/// [`replay`], naming calls and branches as units as `units` says.
fn replay_with(
    target: &Target<'_>,
    prefix: &[Choice],
    units: Units,
) -> Result<Execution, SearchError> {
    let mut exec = target.start_with(units);
    for (step, &choice) in prefix.iter().enumerate() {
        if !exec.enabled().contains(&choice) {
            return Err(SearchError::Diverged { step, choice });
        }
        exec.apply(choice);
    }
    Ok(exec)
}
