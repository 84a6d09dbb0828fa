//! The state of an execution as one key, for the stateful search
//! ([`explore`](crate::explore)'s visited-state table): the fabric's state
//! with the bookkeeping of the search left out, and what each program unit
//! has observed of the fabric.
//!
//! A rank's program is a future that cannot be inspected, but it is
//! deterministic given what the fabric returned to it: which of its
//! operations completed in which step, with which results, and the values
//! it read (its clock, the ids of its joins). Under the per-call
//! refinement a concurrent call observes nothing but its own operations
//! (the assumption [`effect`](crate::effect) states and the world checks);
//! then each call is deterministic given its own observations, and a
//! history per call is enough. Otherwise the history is the whole rank's.
//! So two executions whose fabric states and units' histories are equal
//! have every program in the same state and the same futures ahead.
//!
//! A history is kept as a running digest: each step in which a unit
//! observed something starts a group (a unit polled once per step sees
//! one set of completions), then each completion (the unit's own index of
//! the operation and a digest of its result), clock read and join id. A
//! joint operation's parts are not observations (the rank sees one
//! completion, when every part is done): only the joint's completion is.
//!
//! Left out of the key: global operation ids (replaced by the unit and
//! the unit's own index of the operation) and the order they give
//! (pending joint operations are listed by that name, not in the order in
//! which the schedule posted them across units: the world only looks them
//! up, so two states that differ in that order have the same future; keyed
//! in it, the 6,178 states of tag_reuse_fixed on 3 ranks under `eager:1`
//! had 209,708 keys, 34 on average), step indices (`sent_at`,
//! `posted_at`, `stopped_at`'s step, `message_popped`, join ends' steps:
//! the search's causality bookkeeping), the absolute order of sends on a
//! pair (only their relative order decides which waiting send gets a freed
//! slot), and the bandwidth timing model (`TIMINGS[1]`: read only by the
//! cost check, which times its own execution, never by a property at the
//! end of a searched schedule). The latency model (`TIMINGS[0]`, read by
//! `max_steps`) is kept when `clocks` says so.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use algorithms::{FabricError, Payload, Rank};

use super::{OpId, OpState, RankStatus, World};

/// A 128-bit digest: two SipHash streams with different seeds, so that
/// the chance that two of `n` distinct states collide is about
/// `n^2 / 2^129` (below 10^-20 for 10^9 states).
pub struct Digest {
    a: DefaultHasher,
    b: DefaultHasher,
}

impl Default for Digest {
    fn default() -> Digest {
        let a = DefaultHasher::new();
        let mut b = DefaultHasher::new();
        b.write(b"second stream of the state digest");
        Digest { a, b }
    }
}

impl Hasher for Digest {
    fn write(&mut self, bytes: &[u8]) {
        self.a.write(bytes);
        self.b.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.a.finish()
    }
}

impl Digest {
    /// The 128-bit digest of what was written.
    pub fn finish128(&self) -> u128 {
        (u128::from(self.a.finish()) << 64) | u128::from(self.b.finish())
    }
}

/// Who observes: a rank, and its concurrent call when calls are
/// separate units.
type Observer = (Rank, Option<usize>);

/// An operation named without its global id: its observer and its index
/// among that observer's operations.
type OpKey = (Observer, u32);

/// What one observer has observed so far.
#[derive(Debug, Default)]
struct History {
    /// The running digest of its observations.
    digest: u128,
    /// The step of its latest observation (`Some(None)`: before the first
    /// step), to group what it observes in one step.
    last_step: Option<Option<usize>>,
    /// Operations it has posted.
    ops: u32,
}

/// Every unit's observations, kept while the stateful search asks.
#[derive(Debug, Default)]
pub struct Observed {
    histories: BTreeMap<Observer, History>,
    /// Each operation's observer and index among that observer's.
    op_index: Vec<OpKey>,
    /// A joint operation's parts are being posted (not observations).
    posting_parts: bool,
}

/// One observation.
#[derive(Hash)]
enum Event {
    /// An operation completed, with the digest of its result.
    Done(u32, u128),
    /// The clock was read.
    Clock(u64),
    /// A join of branches was begun, with this id.
    Join(u64),
}

fn digest_of(value: impl Hash) -> u128 {
    let mut d = Digest::default();
    value.hash(&mut d);
    d.finish128()
}

/// Writes a payload (its shape and bytes) into a digest.
pub fn hash_payload(p: &Payload, d: &mut Digest) {
    p.shape().hash(d);
    if let Some(bytes) = p.as_bytes() {
        bytes.hash(d);
    }
}

fn hash_error(e: &FabricError, d: &mut Digest) {
    e.to_string().hash(d);
}

/// The digest of a completed operation's result (0 while pending or
/// taken).
fn result_digest(state: &OpState) -> u128 {
    let mut d = Digest::default();
    match state {
        OpState::Pending(_) | OpState::Taken => return 0,
        OpState::SendDone(r) => {
            1u8.hash(&mut d);
            if let Err(e) = r {
                hash_error(e, &mut d);
            }
        }
        OpState::RecvDone(r) => {
            2u8.hash(&mut d);
            match r {
                Ok(p) => hash_payload(p, &mut d),
                Err(e) => hash_error(e, &mut d),
            }
        }
        OpState::JointDone(r) => {
            3u8.hash(&mut d);
            match r {
                Ok(ps) => ps.iter().for_each(|p| hash_payload(p, &mut d)),
                Err(e) => hash_error(e, &mut d),
            }
        }
    }
    d.finish128()
}

fn kind(state: &OpState) -> u8 {
    match state {
        OpState::Pending(_) => 0,
        OpState::SendDone(_) => 1,
        OpState::RecvDone(_) => 2,
        OpState::JointDone(_) => 3,
        OpState::Taken => 4,
    }
}

impl World {
    /// Starts keeping each unit's observations, for [`World::state_key`];
    /// called before any rank runs.
    pub fn observe(&mut self) {
        self.observed = Some(Observed::default());
    }

    fn observer(&self, rank: Rank, call: Option<usize>) -> Observer {
        (rank, call.filter(|_| self.calls_independent))
    }

    /// Adds `event` to the history of `op`'s observer (or of `rank`'s
    /// call `call`'s).
    fn record(&mut self, who: Observer, event: Event) {
        let step = self.step;
        let Some(observed) = self.observed.as_mut() else {
            return;
        };
        let h = observed.histories.entry(who).or_default();
        if h.last_step != Some(step) {
            h.last_step = Some(step);
            h.digest = digest_of((h.digest, "step"));
        }
        h.digest = digest_of((h.digest, event));
    }

    /// Notes a new operation's observer and index; one complete at once
    /// (not a part of a joint operation) is observed.
    pub(super) fn observe_new_op(&mut self, op: OpId) {
        let who = self.observer(self.op_rank[op], self.op_call[op]);
        let Some(observed) = self.observed.as_mut() else {
            return;
        };
        let h = observed.histories.entry(who).or_default();
        let index = h.ops;
        h.ops += 1;
        observed.op_index.push((who, index));
        let parts = observed.posting_parts;
        if !parts && kind(&self.ops[op]) != 0 {
            self.observe_done(op);
        }
    }

    /// Marks the start and end of posting a joint operation's parts.
    pub(super) fn observe_parts(&mut self, posting: bool) {
        if let Some(observed) = self.observed.as_mut() {
            observed.posting_parts = posting;
        }
    }

    /// Records that `op` (not a part of a joint operation) completed.
    pub(super) fn observe_done(&mut self, op: OpId) {
        let Some(observed) = self.observed.as_ref() else {
            return;
        };
        let (who, index) = observed.op_index[op];
        let result = result_digest(&self.ops[op]);
        self.record(who, Event::Done(index, result));
    }

    /// Records a clock read of `rank`'s call `call` (the value it read),
    /// when observing.
    pub fn observe_clock(&mut self, rank: Rank, call: Option<usize>, value: u64) {
        let who = self.observer(rank, call);
        self.record(who, Event::Clock(value));
    }

    /// Records that `rank`'s call `call` began a join and got `id`.
    pub(super) fn observe_join(&mut self, rank: Rank, call: Option<usize>, id: u64) {
        let who = self.observer(rank, call);
        self.record(who, Event::Join(id));
    }

    fn op_key(&self, op: OpId, d: &mut Digest) {
        let observed = self.observed.as_ref().expect("observing");
        observed.op_index[op].hash(d);
    }

    /// The state's key (see the module docs): equal keys, equal states,
    /// up to a 128-bit digest's collisions. `clocks`: keep the latency
    /// timing model (a property reads it). Needs [`World::observe`] from
    /// the start.
    pub fn state_key(&self, clocks: bool, d: &mut Digest) {
        let observed = self.observed.as_ref().expect("state_key needs observe()");
        for (who, h) in &observed.histories {
            (who, h.digest).hash(d);
        }
        // Operations' states, per observer in its own order.
        let mut kinds: BTreeMap<Observer, Vec<u8>> = BTreeMap::new();
        for (op, state) in self.ops.iter().enumerate() {
            kinds
                .entry(observed.op_index[op].0)
                .or_default()
                .push(kind(state));
        }
        kinds.hash(d);
        self.used.hash(d);
        for r in &self.ranks {
            match &r.status {
                RankStatus::Running => 0u8.hash(d),
                RankStatus::Finished(e) => (1u8, e).hash(d),
                RankStatus::Crashed(e) => (2u8, e).hash(d),
            }
            (r.bytes_sent, r.messages_sent, r.received).hash(d);
            if clocks {
                r.clock[0].hash(d);
            }
            (&r.known_stopped, r.stopped_at.is_some(), &r.cause).hash(d);
        }
        // Sends on each pair in their relative order.
        let mut order: BTreeMap<(Rank, Rank), Vec<u64>> = BTreeMap::new();
        for (k, q) in &self.channels {
            order
                .entry((k.src, k.dst))
                .or_default()
                .extend(q.iter().map(|m| m.pair_seq));
        }
        order.values_mut().for_each(|v| v.sort_unstable());
        for (k, q) in &self.channels {
            if q.is_empty() {
                continue;
            }
            (k, q.len()).hash(d);
            let seqs = &order[&(k.src, k.dst)];
            for m in q {
                hash_payload(&m.payload, d);
                (m.buffered, m.channel, m.retries).hash(d);
                seqs.binary_search(&m.pair_seq).ok().hash(d);
                match m.send {
                    Some(op) => self.op_key(op, d),
                    None => 0u8.hash(d),
                }
                if clocks {
                    m.arrival[0].hash(d);
                }
            }
        }
        for (k, q) in &self.posted {
            if q.is_empty() {
                continue;
            }
            (k, q.len()).hash(d);
            for p in q {
                self.op_key(p.op, d);
                p.expect.hash(d);
            }
        }
        self.slots_used.hash(d);
        self.pair_seq.hash(d);
        if clocks {
            for (pair, free) in &self.link_free {
                (pair, free[0]).hash(d);
            }
        }
        for (pair, (_, cause)) in &self.notices {
            (pair, cause).hash(d);
        }
        // Pending joint operations, each named by its unit and the unit's
        // own index, in that order (the map's own order, by global
        // operation id, is the order in which the schedule posted them).
        let mut joints: Vec<(OpKey, Vec<OpKey>)> = self
            .joints
            .iter()
            .map(|(&joint, x)| {
                let parts = x.sends.iter().chain(&x.recvs);
                let parts = parts.map(|&p| observed.op_index[p]).collect();
                (observed.op_index[joint], parts)
            })
            .collect();
        joints.sort_unstable();
        joints.hash(d);
        for (gate, (op, _)) in &self.gates {
            gate.hash(d);
            self.op_key(*op, d);
        }
        for call in self.calls_done.keys() {
            call.hash(d);
        }
        for j in &self.branch_joins {
            (j.rank, j.call, j.parent, j.ends.len()).hash(d);
        }
        self.live_branches.hash(d);
    }
}
