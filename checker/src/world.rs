//! The state of one checked execution: messages waiting in channels,
//! posted receives, send buffer slots, per-rank status, and the
//! transitions the checker chooses between ([`Choice`]).
//!
//! A rank's own computation between two choices is deterministic; every
//! nondeterminism is a [`Choice`]: which message is delivered next, which
//! is lost, which rank crashes, which receive times out, and when a rank
//! learns that a peer stopped.

//!
//! Submodules, each one part of [`World`]:
//! - `choice`: [`ChannelKey`] and [`Choice`], what the checker chooses;
//! - `post`: the operations a rank posts (sends, receives, exchanges, the
//!   gates of concurrent calls);
//! - `lookahead`: what the explorer asks before taking a choice (which
//!   choices are enabled, which instance each is, its predicted effect and
//!   causes);
//! - `apply`: taking a choice (deliveries, losses, crashes, timeouts,
//!   notices) and a rank's end;
//! - `joint`: operations of several parts completing as one (exchanges,
//!   in-network operations);
//! - `branches`: the branches of a call's joins as units of the search.

mod apply;
mod branches;
mod choice;
mod joint;
mod lanes;
mod lookahead;
mod post;
mod state;

use std::collections::{BTreeMap, VecDeque};
use std::task::Waker;

use algorithms::{FabricError, Payload, Rank, Shape};

pub use super::effect::{Branch, Connection, Effect, Half, Part, Post, Resource, Unit, Units};
use super::spec::{Buffering, Faults};
use branches::JoinState;
pub use choice::{ChannelKey, Choice};
use joint::PendingJoint;
pub use joint::{JointRecv, JointSend};
use lanes::Outboxes;
use state::Observed;
pub use state::{Digest, hash_payload};

/// A timing model under which the checker clocks every execution, to
/// compare the critical path with an algorithm's cost formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The latency of a message (alpha), in ps.
    pub latency_ps: u64,
    /// Time per byte on a link (1/beta), in ps.
    pub ps_per_byte: u64,
}

/// The two timing models: latency only (time = the longest chain of
/// messages, in steps) and bandwidth only (time = the bytes on the
/// critical path, one link per ordered pair of ranks as in the
/// simulator's ideal links).
pub const TIMINGS: [Timing; 2] = [
    Timing {
        latency_ps: 1,
        ps_per_byte: 0,
    },
    Timing {
        latency_ps: 0,
        ps_per_byte: 1,
    },
];

/// A message in a channel.
#[derive(Debug)]
struct Message {
    payload: Payload,
    /// Whether it holds a send buffer slot (its send has completed).
    buffered: bool,
    /// The send operation waiting for this message to be buffered or
    /// received, if its send has not completed.
    send: Option<OpId>,
    /// Order of sends on its (src, dst) pair, for handing out freed slots.
    pair_seq: u64,
    /// The channel whose slots it uses ([`Connection::channel`]).
    channel: Option<u16>,
    /// The step during which it was sent (`None`: before the first).
    sent_at: Option<usize>,
    /// The step during which it took a buffer slot (its send completed),
    /// if it has: a loss in flight needs it.
    buffered_at: Option<usize>,
    /// The step of its latest loss (retransmitted), if any.
    dropped_at: Option<usize>,
    /// When it arrives under each [`TIMINGS`] model.
    arrival: [u64; 2],
    /// Times it was lost and retransmitted.
    retries: usize,
}

/// A receive waiting in a channel.
#[derive(Debug)]
struct PostedRecv {
    op: OpId,
    expect: Shape,
    posted_at: Option<usize>,
}

/// The index of a send or receive operation.
pub type OpId = usize;

/// Where a send or receive operation is.
#[derive(Debug)]
pub enum OpState {
    /// Not complete; the waker of the task waiting for it.
    Pending(Option<Waker>),
    /// A completed send.
    SendDone(Result<(), FabricError>),
    /// A completed receive.
    RecvDone(Result<Payload, FabricError>),
    /// A completed joint operation (see [`World::post_joint`]): its error, or the
    /// payloads of its receives.
    JointDone(Result<Vec<Payload>, FabricError>),
    /// Its result has been taken.
    Taken,
}

/// How a rank's program stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankStatus {
    /// Still running (perhaps blocked).
    Running,
    /// Its program returned; with an error, the cause it reports.
    Finished(Option<String>),
    /// Stopped by a [`Choice::Crash`] or by a transport failure the
    /// checker imposed (the retry budget exhausted).
    Crashed(String),
}

/// Per-rank bookkeeping.
#[derive(Debug)]
pub struct RankState {
    /// Its status.
    pub status: RankStatus,
    /// Bytes it sent.
    pub bytes_sent: u64,
    /// Messages it sent.
    pub messages_sent: u64,
    /// Messages it received.
    pub received: u64,
    /// Its clock under each [`TIMINGS`] model: when its last received
    /// message arrived (it computes in no time).
    pub clock: [u64; 2],
    /// Peers it knows have stopped, with the cause they reported.
    pub known_stopped: BTreeMap<Rank, String>,
    /// The step during which it stopped, if it has.
    pub stopped_at: Option<Option<usize>>,
    /// The first failure it learned of (its own fault, or a stopped
    /// peer's cause), what its error should name.
    pub cause: Option<String>,
}

/// What a rank is blocked on, for deadlock reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// A receive from `key.src`.
    Recv(ChannelKey),
    /// A send to `key.dst` waiting for a slot or its receiver.
    Send(ChannelKey),
}

/// The state of one execution.
#[derive(Debug)]
pub struct World {
    /// Number of ranks.
    pub world_size: usize,
    /// Send semantics.
    pub buffering: Buffering,
    /// The fault budget.
    pub faults: Faults,
    /// Faults used so far: drops, crashes, timeouts.
    pub used: [usize; 3],
    /// Per-rank state.
    pub ranks: Vec<RankState>,
    /// Every operation.
    pub ops: Vec<OpState>,
    /// The rank of each operation.
    op_rank: Vec<Rank>,
    /// The concurrent call that posted each operation, if any.
    op_call: Vec<Option<usize>>,
    /// The branch that posted each operation.
    op_branch: Vec<Branch>,
    /// The part of its branch (an outbox's main flow or lane) that
    /// posted each operation.
    op_part: Vec<Part>,
    /// The joint operation (an exchange, an in-network operation) each
    /// operation is a part of, if it is one.
    half_of: Vec<Option<OpId>>,
    /// Joint operations not complete, with their parts.
    joints: BTreeMap<OpId, PendingJoint>,
    /// Steps the step being applied causally follows beyond its choice's
    /// own causes: the steps that completed the other parts of a joint
    /// operation it completes.
    extra_causes: Vec<usize>,
    channels: BTreeMap<ChannelKey, VecDeque<Message>>,
    posted: BTreeMap<ChannelKey, VecDeque<PostedRecv>>,
    /// Slots in use per connection.
    slots_used: BTreeMap<Connection, usize>,
    pair_seq: BTreeMap<(Rank, Rank), u64>,
    /// When each (src, dst) link is free again, under each timing model.
    link_free: BTreeMap<(Rank, Rank), [u64; 2]>,
    /// Notices not yet delivered: (from, to) -> the step they were
    /// created, and the cause they report.
    notices: BTreeMap<(Rank, Rank), (Option<usize>, String)>,
    /// The step that last took the oldest message out of a channel: the
    /// message now oldest cannot be delivered or lost before it.
    message_popped: BTreeMap<ChannelKey, usize>,
    /// The step that last took the oldest receive posted on a channel: the
    /// receive now oldest cannot match or time out before it.
    recv_popped: BTreeMap<ChannelKey, usize>,
    /// What the step being applied has done so far.
    pub effect: Effect,
    /// Calls waiting to be started: (rank, call) -> (operation, the step
    /// during which the rank began waiting).
    gates: BTreeMap<(Rank, usize), (OpId, Option<usize>)>,
    /// The step being applied (`None` before the first choice).
    pub step: Option<usize>,
    /// Whether steps name the calls of a rank as separate units (the
    /// per-call refinement of the dependence relation, see
    /// [`effect`](super::effect)); otherwise each rank is one unit.
    pub calls_independent: bool,
    /// Why the per-call refinement's assumption failed in this execution,
    /// if it did: the explorer then searches again with whole ranks.
    pub independence_broken: Option<String>,
    /// The step during which each call of each rank returned
    /// (`Some(None)`: before the first step).
    calls_done: BTreeMap<(Rank, usize), Option<usize>>,
    /// Whether steps name the branches of a call's joins as separate
    /// units ([`World::branching`]).
    pub branches_independent: bool,
    /// Why the per-branch refinement's assumption failed in this
    /// execution, if it did: the explorer then searches again without it.
    pub branches_broken: Option<String>,
    /// The branch being polled now, and the ones polling it.
    branch_now: Branch,
    branch_stack: Vec<Branch>,
    /// Every join of branches begun, by id.
    branch_joins: Vec<JoinState>,
    /// Per rank: branches begun that have neither returned nor been
    /// abandoned.
    live_branches: Vec<usize>,
    /// The outboxes open, and the lane being polled (`world/lanes.rs`).
    outboxes: Outboxes,
    /// What each unit has observed, when the stateful search keys states
    /// ([`World::observe`]).
    observed: Option<Observed>,
}

/// What the explorer needs to know about an applied choice: the steps it
/// causally follows (the send of its message, the posting of its receive,
/// the stop its notice reports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Causes {
    /// Steps that must precede this one in every equivalent schedule.
    pub after: Vec<usize>,
    /// For a delivery, the step during which its message was sent (`None`
    /// also when it was sent before the first step).
    pub sent_at: Option<usize>,
}

impl World {
    /// A world of `world_size` running ranks and nothing in flight.
    pub fn new(world_size: usize, buffering: Buffering, faults: Faults) -> World {
        World {
            world_size,
            buffering,
            faults,
            used: [0; 3],
            ranks: (0..world_size)
                .map(|_| RankState {
                    status: RankStatus::Running,
                    bytes_sent: 0,
                    messages_sent: 0,
                    received: 0,
                    clock: [0; 2],
                    known_stopped: BTreeMap::new(),
                    stopped_at: None,
                    cause: None,
                })
                .collect(),
            ops: Vec::new(),
            op_rank: Vec::new(),
            op_call: Vec::new(),
            op_branch: Vec::new(),
            op_part: Vec::new(),
            half_of: Vec::new(),
            joints: BTreeMap::new(),
            extra_causes: Vec::new(),
            channels: BTreeMap::new(),
            posted: BTreeMap::new(),
            slots_used: BTreeMap::new(),
            pair_seq: BTreeMap::new(),
            link_free: BTreeMap::new(),
            notices: BTreeMap::new(),
            message_popped: BTreeMap::new(),
            recv_popped: BTreeMap::new(),
            gates: BTreeMap::new(),
            effect: Effect::default(),
            step: None,
            calls_independent: false,
            independence_broken: None,
            calls_done: BTreeMap::new(),
            branches_independent: false,
            branches_broken: None,
            branch_now: Branch::ROOT,
            branch_stack: Vec::new(),
            branch_joins: Vec::new(),
            live_branches: vec![0; world_size],
            outboxes: Outboxes::default(),
            observed: None,
        }
    }

    fn new_op(&mut self, rank: Rank, call: Option<usize>, state: OpState) -> OpId {
        self.ops.push(state);
        self.op_rank.push(rank);
        self.op_call.push(call);
        self.op_branch.push(self.branch_now);
        let part = self.part_now(rank, call);
        self.op_part.push(part);
        self.half_of.push(None);
        let op = self.ops.len() - 1;
        if !matches!(self.ops[op], OpState::Pending(_)) {
            self.lane_done(op);
        }
        self.observe_new_op(op);
        op
    }

    /// The unit a call's branch (and part of it) changes: the call when
    /// calls are independent units, else every call of the rank; within it
    /// the branch and part when branches are.
    fn unit(&self, rank: Rank, call: Option<usize>, branch: Branch, part: Part) -> Unit {
        let branches = self.branches_independent;
        Unit {
            rank,
            call: call.filter(|_| self.calls_independent),
            branch: if branches { branch } else { Branch::ROOT },
            part: if branches { part } else { Part::Whole },
        }
    }

    /// What completing `op` changes: its rank (or call, or branch, or
    /// lane), or half of its exchange.
    fn touch_op(&self, effect: &mut Effect, op: OpId) {
        let (rank, call) = (self.op_rank[op], self.op_call[op]);
        let unit = self.unit(rank, call, self.op_branch[op], self.op_part[op]);
        match self.half_of[op] {
            Some(exchange) => {
                let completes = self.completes_joint(exchange, op);
                effect.touch_half(Half {
                    unit,
                    exchange,
                    op,
                    completes,
                })
            }
            None => effect.touch(unit),
        }
        if let Some(main) = self.awaiting_main(op) {
            effect.touch(self.unit(rank, call, self.op_branch[op], main));
        }
    }

    fn complete(&mut self, op: OpId, done: OpState) {
        let mut effect = std::mem::take(&mut self.effect);
        self.touch_op(&mut effect, op);
        self.effect = effect;
        if let OpState::Pending(Some(waker)) = std::mem::replace(&mut self.ops[op], done) {
            waker.wake();
        }
        match self.half_of[op] {
            Some(joint) => self.part_done(joint),
            None => self.observe_done(op),
        }
        self.lane_done(op);
    }

    fn is_running(&self, rank: Rank) -> bool {
        self.ranks[rank].status == RankStatus::Running
    }

    fn stopped_error(&self, rank: Rank, peer: Rank) -> FabricError {
        let cause = &self.ranks[rank].known_stopped[&peer];
        FabricError::Transport {
            rank,
            reason: format!("rank {peer} stopped ({cause})"),
        }
    }

    fn note_cause(&mut self, rank: Rank, cause: String) {
        self.ranks[rank].cause.get_or_insert(cause);
    }

    /// Records that `rank`'s call `call` returned.
    pub fn call_done(&mut self, rank: Rank, call: usize) {
        self.calls_done.insert((rank, call), self.step);
    }

    /// Records that `rank`'s call `call` read the rank's clock
    /// ([`Fabric::now`](algorithms::Fabric::now)), which every call of the
    /// rank moves: the per-call refinement does not hold for it.
    pub fn clock_read(&mut self, rank: Rank, call: Option<usize>) {
        self.branch_clock_read(rank);
        if self.calls_independent
            && let Some(call) = call
        {
            self.independence_broken.get_or_insert_with(|| {
                format!(
                    "call {call} of rank {rank} read the rank's clock, which its other calls move"
                )
            });
        }
    }

    /// Checks the step just run against the per-call refinement's
    /// assumption (a call moves only when one of its own operations
    /// completes) and returns the causes found while the woken ranks ran
    /// (a rank's end follows the ends of its calls).
    pub fn end_step(&mut self) -> Vec<usize> {
        if let Some(unit) = self.effect.unexplained_post()
            && (unit.branch != Branch::ROOT || unit.part != Part::Whole)
        {
            let step = self.step.map_or(0, |s| s + 1);
            self.branches_broken.get_or_insert_with(|| {
                format!(
                    "{} ({:?}) of rank {} moved at step {step} although none of its operations completed",
                    unit.branch, unit.part, unit.rank
                )
            });
        } else if self.calls_independent
            && let Some(unit) = self.effect.unexplained_post()
        {
            self.independence_broken.get_or_insert_with(|| {
                format!(
                    "call {} of rank {} moved at step {} although none of its operations completed",
                    unit.call.map_or("?".into(), |c| c.to_string()),
                    unit.rank,
                    self.step.map_or(0, |s| s + 1)
                )
            });
        }
        std::mem::take(&mut self.extra_causes)
    }

    /// What each running rank waits for (receives it posted, sends not
    /// complete), for deadlock reports.
    pub fn waits(&self) -> Vec<Vec<Wait>> {
        let mut out = vec![Vec::new(); self.world_size];
        for (key, p) in &self.posted {
            for _ in p {
                out[key.dst].push(Wait::Recv(*key));
            }
        }
        for (key, q) in &self.channels {
            for m in q {
                if m.send.is_some() {
                    out[key.src].push(Wait::Send(*key));
                }
            }
        }
        out
    }

    /// Messages sent and never received, per channel.
    pub fn leftovers(&self) -> Vec<(ChannelKey, usize)> {
        self.channels
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, q)| (*k, q.len()))
            .collect()
    }

    /// Whether any fault struck.
    pub fn faulted(&self) -> bool {
        self.used.iter().any(|&u| u > 0)
    }
}

/// Every channel key of the (src, dst) pair.
fn pair_range(src: Rank, dst: Rank) -> std::ops::RangeInclusive<ChannelKey> {
    ChannelKey { src, dst, tag: 0 }..=ChannelKey {
        src,
        dst,
        tag: u64::MAX,
    }
}
