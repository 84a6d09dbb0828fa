//! The shapes of the two trees (NCCL's `ncclGetBtree` and
//! `ncclGetDtree`, adapted for odd world sizes as the parent module's docs
//! say): each rank's node, the roots, the heights and the order in which a
//! subtree is folded.

use crate::fabric::Rank;
use crate::reference::Order;

/// `S(v)`: the order in which the subtree of `v` in tree `tree` is folded.
pub(super) fn subtree_order(n: usize, tree: u8, v: Rank) -> Order {
    let node = node(n, tree, v);
    let mut order = Order::Rank(v);
    if let Some(left) = node.left {
        order = Order::combine(subtree_order(n, tree, left), order);
    }
    if let Some(right) = node.right {
        order = Order::combine(order, subtree_order(n, tree, right));
    }
    order
}

/// One rank's place in one tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) parent: Option<Rank>,
    pub(crate) left: Option<Rank>,
    pub(crate) right: Option<Rank>,
}

impl Node {
    /// The children, left first.
    pub(crate) fn children(self) -> impl Iterator<Item = Rank> {
        self.left.into_iter().chain(self.right)
    }

    /// The node with every rank renamed by `f`.
    fn map(self, f: impl Fn(usize) -> usize) -> Node {
        Node {
            parent: self.parent.map(&f),
            left: self.left.map(&f),
            right: self.right.map(&f),
        }
    }
}

/// NCCL's `ncclGetBtree`: node `i` of the in-order binary tree on `0..m`
/// rooted at 0.
pub(super) fn btree(m: usize, i: usize) -> Node {
    if i == 0 {
        let right = (m > 1).then(|| m.next_power_of_two() / 2);
        return Node {
            right,
            ..Node::default()
        };
    }
    let bit = 1 << i.trailing_zeros();
    let up = (i ^ bit) | (bit << 1);
    let parent = if up < m { up } else { i ^ bit };
    let mut low = bit / 2;
    let left = (low > 0).then(|| i - low);
    while low > 0 && i + low >= m {
        low /= 2;
    }
    let right = (low > 0).then(|| i + low);
    Node {
        parent: Some(parent),
        left,
        right,
    }
}

/// Rank `rank`'s node in tree `tree` of a world of `n >= 2` ranks.
pub(crate) fn node(n: usize, tree: u8, rank: Rank) -> Node {
    match (tree, n % 2) {
        (0, _) => btree(n, rank),
        (_, 0) => btree(n, n - 1 - rank).map(|i| n - 1 - i),
        _ if rank == 0 => Node {
            parent: Some(1),
            ..Node::default()
        },
        _ => {
            let mut node = btree(n - 1, rank - 1).map(|i| i + 1);
            if rank == 1 {
                node.left = Some(0);
            }
            node
        }
    }
}

/// The root of tree `tree`.
pub(super) fn root(n: usize, tree: u8) -> Rank {
    if tree == 0 || n % 2 == 1 {
        tree as Rank
    } else {
        n - 1
    }
}

/// The heights of both trees on `n` ranks. Every rank of every call needs
/// them and walking a tree takes `O(N)`, so they are computed once per
/// world size and thread and kept (a pure function of `n`: the cache
/// cannot change any result).
pub(super) fn tree_heights(n: usize) -> [usize; 2] {
    thread_local! {
        static HEIGHTS: std::cell::RefCell<std::collections::BTreeMap<usize, [usize; 2]>> =
            const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
    }
    HEIGHTS.with(|cache| {
        *cache
            .borrow_mut()
            .entry(n)
            .or_insert_with(|| [0, 1].map(|t| height(n, t, root(n, t))))
    })
}

/// The height of `v`'s subtree in tree `tree` (0 for a leaf).
pub(super) fn height(n: usize, tree: u8, v: Rank) -> usize {
    node(n, tree, v)
        .children()
        .map(|c| 1 + height(n, tree, c))
        .max()
        .unwrap_or(0)
}
