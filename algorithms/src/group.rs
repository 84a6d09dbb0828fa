//! [`Group`]: a [`Fabric`] over a subset of ranks, so that an algorithm
//! can run a collective among some ranks only (the ranks of one node, one
//! rank per node) with ranks renumbered `0..members`.

use crate::dtype::ReduceOp;
use crate::fabric::{Fabric, FabricError, Rank, Tag, Time, Work};
use crate::nccl::Framing;
use crate::payload::{Payload, Shape};

/// The ranks `members` of an underlying fabric, seen as a world of their
/// own. Local rank `i` is global rank `members[i]`. Tags pass through
/// unchanged: an algorithm that runs several sub-collectives gives each its
/// own tag (see [`Tag::phase`]) so their messages never match by mistake.
#[derive(Debug)]
pub struct Group<'a, F> {
    fabric: &'a F,
    members: Vec<Rank>,
    index: usize,
}

impl<'a, F: Fabric> Group<'a, F> {
    /// The group of `members` (global ranks, which must include the calling
    /// rank). Returns `None` if the caller is not a member.
    pub fn new(fabric: &'a F, members: Vec<Rank>) -> Option<Group<'a, F>> {
        let index = members.iter().position(|&r| r == fabric.rank())?;
        Some(Group {
            fabric,
            members,
            index,
        })
    }

    /// The underlying fabric's rank of the group's rank `local`.
    fn global(&self, local: Rank) -> Result<Rank, FabricError> {
        self.members
            .get(local)
            .copied()
            .ok_or(FabricError::PeerOutOfRange {
                rank: self.index,
                peer: local,
                world_size: self.members.len(),
            })
    }

    /// The underlying fabric's ranks of the group's ranks `group` (an
    /// in-network operation's members).
    fn global_members(&self, group: &[Rank]) -> Result<Vec<Rank>, FabricError> {
        group.iter().map(|&r| self.global(r)).collect()
    }
}

impl<F: Fabric> Fabric for Group<'_, F> {
    fn rank(&self) -> Rank {
        self.index
    }

    fn world_size(&self) -> usize {
        self.members.len()
    }

    fn now(&self) -> Time {
        self.fabric.now()
    }

    fn branching(&self, event: crate::branches::Branching) -> Option<u64> {
        self.fabric.branching(event)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        let to = self.global(to)?;
        self.fabric.send(to, tag, payload).await
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        let from = self.global(from)?;
        self.fabric.recv(from, tag, expect).await
    }

    /// Both ranks are local: they become global and the underlying
    /// fabric exchanges (so a back-end's exchange is reached through the
    /// group).
    async fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> Result<Payload, FabricError> {
        let to = self.global(to)?;
        let from = self.global(from)?;
        self.fabric.exchange(to, payload, from, expect, tag).await
    }

    /// Both ranks are local, as in [`Group::exchange`](Fabric::exchange).
    async fn exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> Result<Payload, FabricError> {
        let to = self.global(to)?;
        let from = self.global(from)?;
        self.fabric
            .exchange_framed(to, payload, from, expect, tag, framing)
            .await
    }

    async fn compute(&self, work: Work) -> Result<(), FabricError> {
        self.fabric.compute(work).await
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
        let to = self.global(to)?;
        self.fabric.send_framed(to, tag, payload, framing).await
    }

    /// The group's ranks are local: they become global before the
    /// underlying fabric answers.
    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        let global = self.global_members(group)?;
        self.fabric.can_reduce_in_network(&global)
    }

    /// The group's ranks are local: they become global before the
    /// underlying fabric reduces.
    async fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Payload, FabricError> {
        let global = self.global_members(group)?;
        self.fabric
            .reduce_in_network(&global, tag, payload, op)
            .await
    }

    /// The group's ranks and the root are local: they become global
    /// before the underlying fabric reduces.
    async fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Option<Payload>, FabricError> {
        let global = self.global_members(group)?;
        let root = self.global(root)?;
        self.fabric
            .reduce_to_in_network(&global, root, tag, payload, op)
            .await
    }

    /// The group's ranks are local: they become global before the
    /// underlying fabric answers.
    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        let global = self.global_members(group)?;
        self.fabric.can_multicast_in_network(&global)
    }

    /// The group's ranks are local: they become global before the
    /// underlying fabric multicasts.
    async fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<Payload, FabricError> {
        let global = self.global_members(group)?;
        self.fabric
            .multicast_in_network(&global, tag, payload)
            .await
    }
}
