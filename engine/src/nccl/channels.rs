//! The communicator's channels at run time: how many (`ncclTopoPostset`)
//! and each channel's tree over the nodes' chains (NCCL's double binary
//! tree); [`NcclSystem::build`](super::NcclSystem::build) takes the rings
//! from the search's orders.

use algorithms::Rank;
use algorithms::nccl::TreeNode;
use algorithms::nccl::plan::binary_tree_node;

use super::{Constants, Graph, Machine, NcclConfig};

/// `ncclTopoPostset`'s channel count: the graph's channels doubled, again
/// on multi-node Hopper or newer with fast rings below 16 (`connect.cc:474-476`
/// @b91894bd), capped at the version's `MAXCHANNELS`, then
/// `NCCL_MAX_NCHANNELS` and `NCCL_MIN_NCHANNELS` (`src/graph/connect.cc:443-472` @ab2b89c4).
pub(super) fn runtime_channels(
    graph: &Graph,
    machine: &Machine,
    config: &NcclConfig,
    constants: &Constants,
) -> usize {
    let max = constants.max_channels;
    let mut n = (2 * graph.channels).min(max);
    if machine.compute_capability >= 90
        && machine.node_count() > 1
        && graph.bw_intra > 45.0
        && n < 16
    {
        n = (2 * n).min(max);
    }
    if let Some(m) = config.max_channels {
        n = n.min(m.max(1));
    }
    if let Some(m) = config.min_channels {
        n = n.max(m.min(max));
    }
    n.max(1)
}

/// The tree of one channel: each node's chain in `order` (entry first),
/// the nodes joined by tree `t` of the double binary tree (NCCL's
/// `BALANCED_TREE`: a node's first rank talks to its parent node and its
/// right child node, its second rank to its left child node; with one rank
/// per node, the `TREE` pattern, the first does everything).
pub(super) fn tree_of(order: &[Vec<Rank>], t: u8, one_per_node: bool, n: usize) -> Vec<TreeNode> {
    let mut tree = vec![TreeNode::default(); n];
    for chain in order {
        for w in chain.windows(2) {
            tree[w[1]].parent = Some(w[0]);
            tree[w[0]].children.push(w[1]);
        }
    }
    let nodes = order.len();
    if nodes < 2 {
        return tree;
    }
    let head = |k: usize| order[k][0];
    let left_port = |k: usize| {
        if one_per_node || order[k].len() < 2 {
            order[k][0]
        } else {
            order[k][1]
        }
    };
    for k in 0..nodes {
        let (_, left, right) = binary_tree_node(nodes, t, k);
        if let Some(d0) = left {
            tree[head(d0)].parent = Some(left_port(k));
            tree[left_port(k)].children.push(head(d0));
        }
        if let Some(d1) = right {
            tree[head(d1)].parent = Some(head(k));
            tree[head(k)].children.push(head(d1));
        }
    }
    tree
}
