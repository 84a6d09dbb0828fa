//! The in-network reduction and multicast future of [`SimFabric`]: a
//! member's contribution sent to the group's switch on the first poll,
//! then the switch's result awaited and checked.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::{Fabric, FabricError, Payload, Rank, ReduceOp, Tag, Time};

use super::SimFabric;
use crate::in_network::Contribution;
use crate::trace::SpanKind;

/// One rank's in-network reduction: sends its contribution on the first
/// poll, then waits for the switch's result.
pub(super) struct ReduceInNetwork<'a> {
    pub(super) fabric: &'a SimFabric,
    pub(super) group: &'a [Rank],
    pub(super) tag: Tag,
    /// The reduction's operator; `None` for a multicast.
    pub(super) op: Option<ReduceOp>,
    /// A reduction's one receiver, if not every member.
    pub(super) to: Option<Rank>,
    pub(super) payload: Option<Payload>,
    pub(super) ticket: Option<u64>,
    pub(super) posted: Time,
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
