//! [`ChannelPlan`]: the channels of an NCCL communicator, each a ring and
//! a tree over the ranks.
//!
//! NCCL runs a collective on several channels at once, each on its own
//! slice of the buffer and (on a real machine) its own links and NIC. A
//! back-end that knows its hardware builds the plan from it (the
//! simulator follows NCCL's graph search); any other back-end gets
//! [`ChannelPlan::rank_order`], one ring in rank order and NCCL's double
//! binary tree with every rank its own node.

use crate::allreduce::tree;
use crate::fabric::Rank;

/// Rank `r`'s place in one channel's tree: its parent (`None` at the root)
/// and its children, up to three (an intra-node chain child and two
/// inter-node children, NCCL's `NCCL_MAX_TREE_ARITY`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeNode {
    /// Where reductions go up to; `None` at the root.
    pub parent: Option<Rank>,
    /// Where results go down to.
    pub children: Vec<Rank>,
}

/// The channels of one communicator: for channel `c`, the ring order
/// `rings[c]` (rank `rings[c][i]` sends to `rings[c][i + 1]`, the last to
/// the first) and the tree `trees[c]` (indexed by rank).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelPlan {
    /// Each channel's ring, a permutation of `0..world_size`.
    pub rings: Vec<Vec<Rank>>,
    /// Each channel's tree: `trees[c][r]` is rank `r`'s node.
    pub trees: Vec<Vec<TreeNode>>,
}

impl ChannelPlan {
    /// The plan of a fabric that knows nothing of its hardware: two
    /// channels, each the ring `0, 1, ..., N-1`, with NCCL's two
    /// complementary binary trees over the ranks (`ncclGetDtree`, see
    /// [`crate::allreduce::tree`]).
    pub fn rank_order(world_size: usize) -> ChannelPlan {
        let ring: Vec<Rank> = (0..world_size).collect();
        ChannelPlan {
            rings: vec![ring.clone(), ring],
            trees: (0..2).map(|t| double_binary_tree(world_size, t)).collect(),
        }
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.rings.len()
    }

    /// Channel `c`'s ring (channels repeat when `c` is past the last).
    pub fn ring(&self, c: usize) -> &[Rank] {
        &self.rings[c % self.rings.len()]
    }

    /// Channel `c`'s tree (channels repeat when `c` is past the last).
    pub fn tree(&self, c: usize) -> &[TreeNode] {
        &self.trees[c % self.trees.len()]
    }

    /// Checks that the plan fits a world of `world_size` ranks: at least
    /// one channel, every ring a permutation, every tree spanning with
    /// consistent parents and children and one root.
    pub fn check(&self, world_size: usize) -> Result<(), String> {
        if self.rings.is_empty() || self.trees.is_empty() {
            return Err("a channel plan needs at least one ring and one tree".into());
        }
        for (c, ring) in self.rings.iter().enumerate() {
            let mut seen = vec![false; world_size];
            for &r in ring {
                if r >= world_size || std::mem::replace(&mut seen[r], true) {
                    return Err(format!("ring {c} is not a permutation of 0..{world_size}"));
                }
            }
            if ring.len() != world_size {
                return Err(format!(
                    "ring {c} has {} ranks, not {world_size}",
                    ring.len()
                ));
            }
        }
        for (c, tree) in self.trees.iter().enumerate() {
            if tree.len() != world_size {
                return Err(format!(
                    "tree {c} has {} nodes, not {world_size}",
                    tree.len()
                ));
            }
            let roots = tree.iter().filter(|n| n.parent.is_none()).count();
            if roots != 1 {
                return Err(format!("tree {c} has {roots} roots"));
            }
            for (r, node) in tree.iter().enumerate() {
                for &child in &node.children {
                    if tree.get(child).and_then(|n| n.parent) != Some(r) {
                        return Err(format!(
                            "tree {c}: rank {child} is a child of {r} but not its parent's child"
                        ));
                    }
                }
                if let Some(p) = node.parent
                    && !tree.get(p).is_some_and(|n| n.children.contains(&r))
                {
                    return Err(format!("tree {c}: rank {r}'s parent {p} does not list it"));
                }
            }
        }
        Ok(())
    }
}

/// Rank `r`'s place in tree `t` (0 or 1) of NCCL's double binary tree
/// over `n >= 2` ranks (`ncclGetDtree`): its parent, its left child (NCCL's
/// `d0`) and its right child (`d1`).
pub fn binary_tree_node(n: usize, t: u8, r: Rank) -> (Option<Rank>, Option<Rank>, Option<Rank>) {
    let node = tree::node(n, t, r);
    (node.parent, node.left, node.right)
}

/// Tree `t` (0 or 1) of NCCL's double binary tree over `n` ranks, each
/// node listed by rank (one node, the root, for `n = 1`).
pub fn double_binary_tree(n: usize, t: u8) -> Vec<TreeNode> {
    if n <= 1 {
        return vec![TreeNode::default(); n];
    }
    (0..n)
        .map(|r| {
            let node = tree::node(n, t, r);
            TreeNode {
                parent: node.parent,
                children: node.children().collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_order_plans_are_valid_for_every_small_world() {
        for n in 1..=17 {
            let plan = ChannelPlan::rank_order(n);
            plan.check(n).unwrap_or_else(|e| panic!("n = {n}: {e}"));
            assert_eq!(plan.channels(), 2);
            assert_eq!(plan.ring(5), plan.ring(1));
        }
    }

    #[test]
    fn check_refuses_broken_plans() {
        let mut plan = ChannelPlan::rank_order(4);
        plan.rings[0] = vec![0, 1, 1, 3];
        assert!(plan.check(4).unwrap_err().contains("permutation"));
        let mut plan = ChannelPlan::rank_order(4);
        plan.trees[1][0].children.push(3);
        assert!(plan.check(4).is_err());
    }
}
