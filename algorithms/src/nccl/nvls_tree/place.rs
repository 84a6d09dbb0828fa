//! The two parts a rank plays for one channel and head of the NVLS tree
//! (see the parent module): a [`Place`] on its node (contributing to the
//! node's reductions and taking the multicast results) and, on the head
//! of some units, a [`Head`] in the tree over nodes (up and down at once).

use std::cell::RefCell;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;

use super::{Tags, Units};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, FabricError, Rank, Work};
use crate::nccl::TreeNode;
use crate::nccl::protocol::STEPS;
use crate::payload::{Payload, Shape};

/// What a rank works on for one channel and head: the node's group, the
/// units, where their results go.
pub(super) struct Place<'a, F> {
    pub(super) fabric: &'a F,
    pub(super) members: &'a [Rank],
    pub(super) cast_group: &'a [Rank],
    pub(super) units: &'a Units,
    pub(super) tags: Tags,
    pub(super) op: ReduceOp,
    pub(super) out: &'a RefCell<Payload>,
}

impl<F: Fabric> Place<'_, F> {
    /// The head of these units on this node (the multicast's source).
    fn head(&self) -> Rank {
        self.cast_group[0]
    }

    /// Window of units a rank's contributions may be ahead of the head.
    fn window(&self) -> usize {
        STEPS.min(self.units.count().max(1))
    }

    /// This rank's contribution to unit `i`'s node reduction.
    async fn contribute(&self, buf: &Payload, i: usize) -> Result<Option<Payload>, FabricError> {
        let own = buf.extract(self.units.range(i));
        self.fabric
            .reduce_to_in_network(self.members, self.head(), self.tags.node, own, self.op)
            .await
    }

    /// A rank that is not the head of these units: it contributes to every
    /// node reduction, each once the head has freed its slot (a zero-byte
    /// credit for unit `i - window`), and takes every result from the
    /// head's multicast, in order.
    pub(super) async fn member(&self, buf: &Payload) -> Result<(), CollectiveError> {
        let dtype = buf.shape().dtype;
        let count = self.units.count();
        let window = self.window();
        let contribute = async {
            for i in 0..count {
                if i >= window {
                    self.fabric
                        .recv(self.head(), self.tags.credit, Shape::new(dtype, 0))
                        .await?;
                }
                self.contribute(buf, i).await?;
            }
            Ok::<_, CollectiveError>(())
        };
        let gather = async {
            for i in 0..count {
                let expect = Payload::phantom(dtype, self.units.range(i).len());
                let result = self
                    .fabric
                    .multicast_in_network(self.cast_group, self.tags.cast, expect)
                    .await?;
                self.out
                    .borrow_mut()
                    .copy_from(self.units.packed(i), &result)?;
            }
            Ok::<_, CollectiveError>(())
        };
        let (c, g) = futures_util::join!(contribute, gather);
        c?;
        g
    }
}

/// The head of some units on its node: its place in the tree over nodes
/// (ranks of the tree are node indices).
pub(super) struct Head<'a, F> {
    pub(super) place: Place<'a, F>,
    pub(super) tree: TreeNode,
    pub(super) per_node: usize,
    pub(super) local: usize,
}

impl<F: Fabric> Head<'_, F> {
    /// The head of node `node` of these units (same local index).
    fn head_of(&self, node: usize) -> Rank {
        node * self.per_node + self.local
    }

    /// Up and down the tree at once; every unit's result into `out`.
    pub(super) async fn run(&self, buf: &Payload) -> Result<(), CollectiveError> {
        let up = self.up(buf);
        match self.tree.parent {
            None => up.await,
            Some(parent) => {
                let (u, d) = futures_util::join!(up, self.down(parent, buf));
                u?;
                d
            }
        }
    }

    /// Each unit's node sum plus the children's, sent to the parent; at
    /// the root, each result sent down. The head's own contributions
    /// stay `window` units ahead of this loop, and once a unit is done the
    /// node's other ranks get a credit for the unit `window` later. Each
    /// child is credited as its unit is taken (for its unit `window`
    /// later); unit `i` goes to the parent once the parent has credited
    /// unit `i - window`.
    async fn up(&self, buf: &Payload) -> Result<(), CollectiveError> {
        let p = &self.place;
        let f = p.fabric;
        let dtype = buf.shape().dtype;
        let count = p.units.count();
        let window = p.window();
        let mut reductions: FuturesOrdered<_> = (0..window.min(count))
            .map(|i| p.contribute(buf, i))
            .collect();
        for i in 0..count {
            let len = p.units.range(i).len();
            let Some(sum) = reductions.next().await else {
                break;
            };
            let Some(mut acc) = sum? else {
                return Err(CollectiveError::Fabric(FabricError::Transport {
                    rank: f.rank(),
                    reason: "the node's in-network reduction brought its head no sum".into(),
                }));
            };
            for &child in &self.tree.children {
                let incoming = f
                    .recv(self.head_of(child), p.tags.up, Shape::new(dtype, len))
                    .await?;
                if i + window < count {
                    f.send(
                        self.head_of(child),
                        p.tags.up_credit,
                        Payload::phantom(dtype, 0),
                    )
                    .await?;
                }
                acc.reduce_from_right(0..len, &incoming, p.op)?;
                f.compute(Work::Reduce {
                    bytes: incoming.shape().bytes(),
                })
                .await?;
            }
            match self.tree.parent {
                Some(parent) => {
                    if i >= window {
                        f.recv(self.head_of(parent), p.tags.up_credit, Shape::new(dtype, 0))
                            .await?;
                    }
                    f.send(self.head_of(parent), p.tags.up, acc).await?;
                }
                None => {
                    if p.op == ReduceOp::Avg {
                        acc.divide(0..len, f.world_size());
                    }
                    self.deliver(i, acc).await?;
                }
            }
            if i + window < count {
                reductions.push_back(p.contribute(buf, i + window));
                for &m in &p.cast_group[1..] {
                    f.send(m, p.tags.credit, Payload::phantom(dtype, 0)).await?;
                }
            }
        }
        Ok(())
    }

    /// Each unit's result from the parent, sent on down; the parent is
    /// credited as each unit is taken (for its unit `window` later).
    async fn down(&self, parent: usize, buf: &Payload) -> Result<(), CollectiveError> {
        let p = &self.place;
        let dtype = buf.shape().dtype;
        let (count, window) = (p.units.count(), p.window());
        for i in 0..count {
            let result = p
                .fabric
                .recv(
                    self.head_of(parent),
                    p.tags.down,
                    Shape::new(dtype, p.units.range(i).len()),
                )
                .await?;
            if i + window < count {
                p.fabric
                    .send(
                        self.head_of(parent),
                        p.tags.down_credit,
                        Payload::phantom(dtype, 0),
                    )
                    .await?;
            }
            self.deliver(i, result).await?;
        }
        Ok(())
    }

    /// Sends unit `i`'s result to the children (to each once it has
    /// credited unit `i - window`), multicasts it to the node and keeps
    /// it.
    async fn deliver(&self, i: usize, result: Payload) -> Result<(), CollectiveError> {
        let p = &self.place;
        let dtype = result.shape().dtype;
        for &child in &self.tree.children {
            if i >= p.window() {
                p.fabric
                    .recv(
                        self.head_of(child),
                        p.tags.down_credit,
                        Shape::new(dtype, 0),
                    )
                    .await?;
            }
            p.fabric
                .send(self.head_of(child), p.tags.down, result.clone())
                .await?;
        }
        let kept = p
            .fabric
            .multicast_in_network(p.cast_group, p.tags.cast, result)
            .await?;
        p.out.borrow_mut().copy_from(p.units.packed(i), &kept)?;
        Ok(())
    }
}
