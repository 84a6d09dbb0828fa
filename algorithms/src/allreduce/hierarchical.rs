//! Hierarchical allreduce: reduce-scatter inside each node, allreduce
//! across nodes, allgather inside each node.
//!
//! # Nodes
//! Consecutive ranks share a node: with `L = min(ranks_per_node, N)`
//! (`ranks_per_node = 0` counts as 1), rank `r` is local rank `r mod L` of
//! node `⌊r / L⌋`, and there are `M = N / L` nodes.
//!
//! **When `L` does not divide `N`** the last node is smaller, so its
//! in-node blocks would not line up with the other nodes' and the
//! cross-node groups would not exist for every local rank. The algorithm
//! then falls back to the flat ring allreduce over all `N` ranks
//! ([`crate::allreduce::ring`]): same result contract, its reduction
//! order and its cost. A world that fits in one node (`N ≤
//! ranks_per_node`) is one node of `N` ranks, not a fallback.
//!
//! # Schedule
//! 1. Ring reduce-scatter ([`crate::reduce_scatter::ring`]) among the `L`
//!    ranks of each node over the whole buffer: local rank `l` ends with
//!    the node's partial reduction of in-node block `l`
//!    (`block_range(count, L, l)`).
//! 2. Ring allreduce ([`crate::allreduce::ring`], chunked and pipelined by
//!    `chunk_bytes` and `slots`) of that block among the `M` ranks with
//!    local rank `l`, one per node.
//! 3. Ring allgather ([`crate::allgather::ring`]) among the ranks of each
//!    node.
//!
//! Each phase runs on a [`Group`] with its own tag
//! (`params.tag.phase(0..=2)`), so their messages never match by mistake.
//!
//! # Reduction order (floating point)
//! An element of in-node block `l` at offset `e` within it, where `e`
//! falls in segment `j` of the ring allreduce (`block_range` of the block
//! over `M`), is
//!
//! ```text
//! ((P_j ⊕ P_{j+1}) ⊕ ...) ⊕ P_{j+M-1}   (nodes taken cyclically from j)
//! P_k = ((x_{kL+l+1} ⊕ x_{kL+l+2}) ⊕ ...) ⊕ x_{kL+l}   (local ranks cyclically from l+1)
//! ```
//!
//! For [`ReduceOp::Avg`] phases 1 and 2 compute the sum and every rank
//! divides the complete sum of its block by `N` once, right after phase 2
//! and before the allgather distributes it. The division is deterministic,
//! so the `M` ranks holding one block divide identical sums to identical
//! results (dividing by `L` and then `M` would round twice).
//!
//! # Cost (ideal links)
//! The phases run back to back and, when `N` divides the count evenly at
//! each level, every rank finishes each phase at the same moment with its
//! links idle, so
//!
//! ```text
//! T = RS_ring(L, n) + AR_ring(M, n/L) + AG_ring(L, n)
//!   = (L-1)(α + n/(L·B) + n·γ/L) + AR_ring(M, n/L) + (L-1)(α + n/(L·B))
//! ```
//!
//! with `AR_ring` the ring allreduce's closed form. The fallback costs
//! `AR_ring(N, n)`.

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::allgather::ring as allgather_ring;
use crate::allreduce::ring as allreduce_ring;
use crate::collective::Collective;
use crate::collective::Params;
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::group::Group;
use crate::layout::block_range;
use crate::payload::Payload;
use crate::reduce_scatter::ring as reduce_scatter_ring;
use crate::reference::{Order, fold_reference};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "L = ranks/node, M = N/L: (L-1)(α + n/(L·B) + n·γ/L) + ring_allreduce(M, n/L) + (L-1)(α + n/(L·B)); L ∤ N: ring_allreduce(N, n)";

/// Modelled time of one call in picoseconds under ideal links: the sum of
/// the three phases' costs, or the ring allreduce's when falling back (see
/// the module docs).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let Some(nodes) = Nodes::new(n, params.ranks_per_node) else {
        return allreduce_ring::cost_ps(model, n, count, dtype, params);
    };
    let l = nodes.size;
    let block = block_range(count, l, 0).len();
    reduce_scatter_ring::cost_ps(model, l, count, dtype, params)
        + allreduce_ring::cost_ps(model, nodes.count, block, dtype, params)
        + allgather_ring::cost_ps(model, l, count, dtype, params)
}

/// Every rank's buffer after the call: the reduction order of the module
/// docs (the ring allreduce's when falling back).
pub fn reference(inputs: &[Payload], op: ReduceOp, params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let Some(nodes) = Nodes::new(n, params.ranks_per_node) else {
        return allreduce_ring::reference(inputs, op, params);
    };
    let count = inputs[0].len();
    let mut parts = Vec::with_capacity(n);
    for l in 0..nodes.size {
        let block = block_range(count, nodes.size, l);
        for j in 0..nodes.count {
            let segment = block_range(block.len(), nodes.count, j);
            let range = block.start + segment.start..block.start + segment.end;
            parts.push((range, nodes.order(l, j)));
        }
    }
    vec![fold_reference(inputs, op, &parts); n]
}

/// Hierarchical allreduce, in place: on return every rank's `buf` holds
/// the reduction of all ranks' inputs. All ranks must call it with buffers
/// of the same shape, the same `op` and the same parameters. Works for any
/// world size and count; see the module docs for the node layout and the
/// fallback when nodes are uneven.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let count = buf.len();
    if n == 1 || count == 0 {
        return Ok(());
    }
    let Some(nodes) = Nodes::new(n, params.ranks_per_node) else {
        return allreduce_ring::run(fabric, buf, op, params).await;
    };
    let r = fabric.rank();
    let local = r % nodes.size;
    let intra = Group::new(fabric, nodes.node_members(r)).expect("a rank is in its node");
    let inter = Group::new(fabric, nodes.peers_of(local)).expect("a rank is among its peers");
    let phase = |k: u8| Params {
        tag: params.tag.phase(k),
        ..*params
    };
    // An average is a sum until it is complete, so it is divided once.
    let sum_op = if op == ReduceOp::Avg {
        ReduceOp::Sum
    } else {
        op
    };
    reduce_scatter_ring::run(&intra, buf, sum_op, &phase(0)).await?;
    let mine = block_range(count, nodes.size, local);
    let mut block = buf.extract(mine.clone());
    allreduce_ring::run(&inter, &mut block, sum_op, &phase(1)).await?;
    if op == ReduceOp::Avg {
        block.divide(0..mine.len(), n);
    }
    buf.copy_from(mine, &block)?;
    allgather_ring::run(&intra, buf, op, &phase(2)).await
}

/// How the world splits into equal nodes of consecutive ranks.
#[derive(Clone, Copy, Debug)]
struct Nodes {
    /// Ranks per node, `L`.
    size: usize,
    /// Number of nodes, `M`.
    count: usize,
}

impl Nodes {
    /// The split of `n` ranks into nodes of `ranks_per_node`, or `None`
    /// when the last node would be smaller (the fallback case).
    fn new(n: usize, ranks_per_node: usize) -> Option<Nodes> {
        let size = ranks_per_node.clamp(1, n);
        n.is_multiple_of(size).then_some(Nodes {
            size,
            count: n / size,
        })
    }

    /// The ranks of `r`'s node, in local-rank order.
    fn node_members(&self, r: Rank) -> Vec<Rank> {
        let first = r / self.size * self.size;
        (first..first + self.size).collect()
    }

    /// The ranks with local rank `local`, one per node, in node order.
    fn peers_of(&self, local: usize) -> Vec<Rank> {
        (0..self.count).map(|k| k * self.size + local).collect()
    }

    /// The order of an element of in-node block `l` in ring segment `j`.
    fn order(&self, l: usize, j: usize) -> Order {
        let mut nodes = (0..self.count).map(|s| self.partial(l, (j + s) % self.count));
        let first = nodes.next().expect("at least one node");
        nodes.fold(first, Order::combine)
    }

    /// Node `k`'s reduce-scatter result for in-node block `l`.
    fn partial(&self, l: usize, k: usize) -> Order {
        let base = k * self.size;
        Order::left_fold((1..=self.size).map(|s| base + (l + s) % self.size))
    }
}

/// The hierarchical allreduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Hierarchical;

impl CollectiveAlgorithm for Hierarchical {
    fn name(&self) -> &str {
        "hierarchical"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Block
    }

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::WholeNodes
    }
}
