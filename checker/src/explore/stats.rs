//! What a search reports: its counters ([`SearchStats`]), the reductions
//! they name, and Knuth's estimate of the naive search's size where that
//! search cannot finish.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Target;

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
    /// [`World::branching`](crate::world::World::branching)), so searched
    /// again without it.
    pub branches_fallback: bool,
    /// When the search switched to the stateful one ([`STATEFUL_AFTER`](super::STATEFUL_AFTER)):
    /// the DPOR schedules run (and checked) before it switched; they are
    /// counted in `schedules` too (as DPOR's sleep-blocked schedules and
    /// steps are in `sleep_blocked` and `steps`).
    pub stateful_after: Option<u64>,
    /// States the stateful search stored in its visited-state table (0
    /// for the stateless searches).
    pub states: u64,
    /// Times the stateful search reached a stored state again: pruned,
    /// or (Godefroid's condition) only its choices asleep the first time
    /// and awake now taken.
    pub revisits: u64,
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
pub const BRANCHES_REDUCTION: &str = "the branches of a call's joins (NCCL's channels) and the lanes of an outbox (sends kept in flight) as separate units (steps of different branches or lanes commute unless they share a channel or a send slot)";

/// The reductions a search with these counters applied, as reports name
/// them.
pub fn reductions(stats: &SearchStats) -> String {
    let mut out = REDUCTIONS.to_string();
    if stats.branches_independent {
        out += "; ";
        out += BRANCHES_REDUCTION;
    } else if stats.branches_fallback {
        out += "; branches of joins and lanes of outboxes as one unit (a branch or lane observed state outside its own operations)";
    }
    if let Some(before) = stats.stateful_after {
        out += &format!(
            "; where DPOR ran {} schedules without finishing ({before} in all), a stateful search (sleep sets with state caching, a visited-state table keyed by the fabric and each unit's observations): {} states stored, {} revisits",
            super::STATEFUL_AFTER,
            stats.states,
            stats.revisits
        );
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
