//! [`Framed`]: a fabric whose sends all carry one [`Framing`], so that an
//! algorithm written against plain [`Fabric::send`] (the catalogue's
//! rings and chains) runs on an NCCL channel with NCCL's protocol. Its
//! exchanges ([`Fabric::exchange`]) are the underlying fabric's framed
//! exchanges ([`Fabric::exchange_framed`]), its work the channel's
//! ([`Fabric::compute_framed`]).

use std::sync::Arc;

use crate::dtype::ReduceOp;
use crate::fabric::{Fabric, FabricError, Rank, Tag, Time, Work};
use crate::nccl::{ChannelPlan, Framing};
use crate::payload::{Payload, Shape};

/// `fabric`, with every send framed by `framing`.
#[derive(Debug)]
pub struct Framed<'a, F> {
    fabric: &'a F,
    framing: Framing,
}

impl<'a, F: Fabric> Framed<'a, F> {
    /// Sends on `fabric` framed by `framing`.
    pub fn new(fabric: &'a F, framing: Framing) -> Framed<'a, F> {
        Framed { fabric, framing }
    }
}

impl<F: Fabric> Fabric for Framed<'_, F> {
    fn rank(&self) -> Rank {
        self.fabric.rank()
    }

    fn world_size(&self) -> usize {
        self.fabric.world_size()
    }

    fn now(&self) -> Time {
        self.fabric.now()
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        self.fabric
            .send_framed(to, tag, payload, self.framing)
            .await
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        self.fabric.recv(from, tag, expect).await
    }

    /// An exchange whose send is framed: the underlying fabric's
    /// [`Fabric::exchange_framed`], so a back-end that makes it one
    /// operation (the model checker) sees one.
    fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> impl std::future::Future<Output = Result<Payload, FabricError>> {
        self.fabric
            .exchange_framed(to, payload, from, expect, tag, self.framing)
    }

    fn exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> impl std::future::Future<Output = Result<Payload, FabricError>> {
        self.fabric
            .exchange_framed(to, payload, from, expect, tag, framing)
    }

    /// Work on the channel: the underlying fabric's
    /// [`Fabric::compute_framed`] with this framing.
    async fn compute(&self, work: Work) -> Result<(), FabricError> {
        self.fabric.compute_framed(work, self.framing).await
    }

    async fn compute_framed(&self, work: Work, framing: Framing) -> Result<(), FabricError> {
        self.fabric.compute_framed(work, framing).await
    }

    fn recycle(&self, payload: Payload) {
        self.fabric.recycle(payload)
    }

    async fn send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> Result<(), FabricError> {
        self.fabric.send_framed(to, tag, payload, framing).await
    }

    fn channel_plan(&self) -> Option<Arc<ChannelPlan>> {
        self.fabric.channel_plan()
    }

    fn branching(&self, event: crate::branches::Branching) -> Option<u64> {
        self.fabric.branching(event)
    }

    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.fabric.can_reduce_in_network(group)
    }

    fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> impl std::future::Future<Output = Result<Payload, FabricError>> {
        self.fabric.reduce_in_network(group, tag, payload, op)
    }

    fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> impl std::future::Future<Output = Result<Option<Payload>, FabricError>> {
        self.fabric
            .reduce_to_in_network(group, root, tag, payload, op)
    }

    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.fabric.can_multicast_in_network(group)
    }

    fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> impl std::future::Future<Output = Result<Payload, FabricError>> {
        self.fabric.multicast_in_network(group, tag, payload)
    }
}
