//! [`SimFabric`]: the [`Fabric`] one simulated rank uses.
//!
//! Sends are eager: the message is put on its link at once and the send
//! completes immediately (the simulated send buffer is unbounded).
//! Receives wait in virtual time until a matching message has arrived.
//! Reductions occupy the rank's compute engine for `bytes / throughput`.
//!
//! The operations' futures live beside it: `recv.rs` (a receive),
//! `reduce_in_network.rs` (a switch's reduction or multicast) and
//! `waits.rs` (a reserved reduction, the synchronisation point, a sleep).

mod recv;
mod reduce_in_network;
mod waits;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use std::sync::Arc;

use algorithms::nccl::{ChannelPlan, Framing};
use algorithms::{Fabric, FabricError, Payload, Rank, ReduceOp, Shape, Tag, Time, Work};

use crate::in_network::Contribution;
use crate::trace::{Span, SpanKind};
use crate::world::World;
use recv::Recv;
use reduce_in_network::ReduceInNetwork;
use waits::{Computing, Sleep, SyncAll};

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
}
