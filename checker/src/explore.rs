//! The search over schedules: exhaustive with dynamic partial-order
//! reduction (Flanagan and Godefroid's DPOR with sleep sets), naive
//! exhaustive (every interleaving, to measure what the reduction prunes),
//! or seeded random walks and PCT. Every search goes through the same
//! [`Execution`] and the same choice interface.
//!
//! Stateless: to reach a state again the explorer re-runs the schedule's
//! prefix from the start. Two steps conflict when they change the same
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
//! which exchange may complete first, a real difference), and the search
//! stays large (see below).
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
//! # Left large
//! The double binary tree allreduce on 8 ranks under rendezvous keeps its
//! sends in flight in an `Outbox` (`algorithms/src/outbox.rs`) while it receives: each
//! send's completion wakes the rank, which may start the next send of that
//! lane, so the rank's send completions and receive completions are steps
//! of one unit and conflict; the lanes only join, but the outbox is not a
//! join of independent futures (the main flow queues their sends), so the
//! per-branch refinement does not apply as it stands. tag_reuse_fixed
//! under `eager:1` is real contention (above). Both are left to stateful
//! search (a visited-state table, with the care stateful DPOR needs to stay
//! sound with sleep sets) or to optimal DPOR with wakeup trees (Abdulla et
//! al., JACM 2017), which would run one schedule per class where sleep
//! sets still run some twice (the `blocked` count).
//!
//! Stateful search (a visited-state table keyed by the world and each
//! rank's observation history) and optimal DPOR with wakeup trees (Abdulla
//! et al., JACM 2017) were weighed: the exchange removes the explosion at
//! its source, where a state table would only merge its effects and
//! would need the care stateful DPOR requires to stay sound with sleep
//! sets; symmetry reduction was not needed.

use std::collections::BTreeSet;
use std::rc::Rc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Execution;
use super::program::Program;
use super::spec::{Assertion, Bounds, Buffering, Faults, Point, Search};
use super::world::{Choice, Effect, Units};

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
    /// DPOR with sleep sets.
    Dpor,
    /// None: every interleaving (for small cases and measurements).
    Naive,
}

/// Counters of one search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Complete schedules run to their end and checked.
    pub schedules: u64,
    /// Schedules abandoned because every enabled choice slept (an
    /// equivalent schedule was already explored).
    pub sleep_blocked: u64,
    /// Schedules cut at the depth bound.
    pub depth_cut: u64,
    /// Steps applied, replays included.
    pub steps: u64,
    /// Whether the search stopped at `max_schedules` before finishing.
    pub schedule_cap_hit: bool,
    /// Whether the delay bound pruned some branch.
    pub delay_pruned: bool,
    /// Whether the caller stopped the search.
    pub stopped: bool,
    /// The most search nodes (states on the current path, each with its
    /// enabled, backtrack, done and sleep sets) held at once: what the
    /// stateless search stores.
    pub peak_nodes: u64,
    /// When the schedule cap stopped an exhaustive search: the estimated
    /// fraction of its (reduced) tree explored, in parts per million,
    /// counting each node's known branches as equally large subtrees.
    pub explored_ppm: Option<u32>,
    /// Whether the search treated the concurrent calls of a rank as
    /// separate units ([`CALLS_REDUCTION`]).
    pub calls_independent: bool,
    /// Whether it tried to and found the assumption broken (a call moved
    /// without one of its operations completing, or read the rank's
    /// clock), so searched again with whole ranks.
    pub calls_fallback: bool,
    /// Whether the search treated the branches of each call's joins as
    /// separate units ([`BRANCHES_REDUCTION`]) and the program joined some.
    pub branches_independent: bool,
    /// Whether it tried to and found that assumption broken (see
    /// [`World::branching`](super::world::World::branching)), so searched
    /// again without it.
    pub branches_fallback: bool,
}

impl SearchStats {
    /// Whether every schedule (up to equivalence) was explored.
    pub fn complete(&self) -> bool {
        !self.schedule_cap_hit && !self.delay_pruned && self.depth_cut == 0 && !self.stopped
    }

    /// The bounds that cut the search, as people read them (empty when it
    /// was complete or stopped at a violation).
    pub fn bounds_hit(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.schedule_cap_hit {
            out.push("the schedule cap (max_schedules)");
        }
        if self.depth_cut > 0 {
            out.push("the depth bound (max_depth)");
        }
        if self.delay_pruned {
            out.push("the delay bound (delay_bound)");
        }
        out
    }
}

/// The reductions an exhaustive search applies, as reports name them.
pub const REDUCTIONS: &str = "DPOR with sleep sets (Flanagan and Godefroid); the parts of a joint operation commute (an exchange's halves, one completion as MPI_Sendrecv; an in-network operation's messages)";

/// The reduction added when a program's calls are concurrent.
pub const CALLS_REDUCTION: &str = "a rank's concurrent calls as separate units (steps of different calls commute unless they share a channel or a send slot)";

/// The reduction added when a call joins independent branches (NCCL's
/// channels).
pub const BRANCHES_REDUCTION: &str = "the branches of a call's joins (NCCL's channels) as separate units (steps of different branches commute unless they share a channel or a send slot)";

/// The reductions a search with these counters applied, as reports name
/// them.
pub fn reductions(stats: &SearchStats) -> String {
    let mut out = REDUCTIONS.to_string();
    if stats.branches_independent {
        out += "; ";
        out += BRANCHES_REDUCTION;
    } else if stats.branches_fallback {
        out +=
            "; branches of joins as one unit (a branch observed state outside its own operations)";
    }
    if stats.calls_independent {
        out += "; ";
        out += CALLS_REDUCTION;
    } else if stats.calls_fallback {
        out +=
            "; concurrent calls as whole ranks (a call observed state outside its own operations)";
    }
    out
}

/// Whether the search may treat the concurrent calls of each rank as
/// separate units: the program has several concurrent calls and no
/// property reads the ranks' clocks, which the calls share (see
/// [`effect`](super::effect)).
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
/// branches share (see [`World::branching`](super::world::World::branching)).
/// A program without joins of branches is searched the same either way.
pub fn branches_refinable(program: &Program) -> bool {
    !program
        .asserts
        .iter()
        .any(|a| matches!(a, Assertion::MaxSteps { .. }))
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

/// Knuth's estimate of the number of complete schedules of the naive
/// search (every interleaving): the mean, over `probes` seeded random
/// walks, of the product of the number of choices enabled at each step
/// (D. E. Knuth, "Estimating the efficiency of backtrack programs",
/// Math. Comp. 29, 1975). Unbiased; used where the naive search cannot
/// finish.
pub fn estimate_naive(target: &Target<'_>, probes: u32, seed: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sum = 0.0;
    for _ in 0..probes {
        let mut exec = target.start();
        let mut product = 1.0f64;
        while exec.steps.len() < target.bounds.max_depth {
            let enabled = exec.enabled();
            if enabled.is_empty() {
                break;
            }
            product *= enabled.len() as f64;
            exec.apply(enabled[rng.random_range(0..enabled.len())]);
        }
        sum += product;
    }
    sum / f64::from(probes.max(1))
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

/// A node of the exhaustive search: the state before one step.
struct Node {
    enabled: Vec<Choice>,
    /// Which instance of each enabled choice it is ([`World::instance`](super::world::World::instance)).
    instances: Vec<(u64, u64)>,
    /// The predicted effect of each enabled choice (for sleep sets).
    effects: Vec<Effect>,
    backtrack: BTreeSet<Choice>,
    done: BTreeSet<Choice>,
    sleep: BTreeSet<Choice>,
    /// Deviations from the first enabled choice before this node.
    delays: usize,
    /// The steps that happen before the step taken here.
    hb: Vec<u64>,
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
pub fn exhaustive(
    target: &Target<'_>,
    reduction: Reduction,
    prefix: &[Choice],
    mut visit: impl FnMut(&Execution) -> Control,
) -> Result<SearchStats, SearchError> {
    let dpor = reduction == Reduction::Dpor;
    let calls = dpor && calls_refinable(target.program);
    let branches = dpor && branches_refinable(target.program);
    let mut units = Units { calls, branches };
    let mut fallback = (false, false);
    loop {
        match search(target, reduction, prefix, units, &mut visit)? {
            Searched::Done(mut stats) => {
                stats.calls_independent = units.calls;
                stats.branches_independent &= units.branches;
                stats.calls_fallback = fallback.0;
                stats.branches_fallback = fallback.1;
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
enum Searched {
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
                    let fresh = fresh_choices(parent, &enabled, &instances, &effects);
                    let sleep = parent
                        .sleep
                        .iter()
                        .chain(parent.done.iter().filter(|&&c| c != taken))
                        .filter(|&&q| {
                            let at = parent.enabled.iter().position(|&c| c == q);
                            at.is_some_and(|i| {
                                let predicted = &parent.effects[i];
                                !predicted.may_conflict(done)
                                    && !fresh.iter().any(|&(r, e)| disturbs(q, predicted, r, e))
                            })
                        })
                        .copied()
                        .collect();
                    let deviated = parent.enabled.first() != Some(&taken);
                    (sleep, parent.delays + usize::from(deviated))
                }
                None => (BTreeSet::new(), 0),
            };
            let sleep: BTreeSet<Choice> = match reduction {
                Reduction::Dpor => sleep,
                Reduction::Naive => BTreeSet::new(),
            };
            let Some(&choice) = enabled.iter().find(|c| !sleep.contains(c)) else {
                blocked = true;
                break;
            };
            let backtrack = match reduction {
                Reduction::Dpor => BTreeSet::from([choice]),
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

/// Records which earlier steps happen before the step just applied (its
/// causes, the earlier steps it conflicts with, and theirs), and schedules
/// the reversal of its race: the latest earlier step it conflicts with that
/// does not happen before it by causality.
fn record_hb(stack: &mut [Node], exec: &Execution, base: usize) {
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

/// The choices (with their predicted effects) enabled now that were not
/// enabled, or not as the same instance, before the step just taken from
/// `parent`.
fn fresh_choices<'a>(
    parent: &Node,
    enabled: &'a [Choice],
    instances: &[(u64, u64)],
    effects: &'a [Effect],
) -> Vec<(Choice, &'a Effect)> {
    enabled
        .iter()
        .zip(instances)
        .zip(effects)
        .filter(|&((c, i), _)| {
            !parent
                .enabled
                .iter()
                .zip(&parent.instances)
                .any(|(p, pi)| p == c && pi == i)
        })
        .map(|((&c, _), e)| (c, e))
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
fn add_disabled(parent: &mut Node, taken: Choice, enabled: &[Choice], instances: &[(u64, u64)]) {
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
fn add_races(stack: &mut [Node], exec: &Execution, base: usize, enabled: &[Choice], faults: bool) {
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

/// Runs `schedules` random schedules (uniform walks, or PCT), calling
/// `visit` on each.
pub fn random(
    target: &Target<'_>,
    search: Search,
    mut visit: impl FnMut(&Execution) -> Control,
) -> SearchStats {
    let (schedules, seed, depth) = match search {
        Search::Random { schedules, seed } => (schedules, seed, None),
        Search::Pct {
            schedules,
            seed,
            depth,
        } => (schedules, seed, Some(depth)),
        Search::Exhaustive => (0, 0, None),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats = SearchStats::default();
    let mut expected_len = 64usize;
    let n = target.point.world_size;
    for _ in 0..schedules.min(target.bounds.max_schedules) {
        let mut exec = target.start();
        // PCT: a random priority per rank, lowered at depth - 1 random
        // change points.
        let mut priority: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            priority.swap(i, rng.random_range(0..=i));
        }
        let change_points: Vec<usize> = match depth {
            Some(d) => (1..d)
                .map(|_| rng.random_range(0..expected_len.max(1)))
                .collect(),
            None => Vec::new(),
        };
        let mut lowered = 0usize;
        loop {
            let at = exec.steps.len();
            if at >= target.bounds.max_depth {
                stats.depth_cut += 1;
                break;
            }
            let enabled = exec.enabled();
            if enabled.is_empty() {
                break;
            }
            let choice = match depth {
                None => enabled[rng.random_range(0..enabled.len())],
                Some(_) => {
                    let best = *enabled
                        .iter()
                        .max_by_key(|c| priority[c.affected(target.buffering()).0])
                        .expect("enabled is not empty");
                    if change_points.contains(&at) {
                        // Lower the running rank below every other.
                        let r = best.affected(target.buffering()).0;
                        priority[r] = lowered;
                        lowered += 1;
                        for (q, p) in priority.iter_mut().enumerate() {
                            if q != r {
                                *p += n;
                            }
                        }
                    }
                    best
                }
            };
            exec.apply(choice);
            stats.steps += 1;
        }
        expected_len = expected_len.max(exec.steps.len());
        stats.schedules += 1;
        if visit(&exec) == Control::Stop {
            stats.stopped = true;
            return stats;
        }
    }
    stats.schedule_cap_hit = schedules > target.bounds.max_schedules;
    stats
}
