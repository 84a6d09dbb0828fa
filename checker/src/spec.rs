//! What a check explores, as data: the calls each rank makes, the
//! parameter axes, the send semantics, the fault budget, the search and its
//! bounds. [`crate::scenario`] reads it from a TOML file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use algorithms::{Algorithm, Collective, Rank, ReduceOp};

/// One collective call of the program (`[[call]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSpec {
    /// The name `[order]` refers to it by (default `call0`, `call1`, ...).
    pub id: String,
    /// The collective.
    pub collective: Collective,
    /// The algorithm (of `collective`).
    pub algorithm: Algorithm,
    /// The reduction operator (reducing collectives).
    pub op: ReduceOp,
    /// The base tag of the call (default: its index in the file).
    pub tag: u64,
}

/// How a send completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Buffering {
    /// Eager sends with this many buffer slots per connection (an ordered
    /// pair of ranks, and within it each channel of a call's joins: see
    /// [`Connection`](crate::world::Connection); NCCL has 8 per channel
    /// and peer): a send completes at once while a slot is free, and
    /// otherwise when a slot frees or its receiver takes it. `Eager(0)` is
    /// rendezvous: every send completes only when its receive matches it.
    Eager(usize),
    /// Every send completes at once (an unbounded eager buffer).
    Unbounded,
}

impl Buffering {
    /// Whether a delivery can complete or unblock a sender (every mode but
    /// unbounded buffering).
    pub fn is_bounded(self) -> bool {
        matches!(self, Buffering::Eager(_))
    }
}

impl fmt::Display for Buffering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Buffering::Eager(0) => f.write_str("rendezvous"),
            Buffering::Eager(k) => write!(f, "eager, {k} slot(s) per connection"),
            Buffering::Unbounded => f.write_str("unbounded eager"),
        }
    }
}

/// The fault budget: how many of each fault one schedule may contain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Messages lost in flight.
    pub drops: usize,
    /// Whether the transport retransmits a lost message (RDMA RC does; the
    /// drop then only delays it), with `retry_count` retransmissions per
    /// message before both ends fail with a timeout.
    pub retransmit: bool,
    /// Retransmissions per message (NCCL_IB_RETRY_CNT, default 7).
    pub retry_count: usize,
    /// Ranks that crash (stop) at a point the checker chooses.
    pub crashes: usize,
    /// Receives that time out spuriously (the peer is alive but slow).
    pub timeouts: usize,
}

impl Faults {
    /// Whether any fault may strike.
    pub fn any(&self) -> bool {
        self.drops + self.crashes + self.timeouts > 0
    }
}

/// How the schedules are searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Every schedule, up to equivalence (DPOR with sleep sets).
    Exhaustive,
    /// `schedules` uniformly random schedules from `seed`.
    Random {
        /// Schedules to run per parameter point.
        schedules: u64,
        /// The ChaCha seed.
        seed: u64,
    },
    /// PCT (probabilistic concurrency testing): random priorities with
    /// `depth - 1` priority change points per schedule.
    Pct {
        /// Schedules to run per parameter point.
        schedules: u64,
        /// The ChaCha seed.
        seed: u64,
        /// The bug depth PCT targets.
        depth: usize,
    },
}

/// Limits on one exploration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Schedules per parameter point before the search stops (the verdict
    /// then says it is incomplete).
    pub max_schedules: u64,
    /// Steps (deliveries and faults) per schedule.
    pub max_depth: usize,
    /// Most deviations from the default schedule (first enabled choice),
    /// or `None` for no delay bound.
    pub delay_bound: Option<usize>,
    /// DPOR schedules after which the exhaustive search of a program of
    /// concurrent calls switches to the stateful search (see
    /// [`STATEFUL_AFTER`](crate::explore::STATEFUL_AFTER), the default).
    pub stateful_after: u64,
}

impl Default for Bounds {
    /// 100 000 schedules, 10 000 steps, no delay bound, the stateful
    /// search after [`STATEFUL_AFTER`](crate::explore::STATEFUL_AFTER)
    /// DPOR schedules.
    fn default() -> Self {
        Bounds {
            max_schedules: 100_000,
            max_depth: 10_000,
            delay_bound: None,
            stateful_after: crate::explore::STATEFUL_AFTER,
        }
    }
}

/// The parameter axes: every combination is a [`Point`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axes {
    /// World sizes.
    pub world_size: Vec<usize>,
    /// Elements per rank buffer (the collective's full size).
    pub count: Vec<usize>,
    /// Pipeline chunks the buffer is cut into (`chunk_bytes` is derived).
    pub chunks: Vec<usize>,
    /// Roots of rooted collectives.
    pub root: Vec<Rank>,
    /// In place (one buffer) or out of place (separate input and output).
    pub in_place: Vec<bool>,
    /// Send buffering.
    pub buffering: Vec<Buffering>,
}

/// One combination of parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    /// World size.
    pub world_size: usize,
    /// Elements per rank buffer.
    pub count: usize,
    /// Pipeline chunks.
    pub chunks: usize,
    /// Root of rooted collectives.
    pub root: Rank,
    /// In place or not.
    pub in_place: bool,
    /// Send buffering.
    pub buffering: Buffering,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "N={} count={} chunks={} root={} {} ({})",
            self.world_size,
            self.count,
            self.chunks,
            self.root,
            if self.in_place {
                "in place"
            } else {
                "out of place"
            },
            self.buffering
        )
    }
}

/// The verdict a scenario expects (`expect = "..."`), also the name of the
/// property a counterexample violates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Every property holds on every explored schedule.
    Verified,
    /// Some ranks never finish: every one waits on another.
    Deadlock,
    /// A rank's collective returned an error though no fault struck.
    Error,
    /// A rank's output is not the reference result.
    WrongResult,
    /// Results differ bitwise between ranks or between schedules.
    Nondeterministic,
    /// A message was sent and never received.
    Leftover,
    /// The bytes sent or the steps taken differ from the cost formula.
    Cost,
    /// A user assertion of the scenario failed.
    Assertion,
    /// After a fault, a rank hung, returned a wrong result, or the ranks'
    /// errors name different causes.
    FaultContract,
}

impl Verdict {
    /// Every verdict.
    pub const ALL: [Verdict; 9] = [
        Verdict::Verified,
        Verdict::Deadlock,
        Verdict::Error,
        Verdict::WrongResult,
        Verdict::Nondeterministic,
        Verdict::Leftover,
        Verdict::Cost,
        Verdict::Assertion,
        Verdict::FaultContract,
    ];

    /// The name used in scenarios and reports.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::Deadlock => "deadlock",
            Verdict::Error => "error",
            Verdict::WrongResult => "wrong_result",
            Verdict::Nondeterministic => "nondeterministic",
            Verdict::Leftover => "leftover",
            Verdict::Cost => "cost",
            Verdict::Assertion => "assertion",
            Verdict::FaultContract => "fault_contract",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A user assertion (`[[assert]]`), checked on every explored schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assertion {
    /// No rank (or only `rank`) sends more than `bytes` bytes in total.
    MaxBytesSent {
        /// One rank, or every rank.
        rank: Option<Rank>,
        /// The limit.
        bytes: u64,
    },
    /// No rank (or only `rank`) sends more than `messages` messages.
    MaxMessagesSent {
        /// One rank, or every rank.
        rank: Option<Rank>,
        /// The limit.
        messages: u64,
    },
    /// The longest chain of causally dependent messages is at most `steps`.
    MaxSteps {
        /// The limit.
        steps: u64,
    },
}

/// A whole check, as read from a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckScenario {
    /// The scenario's name.
    pub name: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// The calls, in file order.
    pub calls: Vec<CallSpec>,
    /// Per-rank call orders (indices into `calls`); ranks not named use
    /// `default_order`.
    pub order: BTreeMap<Rank, Vec<usize>>,
    /// The order of ranks `order` does not name (default: file order).
    pub default_order: Vec<usize>,
    /// Whether each rank runs its calls concurrently (joined) rather than
    /// one after the other.
    pub concurrent: bool,
    /// The parameter axes.
    pub axes: Axes,
    /// The fault budget.
    pub faults: Faults,
    /// The search.
    pub search: Search,
    /// Its bounds.
    pub bounds: Bounds,
    /// Whether to check the cost-formula property (on the calls whose
    /// algorithm has a cost formula; see [`CheckScenario::notes`]).
    pub check_cost: bool,
    /// The verdict the scenario expects, if it states one.
    pub expect: Option<Verdict>,
    /// User assertions.
    pub asserts: Vec<Assertion>,
    /// What the check will not do that the file asked for, one sentence
    /// each (the cost property of an algorithm without a cost formula).
    pub notes: Vec<String>,
}

impl CheckScenario {
    /// The calls rank `rank` makes, in its order.
    pub fn order_of(&self, rank: Rank) -> &[usize] {
        self.order.get(&rank).unwrap_or(&self.default_order)
    }

    /// Every parameter point, in axis order: world size slowest, buffering
    /// fastest.
    pub fn points(&self) -> Vec<Point> {
        let a = &self.axes;
        let mut out = Vec::new();
        for &world_size in &a.world_size {
            for &count in &a.count {
                for &chunks in &a.chunks {
                    for &root in &a.root {
                        for &in_place in &a.in_place {
                            for &buffering in &a.buffering {
                                out.push(Point {
                                    world_size,
                                    count,
                                    chunks,
                                    root,
                                    in_place,
                                    buffering,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}
