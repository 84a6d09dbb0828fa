//! `nccl_nvls_tree`: allreduce the way NCCL's NVLS-Tree algorithm runs it
//! across nodes: NVLS inside each node (the NVSwitch reduces, through
//! [`Fabric::reduce_in_network`]), NCCL's double binary tree between the
//! nodes' heads, and the result written back to every GPU of the node by
//! the NVSwitch's multicast ([`Fabric::multicast_in_network`]).
//!
//! Nodes are `Params::ranks_per_node` (`p`) consecutive ranks (all ranks
//! one node when it does not divide the world size). Every GPU of a node
//! is a head (NCCL: the NVLS graph's heads, one per NIC across nodes,
//! `src/graph/search.cc:1195-1214` @b91894bd; on DGX/HGX nodes that is
//! every GPU).
//!
//! NCCL (`src/device/all_reduce.h:522-628` @b91894bd): a channel's part of
//! the buffer goes in loops of `nHeads` chunks, head `h` owning chunk `h`
//! of every loop (`all_reduce.h:573`). For its chunk, the head's reduce
//! warps `multimem.ld_reduce` the node's copies (the switch sums them)
//! together with the partial sums of up to two child nodes' heads and send
//! the sum to the parent node's head (`treeUp`); the root's sum goes back
//! down. The head's broadcast warps receive the result from the parent,
//! pass it to the children and `multimem.st` it to the node
//! (`all_reduce.h:604-625`; `treeDown[0]` is the local NVLS,
//! `src/graph/connect.cc:264-320`). Head `h` of every node forms the tree
//! over nodes: NCCL's double binary tree (`ncclGetDtree`), channel `c`
//! using tree `c mod 2` (`connect.cc:264-320`).
//!
//! Here: the buffer is cut into `c = Params::channels` blocks (0: two, one
//! per tree), block `k` on tree `k mod 2`; a block goes in loops of `p`
//! units of `min(Params::chunk_bytes, 128 KiB)` (the engine passes NCCL's
//! NVLS-Tree chunk, `src/enqueue.cc:2166-2179`), unit `h` of each loop
//! owned by local head `h` (a short last loop is split evenly over the
//! heads; NCCL aligns it to 16 bytes). For each unit:
//! 1. the node's ranks reduce it in the switch, the sum going to the head
//!    alone ([`Fabric::reduce_to_in_network`], `multimem.ld_reduce`);
//! 2. the head adds its children's partial sums, in child order, and sends
//!    the sum to its parent; the root has the result (divided by `N` for
//!    [`ReduceOp::Avg`]);
//! 3. the result goes down the tree (a head sends it on to its children)
//!    and each head multicasts it to its node (the head the source).
//!
//! A head's units go up in order (a node reduction's result awaited per
//! unit, all issued at once) and come down in order, the two directions at
//! once; tree messages are plain sends (the router takes a head through
//! its own NIC) with no slot credits. Tags: [`channel_tag`] of channel
//! `k p + h` with phases 0 (node reduction), 1 (up the tree), 2 (down the
//! tree) and 3 (multicast).
//!
//! Reduction order: a node's sum `S_v` is its ranks folded in local order
//! (the switch's member order); a tree node's partial sum is
//! `((S_v ⊕ P(child0)) ⊕ P(child1))`; the result is the root's.
//!
//! Traffic per GPU link for a buffer of `S` bytes and `p` heads: up `S`
//! (its contributions) plus `S/p` (its multicasts), down `S/p` (its node
//! sums) plus `S` (every head's multicast); across nodes each head sends
//! and receives its `S/p` once per tree edge.
//!
//! Cost on ideal links (every rank a link of latency `α` to the switch
//! and to every other rank, `c` the time of one unit on it, the switch's
//! forwarding free), two nodes of `p` ranks, one channel, one loop (each
//! head one unit): every rank's `p` contributions leave back to back, so
//! head `h`'s node sum is back at `(h + 2) c + 2α`; the child head's sum
//! reaches the root `c + α` later, the result reaches the child after
//! another `c + α`, and the child's multicast takes `2 (c + α)`: the last
//! head's copy is in at `T = (p + 5) c + 6α` ([`ideal_time_ps`]), provided
//! the multicasts do not queue behind the node sums on the way down
//! (`3α >= (p - 3) c`; the root's first multicast leaves the switch at
//! `4c + 4α`, its node's last node sum at `(p + 1) c + α`).
//!
//! On fabrics without a switch that reduces and multicasts the call fails
//! with the fabric's reason before anything is sent.

use std::ops::Range;

use futures_util::StreamExt;
use futures_util::future::try_join_all;
use futures_util::stream::FuturesOrdered;

use crate::algorithm::{Chunking, CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, FabricError, Rank, Tag, Work};
use crate::layout::block_range;
use crate::nccl::TreeNode;
use crate::nccl::nvls::NVLS_CHUNK_BYTES;
use crate::nccl::plan::double_binary_tree;
use crate::nccl::ring::channel_tag;
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

/// The call's layout: ranks per node, nodes, channels, elements per unit.
#[derive(Clone, Copy, Debug)]
struct Layout {
    per_node: usize,
    nodes: usize,
    channels: usize,
    unit: usize,
}

impl Layout {
    fn new(n: usize, count: usize, elem: usize, params: &Params) -> Layout {
        let p = params.ranks_per_node;
        let per_node = if p == 0 || !n.is_multiple_of(p) { n } else { p };
        let channels = if params.channels == 0 {
            2
        } else {
            params.channels
        };
        let unit_bytes = params.chunk_bytes.clamp(1, NVLS_CHUNK_BYTES);
        Layout {
            per_node,
            nodes: n / per_node,
            channels: channels.clamp(1, count.max(1)),
            unit: usize::try_from(unit_bytes / elem.max(1) as u64)
                .unwrap_or(usize::MAX)
                .max(1),
        }
    }

    /// Channel `k`'s block of a buffer of `count` elements.
    fn block(&self, count: usize, k: usize) -> Range<usize> {
        block_range(count, self.channels, k)
    }

    /// Head `h`'s units of `block`, non-empty, in order: unit `h` of each
    /// loop of `per_node` units, a short last loop split evenly.
    fn units(&self, block: &Range<usize>, h: usize) -> Vec<Range<usize>> {
        let loop_len = self.per_node * self.unit;
        let mut out = Vec::new();
        let mut start = block.start;
        while start < block.end {
            let len = (block.end - start).min(loop_len);
            let mine = if len == loop_len {
                h * self.unit..(h + 1) * self.unit
            } else {
                block_range(len, self.per_node, h)
            };
            if !mine.is_empty() {
                out.push(start + mine.start..start + mine.end);
            }
            start += len;
        }
        out
    }

    /// The ranks of `node`, with local rank `h` first (the multicast's
    /// source), then the others in local order.
    fn node_group(&self, node: usize, h: usize) -> Vec<Rank> {
        let base = node * self.per_node;
        std::iter::once(base + h)
            .chain((0..self.per_node).filter(|&j| j != h).map(|j| base + j))
            .collect()
    }
}

/// The tags of channel `k`, head `h`.
#[derive(Clone, Copy, Debug)]
struct Tags {
    node: Tag,
    up: Tag,
    down: Tag,
    cast: Tag,
}

impl Tags {
    fn new(tag: Tag, layout: &Layout, k: usize, h: usize) -> Tags {
        let t = channel_tag(tag, k * layout.per_node + h);
        Tags {
            node: t.phase(0),
            up: t.phase(1),
            down: t.phase(2),
            cast: t.phase(3),
        }
    }
}

/// Allreduce with NVLS-Tree, in place on `buf`; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let n = fabric.world_size();
    let dtype = buf.shape().dtype;
    let layout = Layout::new(n, buf.len(), dtype.size_bytes(), params);
    let (node, local) = (
        fabric.rank() / layout.per_node,
        fabric.rank() % layout.per_node,
    );
    // Every group asked on every rank, so all refuse alike, before sending.
    let members: Vec<Rank> = (0..layout.per_node)
        .map(|j| node * layout.per_node + j)
        .collect();
    fabric.can_reduce_in_network(&members)?;
    for h in 0..layout.per_node {
        fabric.can_multicast_in_network(&layout.node_group(node, h))?;
    }
    let buf_ref = &*buf;
    let mut jobs = Vec::new();
    for k in 0..layout.channels {
        let block = layout.block(buf.len(), k);
        let tree = double_binary_tree(layout.nodes, (k % 2) as u8);
        for h in 0..layout.per_node {
            let units = layout.units(&block, h);
            let tags = Tags::new(params.tag, &layout, k, h);
            let cast_group = layout.node_group(node, h);
            let head = (local == h).then(|| tree[node].clone());
            let members = &members;
            jobs.push(async move {
                let results = match head {
                    Some(place) => {
                        let job = Head {
                            fabric,
                            members,
                            cast_group: &cast_group,
                            place,
                            node,
                            per_node: layout.per_node,
                            local,
                            tags,
                            op,
                        };
                        job.run(buf_ref, &units).await?
                    }
                    None => member(fabric, members, &cast_group, tags, buf_ref, &units, op).await?,
                };
                Ok::<_, CollectiveError>(units.into_iter().zip(results).collect::<Vec<_>>())
            });
        }
    }
    let done = join_branches(fabric, jobs).await;
    for job in done {
        for (range, result) in job? {
            buf.copy_from(range, &result)?;
        }
    }
    Ok(())
}

/// A rank that is not the head of these units: it contributes to every
/// node reduction and takes every result from the head's multicast.
async fn member<F: Fabric>(
    fabric: &F,
    members: &[Rank],
    cast_group: &[Rank],
    tags: Tags,
    buf: &Payload,
    units: &[Range<usize>],
    op: ReduceOp,
) -> Result<Vec<Payload>, CollectiveError> {
    let head = cast_group[0];
    let reductions = try_join_all(units.iter().map(|u| {
        fabric.reduce_to_in_network(members, head, tags.node, buf.extract(u.clone()), op)
    }));
    let casts = try_join_all(units.iter().map(|u| {
        let expect = Payload::phantom(buf.shape().dtype, u.len());
        fabric.multicast_in_network(cast_group, tags.cast, expect)
    }));
    let (reduced, results) = futures_util::future::join(reductions, casts).await;
    reduced?;
    Ok(results?)
}

/// The head of some units on its node: its place in the tree over nodes
/// (ranks of the tree are node indices).
struct Head<'a, F> {
    fabric: &'a F,
    members: &'a [Rank],
    cast_group: &'a [Rank],
    place: TreeNode,
    node: usize,
    per_node: usize,
    local: usize,
    tags: Tags,
    op: ReduceOp,
}

impl<F: Fabric> Head<'_, F> {
    /// The head of node `node` of these units (same local index).
    fn head_of(&self, node: usize) -> Rank {
        node * self.per_node + self.local
    }

    /// Up and down the tree at once; every unit's result.
    async fn run(
        &self,
        buf: &Payload,
        units: &[Range<usize>],
    ) -> Result<Vec<Payload>, CollectiveError> {
        let up = self.up(buf, units);
        match self.place.parent {
            None => up.await,
            Some(parent) => {
                let (u, d) = futures_util::join!(up, self.down(parent, buf, units));
                u?;
                d
            }
        }
    }

    /// Each unit's node sum plus the children's, sent to the parent; at
    /// the root, each result sent down (and returned).
    async fn up(
        &self,
        buf: &Payload,
        units: &[Range<usize>],
    ) -> Result<Vec<Payload>, CollectiveError> {
        let f = self.fabric;
        let dtype = buf.shape().dtype;
        let mut reductions: FuturesOrdered<_> = units
            .iter()
            .map(|u| {
                let own = buf.extract(u.clone());
                let head = self.head_of(self.node);
                f.reduce_to_in_network(self.members, head, self.tags.node, own, self.op)
            })
            .collect();
        let mut results = Vec::new();
        for u in units {
            let Some(sum) = reductions.next().await else {
                break;
            };
            let Some(mut acc) = sum? else {
                return Err(CollectiveError::Fabric(FabricError::Transport {
                    rank: f.rank(),
                    reason: "the node's in-network reduction brought its head no sum".into(),
                }));
            };
            for &child in &self.place.children {
                let incoming = f
                    .recv(
                        self.head_of(child),
                        self.tags.up,
                        Shape::new(dtype, u.len()),
                    )
                    .await?;
                acc.reduce_from_right(0..u.len(), &incoming, self.op)?;
                f.compute(Work::Reduce {
                    bytes: incoming.shape().bytes(),
                })
                .await?;
            }
            match self.place.parent {
                Some(parent) => f.send(self.head_of(parent), self.tags.up, acc).await?,
                None => {
                    if self.op == ReduceOp::Avg {
                        acc.divide(0..u.len(), f.world_size());
                    }
                    results.push(self.deliver(acc).await?);
                }
            }
        }
        Ok(results)
    }

    /// Each unit's result from the parent, sent on down.
    async fn down(
        &self,
        parent: usize,
        buf: &Payload,
        units: &[Range<usize>],
    ) -> Result<Vec<Payload>, CollectiveError> {
        let dtype = buf.shape().dtype;
        let mut results = Vec::with_capacity(units.len());
        for u in units {
            let result = self
                .fabric
                .recv(
                    self.head_of(parent),
                    self.tags.down,
                    Shape::new(dtype, u.len()),
                )
                .await?;
            results.push(self.deliver(result).await?);
        }
        Ok(results)
    }

    /// Sends a result to the children and multicasts it to the node.
    async fn deliver(&self, result: Payload) -> Result<Payload, CollectiveError> {
        for &child in &self.place.children {
            self.fabric
                .send(self.head_of(child), self.tags.down, result.clone())
                .await?;
        }
        Ok(self
            .fabric
            .multicast_in_network(self.cast_group, self.tags.cast, result)
            .await?)
    }
}

/// The closed-form time of one call on ideal links (see the module docs):
/// two nodes of `per_node` ranks, one channel, one unit per head taking
/// `unit_ps` on a link of latency `alpha_ps`; exact while
/// `3 alpha_ps >= (per_node - 3) unit_ps`.
pub fn ideal_time_ps(alpha_ps: u64, unit_ps: u64, per_node: u64) -> u64 {
    (per_node + 5) * unit_ps + 6 * alpha_ps
}

/// Node `v`'s partial sum in `tree`: its ranks in local order, then each
/// child's partial sum.
fn subtree_order(tree: &[TreeNode], v: usize, per_node: usize) -> Order {
    let own = Order::left_fold((0..per_node).map(|j| v * per_node + j));
    tree[v].children.iter().fold(own, |acc, &c| {
        Order::combine(acc, subtree_order(tree, c, per_node))
    })
}

/// Every rank's result: per channel block, the root's partial sum of its
/// tree (see the module docs).
pub fn reference(inputs: &[Payload], op: ReduceOp, params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let layout = Layout::new(n, count, inputs[0].shape().dtype.size_bytes(), params);
    let parts: Vec<(Range<usize>, Order)> = (0..layout.channels)
        .map(|k| {
            let tree = double_binary_tree(layout.nodes, (k % 2) as u8);
            let root = tree
                .iter()
                .position(|t| t.parent.is_none())
                .expect("a tree has a root");
            (
                layout.block(count, k),
                subtree_order(&tree, root, layout.per_node),
            )
        })
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// NCCL's NVLS-Tree allreduce, as the registry holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allreduce;

impl CollectiveAlgorithm for Allreduce {
    fn name(&self) -> &str {
        "nccl_nvls_tree"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { run(&fabric, buf, op, params).await })
    }

    fn reference(&self, inputs: &[Payload], op: ReduceOp, params: &Params) -> Option<Vec<Payload>> {
        Some(reference(inputs, op, params))
    }

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("nvls_tree")
    }

    fn runs_nccl_channels(&self) -> bool {
        true
    }

    fn reduces_in_network(&self) -> bool {
        true
    }
}
