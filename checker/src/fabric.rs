//! [`CheckFabric`]: the [`Fabric`] a rank uses under the model checker.
//! Sends and receives become operations in the checked [`World`]; they
//! complete only when the checker's choices make them (a delivery, a freed
//! slot, a notice that the peer stopped). An exchange
//! ([`Fabric::exchange`], and [`Fabric::exchange_framed`], whose framing
//! the checker ignores) is one operation whose two halves complete
//! separately but wake the rank once, when both are done.
//!
//! An in-network reduction ([`Fabric::reduce_in_network`]) is checked as
//! the switch behaves towards the members: each member's contribution is a
//! message to every other member with the call's tag (deliveries the
//! checker orders like any other), and each member, once it has every
//! contribution, combines them in member order
//! ([`reduce_in_member_order`]), as the switch does. So an algorithm's
//! software part (who contributes what, when, with which tag) is checked;
//! a call's tag must not also carry point-to-point messages between the
//! members. A multicast ([`Fabric::multicast_in_network`]) is likewise the
//! source's payload sent to every other member with the call's tag, and a
//! reduction to one member ([`Fabric::reduce_to_in_network`]) every other
//! member's contribution sent to the root, which combines them. Each is
//! one joint operation ([`World::post_joint`]): the member sees one
//! completion, as it would of a switch, so the checker never orders the
//! completions of its messages (they commute, as an exchange's halves
//! do).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use algorithms::branches::Branching;
use algorithms::in_network::{check_group, check_members, check_root, reduce_in_member_order};
use algorithms::nccl::Framing;
use algorithms::{Fabric, FabricError, Payload, Rank, ReduceOp, Shape, Tag, Time, Work};

use super::world::{JointRecv, JointSend, OpId, OpState, World};

/// One rank's view of a checked execution.
#[derive(Clone, Debug)]
pub struct CheckFabric {
    rank: Rank,
    /// The concurrent call this view of the fabric serves, if any.
    call: Option<usize>,
    world_size: usize,
    world: Rc<RefCell<World>>,
}

impl CheckFabric {
    /// The fabric of `rank` in `world`.
    pub fn new(rank: Rank, world: Rc<RefCell<World>>) -> CheckFabric {
        let world_size = world.borrow().world_size;
        CheckFabric {
            rank,
            call: None,
            world_size,
            world,
        }
    }

    /// The same rank's fabric for its concurrent call `call`: the world
    /// knows which call posts each operation (see
    /// [`effect`](super::effect)).
    pub fn for_call(&self, call: usize) -> CheckFabric {
        CheckFabric {
            call: Some(call),
            ..self.clone()
        }
    }

    /// Tells the world that this fabric's call returned.
    pub fn call_done(&self) {
        if let Some(call) = self.call {
            self.world.borrow_mut().call_done(self.rank, call);
        }
    }
}

impl CheckFabric {
    /// Waits until the checker lets this rank start call `call` (see
    /// [`Choice::Start`](super::world::Choice::Start)).
    pub async fn wait_start(&self, call: usize) {
        let op = self.world.borrow_mut().post_gate(self.rank, call);
        OpFuture {
            world: &self.world,
            op,
        }
        .await;
    }
}

/// Waits for one operation of the world to complete.
struct OpFuture<'a> {
    world: &'a RefCell<World>,
    op: OpId,
}

impl Future for OpFuture<'_> {
    type Output = OpState;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<OpState> {
        let mut world = self.world.borrow_mut();
        world.check_waiter(self.op);
        let state = &mut world.ops[self.op];
        match state {
            OpState::Pending(waker) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(std::mem::replace(state, OpState::Taken)),
        }
    }
}

impl CheckFabric {
    /// Posts `sends` and `recvs` as one joint operation
    /// ([`World::post_joint`]) and waits for it: the rank wakes once,
    /// when every part is done, with the received payloads in the order
    /// of `recvs` (or the first error).
    async fn joint(
        &self,
        sends: Vec<JointSend>,
        recvs: Vec<JointRecv>,
    ) -> Result<Vec<Payload>, FabricError> {
        let op = self
            .world
            .borrow_mut()
            .post_joint(self.rank, self.call, sends, recvs);
        self.wait_joint(op).await
    }

    /// Waits for the joint operation `op`.
    async fn wait_joint(&self, op: OpId) -> Result<Vec<Payload>, FabricError> {
        match (OpFuture {
            world: &self.world,
            op,
        })
        .await
        {
            OpState::JointDone(result) => result,
            other => unreachable!("a joint operation completed as {other:?}"),
        }
    }
}

impl Fabric for CheckFabric {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    /// The number of messages this rank has received: time is not modelled
    /// by the checker, and a rank-local count keeps ranks independent.
    fn now(&self) -> Time {
        let mut world = self.world.borrow_mut();
        world.clock_read(self.rank, self.call);
        let received = world.ranks[self.rank].received;
        world.observe_clock(self.rank, self.call, received);
        Time(received)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        let op = self
            .world
            .borrow_mut()
            .post_send(self.rank, self.call, to, tag, payload);
        match (OpFuture {
            world: &self.world,
            op,
        })
        .await
        {
            OpState::SendDone(result) => result,
            other => unreachable!("a send operation completed as {other:?}"),
        }
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        let op = self
            .world
            .borrow_mut()
            .post_recv(self.rank, self.call, from, tag, expect);
        match (OpFuture {
            world: &self.world,
            op,
        })
        .await
        {
            OpState::RecvDone(result) => result,
            other => unreachable!("a receive operation completed as {other:?}"),
        }
    }

    /// One joint operation in the world ([`World::post_joint`]): the rank
    /// is woken once, when both halves are done, so the checker never
    /// orders the halves' completions (see
    /// [`Effect`](super::world::Effect)).
    async fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> Result<Payload, FabricError> {
        let op = self.world.borrow_mut().post_joint(
            self.rank,
            self.call,
            vec![(to, tag, payload)],
            vec![(from, tag, expect)],
        );
        let mut received = self.wait_joint(op).await?;
        Ok(received.pop().expect("an exchange receives one message"))
    }

    /// The checker does not model framing (its sends ignore it, as
    /// [`Fabric::send_framed`]'s default does): one exchange, as
    /// [`CheckFabric::exchange`](Fabric::exchange).
    fn exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        _framing: Framing,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        self.exchange(to, payload, from, expect, tag)
    }

    /// Told to the world, which names each branch's operations (see
    /// [`World::branching`]).
    fn branching(&self, event: Branching) -> Option<u64> {
        self.world
            .borrow_mut()
            .branching(self.rank, self.call, event)
    }

    /// Local work completes at once: the checker does not model time.
    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }

    /// Every group is served (see the module docs).
    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        check_members(self.rank, group, self.world_size)
    }

    /// The switch as messages between the members (see the module docs):
    /// sends and receives posted at once, so no buffering deadlocks them.
    async fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Payload, FabricError> {
        check_group(self.rank, group, self.world_size)?;
        let shape = payload.shape();
        let others: Vec<Rank> = group.iter().copied().filter(|&r| r != self.rank).collect();
        let sends = others.iter().map(|&r| (r, tag, payload.clone())).collect();
        let recvs = others.iter().map(|&r| (r, tag, shape)).collect();
        let mut received = self.joint(sends, recvs).await?.into_iter();
        let parts: Vec<Payload> = group
            .iter()
            .map(|&r| {
                if r == self.rank {
                    payload.clone()
                } else {
                    received.next().expect("one message from each other member")
                }
            })
            .collect();
        reduce_in_member_order(parts.iter(), op).ok_or_else(|| FabricError::Transport {
            rank: self.rank,
            reason: format!("the in-network reduction of group {group:?} tag {tag} got no result"),
        })
    }

    /// The switch as messages from every other member to the root, which
    /// combines them in member order (see the module docs).
    async fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Option<Payload>, FabricError> {
        check_group(self.rank, group, self.world_size)?;
        check_root(self.rank, group, root)?;
        if root != self.rank {
            self.send(root, tag, payload).await?;
            return Ok(None);
        }
        let shape = payload.shape();
        let others = group.iter().copied().filter(|&r| r != self.rank);
        let recvs = others.map(|r| (r, tag, shape)).collect();
        let mut received = self.joint(Vec::new(), recvs).await?.into_iter();
        let parts: Vec<Payload> = group
            .iter()
            .map(|&r| {
                if r == self.rank {
                    payload.clone()
                } else {
                    received.next().expect("one message from each other member")
                }
            })
            .collect();
        let sum =
            reduce_in_member_order(parts.iter(), op).ok_or_else(|| FabricError::Transport {
                rank: self.rank,
                reason: format!(
                    "the in-network reduction of group {group:?} tag {tag} got no result"
                ),
            })?;
        Ok(Some(sum))
    }

    /// Every group is served (see the module docs).
    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        check_members(self.rank, group, self.world_size)
    }

    /// The switch as messages from the source to every other member (see
    /// the module docs).
    async fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<Payload, FabricError> {
        check_group(self.rank, group, self.world_size)?;
        let source = group[0];
        if source != self.rank {
            return self.recv(source, tag, payload.shape()).await;
        }
        let sends = group[1..]
            .iter()
            .map(|&r| (r, tag, payload.clone()))
            .collect();
        self.joint(sends, Vec::new()).await?;
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Buffering, Faults};
    use algorithms::DType;
    use algorithms::any_fabric::INLINE_FUTURE_BYTES;

    /// Every operation's future fits the inline space of an `AnyFabric`:
    /// the checker's millions of schedules allocate nothing per message.
    #[test]
    fn operation_futures_fit_inline() {
        let world = Rc::new(RefCell::new(World::new(
            2,
            Buffering::Unbounded,
            Faults::default(),
        )));
        let f = CheckFabric::new(0, world);
        let sizes = [
            std::mem::size_of_val(&f.send(1, Tag(0), Payload::phantom(DType::F32, 1))),
            std::mem::size_of_val(&f.recv(1, Tag(0), Shape::new(DType::F32, 1))),
            std::mem::size_of_val(&f.compute(Work::Reduce { bytes: 1 })),
            std::mem::size_of_val(&f.exchange(
                1,
                Payload::phantom(DType::F32, 1),
                1,
                Shape::new(DType::F32, 1),
                Tag(0),
            )),
            std::mem::size_of_val(&f.exchange_framed(
                1,
                Payload::phantom(DType::F32, 1),
                1,
                Shape::new(DType::F32, 1),
                Tag(0),
                Framing {
                    protocol: algorithms::nccl::Protocol::Simple,
                    algorithm: algorithms::nccl::NcclAlgorithm::Ring,
                    channel: 0,
                },
            )),
        ];
        assert!(
            sizes.iter().all(|&s| s <= INLINE_FUTURE_BYTES),
            "{sizes:?} > {INLINE_FUTURE_BYTES}"
        );
    }
}
