//! [`ShmFabric`]: one rank's end of the shared segment: eager sends into
//! per-peer queues, and the [`Fabric`] and [`Endpoint`] faces; the
//! progress that moves bytes between queues, rings and the [`Mailbox`]
//! is in `progress.rs`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use algorithms::{
    CollectiveError, Fabric, FabricError, Payload, Rank, ReduceOp, Shape, Tag, Time, Work,
};
use futures_util::future::Either;

use super::ShmOptions;
use super::direct::{DirectRecv, DirectSlot};
use super::landing::{Landing, Posted};
use super::lend::Registered;
use super::liveness::Health;
use super::progress::{Incoming, Rx};
use super::ring::{Corrupt, Cursor};
use super::segment::Segment;
use super::slots::{SLOT_WORDS, SlotCursor};
use super::small::SmallSpares;
use super::wire::{Kind, MessageHeader, SLOT_PAYLOAD_BYTES};
use crate::call::CallId;
use crate::endpoint::Endpoint;
use crate::executor::IdlePolicy;
use crate::heartbeat::{self, Beater, PeerSilence};
use crate::mailbox::Mailbox;
use crate::pool::BufferPool;

/// A message waiting for a free slot (its header) or for ring space
/// (its inline bytes).
pub(super) struct Pending {
    /// The slot's words: the header, and a small payload.
    pub(super) header: [u64; SLOT_WORDS],
    pub(super) header_sent: bool,
    /// The payload whose bytes follow in the byte ring (`None`: none).
    pub(super) inline: Option<Payload>,
    /// Inline bytes already in the ring.
    pub(super) offset: usize,
}

/// This rank's sending side towards one peer.
#[derive(Default)]
pub(crate) struct Outgoing {
    /// This rank's place in the byte ring to the peer.
    pub(super) cur: Cursor,
    /// This rank's place in the slots to the peer.
    pub(super) slots: SlotCursor,
    pub(super) queue: VecDeque<Pending>,
    /// Payloads the peer copies out of our memory, oldest first; `None`
    /// for a part of a caller's buffer lent by
    /// [`Fabric::exchange_in_place`] (nothing to free).
    pub(super) attached: VecDeque<Option<Payload>>,
    /// Attached payloads freed so far (the peer's `copied` count we saw).
    pub(super) freed: u64,
    /// The exchange waiting for the peer to copy a lent part (woken when
    /// `freed` moves, and on each probe of the peers).
    pub(super) lent_waker: Option<Waker>,
}

impl Outgoing {
    /// Whether everything sent to this peer has left this rank's hands.
    pub(crate) fn is_flushed(&self) -> bool {
        self.queue.is_empty() && self.attached.is_empty()
    }
}

/// One rank of a job whose ranks share a host (see the [module docs](super)).
pub struct ShmFabric {
    pub(crate) rank: Rank,
    pub(crate) world: usize,
    pub(crate) seg: Arc<Segment>,
    pub(crate) mailbox: Mailbox,
    pub(crate) options: ShmOptions,
    /// Peers' process ids (for cross-memory attach).
    pub(super) pids: Vec<u32>,
    /// Per destination: whether it may copy large payloads out of our memory.
    pub(super) attach_to: Vec<bool>,
    pub(super) call: Cell<CallId>,
    /// Whether the mailbox has not been told of `call` yet (see
    /// [`ShmFabric::mailbox_now`]).
    mailbox_behind: Cell<bool>,
    start: Instant,
    pub(crate) out: RefCell<Vec<Outgoing>>,
    pub(super) inc: RefCell<Vec<Incoming>>,
    pub(crate) health: RefCell<Health>,
    pub(crate) finished: Cell<bool>,
    /// Message memory done with, for the next messages (see [`crate::pool`]).
    pub(super) pool: RefCell<BufferPool>,
    /// The caller's buffers already registered for lending (see `lend`).
    pub(super) registered: RefCell<Registered>,
    /// Small payloads' buffers kept for the next small messages (see
    /// [`SmallSpares`]).
    pub(super) small_spare: RefCell<SmallSpares>,
    /// The direct receive under way, if any (see [`super::direct`]).
    pub(super) direct: RefCell<DirectSlot>,
    /// The part of the caller's buffer a receive waits to be filled, if
    /// any (see [`super::landing`]).
    pub(super) landing: RefCell<Option<Landing>>,
    /// How the executor waits, decided once at connect (finding the
    /// number of cores reads files, far too slow to do per call).
    idle: IdlePolicy,
    /// The word peers read at connect time to test cross-memory attach.
    _probe: Box<u64>,
    /// The heartbeat thread (see [`crate::heartbeat`]): beats in this
    /// rank's control block.
    _beater: Beater,
}

impl ShmFabric {
    /// Assembles a connected rank (see [`ShmFabric::connect`]) and starts
    /// its heartbeat.
    pub(crate) fn assemble(
        seg: Segment,
        rank: Rank,
        world: usize,
        options: &ShmOptions,
        pids: Vec<u32>,
        attach_to: Vec<bool>,
        probe: Box<u64>,
    ) -> Result<ShmFabric, FabricError> {
        let seg = Arc::new(seg);
        let beating = seg.clone();
        let beater = Beater::start(
            format!("realnet-shm-{rank}-beat"),
            heartbeat::interval(options.job.timeout),
            move || beating.rank_control(rank).beat(heartbeat::monotonic_ns()),
        )
        .map_err(|e| FabricError::Transport {
            rank,
            reason: format!("cannot start the heartbeat thread: {e}"),
        })?;
        let idle = options
            .idle
            .unwrap_or_else(|| default_idle(world, job_cores(&pids)));
        Ok(ShmFabric {
            rank,
            world,
            seg,
            mailbox: Mailbox::new(rank, world, options.job.timeout),
            options: options.clone(),
            pids,
            attach_to,
            call: Cell::new(CallId::NONE),
            mailbox_behind: Cell::new(false),
            start: Instant::now(),
            out: RefCell::new((0..world).map(|_| Outgoing::default()).collect()),
            inc: RefCell::new(
                (0..world)
                    .map(|_| Incoming {
                        cur: Cursor::default(),
                        slots: SlotCursor::default(),
                        rx: Rx::Header,
                    })
                    .collect(),
            ),
            health: RefCell::new(Health::new(world)),
            finished: Cell::new(false),
            pool: RefCell::new(BufferPool::default()),
            registered: RefCell::new(Registered::default()),
            small_spare: RefCell::new(SmallSpares::default()),
            direct: RefCell::new(DirectSlot::default()),
            landing: RefCell::new(None),
            idle,
            _probe: probe,
            _beater: beater,
        })
    }

    /// Whether large payloads to `peer` are copied out of this rank's memory
    /// by the peer (cross-memory attach) rather than streamed through the ring.
    pub fn attaches_to(&self, peer: Rank) -> bool {
        self.attach_to.get(peer).copied().unwrap_or(false)
    }

    pub(crate) fn error(&self, reason: String) -> FabricError {
        FabricError::Transport {
            rank: self.rank,
            reason,
        }
    }

    pub(super) fn corrupt(&self, src: Rank, dst: Rank, c: Corrupt) -> FabricError {
        self.error(format!(
            "the ring from rank {src} to rank {dst} is corrupt (position {} against {})",
            c.other, c.pos
        ))
    }

    pub(super) fn corrupt_slots(&self, src: Rank, dst: Rank, c: Corrupt) -> FabricError {
        self.error(format!(
            "the message slots from rank {src} to rank {dst} are corrupt (count {} against {})",
            c.other, c.pos
        ))
    }

    /// Queues `payload` for `to` and pushes what fits into the ring now.
    fn enqueue(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        let shape = payload.shape();
        let bytes = shape.bytes() as usize;
        let attach = !payload.is_phantom()
            && self.attach_to[to]
            && self
                .options
                .attach_min_bytes
                .is_some_and(|min| bytes >= min.max(1));
        let kind = match () {
            _ if payload.is_phantom() => Kind::Phantom,
            _ if attach => Kind::Attach,
            _ if bytes <= SLOT_PAYLOAD_BYTES => Kind::Small,
            _ => Kind::Inline,
        };
        let header = MessageHeader {
            tag,
            call: self.call.get(),
            shape,
            kind,
            addr: payload.as_bytes().map_or(0, |b| b.as_ptr() as u64),
        }
        .encode(match kind {
            Kind::Small => payload.as_bytes().unwrap_or_default(),
            _ => &[],
        });
        let mut out = self.out.borrow_mut();
        let o = &mut out[to];
        // A small payload's bytes are in the header: its buffer is kept
        // for the next small message, once the slot is written (the peer
        // waits for that store, not for the bookkeeping).
        let (inline, small) = match kind {
            Kind::Inline => (Some(payload), None),
            Kind::Attach => {
                o.attached.push_back(Some(payload));
                (None, None)
            }
            Kind::Small => (None, Some(payload)),
            Kind::Phantom => (None, None),
        };
        // Nothing queued before it and no bytes to stream: straight into
        // a free slot, without queueing.
        let mut written = false;
        if o.queue.is_empty() && inline.is_none() {
            let slots = self.seg.slots(self.rank, to);
            if slots
                .writable(&mut o.slots)
                .map_err(|c| self.corrupt_slots(self.rank, to, c))?
            {
                slots.write(&mut o.slots, &header);
                written = true;
            }
        }
        if let Some(p) = small {
            self.small_spare.borrow_mut().keep(p);
        }
        if written {
            return Ok(());
        }
        o.queue.push_back(Pending {
            header,
            header_sent: false,
            inline,
            offset: 0,
        });
        self.push(to, o)?;
        Ok(())
    }

    /// [`Fabric::send`]'s work, done at once (a send is eager: queued
    /// and pushed as far as the ring takes it).
    pub(super) fn send_now(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        crate::endpoint::refuse_symbols(self.rank, to, &payload)?;
        if to >= self.world {
            return Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: to,
                world_size: self.world,
            });
        }
        if let Some(e) = self.mailbox.fatal() {
            return Err(e);
        }
        if to == self.rank {
            self.mailbox_now()
                .deliver(to, tag, self.call.get(), payload);
            return Ok(());
        }
        self.enqueue(to, tag, payload)
            .inspect_err(|e| self.mailbox.fail_all(e.clone()))
    }

    /// The mailbox, told of the current call first if
    /// [`Endpoint::begin_call`] left that for later: whatever depends on
    /// the call (a delivery, a receive, the timeouts) goes through here;
    /// its flags (`has_fatal`, `holds_messages`, `has_waiters`) and
    /// failures do not depend on it. Left for later only when the mailbox
    /// held no message, no receive waited there (a receive already in the
    /// mailbox polls against the mailbox's call, not through here) and
    /// the rank had not failed, and since nothing but this rank's thread
    /// delivers to it, the mailbox still holds none when told: telling it
    /// cannot find a problem that `begin_call` would have reported (a
    /// failure since then, it reports on its own).
    pub(super) fn mailbox_now(&self) -> &Mailbox {
        if self.mailbox_behind.get() {
            self.mailbox_behind.set(false);
            // Only a failure can make it refuse, and every later use of
            // the mailbox reports that failure.
            let _ = self.mailbox.begin_call(self.call.get());
        }
        &self.mailbox
    }

    /// Marks this rank failed with `reason`, so that its peers stop with an
    /// error naming it instead of waiting for their timeout.
    pub fn fail(&self, reason: &str) {
        self.fail_with(self.error(reason.to_string()));
    }
}

/// The most bytes of one connection's chunks worth having in flight: the
/// chunks a receiver has copied out of its peer ahead of reducing them
/// (a loan completes only once the peer has copied it, so a peer reads
/// every chunk as soon as it is lent, up to `slots` chunks before the
/// algorithm combines it). Beyond the caches each of those bytes is
/// written to memory and read back: on this machine (32 MiB last-level
/// cache shared by both ranks, each also streaming its own buffer) a
/// 64 MiB allreduce ran at 3.8-4.4 GB/s with the tuner's 4 MiB chunks and
/// 6.9-7.8 GB/s with 512 KiB ones (8 slots, four interleaved rounds). It
/// equals the default chunk times the default slots of
/// [`algorithms::collective::Params`].
pub(crate) const READ_AHEAD_BYTES_MAX: u64 = 4 << 20;

/// Idle rounds a rank with a core of its own spins before it yields: tens
/// of milliseconds, as MPI libraries poll while every rank has a core. A
/// rank that yields sooner loses its core for a whole time slice of any
/// other busy process (milliseconds): on a loaded 2-core host an 8-byte
/// allreduce took 0.6 to 2.5 ms that way, about 1.1 us spinning (with the
/// ranks bound to a core each, see `crate::launcher`).
const SPIN_ROUNDS: u32 = 1_000_000;

/// The CPUs the job's ranks (processes `pids`) may run on between them:
/// the union of their affinity masks. A launcher that binds each rank to a
/// core of its own (`sim launch`, `mpirun --bind-to core`) leaves each rank
/// one CPU, yet every rank has a core. Where a mask cannot be read, this
/// process's own count.
fn job_cores(pids: &[u32]) -> usize {
    use rustix::thread::{CpuSet, sched_getaffinity};
    let own = || std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut union = CpuSet::new();
    for pid in pids {
        let Some(pid) = i32::try_from(*pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return own();
        };
        let Ok(set) = sched_getaffinity(Some(pid)) else {
            return own();
        };
        for cpu in (0..CpuSet::MAX_CPU).filter(|c| set.is_set(*c)) {
            union.set(cpu);
        }
    }
    (union.count() as usize).max(1)
}

/// The idle policy for `world` ranks sharing `cores` CPUs (see
/// [`ShmFabric::idle_policy`](crate::Endpoint::idle_policy)).
fn default_idle(world: usize, cores: usize) -> IdlePolicy {
    let spin = if world <= cores { SPIN_ROUNDS } else { 0 };
    IdlePolicy {
        spin,
        yields: 200_000,
        park: Duration::from_micros(50),
    }
}

impl Fabric for ShmFabric {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world
    }

    fn now(&self) -> Time {
        crate::endpoint::time_since(self.start)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        self.send_now(to, tag, payload)
    }

    /// A direct receive while it can be one (see `shm/direct.rs`), else
    /// the mailbox's.
    fn recv(
        &self,
        from: Rank,
        tag: Tag,
        expect: Shape,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        DirectRecv::new(self, from, tag, expect)
    }

    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }

    /// Sends at once (a send is eager) and returns the receive: no join of
    /// two futures, and small enough for [`algorithms::AnyFabric`] to hold
    /// inline.
    fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        match self.send_now(to, tag, payload) {
            Ok(()) => Exchange::Receiving(DirectRecv::new(self, from, tag, expect)),
            Err(e) => Exchange::Failed(Some(Box::new(e))),
        }
    }

    /// The copy goes into a recycled buffer when the pool has one; a
    /// small one (carried in its slot) into the kept small payload.
    fn send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload {
        let bytes = range.len() * buf.shape().dtype.size_bytes();
        if bytes <= SLOT_PAYLOAD_BYTES
            && !buf.is_phantom()
            && let Some(spare) = self.small_spare.borrow_mut().take_any()
        {
            return buf.extract_reusing(range, spare);
        }
        crate::pool::copy_for_send(buf, range, |shape| self.pool.borrow_mut().take(shape))
    }

    /// Keeps a received buffer the caller is done with for the next
    /// message: a small one as the kept small payload (the next small
    /// send's copy, or receive, goes into it).
    fn recycle(&self, payload: Payload) {
        if !payload.is_phantom() && payload.shape().bytes() <= SLOT_PAYLOAD_BYTES as u64 {
            self.small_spare.borrow_mut().keep(payload);
            return;
        }
        self.pool.borrow_mut().give(payload);
    }

    /// Lends `buf[range]` to the peer, which copies it straight out of this
    /// rank's memory, and completes once it has; a part too small for
    /// cross-memory attach (or to a peer without it) is sent as a copy.
    async fn send_from(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        range: Range<usize>,
    ) -> Result<(), FabricError> {
        if !self.can_lend(to, crate::pool::lendable(self.rank, to, buf, &range)) {
            let part = self.send_copy(buf, range);
            return self.send_now(to, tag, part);
        }
        self.lend(to, tag, buf, &range)?.await
    }

    /// Lends `buf[send]` to the peer, which copies it straight out of this
    /// rank's memory (no copy into a message of its own), combines the
    /// received message into `buf[recv]`, and completes once the peer has
    /// copied the lent part. Where `recv` overlaps `send` (two ranks
    /// swapping one block) the combine waits for that copy. Parts too
    /// small for cross-memory attach (or to a peer without it) take the
    /// default's copy.
    ///
    /// The part is lent (or sent) when called, so that the future holds
    /// only what the receive needs and fits [`algorithms::AnyFabric`]'s
    /// inline space (else it would run the default's copies).
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
        let apart = send.end <= recv.start || recv.end <= send.start;
        // The error boxed and the loan awaited where it lies: the future
        // stays small.
        let mut started = self.lend_or_send(to, tag, buf, send).map_err(Box::new);
        async move {
            let loan = match started.as_mut() {
                Ok(loan) => loan,
                Err(e) => return Err(e.as_ref().clone().into()),
            };
            let expect = Shape::new(buf.shape().dtype, recv.len());
            // A copy may land in place, unless it would overwrite a part
            // the peer has yet to copy.
            let posted = (op.is_none() && (apart || loan.is_none()))
                .then(|| self.post_landing(from, tag, buf, recv.clone()))
                .flatten();
            let incoming = if loan.is_none() && posted.is_none() {
                // Small parts: the default's exchange, a direct receive.
                Some(DirectRecv::new(self, from, tag, expect).await?)
            } else {
                // A message a direct receive holds would keep this one
                // waiting.
                self.hand_back();
                let mut receiving = self.mailbox_now().recv(from, tag, expect);
                let posted = posted.as_ref();
                let received =
                    poll_fn(|cx| Posted::poll_receive(posted, &mut receiving, cx)).await?;
                // `None`: a message was claimed for `buf[recv]`; copied
                // now, through this exchange's own borrow.
                if received.is_none() {
                    self.copy_claimed(buf, &recv)?;
                }
                received
            };
            drop(posted);
            // The received bytes may only overwrite a lent part once the
            // peer has copied it.
            if !apart && let Some(loan) = loan.as_mut() {
                loan.await?;
            }
            // `None`: the message landed in `buf[recv]`.
            if let Some(incoming) = incoming {
                crate::pool::combine(buf, recv, &incoming, op)?;
                self.recycle(incoming);
            }
            if apart && let Some(loan) = loan.as_mut() {
                loan.await?;
            }
            Ok(())
        }
    }

    /// Combines as the default does (a direct receive), or lands a large
    /// copy in place; keeps the received buffer for the next message. The
    /// part is posted and the receive made when called, so that the
    /// future fits [`algorithms::AnyFabric`]'s inline space.
    fn recv_combine(
        &self,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> impl Future<Output = Result<(), CollectiveError>> {
        let expect = Shape::new(buf.shape().dtype, range.len());
        // A copy may land in place (see `super::landing`).
        let posted = op
            .is_none()
            .then(|| self.post_landing(from, tag, buf, range.clone()))
            .flatten();
        let mut receiving = if posted.is_none() {
            Either::Left(DirectRecv::new(self, from, tag, expect))
        } else {
            // A message a direct receive holds would keep this one waiting.
            self.hand_back();
            Either::Right(self.mailbox_now().recv(from, tag, expect))
        };
        async move {
            // Awaited where it lies (not moved into the await): the
            // future stays small.
            let posted = posted.as_ref();
            let received = poll_fn(|cx| Posted::poll_receive(posted, &mut receiving, cx)).await?;
            // `None`: a message was claimed for `buf[range]`; copied now,
            // through this receive's own borrow.
            let Some(incoming) = received else {
                self.copy_claimed(buf, &range)?;
                return Ok(());
            };
            crate::pool::combine(buf, range, &incoming, op)?;
            self.recycle(incoming);
            Ok(())
        }
    }
}

/// [`ShmFabric`]'s exchange once its send is done: the receive, or the
/// send's error.
enum Exchange<'a> {
    /// The send failed (boxed: the future stays small); taken when polled.
    Failed(Option<Box<FabricError>>),
    /// The send is done; the receive.
    Receiving(DirectRecv<'a>),
}

impl Future for Exchange<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Exchange::Failed(e) => Poll::Ready(Err(*e.take().expect("polled after completion"))),
            Exchange::Receiving(recv) => Pin::new(recv).poll(cx),
        }
    }
}

impl Endpoint for ShmFabric {
    fn mailbox(&self) -> &Mailbox {
        self.mailbox_now()
    }

    fn progress(&self) -> bool {
        if self.mailbox.has_fatal() {
            // A loan waits on its peer's copy count, not on the mailbox, so
            // a failure that came any other way than a probe (a step's
            // error, a receive's timeout) would never wake it: wake it to
            // see the failure.
            self.wake_lenders();
            self.cancel_direct(false);
            return false;
        }
        let step = if self.quiet() { Ok(false) } else { self.step() };
        match step {
            Ok(true) => {
                self.health.borrow_mut().busy();
                true
            }
            Ok(false) => {
                if self.check_peers_when_due() {
                    self.wake_lenders();
                    self.cancel_direct(false);
                } else {
                    self.cancel_direct(true);
                }
                false
            }
            Err(e) => {
                self.fail_with(e);
                true
            }
        }
    }

    /// The options' policy, or: with a core per rank, spin a million rounds
    /// (tens of milliseconds) before yielding; with more ranks than
    /// cores, yield at once so that a spinning rank never holds the core
    /// its peer needs. Park 50 us at a time after a long idle stretch.
    fn idle_policy(&self) -> IdlePolicy {
        self.idle
    }

    /// 4 MiB (`READ_AHEAD_BYTES_MAX`: what a receiver may read ahead and
    /// still find in cache) shared among the slots, at least 64 KiB.
    fn chunk_bytes_max(&self, slots: usize) -> Option<u64> {
        Some((READ_AHEAD_BYTES_MAX / slots.max(1) as u64).max(64 << 10))
    }

    fn peer_silence(&self) -> PeerSilence {
        self.silences()
    }

    fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        // A direct receive still under way (its future outlived its call)
        // moves to the mailbox, with a message it was given but did not
        // take: the mailbox judges them against the new call, as it
        // judges its own receives and messages.
        self.cancel_direct(false);
        self.hand_back();
        self.call.set(call);
        // An empty mailbox of a rank that has not failed has nothing to
        // judge against the new call: it is told only when first used
        // (`mailbox_now`), which a small call of direct receives never
        // does (no lock per call). Not while a receive waits there: that
        // receive (its future outlived its call) matches the new call's
        // messages when polled again, as before, and a delivery wakes
        // only the receives of its own call, so it must not register for
        // the old one.
        if !self.mailbox.holds_messages()
            && !self.mailbox.has_waiters()
            && !self.mailbox.has_fatal()
        {
            self.mailbox_behind.set(true);
            return Ok(());
        }
        self.mailbox_behind.set(false);
        self.mailbox.begin_call(call)
    }

    fn finish(&self) -> Result<(), FabricError> {
        self.finish_job()
    }
}

impl Drop for ShmFabric {
    fn drop(&mut self) {
        if !self.finished.get() {
            let reason = self.mailbox.fatal().map_or_else(
                || "it dropped its fabric without finish()".to_string(),
                |e| e.to_string(),
            );
            self.seg.rank_control(self.rank).fail(&reason);
        }
        // A peer may still be copying out of these payloads: never free
        // memory another rank may read (a bounded leak on a failure path).
        for o in self.out.get_mut().iter_mut() {
            std::mem::forget(std::mem::take(&mut o.attached));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cores_of_a_job_are_the_union_of_its_ranks_masks() {
        let own = std::thread::available_parallelism().map_or(1, |n| n.get());
        let me = std::process::id();
        // Ranks that are threads of this process share its mask.
        assert_eq!(job_cores(&[me, me, me]), own);
        // A process id that cannot be asked: this process's own count.
        assert_eq!(job_cores(&[me, u32::MAX]), own);
    }

    #[test]
    fn an_exchange_future_fits_inline_in_any_fabric() {
        // Else `AnyFabric` would join a send and a receive instead.
        assert!(size_of::<Exchange<'_>>() <= algorithms::any_fabric::INLINE_FUTURE_BYTES);
    }

    #[test]
    fn ranks_spin_only_with_a_core_each() {
        assert_eq!(default_idle(2, 2).spin, SPIN_ROUNDS);
        assert_eq!(default_idle(3, 2).spin, 0);
    }
}
