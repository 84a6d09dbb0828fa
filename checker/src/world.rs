//! The state of one checked execution: messages waiting in channels,
//! posted receives, send buffer slots, per-rank status, and the
//! transitions the checker chooses between ([`Choice`]).
//!
//! A rank's own computation between two choices is deterministic; every
//! nondeterminism is a [`Choice`]: which message is delivered next, which
//! is lost, which rank crashes, which receive times out, and when a rank
//! learns that a peer stopped.

mod branches;
mod joint;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::task::Waker;

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

pub use super::effect::{Branch, Connection, Effect, Half, Post, Resource, Unit, Units};
use super::spec::{Buffering, Faults};
use branches::JoinState;
use joint::PendingJoint;
pub use joint::{JointRecv, JointSend};

/// A channel: the messages from `src` to `dst` with one tag, delivered in
/// the order they were sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChannelKey {
    /// The sender.
    pub src: Rank,
    /// The receiver.
    pub dst: Rank,
    /// The tag.
    pub tag: u64,
}

impl fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{} tag {}", self.src, self.dst, self.tag)
    }
}

/// One transition the checker may choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// Let `rank` start call `call` (programs whose calls are concurrent:
    /// the order in which a rank's threads or streams issue them).
    Start {
        /// The rank.
        rank: Rank,
        /// The call's index in the scenario.
        call: usize,
    },
    /// Deliver the oldest message of the channel to its oldest matching
    /// receive.
    Deliver(ChannelKey),
    /// Lose the oldest message of the channel in flight.
    Drop(ChannelKey),
    /// Stop a rank where it is.
    Crash(Rank),
    /// Fail the oldest receive `rank` posted on the channel with a timeout.
    Timeout(ChannelKey),
    /// Tell `to` that `from` has stopped: its receives from `from` that no
    /// message can satisfy fail, and so do its sends to `from`.
    Notify {
        /// The rank that stopped.
        from: Rank,
        /// The rank that learns it.
        to: Rank,
    },
}

impl Choice {
    /// The rank this transition changes first (its receiver), and the
    /// other rank it may change (the sender, under bounded buffering), for
    /// traces and PCT priorities. The partial-order reduction uses the
    /// precise [`Effect`]s instead.
    pub fn affected(self, buffering: Buffering) -> (Rank, Option<Rank>) {
        match self {
            // Under bounded buffering, a delivery may complete a send or
            // free the slot a blocked send waits for.
            Choice::Deliver(k) if buffering.is_bounded() => (k.dst, Some(k.src)),
            Choice::Deliver(k) => (k.dst, None),
            Choice::Drop(k) => (k.dst, Some(k.src)),
            Choice::Crash(r) => (r, None),
            Choice::Start { rank, .. } => (rank, None),
            Choice::Timeout(k) => (k.dst, None),
            Choice::Notify { to, .. } => (to, None),
        }
    }

    /// Whether this is a fault (a drop, crash or timeout).
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Choice::Drop(_) | Choice::Crash(_) | Choice::Timeout(_)
        )
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Deliver(k) => write!(f, "deliver {k}"),
            Choice::Drop(k) => write!(f, "drop {k}"),
            Choice::Crash(r) => write!(f, "crash {r}"),
            Choice::Start { rank, call } => write!(f, "start {rank} call {call}"),
            Choice::Timeout(k) => write!(f, "timeout {k}"),
            Choice::Notify { from, to } => write!(f, "notify {from}->{to}"),
        }
    }
}

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
        }
    }

    fn new_op(&mut self, rank: Rank, call: Option<usize>, state: OpState) -> OpId {
        self.ops.push(state);
        self.op_rank.push(rank);
        self.op_call.push(call);
        self.op_branch.push(self.branch_now);
        self.half_of.push(None);
        self.ops.len() - 1
    }

    /// The unit a call's branch changes: the call when calls are
    /// independent units, else every call of the rank; within it the
    /// branch when branches are.
    fn unit(&self, rank: Rank, call: Option<usize>, branch: Branch) -> Unit {
        Unit {
            rank,
            call: call.filter(|_| self.calls_independent),
            branch: if self.branches_independent {
                branch
            } else {
                Branch::ROOT
            },
        }
    }

    /// What completing `op` changes: its rank (or call, or branch), or
    /// half of its exchange.
    fn touch_op(&self, effect: &mut Effect, op: OpId) {
        let unit = self.unit(self.op_rank[op], self.op_call[op], self.op_branch[op]);
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
    }

    fn complete(&mut self, op: OpId, done: OpState) {
        let mut effect = std::mem::take(&mut self.effect);
        self.touch_op(&mut effect, op);
        self.effect = effect;
        if let OpState::Pending(Some(waker)) = std::mem::replace(&mut self.ops[op], done) {
            waker.wake();
        }
        if let Some(joint) = self.half_of[op] {
            self.part_done(joint);
        }
    }

    /// Starts an exchange of `rank`: a send to `to` and a receive from
    /// `from`, both with `tag`, completing as one joint operation (an
    /// [`OpState::JointDone`] once both halves have).
    #[allow(clippy::too_many_arguments)]
    pub fn post_exchange(
        &mut self,
        rank: Rank,
        call: Option<usize>,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> OpId {
        self.post_joint(
            rank,
            call,
            vec![(to, tag, payload)],
            vec![(from, tag, expect)],
        )
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

    /// Starts a send from `src`; returns its operation (complete at once
    /// when the message is buffered).
    ///
    /// Under `Eager(k)` the send takes one of the `k` slots of its
    /// [`Connection`]: the pair, and the channel of the call's joins it is
    /// posted from ([`Branch::channel`]; NCCL's channels, which
    /// [`join_branches`](algorithms::branches::join_branches) runs, each
    /// have their own connection with `NCCL_STEPS` buffers per peer:
    /// `struct ncclChannelPeer` in `src/include/device.h` and
    /// `ncclTransportP2pConnect` in `src/transport.cc`, NVIDIA/nccl commit
    /// 5067397c2676d5aed50042fc39e5c8ee96eb0027). A send outside every
    /// join (MPI's eager protocol, whose buffering is per pair whatever the
    /// tag) shares the pair's pool with the other sends outside joins. A
    /// send finding a slot free also waits while an older send of the same
    /// connection does (slots are handed out in send order).
    pub fn post_send(
        &mut self,
        src: Rank,
        call: Option<usize>,
        dst: Rank,
        tag: Tag,
        payload: Payload,
    ) -> OpId {
        if dst >= self.world_size {
            let e = FabricError::PeerOutOfRange {
                rank: src,
                peer: dst,
                world_size: self.world_size,
            };
            return self.new_op(src, call, OpState::SendDone(Err(e)));
        }
        if self.ranks[src].known_stopped.contains_key(&dst) {
            let e = self.stopped_error(src, dst);
            return self.new_op(src, call, OpState::SendDone(Err(e)));
        }
        let bytes = payload.shape().bytes();
        let sender = &mut self.ranks[src];
        sender.bytes_sent += bytes;
        sender.messages_sent += 1;
        let ready = sender.clock;
        let link = self.link_free.entry((src, dst)).or_default();
        let mut arrival = [0; 2];
        for (m, t) in TIMINGS.iter().enumerate() {
            let start = ready[m].max(link[m]);
            link[m] = start + t.ps_per_byte * bytes;
            arrival[m] = link[m] + t.latency_ps;
        }
        let connection = Connection {
            src,
            dst,
            channel: self.branch_now.channel(),
        };
        let used = self.slots_used.entry(connection).or_default();
        let waiting = self.channels.range(pair_range(src, dst)).any(|(_, q)| {
            q.iter()
                .any(|m| !m.buffered && m.channel == connection.channel)
        });
        let buffered = match self.buffering {
            Buffering::Unbounded => true,
            Buffering::Eager(k) => *used < k && !waiting,
        };
        let critical = match self.buffering {
            Buffering::Eager(k) => waiting || *used + 1 >= k,
            Buffering::Unbounded => false,
        };
        if critical {
            self.effect.critical.push(connection);
        }
        let key = ChannelKey {
            src,
            dst,
            tag: tag.0,
        };
        if buffered && self.buffering.is_bounded() {
            *used += 1;
        }
        if let Buffering::Eager(1..) = self.buffering {
            self.record_post(src, call, Resource::Slots(connection), critical);
        }
        self.record_post(src, call, Resource::Sends(key), false);
        let seq = self.pair_seq.entry((src, dst)).or_default();
        *seq += 1;
        let pair_seq = *seq;
        let op = if buffered {
            self.new_op(src, call, OpState::SendDone(Ok(())))
        } else {
            self.new_op(src, call, OpState::Pending(None))
        };
        self.channels.entry(key).or_default().push_back(Message {
            payload,
            buffered,
            send: (!buffered).then_some(op),
            pair_seq,
            channel: connection.channel,
            sent_at: self.step,
            buffered_at: if buffered { self.step } else { None },
            dropped_at: None,
            arrival,
            retries: 0,
        });
        op
    }

    /// Posts a receive at `dst` from `src`.
    pub fn post_recv(
        &mut self,
        dst: Rank,
        call: Option<usize>,
        src: Rank,
        tag: Tag,
        expect: Shape,
    ) -> OpId {
        if src >= self.world_size {
            let e = FabricError::PeerOutOfRange {
                rank: dst,
                peer: src,
                world_size: self.world_size,
            };
            return self.new_op(dst, call, OpState::RecvDone(Err(e)));
        }
        let key = ChannelKey {
            src,
            dst,
            tag: tag.0,
        };
        if self.ranks[dst].known_stopped.contains_key(&src) && !self.satisfiable(key, 1) {
            let e = self.stopped_error(dst, src);
            return self.new_op(dst, call, OpState::RecvDone(Err(e)));
        }
        self.record_post(dst, call, Resource::Receives(key), false);
        let op = self.new_op(dst, call, OpState::Pending(None));
        self.posted.entry(key).or_default().push_back(PostedRecv {
            op,
            expect,
            posted_at: self.step,
        });
        op
    }

    /// Whether the channel holds a message for `extra` more receives beyond
    /// those posted (as many messages as receives).
    fn satisfiable(&self, key: ChannelKey, extra: usize) -> bool {
        let messages = self.channels.get(&key).map_or(0, VecDeque::len);
        let posted = self.posted.get(&key).map_or(0, VecDeque::len);
        messages >= posted + extra
    }

    /// When the oldest message of `key` arrives under timing model `model`.
    pub fn arrival(&self, key: ChannelKey, model: usize) -> Option<u64> {
        self.channels.get(&key)?.front().map(|m| m.arrival[model])
    }

    /// What `choice`, enabled now, would change, as far as can be known
    /// before taking it (the sends of the ranks it wakes are not known).
    pub fn predict(&self, choice: Choice) -> Effect {
        let mut e = Effect::default();
        match choice {
            Choice::Deliver(k) => {
                match self.posted.get(&k).and_then(|p| p.front()) {
                    Some(recv) => self.touch_op(&mut e, recv.op),
                    None => e.touch(Unit::rank(k.dst)),
                }
                let head = self.channels.get(&k).and_then(|q| q.front());
                let bounded = self.buffering.is_bounded();
                if let Some(m) = head {
                    // The send it completes: its own, or the oldest one
                    // waiting for the slot it frees.
                    let oldest_waiting = self
                        .channels
                        .range(pair_range(k.src, k.dst))
                        .flat_map(|(_, q)| q.iter())
                        .filter(|w| !w.buffered && w.channel == m.channel)
                        .min_by_key(|w| w.pair_seq);
                    let completes = match (m.send, oldest_waiting) {
                        (Some(op), _) => Some(Some(op)),
                        (None, Some(w)) if m.buffered && bounded => Some(w.send),
                        _ => None,
                    };
                    match completes {
                        Some(Some(op)) => self.touch_op(&mut e, op),
                        Some(None) => e.touch(Unit::rank(k.src)),
                        None => {}
                    }
                    if m.buffered && bounded {
                        e.frees = Some(Connection {
                            src: k.src,
                            dst: k.dst,
                            channel: m.channel,
                        });
                    }
                }
            }
            Choice::Drop(k) => {
                e.touch(Unit::rank(k.dst));
                e.touch(Unit::rank(k.src));
            }
            Choice::Crash(r) => e.touch(Unit::rank(r)),
            Choice::Timeout(k) => match self.posted.get(&k).and_then(|p| p.front()) {
                Some(recv) => self.touch_op(&mut e, recv.op),
                None => e.touch(Unit::rank(k.dst)),
            },
            Choice::Notify { to, .. } => e.touch(Unit::rank(to)),
            Choice::Start { rank, call } => e.touch(self.unit(rank, Some(call), Branch::ROOT)),
        }
        e
    }

    /// Records a post of `rank`'s call (and branch) on state its calls and
    /// branches share (see [`effect`](super::effect)), when they are
    /// independent units.
    fn record_post(&mut self, rank: Rank, call: Option<usize>, resource: Resource, critical: bool) {
        let unit = self.unit(rank, call, self.branch_now);
        if unit != Unit::rank(rank) {
            self.effect.posts.push(Post {
                unit,
                resource,
                critical,
            });
        }
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
            && unit.branch != Branch::ROOT
        {
            let step = self.step.map_or(0, |s| s + 1);
            self.branches_broken.get_or_insert_with(|| {
                format!(
                    "{} of rank {} moved at step {step} although none of its operations completed",
                    unit.branch, unit.rank
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

    /// Makes `rank` wait until the checker lets it start call `call`.
    pub fn post_gate(&mut self, rank: Rank, call: usize) -> OpId {
        let op = self.new_op(rank, Some(call), OpState::Pending(None));
        self.gates.insert((rank, call), (op, self.step));
        op
    }

    /// The steps a choice enabled now would causally follow (see
    /// [`Causes`]), without applying it: the steps that sent its message,
    /// posted its receive, took the older message or receive of the channel
    /// out of the way, gave its message a slot (a loss strikes a message in
    /// flight), lost it before (a retransmission), stopped the rank a
    /// notice reports, or posted the call a start lets go.
    pub fn pending_causes(&self, choice: Choice) -> Vec<usize> {
        let head = |k: &ChannelKey| self.channels.get(k).and_then(|q| q.front());
        let posted = |k: &ChannelKey| {
            self.posted
                .get(k)
                .and_then(|p| p.front())
                .and_then(|p| p.posted_at)
        };
        let message_popped = |k: &ChannelKey| self.message_popped.get(k).copied();
        let recv_popped = |k: &ChannelKey| self.recv_popped.get(k).copied();
        let mut out = Vec::new();
        match choice {
            Choice::Deliver(k) => {
                out.extend(head(&k).and_then(|m| m.sent_at));
                out.extend(message_popped(&k));
                out.extend(posted(&k));
                out.extend(recv_popped(&k));
            }
            Choice::Drop(k) => {
                if let Some(m) = head(&k) {
                    out.extend(m.sent_at);
                    out.extend(m.buffered_at);
                    out.extend(m.dropped_at);
                }
                out.extend(message_popped(&k));
            }
            Choice::Timeout(k) => {
                out.extend(posted(&k));
                out.extend(recv_popped(&k));
            }
            Choice::Notify { from, to } => {
                out.extend(self.notices.get(&(from, to)).and_then(|n| n.0));
            }
            Choice::Start { rank, call } => {
                out.extend(self.gates.get(&(rank, call)).and_then(|g| g.1));
            }
            Choice::Crash(_) => {}
        }
        out
    }

    /// Which instance of `choice`, enabled now, would be taken: the
    /// message and receive a delivery matches, the message (and its loss
    /// count) a drop loses, the receive a timeout fails. A choice names a
    /// channel, so the same choice at another state may act on other
    /// messages; the explorer compares instances before it reorders one.
    pub fn instance(&self, choice: Choice) -> (u64, u64) {
        let head = |k: &ChannelKey| self.channels.get(k).and_then(|q| q.front());
        let posted = |k: &ChannelKey| {
            self.posted
                .get(k)
                .and_then(|p| p.front())
                .map_or(u64::MAX, |p| p.op as u64)
        };
        match choice {
            Choice::Deliver(k) => (head(&k).map_or(u64::MAX, |m| m.pair_seq), posted(&k)),
            Choice::Drop(k) => head(&k).map_or((u64::MAX, 0), |m| (m.pair_seq, m.retries as u64)),
            Choice::Timeout(k) => (posted(&k), 0),
            Choice::Start { .. } | Choice::Crash(_) | Choice::Notify { .. } => (0, 0),
        }
    }

    /// Every choice enabled now, in a fixed order: starts first, so that
    /// the default schedule issues every rank's calls in scenario order.
    pub fn enabled(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        for &(rank, call) in self.gates.keys() {
            if self.is_running(rank) {
                out.push(Choice::Start { rank, call });
            }
        }
        for (key, queue) in &self.channels {
            let Some(head) = queue.front() else { continue };
            let receivable = self.posted.get(key).is_some_and(|p| !p.is_empty());
            if receivable && self.is_running(key.dst) {
                out.push(Choice::Deliver(*key));
            }
            if self.used[0] < self.faults.drops && head.buffered && self.is_running(key.dst) {
                out.push(Choice::Drop(*key));
            }
        }
        for &(from, to) in self.notices.keys() {
            if self.is_running(to) {
                out.push(Choice::Notify { from, to });
            }
        }
        if self.used[2] < self.faults.timeouts {
            for (key, p) in &self.posted {
                if !p.is_empty() && self.is_running(key.dst) {
                    out.push(Choice::Timeout(*key));
                }
            }
        }
        if self.used[1] < self.faults.crashes {
            for r in 0..self.world_size {
                if self.is_running(r) {
                    out.push(Choice::Crash(r));
                }
            }
        }
        out
    }

    /// Applies an enabled choice as step `step`; returns the steps it
    /// causally follows.
    pub fn apply(&mut self, choice: Choice, step: usize) -> Causes {
        self.step = Some(step);
        self.effect = Effect::default();
        self.extra_causes.clear();
        let mut causes = Causes {
            after: self.pending_causes(choice),
            sent_at: None,
        };
        match choice {
            Choice::Start { rank, call } => {
                let (op, _) = self
                    .gates
                    .remove(&(rank, call))
                    .expect("a start is chosen only for a waiting call");
                self.complete(op, OpState::SendDone(Ok(())));
            }
            Choice::Deliver(key) => self.deliver(key, step, &mut causes),
            Choice::Drop(key) => self.drop_message(key, step),
            Choice::Crash(rank) => {
                self.used[1] += 1;
                self.stop(rank, RankStatus::Crashed(format!("rank {rank} crashed")));
            }
            Choice::Timeout(key) => {
                self.used[2] += 1;
                let recv = self.posted.get_mut(&key).and_then(VecDeque::pop_front);
                let recv = recv.expect("a timeout is chosen only for a posted receive");
                self.recv_popped.insert(key, step);
                let reason = format!("receive from rank {} tag {} timed out", key.src, key.tag);
                self.note_cause(key.dst, format!("rank {}: {reason}", key.dst));
                let e = FabricError::Timeout {
                    rank: key.dst,
                    peer: key.src,
                    reason,
                };
                self.complete(recv.op, OpState::RecvDone(Err(e)));
            }
            Choice::Notify { from, to } => {
                let (_, cause) = self
                    .notices
                    .remove(&(from, to))
                    .expect("a notice is chosen only when pending");
                self.learn_stopped(to, from, cause);
            }
        }
        for c in std::mem::take(&mut self.extra_causes) {
            if !causes.after.contains(&c) {
                causes.after.push(c);
            }
        }
        causes
    }

    fn deliver(&mut self, key: ChannelKey, step: usize, causes: &mut Causes) {
        let msg = self.channels.get_mut(&key).and_then(VecDeque::pop_front);
        let msg = msg.expect("a delivery is chosen only for a waiting message");
        let recv = self.posted.get_mut(&key).and_then(VecDeque::pop_front);
        let recv = recv.expect("a delivery is chosen only for a posted receive");
        self.message_popped.insert(key, step);
        self.recv_popped.insert(key, step);
        causes.sent_at = msg.sent_at;
        let receiver = &mut self.ranks[key.dst];
        receiver.received += 1;
        for m in 0..TIMINGS.len() {
            receiver.clock[m] = receiver.clock[m].max(msg.arrival[m]);
        }
        let got = msg.payload.shape();
        let result = if got == recv.expect {
            Ok(msg.payload)
        } else {
            Err(FabricError::ShapeMismatch {
                rank: key.dst,
                from: key.src,
                tag: Tag(key.tag),
                expected: recv.expect,
                got,
            })
        };
        self.complete(recv.op, OpState::RecvDone(result));
        if let Some(send) = msg.send {
            self.complete(send, OpState::SendDone(Ok(())));
        }
        if msg.buffered && self.buffering.is_bounded() {
            let connection = Connection {
                src: key.src,
                dst: key.dst,
                channel: msg.channel,
            };
            self.effect.frees = Some(connection);
            self.free_slot(connection);
        }
    }

    /// Frees a slot of the connection and hands it to the oldest send
    /// waiting on it, if any.
    fn free_slot(&mut self, connection: Connection) {
        let used = self.slots_used.entry(connection).or_default();
        *used = used.saturating_sub(1);
        let oldest = self
            .channels
            .range_mut(pair_range(connection.src, connection.dst))
            .flat_map(|(_, q)| q.iter_mut())
            .filter(|m| !m.buffered && m.channel == connection.channel)
            .min_by_key(|m| m.pair_seq);
        if let Some(m) = oldest {
            m.buffered = true;
            m.buffered_at = self.step;
            let send = m.send.take();
            *self.slots_used.entry(connection).or_default() += 1;
            if let Some(op) = send {
                self.complete(op, OpState::SendDone(Ok(())));
            }
        }
    }

    fn drop_message(&mut self, key: ChannelKey, step: usize) {
        self.used[0] += 1;
        self.effect.touch(Unit::rank(key.src));
        self.effect.touch(Unit::rank(key.dst));
        let queue = self.channels.get_mut(&key).expect("a drop names a channel");
        let head = queue
            .front_mut()
            .expect("a drop is chosen only for a message");
        if self.faults.retransmit {
            // The transport resends it: the loss only delays the message,
            // unless it exhausts the retry budget.
            head.retries += 1;
            head.dropped_at = Some(step);
            if head.retries > self.faults.retry_count {
                queue.pop_front();
                self.message_popped.insert(key, step);
                let cause = format!(
                    "rank {}: retry budget ({}) exhausted on {key}",
                    key.src, self.faults.retry_count
                );
                if self.is_running(key.src) {
                    self.stop(key.src, RankStatus::Crashed(cause));
                } else {
                    // The sender has already returned (or stopped): it
                    // stays as it was, but the receiver learns that the
                    // message will never come.
                    self.notices.insert((key.src, key.dst), (self.step, cause));
                }
            }
        } else {
            // Lost for good; its slot is never returned (credits travel
            // with the receiver's consumption, which never comes).
            queue.pop_front();
            self.message_popped.insert(key, step);
        }
    }

    fn note_cause(&mut self, rank: Rank, cause: String) {
        self.ranks[rank].cause.get_or_insert(cause);
    }

    /// Stops `rank` (crash, or an imposed transport failure): its receives
    /// and unsent messages go, and every running peer will be told.
    pub fn stop(&mut self, rank: Rank, status: RankStatus) {
        self.effect.touch(Unit::rank(rank));
        if let RankStatus::Crashed(cause) = &status {
            let cause = cause.clone();
            self.note_cause(rank, cause);
        }
        self.ranks[rank].status = status;
        self.ranks[rank].stopped_at = Some(self.step);
        self.posted.retain(|k, _| k.dst != rank);
        self.gates.retain(|g, _| g.0 != rank);
        for (k, q) in self.channels.iter_mut() {
            if k.src == rank {
                q.retain(|m| m.buffered);
            }
        }
        let cause = match &self.ranks[rank].status {
            RankStatus::Crashed(c) | RankStatus::Finished(Some(c)) => c.clone(),
            _ => format!("rank {rank} stopped"),
        };
        for peer in 0..self.world_size {
            if peer == rank {
                continue;
            }
            if self.is_running(peer) {
                self.notices
                    .insert((rank, peer), (self.step, cause.clone()));
            } else {
                self.effect.unsent_notices.push((rank, peer));
            }
        }
    }

    /// Records that `rank`'s program returned (with the cause of its
    /// error, if it failed); a failed rank's peers will be told.
    pub fn finish(&mut self, rank: Rank, error: Option<String>) {
        if self.calls_independent || self.branches_independent {
            // The program ends when its last call does: a change to the
            // whole rank, after every call's end (as an exchange completes
            // after both halves).
            self.effect.touch(Unit::rank(rank));
            let ends = self.calls_done.range((rank, 0)..=(rank, usize::MAX));
            let ends: Vec<usize> = ends.filter_map(|(_, &at)| at).collect();
            self.extra_causes.extend(ends);
        }
        let failed = error.is_some();
        if let Some(e) = &error {
            let cause = self.ranks[rank].cause.clone().unwrap_or_else(|| e.clone());
            self.ranks[rank].cause = Some(cause);
        }
        let cause = self.ranks[rank].cause.clone();
        if failed {
            self.stop(rank, RankStatus::Finished(cause));
        } else {
            self.ranks[rank].status = RankStatus::Finished(None);
            self.ranks[rank].stopped_at = Some(self.step);
            self.posted.retain(|k, _| k.dst != rank);
        }
    }

    fn learn_stopped(&mut self, rank: Rank, peer: Rank, cause: String) {
        self.effect.touch(Unit::rank(rank));
        self.note_cause(rank, cause.clone());
        self.ranks[rank].known_stopped.insert(peer, cause);
        // Receives from the peer beyond the messages it left fail.
        let keys: Vec<ChannelKey> = self
            .posted
            .keys()
            .filter(|k| k.dst == rank && k.src == peer)
            .copied()
            .collect();
        for key in keys {
            let messages = self.channels.get(&key).map_or(0, VecDeque::len);
            let posted = self.posted.get_mut(&key).expect("key listed");
            let failing: Vec<OpId> = posted
                .drain(messages.min(posted.len())..)
                .map(|p| p.op)
                .collect();
            for op in failing {
                let e = self.stopped_error(rank, peer);
                self.complete(op, OpState::RecvDone(Err(e)));
            }
        }
        // Sends to the peer that wait for it fail.
        let pending: Vec<OpId> = self
            .channels
            .range_mut(pair_range(rank, peer))
            .flat_map(|(_, q)| q.iter_mut())
            .filter_map(|m| m.send.take())
            .collect();
        for (_, q) in self.channels.range_mut(pair_range(rank, peer)) {
            q.retain(|m| m.buffered);
        }
        for op in pending {
            let e = self.stopped_error(rank, peer);
            self.complete(op, OpState::SendDone(Err(e)));
        }
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
