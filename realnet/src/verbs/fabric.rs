//! [`VerbsFabric`]: the rank's [`Fabric`] and [`Endpoint`] over RDMA verbs.
//!
//! The logic lives in [`Core`], generic over the [`Wire`] it posts to, so
//! that the unit tests run it on an in-memory device (`fake`).

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use algorithms::{Fabric, FabricError, Payload, Rank, Shape, Tag, Time, Work};

use crate::bootstrap::Bootstrap;
use crate::call::CallId;
use crate::endpoint::Endpoint;
use crate::executor::IdlePolicy;
use crate::mailbox::Mailbox;
use crate::verbs::channel::{Arrival, Channel};
use crate::verbs::device::Resources;
use crate::verbs::diagnose;
use crate::verbs::exchange;
use crate::verbs::options::VerbsOptions;
use crate::verbs::slots::{SlotLayout, WorkId, peer_index};
use crate::verbs::wire::{Completion, Wire};

/// The mutable state behind `&self`: channels, then the device objects.
struct Inner<W> {
    channels: Vec<Option<Channel>>,
    /// Peers whose connection ended with an error (already reported).
    failed: Vec<bool>,
    layout: SlotLayout,
    done: Vec<Completion>,
    wire: W,
}

/// One rank's fabric over reliable-connected queue pairs.
pub struct VerbsFabric {
    core: Core<Resources>,
}

/// The fabric's logic over any [`Wire`].
pub(crate) struct Core<W> {
    rank: Rank,
    world_size: usize,
    mailbox: Mailbox,
    call: Cell<CallId>,
    start: Instant,
    timeout: Duration,
    inner: RefCell<Inner<W>>,
}

impl VerbsFabric {
    /// Opens the device, connects a queue pair to every peer (addresses
    /// exchanged through `bootstrap`) and posts the receive slots. Every
    /// rank fails with the first rank's reason if any rank cannot set up.
    pub fn connect(
        bootstrap: &dyn Bootstrap,
        options: &VerbsOptions,
    ) -> Result<VerbsFabric, FabricError> {
        let rank = bootstrap.rank();
        let n = bootstrap.world_size();
        let err = |reason: String| FabricError::Transport {
            rank,
            reason: format!("verbs: {reason}"),
        };
        let mut opened = Resources::open(options, rank, n);
        let mine = match &opened {
            Ok(r) => exchange::encode(&options.job, rank, &r.local_addrs()),
            Err(e) => exchange::encode_failure(&options.job, rank, e),
        };
        let all = bootstrap.allgather(&mine).map_err(|e| err(e.to_string()))?;
        // Connect, then tell everyone how it went, so that no rank sends
        // before every peer's receive slots are posted and no rank waits
        // for one that gave up.
        let outcome = match &mut opened {
            Ok(res) => exchange::decode_for(&options.job, rank, &all)
                .and_then(|remote| res.connect(&remote)),
            Err(e) => Err(e.clone()),
        };
        let status = match &outcome {
            Ok(()) => vec![1u8],
            Err(e) => [&[0u8][..], e.as_bytes()].concat(),
        };
        let all = bootstrap
            .allgather(&status)
            .map_err(|e| err(e.to_string()))?;
        outcome.map_err(err)?;
        if let Some((r, s)) = all.iter().enumerate().find(|(_, s)| s.first() != Some(&1)) {
            let why = String::from_utf8_lossy(s.get(1..).unwrap_or_default());
            return Err(err(format!("rank {r} could not connect: {why}")));
        }
        let res = opened.map_err(err)?;
        let core = Core::new(rank, n, options, res).map_err(err)?;
        Ok(VerbsFabric { core })
    }

    /// The RDMA device in use.
    pub fn device_name(&self) -> String {
        self.core.inner.borrow().wire.name().to_string()
    }

    /// The GID index in use (`None`: InfiniBand LID routing).
    pub fn gid_index(&self) -> Option<u32> {
        self.core.inner.borrow().wire.gid_index()
    }
}

impl<W: Wire> Core<W> {
    /// Rank `rank` of `world_size` on `wire`, whose receive slots are posted.
    pub(crate) fn new(
        rank: Rank,
        world_size: usize,
        options: &VerbsOptions,
        wire: W,
    ) -> Result<Core<W>, String> {
        let layout = options.layout(world_size)?;
        let channels = (0..world_size)
            .map(|p| (p != rank).then(|| Channel::new(layout, options.message_bytes_max)))
            .collect();
        Ok(Core {
            rank,
            world_size,
            mailbox: Mailbox::new(rank, world_size, options.job.timeout),
            call: Cell::new(CallId::NONE),
            start: Instant::now(),
            timeout: options.job.timeout,
            inner: RefCell::new(Inner {
                channels,
                failed: vec![false; world_size],
                layout,
                done: Vec::new(),
                wire,
            }),
        })
    }

    fn transport(&self, reason: String) -> FabricError {
        FabricError::Transport {
            rank: self.rank,
            reason,
        }
    }

    /// Ends the connection to `peer` with `err` (the first error wins).
    fn fail(&self, inner: &mut Inner<W>, peer: Rank, err: FabricError) {
        if !inner.failed[peer] {
            inner.failed[peer] = true;
            self.mailbox.fail_peer(peer, err);
        }
    }

    /// Takes completions off the queue: frees send slots, turns received
    /// frames into messages and re-posts their slots, reports failures.
    fn poll_completions(&self, inner: &mut Inner<W>) -> bool {
        let mut done = std::mem::take(&mut inner.done);
        done.clear();
        if let Err(e) = inner.wire.poll(&mut done) {
            self.mailbox.fail_all(self.transport(e));
            return false;
        }
        let moved = !done.is_empty();
        for wc in done.drain(..) {
            let Some(id) = WorkId::decode(wc.wr_id) else {
                continue;
            };
            let peer = id.peer();
            let Some(ch) = inner.channels.get_mut(peer).and_then(Option::as_mut) else {
                continue;
            };
            if let WorkId::Send { slot, .. } = id {
                ch.send_completed(slot);
            }
            if wc.status != 0 {
                // After its Bye a peer may close its queue pair while our
                // last credit frames are on their way: not a failure.
                if !ch.bye_received() {
                    let what = match id {
                        WorkId::Recv { .. } => "receive from",
                        WorkId::Send { .. } => "send to",
                    };
                    let e =
                        diagnose::completion_error(self.rank, peer, what, wc.status, wc.vendor_err);
                    self.fail(inner, peer, e);
                }
                continue;
            }
            if let WorkId::Recv { slot, .. } = id {
                self.take_frame(inner, peer, slot, wc.len);
            }
        }
        inner.done = done;
        moved
    }

    /// Handles the frame that arrived in receive slot `slot` from `peer`.
    fn take_frame(&self, inner: &mut Inner<W>, peer: Rank, slot: u32, len: usize) {
        let range = inner.layout.recv_range(peer_index(self.rank, peer), slot);
        let end = range.start + len.min(range.len());
        let ch = inner.channels[peer].as_mut().expect("a channel per peer");
        let arrival = ch.receive(&inner.wire.memory()[range.start..end]);
        if let Err(e) = inner.wire.post_recv(peer, slot) {
            let e = self.transport(e);
            self.fail(inner, peer, e);
            return;
        }
        match arrival {
            Ok(Arrival::Message { tag, call, payload }) => {
                self.mailbox.deliver(peer, tag, call, payload)
            }
            Ok(Arrival::Partial) => self.mailbox.touch(peer),
            Ok(Arrival::Bye) => self.mailbox.fail_peer(
                peer,
                self.transport(format!(
                    "rank {peer} has finished: no more messages will come from it"
                )),
            ),
            Err(e) => {
                let e = self.transport(format!(
                    "protocol error on the connection from rank {peer}: {e}"
                ));
                self.fail(inner, peer, e);
            }
        }
    }

    /// Posts every frame the channels can send now.
    fn pump(&self, inner: &mut Inner<W>) -> bool {
        let mut moved = false;
        for peer in 0..self.world_size {
            if inner.failed[peer] {
                continue;
            }
            let Some(ch) = inner.channels[peer].as_mut() else {
                continue;
            };
            let area = inner.layout.send_area(peer_index(self.rank, peer));
            while let Some((slot, len)) = ch.poll_send(&mut inner.wire.memory()[area.clone()]) {
                let start = area.start + inner.layout.send_slot(slot).0;
                if let Err(e) =
                    inner
                        .wire
                        .post_send(peer, start..start + len, WorkId::Send { peer, slot })
                {
                    ch.send_completed(slot);
                    let e = self.transport(e);
                    self.fail(inner, peer, e);
                    break;
                }
                moved = true;
            }
        }
        moved
    }

    /// The first peer that has not finished (and did not fail), if any.
    fn unfinished(&self) -> Option<Rank> {
        let inner = self.inner.borrow();
        (0..self.world_size).find(|&p| {
            !inner.failed[p] && inner.channels[p].as_ref().is_some_and(|c| !c.finished())
        })
    }
}

impl<W: Wire> Fabric for Core<W> {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn now(&self) -> Time {
        crate::endpoint::time_since(self.start)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        crate::endpoint::refuse_symbols(self.rank, to, &payload)?;
        if to >= self.world_size {
            return Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: to,
                world_size: self.world_size,
            });
        }
        if let Some(e) = self.mailbox.fatal() {
            return Err(e);
        }
        if to == self.rank {
            self.mailbox.deliver(to, tag, self.call.get(), payload);
            return Ok(());
        }
        if let Some(e) = self.mailbox.peer_failure(to) {
            return Err(e);
        }
        let mut inner = self.inner.borrow_mut();
        inner.channels[to]
            .as_mut()
            .expect("a channel per peer")
            .queue(tag, self.call.get(), payload);
        self.pump(&mut inner);
        Ok(())
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        self.mailbox.recv(from, tag, expect).await
    }

    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }
}

impl<W: Wire> Endpoint for Core<W> {
    fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }

    fn progress(&self) -> bool {
        let mut inner = self.inner.borrow_mut();
        let polled = self.poll_completions(&mut inner);
        self.pump(&mut inner) || polled
    }

    /// Completions wake no thread: poll, yielding the core between polls.
    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy {
            spin: 2000,
            yields: 1_000_000,
            park: Duration::from_micros(50),
        }
    }

    fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        self.call.set(call);
        self.mailbox.begin_call(call)
    }

    fn finish(&self) -> Result<(), FabricError> {
        for ch in self.inner.borrow_mut().channels.iter_mut().flatten() {
            ch.want_bye();
        }
        let mut last_move = Instant::now();
        while let Some(peer) = self.unfinished() {
            if let Some(e) = self.mailbox.fatal() {
                return Err(e);
            }
            if self.progress() {
                last_move = Instant::now();
            } else if last_move.elapsed() > self.timeout {
                return Err(FabricError::Timeout {
                    rank: self.rank,
                    peer,
                    reason: format!(
                        "rank {peer} did not finish within {:.1} s (no Bye from it, or ours not acknowledged)",
                        self.timeout.as_secs_f64()
                    ),
                });
            } else {
                std::thread::yield_now();
            }
        }
        if let Some(e) = self.mailbox.fatal() {
            return Err(e);
        }
        let inner = self.inner.borrow();
        match (0..self.world_size).find(|&p| inner.failed[p]) {
            Some(p) => Err(self
                .mailbox
                .peer_failure(p)
                .expect("failed peers are recorded")),
            None => Ok(()),
        }
    }
}

impl Fabric for VerbsFabric {
    fn rank(&self) -> Rank {
        self.core.rank
    }

    fn world_size(&self) -> usize {
        self.core.world_size
    }

    fn now(&self) -> Time {
        self.core.now()
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        self.core.send(to, tag, payload).await
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        self.core.recv(from, tag, expect).await
    }

    async fn compute(&self, work: Work) -> Result<(), FabricError> {
        self.core.compute(work).await
    }
}

impl Endpoint for VerbsFabric {
    fn mailbox(&self) -> &Mailbox {
        self.core.mailbox()
    }

    fn progress(&self) -> bool {
        self.core.progress()
    }

    fn idle_policy(&self) -> IdlePolicy {
        self.core.idle_policy()
    }

    fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        self.core.begin_call(call)
    }

    fn finish(&self) -> Result<(), FabricError> {
        self.core.finish()
    }
}
