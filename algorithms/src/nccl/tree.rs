//! `nccl_tree`: allreduce the way NCCL's tree algorithm runs it.
//!
//! The call uses `c = Params::channels` channels (0: every channel of the
//! plan), channel `k` on block `k` of the buffer cut into `c` blocks, all
//! at once. Channel `k` works on its tree ([`ChannelPlan::tree`](crate::nccl::ChannelPlan::tree)): on a
//! multi-node plan a chain through each node's GPUs hanging from one GPU
//! per node, the nodes joined by one of NCCL's two complementary binary
//! trees (`src/graph/trees.cc`, `src/graph/connect.cc`).
//!
//! The channel's block streams in pipeline units of the protocol
//! ([`Protocol::tree_pipeline`](crate::nccl::Protocol::tree_pipeline), or `Params::chunk_bytes` if smaller:
//! NCCL halves LL128's tree chunk for small calls, and the engine passes
//! NCCL's chunk size that way): each unit is reduced **up** the tree
//! (a rank receives the unit from each child, reduces it into its own and
//! sends the partial sum to its parent) and broadcast **down** it (the
//! root's result, forwarded by every rank to its children). A rank runs the
//! two directions at once, as NCCL's tree kernels do, so units go up and
//! come down concurrently. Each direction of each tree edge has NCCL's 8
//! slots: a sender waits for a zero-byte credit from its receiver before
//! reusing the slot of unit `u - 8`.
//!
//! Messages are framed with the call's protocol, [`NcclAlgorithm::Tree`]
//! and the channel; tags are [`channel_tag`]s with phase 0 (up data), 1
//! (up credits), 2 (down data) and 3 (down credits).
//!
//! [`ReduceOp::Avg`]: the root divides once before broadcasting.

use std::cell::RefCell;
use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::layout::block_range;
use crate::nccl::ring::channel_tag;
use crate::nccl::{Framed, Framing, NcclAlgorithm, TreeNode, channels_used, plan_of};
use crate::payload::{Payload, Shape};

/// Allreduce on every channel's tree, in place on `buf`; see the module
/// docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let plan = plan_of(fabric);
    let channels = channels_used(params.channels, &plan, buf.len());
    let ranges: Vec<Range<usize>> = (0..channels)
        .map(|c| block_range(buf.len(), channels, c))
        .collect();
    let runs = ranges.iter().enumerate().map(|(c, range)| {
        let node = &plan.tree(c)[fabric.rank()];
        run_channel(fabric, c, node, buf.extract(range.clone()), op, params)
    });
    let outputs = join_branches(fabric, runs).await;
    for (range, output) in ranges.into_iter().zip(outputs) {
        buf.copy_from(range, &output?)?;
    }
    Ok(())
}

/// The tags of one channel's four streams.
#[derive(Clone, Copy, Debug)]
struct Tags {
    up: Tag,
    up_credit: Tag,
    down: Tag,
    down_credit: Tag,
}

/// How one channel's block is cut: units and slots.
#[derive(Clone, Copy, Debug)]
struct Units {
    len: usize,
    elems: usize,
    count: usize,
    slots: usize,
}

impl Units {
    fn range(&self, u: usize) -> Range<usize> {
        let start = (u * self.elems).min(self.len);
        start..(start + self.elems).min(self.len)
    }
}

/// One channel: the block in, the block out.
async fn run_channel<F: Fabric>(
    fabric: &F,
    c: usize,
    node: &TreeNode,
    block: Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<Payload, CollectiveError> {
    let framing = Framing {
        protocol: params.protocol,
        algorithm: NcclAlgorithm::Tree,
        channel: c as u16,
    };
    let framed = Framed::new(fabric, framing);
    let tag = channel_tag(params.tag, c);
    let tags = Tags {
        up: tag.phase(0),
        up_credit: tag.phase(1),
        down: tag.phase(2),
        down_credit: tag.phase(3),
    };
    let (step_bytes, slots) = params.protocol.tree_pipeline();
    let unit_bytes = step_bytes.min(params.chunk_bytes.max(1));
    let elem = block.shape().dtype.size_bytes();
    let elems = usize::try_from(unit_bytes / elem as u64)
        .unwrap_or(usize::MAX)
        .max(1);
    let units = Units {
        len: block.len(),
        elems,
        count: block.len().div_ceil(elems).max(1),
        slots,
    };
    let n = fabric.world_size();
    let buf = RefCell::new(block);
    let up = up_stream(&framed, node, &buf, op, n, units, tags);
    match node.parent {
        None => up.await?,
        Some(parent) => {
            let down = down_stream(&framed, parent, &node.children, &buf, units, tags);
            let (u, d) = futures_util::join!(up, down);
            u?;
            d?;
        }
    }
    Ok(buf.into_inner())
}

/// Reduces every unit up the tree; at the root, also starts each unit's
/// way down.
async fn up_stream<F: Fabric>(
    fabric: &F,
    node: &TreeNode,
    buf: &RefCell<Payload>,
    op: ReduceOp,
    n: usize,
    units: Units,
    tags: Tags,
) -> Result<(), CollectiveError> {
    let dtype = buf.borrow().shape().dtype;
    for u in 0..units.count {
        let range = units.range(u);
        let mut acc = buf.borrow().extract(range.clone());
        for &child in &node.children {
            let incoming = fabric
                .recv(child, tags.up, Shape::new(dtype, range.len()))
                .await?;
            if u + units.slots < units.count {
                fabric
                    .send(child, tags.up_credit, Payload::phantom(dtype, 0))
                    .await?;
            }
            acc.reduce_from(0..range.len(), &incoming, op)?;
            fabric
                .compute(Work::Reduce {
                    bytes: incoming.shape().bytes(),
                })
                .await?;
        }
        match node.parent {
            Some(parent) => {
                if u >= units.slots {
                    fabric
                        .recv(parent, tags.up_credit, Shape::new(dtype, 0))
                        .await?;
                }
                fabric.send(parent, tags.up, acc).await?;
            }
            None => {
                if op == ReduceOp::Avg {
                    acc.divide(0..range.len(), n);
                }
                buf.borrow_mut().copy_from(range, &acc)?;
                send_down(fabric, &node.children, u, &acc, units, tags).await?;
            }
        }
    }
    Ok(())
}

/// Receives every unit's result from `parent` and passes it on.
async fn down_stream<F: Fabric>(
    fabric: &F,
    parent: Rank,
    children: &[Rank],
    buf: &RefCell<Payload>,
    units: Units,
    tags: Tags,
) -> Result<(), CollectiveError> {
    let dtype = buf.borrow().shape().dtype;
    for u in 0..units.count {
        let range = units.range(u);
        let result = fabric
            .recv(parent, tags.down, Shape::new(dtype, range.len()))
            .await?;
        if u + units.slots < units.count {
            fabric
                .send(parent, tags.down_credit, Payload::phantom(dtype, 0))
                .await?;
        }
        buf.borrow_mut().copy_from(range, &result)?;
        send_down(fabric, children, u, &result, units, tags).await?;
    }
    Ok(())
}

/// Sends unit `u`'s result to every child, each once its slot is free.
async fn send_down<F: Fabric>(
    fabric: &F,
    children: &[Rank],
    u: usize,
    result: &Payload,
    units: Units,
    tags: Tags,
) -> Result<(), CollectiveError> {
    let dtype = result.shape().dtype;
    for &child in children {
        if u >= units.slots {
            fabric
                .recv(child, tags.down_credit, Shape::new(dtype, 0))
                .await?;
        }
        fabric.send(child, tags.down, result.clone()).await?;
    }
    Ok(())
}

/// NCCL's tree allreduce on every channel, as the registry holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allreduce;

impl CollectiveAlgorithm for Allreduce {
    fn name(&self) -> &str {
        "nccl_tree"
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

    fn chunking(&self) -> Chunking {
        Chunking::Unchunked
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("tree")
    }

    fn runs_nccl_channels(&self) -> bool {
        true
    }
}
