//! [`SimFabric`]: the [`Fabric`] one simulated rank uses.
//!
//! Sends are eager: the message is put on its link at once and the send
//! completes immediately (the simulated send buffer is unbounded).
//! Receives wait in virtual time until a matching message has arrived.
//! Reductions occupy the rank's compute engine for `bytes / throughput`.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use std::sync::Arc;

use algorithms::nccl::{ChannelPlan, Framing};
use algorithms::{Fabric, FabricError, Payload, Rank, ReduceOp, Shape, Tag, Time, Work};

use crate::in_network::Contribution;
use crate::trace::{Span, SpanKind};
use crate::world::World;

/// One rank's view of a simulated run.
#[derive(Clone, Debug)]
pub struct SimFabric {
    rank: Rank,
    world_size: usize,
    pub(crate) world: Rc<RefCell<World>>,
}

impl SimFabric {
    pub(crate) fn new(rank: Rank, world: Rc<RefCell<World>>) -> SimFabric {
        let world_size = world.borrow().config.world_size;
        SimFabric {
            rank,
            world_size,
            world,
        }
    }

    /// Waits until every rank has called `sync_all` as many times as this
    /// one, at no cost in virtual time: the last rank to arrive releases
    /// everyone at its own time. This is the simulator's own coordination,
    /// outside the modelled network (like the host-side synchronisation
    /// between nccl-tests iterations); collectives never use it.
    pub async fn sync_all(&self) {
        SyncAll {
            fabric: self,
            generation: None,
        }
        .await
    }

    /// Records a span of this rank from `start` to now in the trace, if
    /// one is being recorded.
    pub(crate) fn record(&self, kind: SpanKind, peer: Option<Rank>, bytes: u64, start: Time) {
        let mut world = self.world.borrow_mut();
        let end = world.now;
        if let Some(trace) = &mut world.trace {
            trace.push_span(Span {
                rank: self.rank,
                kind,
                peer,
                bytes,
                start,
                end,
            });
        }
    }

    /// Waits `ps` of virtual time doing nothing (a straggler's delay).
    pub async fn sleep_ps(&self, ps: u64) {
        let now = self.now();
        let Some(until) = now.checked_plus_ps(ps) else {
            self.world.borrow_mut().out_of_time = true;
            return std::future::pending().await;
        };
        if ps > 0 {
            Sleep {
                fabric: self,
                until,
                armed: false,
            }
            .await;
            self.record(SpanKind::Delay, None, 0, now);
        }
    }

    fn check_peer(&self, peer: Rank) -> Result<(), FabricError> {
        if peer < self.world_size {
            Ok(())
        } else {
            Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer,
                world_size: self.world_size,
            })
        }
    }
}

impl Fabric for SimFabric {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn now(&self) -> Time {
        self.world.borrow().now
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        self.check_peer(to)?;
        self.world
            .borrow_mut()
            .send(self.rank, to, tag, payload)
            .map_err(|reason| FabricError::Transport {
                rank: self.rank,
                reason,
            })
    }

    /// A plain future rather than an `async fn`, so that it holds each
    /// argument once: it stays small enough for an algorithm reached
    /// through a trait object to store it inline (`algorithms::AnyFabric`).
    fn recv(
        &self,
        from: Rank,
        tag: Tag,
        expect: Shape,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        Recv {
            fabric: self,
            from,
            tag,
            expect,
            posted: None,
            wait: None,
        }
    }

    async fn send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> Result<(), FabricError> {
        self.check_peer(to)?;
        self.world
            .borrow_mut()
            .send_framed(self.rank, to, tag, payload, framing)
            .map_err(|reason| FabricError::Transport {
                rank: self.rank,
                reason,
            })
    }

    fn channel_plan(&self) -> Option<Arc<ChannelPlan>> {
        let world = self.world.borrow();
        world.config.nccl.as_ref().map(|n| Arc::clone(&n.plan))
    }

    /// Whether the topology has a switch that reduces for `group` (see
    /// the `in_network` module).
    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        algorithms::in_network::check_members(self.rank, group, self.world_size)?;
        self.world
            .borrow_mut()
            .switch_of(group)
            .map(|_| ())
            .map_err(|reason| FabricError::NoInNetworkReduction {
                rank: self.rank,
                reason,
            })
    }

    /// The group's switch reduces (see the `in_network` module): on a
    /// topology with a switch that reduces and reaches every member, or on
    /// the ideal links' one switch; folded runs refuse.
    async fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Payload, FabricError> {
        ReduceInNetwork {
            fabric: self,
            group,
            tag,
            op: Some(op),
            to: None,
            payload: Some(payload),
            ticket: None,
            posted: Time::ZERO,
        }
        .await
    }

    /// The group's switch reduces and sends the result to `root` alone;
    /// the other members are done once their contribution is on its way.
    async fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Option<Payload>, FabricError> {
        let rank = self.rank;
        let member = algorithms::in_network::check_group(rank, group, self.world_size)?;
        algorithms::in_network::check_root(rank, group, root)?;
        if root != rank {
            self.world
                .borrow_mut()
                .start_reduce_in_network(
                    rank,
                    group,
                    tag,
                    payload,
                    Contribution {
                        member,
                        op,
                        to: Some(root),
                    },
                )
                .map_err(|reason| FabricError::NoInNetworkReduction { rank, reason })?;
            return Ok(None);
        }
        ReduceInNetwork {
            fabric: self,
            group,
            tag,
            op: Some(op),
            to: Some(root),
            payload: Some(payload),
            ticket: None,
            posted: Time::ZERO,
        }
        .await
        .map(Some)
    }

    /// Whether the topology has a switch that multicasts for `group`: the
    /// one that would reduce for it (see the `in_network` module).
    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        algorithms::in_network::check_members(self.rank, group, self.world_size)?;
        self.world
            .borrow_mut()
            .switch_of(group)
            .map(|_| ())
            .map_err(|reason| FabricError::NoInNetworkMulticast {
                rank: self.rank,
                reason: reason.replace(
                    algorithms::in_network::NO_SWITCH_REASON,
                    algorithms::in_network::NO_MULTICAST_REASON,
                ),
            })
    }

    /// The group's switch multicasts the source's payload (see the
    /// `in_network` module; the source's call completes at once, like a
    /// send); refused where no switch would reduce.
    async fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<Payload, FabricError> {
        let rank = self.rank;
        algorithms::in_network::check_group(rank, group, self.world_size)?;
        if group[0] == rank {
            // The source is done once its payload is on its way.
            let kept = payload.clone();
            self.world
                .borrow_mut()
                .start_multicast_in_network(rank, group, tag, payload)
                .map_err(|reason| FabricError::NoInNetworkMulticast { rank, reason })?;
            return Ok(kept);
        }
        ReduceInNetwork {
            fabric: self,
            group,
            tag,
            op: None,
            to: None,
            payload: Some(payload),
            ticket: None,
            posted: Time::ZERO,
        }
        .await
    }

    /// `compute_on`'s future itself, without a wrapper, so
    /// that it fits an `AnyFabric`'s inline space.
    fn compute(&self, work: Work) -> impl Future<Output = Result<(), FabricError>> {
        self.compute_on(work, None)
    }

    /// Work on an NCCL channel: reductions posted at the same instant are
    /// served in channel order (see the world's `compute` module).
    fn compute_framed(
        &self,
        work: Work,
        framing: Framing,
    ) -> impl Future<Output = Result<(), FabricError>> {
        self.compute_on(work, Some(framing.channel))
    }
}

impl SimFabric {
    /// [`Fabric::compute`] by `channel`, if the work names one.
    async fn compute_on(&self, work: Work, channel: Option<u16>) -> Result<(), FabricError> {
        let bytes = match work {
            Work::Reduce { bytes } => bytes,
            Work::Latency { ps } => {
                self.sleep_ps(ps).await;
                return Ok(());
            }
        };
        let Some(throughput) = self.world.borrow().config.reduce_bytes_per_s else {
            return Ok(());
        };
        let slowdown = self.world.borrow().config.faults.slowdown(self.rank);
        let work_ps = topologies::duration_ps(bytes, throughput / slowdown);
        if work_ps == 0 {
            return Ok(());
        }
        let reserved = self
            .world
            .borrow_mut()
            .reserve_compute(self.rank, work_ps, channel);
        let Some(ticket) = reserved else {
            // Past the end of virtual time: never completes; the executor
            // stops the run and reports it.
            return std::future::pending().await;
        };
        let done = Computing {
            fabric: self,
            ticket: Some(ticket),
            armed_for: None,
        }
        .await;
        let start = Time(done.as_ps() - work_ps);
        self.record(SpanKind::Reduce, None, bytes, start);
        Ok(())
    }
}

/// Waits for a reserved reduction ([`World::reserve_compute`]) to be
/// done and returns when it was: woken at the finish its ticket names,
/// which a reduction posted later at the same instant may move back.
struct Computing<'a> {
    fabric: &'a SimFabric,
    /// Its ticket, until it is done.
    ticket: Option<u32>,
    /// The finish its timer is set for.
    armed_for: Option<Time>,
}

impl Future for Computing<'_> {
    type Output = Time;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Time> {
        let ticket = self.ticket.expect("polled after it returned");
        let mut world = self.fabric.world.borrow_mut();
        let done = world.compute_done(ticket);
        if world.now >= done {
            world.release_compute(ticket);
            drop(world);
            self.ticket = None;
            return Poll::Ready(done);
        }
        if self.armed_for != Some(done) {
            world.schedule_timer(self.fabric.rank, done, cx.waker());
            drop(world);
            self.armed_for = Some(done);
        }
        Poll::Pending
    }
}

impl Drop for Computing<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket
            && let Ok(mut world) = self.fabric.world.try_borrow_mut()
        {
            world.release_compute(ticket);
        }
    }
}

/// Receives the next message from `from` with `tag`: checks the peer on
/// the first poll, waits, then records the receive's span and checks the
/// message's shape.
struct Recv<'a> {
    fabric: &'a SimFabric,
    from: Rank,
    tag: Tag,
    expect: Shape,
    /// When the receive was first polled (posted).
    posted: Option<Time>,
    /// Its entry among the world's waiting receives, once it waited.
    wait: Option<u32>,
}

impl Recv<'_> {
    /// The received `payload`, its span recorded, if it has the expected
    /// shape.
    fn arrived(&self, payload: Payload) -> Result<Payload, FabricError> {
        let posted = self.posted.expect("set on the first poll");
        let got = payload.shape();
        self.fabric
            .record(SpanKind::Recv, Some(self.from), got.bytes(), posted);
        if got != self.expect {
            return Err(FabricError::ShapeMismatch {
                rank: self.fabric.rank,
                from: self.from,
                tag: self.tag,
                expected: self.expect,
                got,
            });
        }
        Ok(payload)
    }
}

impl Future for Recv<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.posted.is_none() {
            self.fabric.check_peer(self.from)?;
            self.posted = Some(self.fabric.now());
        }
        let rank = self.fabric.rank;
        let mut world = self.fabric.world.borrow_mut();
        if let Some(id) = self.wait
            && world.wait_unchanged(id, cx.waker())
        {
            // Woken for another receive: nothing new for this one.
            return Poll::Pending;
        }
        if let Some(payload) = world.take_message(rank, self.from, self.tag) {
            if let Some(id) = self.wait.take() {
                world.remove_wait(rank, id);
            }
            drop(world);
            return Poll::Ready(self.arrived(payload));
        }
        if let Some(failure) = world.broken(rank, self.from) {
            let error = FabricError::Timeout {
                rank,
                peer: self.from,
                reason: format!("{}; {}", failure.summary(), failure.cause()),
            };
            if let Some(id) = self.wait.take() {
                world.remove_wait(rank, id);
            }
            return Poll::Ready(Err(error));
        }
        let id = world.register_wait(
            rank,
            self.wait,
            self.from,
            self.tag,
            self.expect,
            cx.waker(),
        );
        drop(world);
        self.wait = Some(id);
        Poll::Pending
    }
}

impl Drop for Recv<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.wait
            && let Ok(mut world) = self.fabric.world.try_borrow_mut()
        {
            world.remove_wait(self.fabric.rank, id);
        }
    }
}

/// One rank's in-network reduction: sends its contribution on the first
/// poll, then waits for the switch's result.
struct ReduceInNetwork<'a> {
    fabric: &'a SimFabric,
    group: &'a [Rank],
    tag: Tag,
    /// The reduction's operator; `None` for a multicast.
    op: Option<ReduceOp>,
    /// A reduction's one receiver, if not every member.
    to: Option<Rank>,
    payload: Option<Payload>,
    ticket: Option<u64>,
    posted: Time,
}

impl Future for ReduceInNetwork<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let rank = self.fabric.rank;
        let ticket = match self.ticket {
            Some(t) => t,
            None => {
                let member =
                    algorithms::in_network::check_group(rank, self.group, self.fabric.world_size)?;
                let payload = self.payload.take().expect("taken once, on the first poll");
                self.posted = self.fabric.now();
                let mut world = self.fabric.world.borrow_mut();
                let t = match self.op {
                    Some(op) => world
                        .start_reduce_in_network(
                            rank,
                            self.group,
                            self.tag,
                            payload,
                            Contribution {
                                member,
                                op,
                                to: self.to,
                            },
                        )
                        .map_err(|reason| FabricError::NoInNetworkReduction { rank, reason })?,
                    None => {
                        // The shape this member expects back.
                        self.payload = Some(Payload::phantom(payload.shape().dtype, payload.len()));
                        world
                            .start_multicast_in_network(rank, self.group, self.tag, payload)
                            .map_err(|reason| FabricError::NoInNetworkMulticast { rank, reason })?
                    }
                };
                drop(world);
                self.ticket = Some(t);
                t
            }
        };
        let mut world = self.fabric.world.borrow_mut();
        let calls = if self.op.is_some() {
            &mut world.in_network
        } else {
            &mut world.multicasts
        };
        let arrived = calls.poll_call(rank, self.group, self.tag, ticket, cx.waker());
        drop(world);
        match arrived {
            None => Poll::Pending,
            Some(Ok(result)) => {
                if let Some(expect) = self.payload.as_ref().map(Payload::shape)
                    && expect != result.shape()
                {
                    return Poll::Ready(Err(FabricError::ShapeMismatch {
                        rank,
                        from: self.group[0],
                        tag: self.tag,
                        expected: expect,
                        got: result.shape(),
                    }));
                }
                let bytes = result.shape().bytes();
                self.fabric.record(SpanKind::Recv, None, bytes, self.posted);
                Poll::Ready(Ok(result))
            }
            Some(Err(reason)) => Poll::Ready(Err(FabricError::Transport { rank, reason })),
        }
    }
}

/// Waits at the synchronisation point until every rank has arrived.
struct SyncAll<'a> {
    fabric: &'a SimFabric,
    generation: Option<u64>,
}

impl Future for SyncAll<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut world = self.fabric.world.borrow_mut();
        let generation = match self.generation {
            Some(g) => g,
            None => {
                let g = world.arrive_at_sync(self.fabric.rank, cx.waker());
                drop(world);
                self.generation = Some(g);
                return self.poll(cx);
            }
        };
        if world.sync.generation > generation {
            Poll::Ready(())
        } else {
            if let Some(entry) = world
                .sync
                .waiting
                .iter_mut()
                .find(|(r, _)| *r == self.fabric.rank)
            {
                entry.1 = cx.waker().clone();
            }
            Poll::Pending
        }
    }
}

/// Waits until virtual time `until`.
struct Sleep<'a> {
    fabric: &'a SimFabric,
    until: Time,
    armed: bool,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut world = self.fabric.world.borrow_mut();
        if world.now >= self.until {
            return Poll::Ready(());
        }
        if !self.armed {
            world.schedule_timer(self.fabric.rank, self.until, cx.waker());
            drop(world);
            self.armed = true;
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use algorithms::any_fabric::INLINE_FUTURE_BYTES;
    use algorithms::{DType, Fabric, Payload, Shape, Tag, Work};
    use topologies::LinkSpec;

    use crate::network::NetworkConfig;
    use crate::world::WorldConfig;

    /// Every operation's future fits the inline space of an `AnyFabric`,
    /// so algorithms reached through the registry allocate nothing per
    /// message.
    #[test]
    fn operation_futures_fit_inline() {
        let network = NetworkConfig::Ideal(LinkSpec::new(1, 1e9).expect("a valid link"));
        let exec = crate::run(WorldConfig::new(1, network), |f| async move {
            [
                std::mem::size_of_val(&f.send(0, Tag(0), Payload::phantom(DType::F32, 1))),
                std::mem::size_of_val(&f.recv(0, Tag(0), Shape::new(DType::F32, 1))),
                std::mem::size_of_val(&f.compute(Work::Reduce { bytes: 1 })),
                std::mem::size_of_val(&f.compute_framed(
                    Work::Reduce { bytes: 1 },
                    algorithms::nccl::Framing {
                        protocol: algorithms::nccl::Protocol::Simple,
                        algorithm: algorithms::nccl::NcclAlgorithm::Pat,
                        channel: 0,
                    },
                )),
            ]
        });
        let sizes = exec.outputs[0].expect("the rank finished");
        assert!(
            sizes.iter().all(|&s| s <= INLINE_FUTURE_BYTES),
            "{sizes:?} > {INLINE_FUTURE_BYTES}"
        );
    }

    /// Receives waiting at once, woken by messages for one another: two
    /// receives of the same sender and tag each get one of its messages
    /// (the first arrival signals both, only one takes it, the other
    /// waits on for the second), and a receive of another tag, polled at
    /// every wake-up of its rank, completes when its own message comes.
    #[test]
    fn concurrent_receives_wait_for_their_own_messages() {
        // 1 us latency, 1000 B at 1 GB/s: 2 us per message, back to back.
        let link = LinkSpec::new(1_000_000, 1e9).expect("a valid link");
        let exec = crate::run(
            WorldConfig::new(2, NetworkConfig::Ideal(link)),
            |f| async move {
                let shape = Shape::new(DType::U8, 1000);
                if f.rank() == 0 {
                    for tag in [5, 5, 5, 7] {
                        let payload = Payload::phantom(DType::U8, 1000);
                        f.send(1, Tag(tag), payload).await.expect("a peer");
                    }
                    return Vec::new();
                }
                let timed = |tag| {
                    let f = &f;
                    async move {
                        f.recv(0, Tag(tag), shape).await.expect("sent");
                        f.now().as_ps()
                    }
                };
                let (a, b, c, d) = futures_util::join!(timed(5), timed(7), timed(5), timed(5));
                vec![a, b, c, d]
            },
        );
        let done = exec.outputs[1].clone().expect("rank 1 finished");
        // Messages arrive at 2, 3, 4 and 5 us (the link sends them one
        // after another); tag 5's three receives take them in turn.
        assert_eq!(done, vec![2_000_000, 5_000_000, 3_000_000, 4_000_000]);
    }

    /// When rank 0 has both messages of a fan-in from ranks 1 and 2 (1000
    /// B each at 1 GB/s, 1 us latency), having first slept `sleep_ps`,
    /// with a receive overhead of `receive_ps`.
    fn fan_in_done_ps(receive_ps: u64, sleep_ps: u64) -> u64 {
        let link = LinkSpec::new(1_000_000, 1e9)
            .expect("a valid link")
            .with_receive_overhead_ps(receive_ps);
        let exec = crate::run(
            WorldConfig::new(3, NetworkConfig::Ideal(link)),
            |f| async move {
                let shape = Shape::new(DType::U8, 1000);
                if f.rank() == 0 {
                    f.sleep_ps(sleep_ps).await;
                    f.recv(1, Tag(0), shape).await.expect("sent");
                    f.recv(2, Tag(0), shape).await.expect("sent");
                } else {
                    let payload = Payload::phantom(DType::U8, 1000);
                    f.send(0, Tag(0), payload).await.expect("a peer");
                }
                f.now().as_ps()
            },
        );
        exec.outputs[0].expect("rank 0 finished")
    }

    #[test]
    fn the_receiver_handles_its_messages_one_at_a_time_in_arrival_order() {
        // Without a receive overhead both arrive at 2 us.
        assert_eq!(fan_in_done_ps(0, 0), 2_000_000);
        // With 3 us each: handled at 5 and 8 us.
        assert_eq!(fan_in_done_ps(3_000_000, 0), 8_000_000);
        // Messages that arrive before the receive is posted are handled
        // meanwhile: a rank busy until 20 us finds both ready.
        assert_eq!(fan_in_done_ps(3_000_000, 20_000_000), 20_000_000);
    }
}
