//! `nccl_collnet_direct` and `nccl_collnet_chain`: allreduce the way
//! NCCL's CollNet algorithms run it, the reduction across nodes done by
//! the network's switches (InfiniBand SHARP, through
//! [`Fabric::reduce_in_network`]).
//!
//! Nodes are `Params::ranks_per_node` (`p`) consecutive ranks (all ranks
//! one node when it does not divide the world size). NCCL's side of SHARP is "send to peer nRanks,
//! receive from peer nRanks" (`src/graph/connect.cc:65,200` @b91894bd);
//! here that is one in-network reduction among one rank of every node.
//!
//! **Direct** (`src/device/all_reduce.h:253-386`): every GPU of a node is
//! a head (NCCL: up to 8, one per NIC, `src/graph/search.cc:1066`); head
//! `h` owns block `h` of the buffer cut into `p` blocks. Each GPU sends
//! block `h` to head `h` (the scatter); the head folds the node's copies
//! in local rank order, `((x0 ⊕ x1) ⊕ ...) ⊕ x_{p-1}`; the heads `h` of
//! all nodes reduce their partial sums in the switches (node order); the
//! head sends the result to its node's GPUs (the broadcast). A block goes
//! through the switches in units of `min(Params::chunk_bytes, 512 KiB)`
//! (NCCL's Simple step, `src/enqueue.cc:2142-2152`), all at once.
//!
//! **Chain** (`src/device/all_reduce.h:630-755`): the node's GPUs form a
//! chain in local order whose top, local rank 0, talks to the network
//! (`src/graph/connect.cc:64-66`). Units of the buffer go up the chain
//! (local rank `j` receives the partial sum from `j + 1`, combines it as
//! the left operand with its own and passes it to `j - 1`), so a node's
//! sum is `((x_{p-1} ⊕ x_{p-2}) ⊕ ...) ⊕ x0`; the tops of all nodes reduce
//! in the switches (node order) and the result comes back down the chain.
//!
//! In both, the node sums are combined in node order by the switch
//! (member order of the group of heads); [`ReduceOp::Avg`] divides by `N`
//! afterwards. Unlike NCCL, the in-node part and the switch part of one
//! block are not overlapped: a head sends its units to the switch once it
//! has summed them all, and passes results on once they are all back.

use futures_util::future::try_join_all;

use crate::algorithm::{Chunking, CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::try_join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::layout::block_range;
use crate::nccl::nvls::units;
use crate::nccl::ring::channel_tag;
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

/// NCCL's Simple step: the largest unit a head hands the switches, bytes
/// (4 MiB `NCCL_BUFFSIZE` over 8 `NCCL_STEPS`).
pub const COLLNET_UNIT_BYTES: u64 = 512 * 1024;

/// Which of NCCL's two CollNet algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollNetShape {
    /// Scatter to every head, reduce, SHARP, broadcast, gather.
    Direct,
    /// A chain per node whose top talks to SHARP.
    Chain,
}

/// The node layout of a call: ranks per node (all ranks form one node
/// when `Params::ranks_per_node` does not divide the world size, as in the
/// reference), this rank's node and local rank.
fn layout<F: Fabric>(fabric: &F, params: &Params) -> (usize, usize, usize) {
    let p = nodes_of(fabric.world_size(), params);
    let r = fabric.rank();
    (p, r / p, r % p)
}

/// Ranks per node among `n` (see [`layout`]).
fn nodes_of(n: usize, params: &Params) -> usize {
    let p = params.ranks_per_node;
    if p == 0 || !n.is_multiple_of(p) { n } else { p }
}

/// The units of `range`'s elements sent to the switches.
fn unit_ranges(
    range: std::ops::Range<usize>,
    elem: usize,
    params: &Params,
) -> Vec<std::ops::Range<usize>> {
    let unit_bytes = params.chunk_bytes.clamp(1, COLLNET_UNIT_BYTES);
    units(range.len(), elem, unit_bytes)
        .into_iter()
        .map(|u| range.start + u.start..range.start + u.end)
        .collect()
}

/// The heads `local` of every node, in node order: the switches' group.
fn heads(n: usize, p: usize, local: usize) -> Vec<Rank> {
    (0..n / p).map(|node| node * p + local).collect()
}

/// Sends each of `parts` of `data` to the switches among `group`, all at
/// once, and returns the results in order (divided for `Avg`).
async fn through_switches<F: Fabric>(
    fabric: &F,
    group: &[Rank],
    tag: Tag,
    data: &Payload,
    parts: &[std::ops::Range<usize>],
    op: ReduceOp,
) -> Result<Vec<Payload>, CollectiveError> {
    let calls = parts
        .iter()
        .map(|r| fabric.reduce_in_network(group, tag, data.extract(r.clone()), op));
    // The first refusal ends the call (try_join_all drops the others).
    let mut out = try_join_all(calls).await?;
    if op == ReduceOp::Avg {
        for result in &mut out {
            result.divide(0..result.len(), fabric.world_size());
        }
    }
    Ok(out)
}

/// Allreduce with CollNet Direct, in place on `buf`; see the module docs.
pub async fn run_direct<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let (p, node, local) = layout(fabric, params);
    let n = fabric.world_size();
    // Every group asked on every rank, so all refuse alike, before sending.
    for h in 0..p {
        fabric.can_reduce_in_network(&heads(n, p, h))?;
    }
    let dtype = buf.shape().dtype;
    let blocks = (0..p).map(|h| {
        let range = block_range(buf.len(), p, h);
        let tag = channel_tag(params.tag, h);
        let head = node * p + h;
        let mine = buf.extract(range.clone());
        async move {
            let parts = unit_ranges(0..range.len(), dtype.size_bytes(), params);
            if local != h {
                for part in &parts {
                    fabric
                        .send(head, tag.phase(0), mine.extract(part.clone()))
                        .await?;
                }
                let mut out = Payload::zeros(dtype, range.len(), mine.is_phantom());
                for part in &parts {
                    let got = fabric
                        .recv(head, tag.phase(2), Shape::new(dtype, part.len()))
                        .await?;
                    out.copy_from(part.clone(), &got)?;
                }
                return Ok::<_, CollectiveError>((range, out));
            }
            // The head: the node's copies folded in local rank order.
            let mut sum = Payload::zeros(dtype, range.len(), mine.is_phantom());
            for part in &parts {
                let mut acc: Option<Payload> = None;
                for j in 0..p {
                    let piece = if j == local {
                        mine.extract(part.clone())
                    } else {
                        fabric
                            .recv(node * p + j, tag.phase(0), Shape::new(dtype, part.len()))
                            .await?
                    };
                    acc = Some(match acc {
                        None => piece,
                        Some(mut a) => {
                            a.reduce_from_right(0..part.len(), &piece, op)?;
                            fabric
                                .compute(Work::Reduce {
                                    bytes: piece.shape().bytes(),
                                })
                                .await?;
                            a
                        }
                    });
                }
                let acc = acc.expect("a node has at least one rank");
                sum.copy_from(part.clone(), &acc)?;
            }
            let group = heads(n, p, h);
            let results = through_switches(fabric, &group, tag.phase(1), &sum, &parts, op).await?;
            let mut out = Payload::zeros(dtype, range.len(), mine.is_phantom());
            for (part, result) in parts.iter().zip(&results) {
                out.copy_from(part.clone(), result)?;
                for j in (0..p).filter(|&j| j != local) {
                    fabric
                        .send(node * p + j, tag.phase(2), result.clone())
                        .await?;
                }
            }
            Ok((range, out))
        }
    });
    for (range, out) in try_join_branches(fabric, blocks).await? {
        buf.copy_from(range, &out)?;
    }
    Ok(())
}

/// Allreduce with CollNet Chain, in place on `buf`; see the module docs.
pub async fn run_chain<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let (p, node, local) = layout(fabric, params);
    let n = fabric.world_size();
    fabric.can_reduce_in_network(&heads(n, p, 0))?;
    let dtype = buf.shape().dtype;
    let parts = unit_ranges(0..buf.len(), dtype.size_bytes(), params);
    let tag = params.tag;
    let below = (local + 1 < p).then(|| node * p + local + 1);
    let above = (local > 0).then(|| node * p + local - 1);
    // Up the chain: each unit's partial sum, incoming as the left operand.
    for part in &parts {
        if let Some(b) = below {
            let incoming = fabric
                .recv(b, tag.phase(0), Shape::new(dtype, part.len()))
                .await?;
            buf.reduce_from(part.clone(), &incoming, op)?;
            fabric
                .compute(Work::Reduce {
                    bytes: incoming.shape().bytes(),
                })
                .await?;
        }
        if let Some(a) = above {
            fabric
                .send(a, tag.phase(0), buf.extract(part.clone()))
                .await?;
        }
    }
    // The top reduces across nodes in the switches.
    if above.is_none() {
        let group = heads(n, p, 0);
        let results = through_switches(fabric, &group, tag.phase(1), buf, &parts, op).await?;
        for (part, result) in parts.iter().zip(&results) {
            buf.copy_from(part.clone(), result)?;
        }
    }
    // Down the chain.
    for part in &parts {
        if let Some(a) = above {
            let result = fabric
                .recv(a, tag.phase(2), Shape::new(dtype, part.len()))
                .await?;
            buf.copy_from(part.clone(), &result)?;
        }
        if let Some(b) = below {
            fabric
                .send(b, tag.phase(2), buf.extract(part.clone()))
                .await?;
        }
    }
    Ok(())
}

/// Every rank's result: the node sums (local order for Direct, reversed
/// for Chain) combined in node order.
pub fn reference(
    inputs: &[Payload],
    op: ReduceOp,
    params: &Params,
    shape: CollNetShape,
) -> Vec<Payload> {
    let n = inputs.len();
    let p = nodes_of(n, params);
    let node = |nd: usize| -> Order {
        let ranks: Vec<usize> = match shape {
            CollNetShape::Direct => (0..p).map(|j| nd * p + j).collect(),
            CollNetShape::Chain => (0..p).rev().map(|j| nd * p + j).collect(),
        };
        Order::left_fold(ranks)
    };
    let order = (1..n / p).fold(node(0), |acc, nd| Order::combine(acc, node(nd)));
    let count = inputs[0].len();
    vec![fold_reference(inputs, op, &[(0..count, order)]); n]
}

macro_rules! collnet_algorithm {
    ($ty:ident, $name:literal, $nccl:literal, $shape:expr, $run:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $ty;

        impl CollectiveAlgorithm for $ty {
            fn name(&self) -> &str {
                $name
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
                Box::pin(async move { $run(&fabric, buf, op, params).await })
            }

            fn reference(
                &self,
                inputs: &[Payload],
                op: ReduceOp,
                params: &Params,
            ) -> Option<Vec<Payload>> {
                Some(reference(inputs, op, params, $shape))
            }

            fn chunking(&self) -> Chunking {
                Chunking::Buffer
            }

            fn nccl_algorithm(&self) -> Option<&str> {
                Some($nccl)
            }

            fn runs_nccl_channels(&self) -> bool {
                true
            }

            fn reduces_in_network(&self) -> bool {
                true
            }
        }
    };
}

collnet_algorithm!(
    Direct,
    "nccl_collnet_direct",
    "collnet_direct",
    CollNetShape::Direct,
    run_direct,
    "NCCL's CollNet Direct allreduce, as the registry holds it."
);
collnet_algorithm!(
    Chain,
    "nccl_collnet_chain",
    "collnet_chain",
    CollNetShape::Chain,
    run_chain,
    "NCCL's CollNet Chain allreduce, as the registry holds it."
);
