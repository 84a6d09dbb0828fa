//! The [`Fabric`] trait: everything one rank knows about the network.
//!
//! A fabric is handed to a collective for one rank. Three kinds of back-end
//! implement it without the collectives changing: the discrete-event
//! simulator (virtual time), the model checker (which decides the order in
//! which enabled deliveries happen) and real transports (shared memory, TCP,
//! RDMA verbs; real time).

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use crate::branches::Branching;
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::nccl::{ChannelPlan, Framing};
use crate::payload::{Payload, Shape};

/// The index of a process in the job, `0..world_size`.
pub type Rank = usize;

/// A message tag. Receives match on `(source rank, tag)` exactly.
///
/// Collectives derive their tags from a base tag handed to them by the
/// caller, so that concurrent or back-to-back collectives do not mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(pub u64);

impl Tag {
    /// Bits of a tag reserved for phases; callers' own tags stay below.
    const PHASE_SHIFT: u32 = 56;

    /// The tag of phase `phase` of the operation tagged `self`, for an
    /// algorithm made of sub-collectives that must keep their messages
    /// apart. The phase goes in the top 8 bits, so for a caller's tag below
    /// 2^56 the phases `0..=254` are distinct from each other and from the
    /// tag itself. Phases do not nest.
    pub fn phase(self, phase: u8) -> Tag {
        assert!(phase < u8::MAX, "phases are 0..=254");
        let low = self.0 & ((1 << Self::PHASE_SHIFT) - 1);
        Tag(low | ((u64::from(phase) + 1) << Self::PHASE_SHIFT))
    }

    /// The caller's tag this one was derived from (without its phase).
    pub fn base(self) -> u64 {
        if self.phase_number().is_some() {
            self.0 & ((1 << Self::PHASE_SHIFT) - 1)
        } else {
            self.0
        }
    }

    /// The phase of a tag made by [`Tag::phase`], if it is one (a caller's
    /// tag of 2^56 or more reads as phased too: callers keep theirs below).
    pub fn phase_number(self) -> Option<u8> {
        let top = (self.0 >> Self::PHASE_SHIFT) as u8;
        (top != 0).then(|| top - 1)
    }
}

impl fmt::Display for Tag {
    /// The tag as reports show it: `7`, or `7 phase 2` for
    /// `Tag(7).phase(2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.phase_number() {
            Some(p) => write!(f, "{} phase {p}", self.base()),
            None => write!(f, "{}", self.0),
        }
    }
}

/// A point in time in integer picoseconds since the start of the job.
///
/// In the simulator this is virtual time; on a real transport it is the
/// time elapsed since the fabric was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// Time zero: the start of the job.
    pub const ZERO: Time = Time(0);

    /// This time in picoseconds.
    pub fn as_ps(self) -> u64 {
        self.0
    }

    /// This time in (fractional) microseconds, for reports.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// The time `ps` picoseconds later, saturating at the end of time.
    pub fn plus_ps(self, ps: u64) -> Time {
        Time(self.0.saturating_add(ps))
    }

    /// The time `ps` picoseconds later, or `None` past the end of time
    /// (2^64 ps, about 213 days).
    pub fn checked_plus_ps(self, ps: u64) -> Option<Time> {
        self.0.checked_add(ps).map(Time)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} us", self.as_us_f64())
    }
}

/// Local work a rank performs between messages, so that a back-end can
/// charge its cost (the simulator advances virtual time; a real transport
/// does nothing because the work really happened).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Combining `bytes` bytes of incoming data into a local buffer with a
    /// reduction operator (the "gamma" term of the alpha-beta-gamma model).
    Reduce {
        /// Bytes of one operand that were reduced.
        bytes: u64,
    },
    /// A fixed software delay of `ps` picoseconds on this rank: a
    /// collective's launch and setup cost as a performance model states it
    /// (NCCL's base latency). The simulator advances virtual time; a real
    /// transport does nothing, its software really ran.
    Latency {
        /// The delay in picoseconds.
        ps: u64,
    },
}

/// What can go wrong in a point-to-point operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// The peer rank is outside `0..world_size`.
    #[error("rank {rank}: peer {peer} is out of range for world size {world_size}")]
    PeerOutOfRange {
        /// The rank that made the call.
        rank: Rank,
        /// The peer it named.
        peer: Rank,
        /// The number of ranks in the job.
        world_size: usize,
    },
    /// A message arrived whose shape differs from what the receive expected
    /// (like `MPI_ERR_TRUNCATE`).
    #[error("rank {rank}: message from rank {from} tag {tag} is {got}, expected {expected}")]
    ShapeMismatch {
        /// The receiving rank.
        rank: Rank,
        /// The sending rank.
        from: Rank,
        /// The tag of the message.
        tag: Tag,
        /// The shape the receive asked for.
        expected: Shape,
        /// The shape that arrived.
        got: Shape,
    },
    /// A peer did not answer within the transport's time limit (an RDMA
    /// retry budget exhausted, a TCP peer silent past its timeout): like
    /// NCCL's timeout errors, it names the peer and, in `reason`, where.
    #[error("rank {rank}: timed out waiting on rank {peer}: {reason}")]
    Timeout {
        /// The rank that observed the failure.
        rank: Rank,
        /// The peer it gave up on.
        peer: Rank,
        /// What timed out, naming the link or connection.
        reason: String,
    },
    /// The fabric cannot reduce in the network for this group (no switch
    /// that reduces serves it, or the back-end has no switches at all).
    #[error("rank {rank}: {reason}")]
    NoInNetworkReduction {
        /// The rank that asked.
        rank: Rank,
        /// Why, naming the ranks or the back-end.
        reason: String,
    },
    /// The fabric cannot multicast in the network for this group (no
    /// switch that multicasts serves it, or the back-end has no switches).
    #[error("rank {rank}: {reason}")]
    NoInNetworkMulticast {
        /// The rank that asked.
        rank: Rank,
        /// Why, naming the ranks or the back-end.
        reason: String,
    },
    /// A transport-level failure that the back-end describes in words
    /// (a dead peer, a timed-out link, a corrupt frame).
    #[error("rank {rank}: {reason}")]
    Transport {
        /// The rank that observed the failure.
        rank: Rank,
        /// What happened, naming the peer or link.
        reason: String,
    },
}

/// What one rank sees of the network: non-blocking, tagged point-to-point
/// messaging, a clock and a way to charge local work.
///
/// # Ordering guarantee
/// Messages from one sender to one receiver **with the same tag are
/// delivered in the order they were sent**. Nothing is promised about the
/// relative order of messages with different tags or from different
/// senders.
///
/// # Completion semantics
/// - [`Fabric::send`] completes when the payload has been handed to the
///   fabric and the caller may reuse its memory (it does not wait for the
///   receiver unless the back-end models rendezvous sends, as the model
///   checker may). Sends and receives are futures, so a rank overlaps them by
///   joining futures rather than by threads.
/// - [`Fabric::recv`] completes when a message from `from` with `tag` has
///   arrived; it fails with [`FabricError::ShapeMismatch`] if the message is
///   not of the expected shape.
///
/// Every method takes `&self` so that several operations of one rank can be
/// in flight at once; implementations use interior mutability.
///
/// # Threads
/// The returned futures need not be `Send`: a rank's collectives run on one
/// thread (the simulator runs every rank's task on one thread; a real
/// transport runs one rank per process, on a single-threaded executor).
/// Futures must wake the task through the [`std::task::Waker`] they were
/// polled with, so that any executor and any future combinator can drive
/// them.
pub trait Fabric {
    /// This rank's index, `0..world_size()`.
    fn rank(&self) -> Rank;

    /// The number of ranks in the job.
    fn world_size(&self) -> usize;

    /// The current time: virtual in the simulator, real on real transports.
    fn now(&self) -> Time;

    /// Sends `payload` to `to` with `tag`.
    fn send(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
    ) -> impl Future<Output = Result<(), FabricError>>;

    /// Receives the next message from `from` with `tag`, which must have
    /// shape `expect`.
    fn recv(
        &self,
        from: Rank,
        tag: Tag,
        expect: Shape,
    ) -> impl Future<Output = Result<Payload, FabricError>>;

    /// Charges the cost of local work (completes when it is done).
    fn compute(&self, work: Work) -> impl Future<Output = Result<(), FabricError>>;

    /// The elements `range` of `buf`, copied into a payload for
    /// [`Fabric::send`] to own. The default copies into new memory
    /// ([`Payload::extract`]); a real transport may copy into memory it
    /// recycles once the peer has the bytes (no page faults, warm caches).
    /// Panics if `range` is out of `buf`'s bounds, as `extract` does.
    fn send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload {
        buf.extract(range)
    }

    /// Receives the next message from `from` with `tag`, which must hold
    /// `range.len()` elements of `buf`'s type, and combines it into
    /// `buf[range]`: reduced with `Some(op)` (the incoming contribution on
    /// the left, as [`Payload::reduce_from`]) or copied with `None`. The
    /// default is [`Fabric::recv`] then [`Payload::reduce_from`] or
    /// [`Payload::copy_from`]; a real transport may combine straight from
    /// where the bytes arrived and recycle their memory. It charges no
    /// [`Work`]: the caller does.
    fn recv_combine(
        &self,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> impl Future<Output = Result<(), CollectiveError>> {
        async move {
            let expect = Shape::new(buf.shape().dtype, range.len());
            let incoming = self.recv(from, tag, expect).await?;
            match op {
                Some(op) => buf.reduce_from(range, &incoming, op)?,
                None => buf.copy_from(range, &incoming)?,
            }
            Ok(())
        }
    }

    /// Sends the elements `range` of `buf` to `to` with `tag`. The default
    /// is [`Fabric::send`] of [`Fabric::send_copy`]'s copy (made when
    /// called); a real transport may lend `buf[range]` to the peer
    /// instead, completing once the peer has the bytes.
    fn send_from(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        range: Range<usize>,
    ) -> impl Future<Output = Result<(), FabricError>> {
        let part = self.send_copy(buf, range);
        self.send(to, tag, part)
    }

    /// Hands back a received payload the caller is done with (already
    /// combined into its own buffer), so that a real transport may reuse
    /// its memory for the next messages instead of freeing it. The
    /// default drops it; the simulator and the model checker keep it.
    fn recycle(&self, payload: Payload) {
        drop(payload);
    }

    /// Sends `payload` to `to` and receives the next message from `from`
    /// (of shape `expect`), both with `tag`, as one operation that
    /// completes when both have (MPI's `MPI_Sendrecv`): the send's error
    /// if it failed, else the receive's result. The rank observes one
    /// completion, never which half finished first, so a back-end that
    /// explores completion orders (the model checker) need not order the
    /// halves. The default joins [`Fabric::send`] and [`Fabric::recv`],
    /// polled in that order, exactly what an algorithm joining the two
    /// futures itself would do.
    fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        let sending = self.send(to, tag, payload);
        let receiving = self.recv(from, tag, expect);
        async move {
            let (sent, received) = futures_util::future::join(sending, receiving).await;
            sent?;
            received
        }
    }

    /// [`Fabric::exchange`] within one buffer: sends `buf[send]` to `to`
    /// and combines the next message from `from` into `buf[recv]` (reduced
    /// with `Some(op)`, the incoming contribution on the left, or copied
    /// with `None`), both with `tag`, as one operation. `send` and `recv`
    /// may overlap (a pairwise exchange of one block between two ranks):
    /// the peer gets `buf[send]` as it was before the call. The default is
    /// [`Fabric::send_copy`], then [`Fabric::exchange`], then the combine
    /// and [`Fabric::recycle`] ([`exchange_in_place_by_copy`]); a real
    /// transport may instead let the peer read `buf[send]` where it lies
    /// (no copy out of the sender's buffer), completing only once the peer
    /// has it, and combining into an overlapping `buf[recv]` only then. It
    /// charges no [`Work`]: the caller does.
    #[allow(clippy::too_many_arguments)]
    fn exchange_in_place(
        &self,
        to: Rank,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        send: Range<usize>,
        recv: Range<usize>,
        op: Option<ReduceOp>,
    ) -> impl Future<Output = Result<(), CollectiveError>> {
        exchange_in_place_by_copy(self, to, from, tag, buf, send, recv, op)
    }

    /// Charges local work like [`Fabric::compute`], saying which NCCL
    /// channel does it (`framing.channel`). NCCL runs each channel on its
    /// own thread block, so one channel's reduction does not wait for
    /// another's to be posted: a back-end that serves a rank's reductions
    /// one at a time (the simulator) serves those posted at the same
    /// instant in channel order, not in the order their messages happened
    /// to be handled. The default ignores the framing.
    fn compute_framed(
        &self,
        work: Work,
        framing: Framing,
    ) -> impl Future<Output = Result<(), FabricError>> {
        let _ = framing;
        self.compute(work)
    }

    /// Sends `payload` like [`Fabric::send`], saying how it travels: which
    /// NCCL protocol frames it, for which algorithm, on which channel. A
    /// back-end that models GPU protocols (the simulator) charges the
    /// framing's wire bytes and per-hop latency and routes the channel
    /// through its own NIC; the default ignores the framing.
    fn send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> impl Future<Output = Result<(), FabricError>> {
        let _ = framing;
        self.send(to, tag, payload)
    }

    /// [`Fabric::exchange`] whose send is framed like
    /// [`Fabric::send_framed`]: one operation that completes when both
    /// halves have, the send's error first. The default joins
    /// [`Fabric::send_framed`] and [`Fabric::recv`], polled in that order,
    /// exactly what an NCCL-style algorithm joining the two futures itself
    /// would do (so the simulator's timing is that of the two operations);
    /// the model checker makes it one operation, as it does `exchange`.
    #[allow(clippy::too_many_arguments)]
    fn exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        let sending = self.send_framed(to, tag, payload, framing);
        let receiving = self.recv(from, tag, expect);
        async move {
            let (sent, received) = futures_util::future::join(sending, receiving).await;
            sent?;
            received
        }
    }

    /// The channels NCCL would build on this fabric (each channel's ring
    /// and tree), if the back-end knows its hardware; `None` (the default)
    /// lets algorithms fall back to [`ChannelPlan::rank_order`].
    fn channel_plan(&self) -> Option<Arc<ChannelPlan>> {
        None
    }

    /// Told by [`join_branches`](crate::branches::join_branches) and
    /// [`try_join_branches`](crate::branches::try_join_branches) of each
    /// step of a join of independent branches (a call's channels); returns
    /// a join's id for [`Branching::Begin`] if it listens. `None` by
    /// default, and the join is a plain `join_all`: only the model checker,
    /// which treats branches as separate units of its search, listens.
    /// Fabrics that wrap another pass it on.
    fn branching(&self, event: Branching) -> Option<u64> {
        let _ = event;
        None
    }

    /// Whether [`Fabric::reduce_in_network`] would serve `group`: `Ok`, or
    /// the refusal it would fail with. Algorithms ask before sending
    /// anything, so a fabric without a reducing switch refuses a call
    /// cleanly on every rank (no message left behind). The default
    /// refuses, like [`Fabric::reduce_in_network`]'s.
    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        let _ = group;
        Err(FabricError::NoInNetworkReduction {
            rank: self.rank(),
            reason: crate::in_network::NO_SWITCH_REASON.to_string(),
        })
    }

    /// Reduces `payload` of every member of `group` in a switch of the
    /// network (NVSwitch NVLink SHARP, InfiniBand SHARP) and returns the
    /// result to each: every member of `group` (global ranks, distinct,
    /// this rank among them, the same list on every member) calls it with
    /// the same `tag` and a payload of the same shape; the switch combines
    /// the contributions in member order, `((m0 ⊕ m1) ⊕ m2) ⊕ ...`
    /// ([`crate::in_network::reduce_in_member_order`]), so results are
    /// deterministic, and multicasts the result back. Calls of one group
    /// and tag match in call order. [`ReduceOp::Avg`] is not divided: the
    /// caller divides.
    ///
    /// The default refuses with [`FabricError::NoInNetworkReduction`]:
    /// real transports (threads, shared memory, TCP, verbs) have no switch
    /// that reduces.
    fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        let _ = (group, tag, payload, op);
        let rank = self.rank();
        std::future::ready(Err(FabricError::NoInNetworkReduction {
            rank,
            reason: crate::in_network::NO_SWITCH_REASON.to_string(),
        }))
    }

    /// Reduces `payload` of every member of `group` in a switch like
    /// [`Fabric::reduce_in_network`] (same group rules, member order,
    /// served where [`Fabric::can_reduce_in_network`] says so), but the
    /// switch sends the result to `root` alone (a member: NCCL's
    /// `multimem.ld_reduce`, issued by one GPU). The root's call completes
    /// with `Some(result)` when it has arrived; another member's with
    /// `None` once its contribution is handed to the fabric (like
    /// [`Fabric::send`]). A group's tag used here must not also be used for
    /// its [`Fabric::reduce_in_network`] calls.
    ///
    /// The default refuses with [`FabricError::NoInNetworkReduction`].
    fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> impl Future<Output = Result<Option<Payload>, FabricError>> {
        let _ = (group, root, tag, payload, op);
        let rank = self.rank();
        std::future::ready(Err(FabricError::NoInNetworkReduction {
            rank,
            reason: crate::in_network::NO_SWITCH_REASON.to_string(),
        }))
    }

    /// Whether [`Fabric::multicast_in_network`] would serve `group`: `Ok`,
    /// or the refusal it would fail with (asked before sending anything,
    /// like [`Fabric::can_reduce_in_network`]). The default refuses.
    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        let _ = group;
        Err(FabricError::NoInNetworkMulticast {
            rank: self.rank(),
            reason: crate::in_network::NO_MULTICAST_REASON.to_string(),
        })
    }

    /// Multicasts the payload of the group's first member (the source,
    /// `group[0]`) through a switch of the network to every member (NCCL's
    /// `multimem.st` on an NVSwitch with NVLink SHARP): every member of
    /// `group` (global ranks, distinct, this rank among them, the same
    /// list on every member) calls it with the same `tag`; the source
    /// passes what it sends, the others a payload of the shape they expect
    /// (its elements are not read; a phantom will do) and get the source's.
    /// The payload crosses the source's route to the switch once and the
    /// switch writes it down to every member, the source included; the
    /// source's call completes once its payload is handed to the fabric
    /// (like [`Fabric::send`]), another member's when the payload has
    /// arrived. Calls of one group and
    /// tag match in call order; a group's tag used for multicasts must not
    /// also be used for its reductions.
    ///
    /// The default refuses with [`FabricError::NoInNetworkMulticast`]:
    /// real transports (threads, shared memory, TCP, verbs) have no switch
    /// that multicasts.
    fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        let _ = (group, tag, payload);
        let rank = self.rank();
        std::future::ready(Err(FabricError::NoInNetworkMulticast {
            rank,
            reason: crate::in_network::NO_MULTICAST_REASON.to_string(),
        }))
    }
}

/// [`Fabric::exchange_in_place`] as its default runs it: the sent part
/// copied out of `buf` ([`Fabric::send_copy`]), one [`Fabric::exchange`],
/// the received message combined into `buf[recv]` and handed back
/// ([`Fabric::recycle`]). Back-ends that override the method fall back on
/// it where they cannot lend the buffer.
#[allow(clippy::too_many_arguments)]
pub async fn exchange_in_place_by_copy<F: Fabric + ?Sized>(
    fabric: &F,
    to: Rank,
    from: Rank,
    tag: Tag,
    buf: &mut Payload,
    send: Range<usize>,
    recv: Range<usize>,
    op: Option<ReduceOp>,
) -> Result<(), CollectiveError> {
    let part = fabric.send_copy(buf, send);
    let expect = Shape::new(buf.shape().dtype, recv.len());
    let incoming = fabric.exchange(to, part, from, expect, tag).await?;
    match op {
        Some(op) => buf.reduce_from(recv, &incoming, op)?,
        None => buf.copy_from(recv, &incoming)?,
    }
    fabric.recycle(incoming);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phased_tags_show_their_base_and_phase() {
        let t = Tag(7).phase(2);
        assert_eq!((t.base(), t.phase_number()), (7, Some(2)));
        assert_eq!(t.to_string(), "7 phase 2");
        assert_eq!(Tag(7).to_string(), "7");
        assert_eq!((Tag(7).base(), Tag(7).phase_number()), (7, None));
        assert_eq!(Tag(1).phase(254).phase_number(), Some(254));
    }
}
