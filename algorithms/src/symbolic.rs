//! Symbolic elements: a buffer element that records *how* it was computed.
//!
//! A [`Sym`] names a node of a reduction tree: a [`Node::Leaf`] (one input
//! element), a [`Node::Combine`] of two earlier symbols under a
//! [`ReduceOp`], a [`Node::Divide`] (the last step of an average) or
//! [`Node::Zero`]. Running a collective on buffers of symbols
//! ([`crate::DType::Sym`]) therefore yields, for every output element, the
//! exact tree of which inputs were combined and in which order, so that a
//! checker can compare an algorithm's result with its documented order
//! without relying on particular floating-point values.
//!
//! # Interning
//! Symbols are hash-consed in a **per-thread** interner: building the same
//! node twice on one thread gives the same id, so two trees are equal
//! exactly when their ids are. Ids mean nothing on another thread (or in
//! another process): compare, describe or combine a symbol only on the
//! thread that made it. Id 0 is always [`Node::Zero`], so a zeroed buffer
//! ([`Sym::ZERO`], what [`crate::Payload::zeros`] makes) holds zero symbols.
//! Ids are handed out in the order nodes are first built, so they depend
//! on the thread's history, never on hashing.
//!
//! # What is normalised
//! IEEE `+` and `*` are commutative bit for bit (apart from which NaN's
//! payload survives when both operands are NaN, which this model ignores),
//! so a [`ReduceOp::Sum`] or [`ReduceOp::Prod`] node keeps its operands in
//! id order, the smaller id on the left: `a + b` and `b + a` are one symbol.
//! [`ReduceOp::Min`] and [`ReduceOp::Max`] keep their operands' order,
//! because `a < b ? a : b` is not commutative bit for bit on signed zeros.
//! [`ReduceOp::Avg`] combines as a sum (like every element type) and is
//! stored as [`ReduceOp::Sum`]. Nothing is re-associated: `(a + b) + c` and
//! `a + (b + c)` are different symbols, as they may be different floats.
//!
//! # Memory
//! The interner only grows: every distinct node built on a thread stays
//! until the thread exits (about 40 bytes a node, counted by
//! [`interned`]). A thread can hold at most `2^32` nodes.
//!
//! # Deep trees
//! Nodes live in a flat table, so nothing recurses over a tree: [`leaves`],
//! [`ops`] and [`describe`] walk with explicit stacks, and a chain of
//! hundreds of thousands of combines is safe.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::dtype::{DType, Element, ReduceOp};

/// A symbolic element: the id of a node in this thread's interner (see the
/// module docs). Ids compare only within the thread that made them.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Debug,
    Default,
    bytemuck::Pod,
    bytemuck::Zeroable,
)]
#[repr(transparent)]
pub struct Sym(pub u32);

impl Sym {
    /// The zero symbol, [`Node::Zero`]: id 0 on every thread.
    pub const ZERO: Sym = Sym(0);
}

/// One node of a reduction tree, as [`node`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// The zero symbol (id 0): what a zeroed buffer holds.
    Zero,
    /// An input element, named by the caller's id.
    Leaf(u64),
    /// `left ⊕ right` under `op` (never [`ReduceOp::Avg`], stored as
    /// [`ReduceOp::Sum`]; for sum and product, `left <= right`).
    Combine {
        /// The operator.
        op: ReduceOp,
        /// The left operand.
        left: Sym,
        /// The right operand.
        right: Sym,
    },
    /// `value / ranks`, the final step of an average.
    Divide {
        /// The dividend.
        value: Sym,
        /// The divisor: the number of ranks.
        ranks: usize,
    },
}

/// The per-thread table of nodes: `nodes[id]` and its inverse.
struct Interner {
    nodes: Vec<Node>,
    ids: HashMap<Node, Sym>,
}

impl Interner {
    fn new() -> Interner {
        let mut interner = Interner {
            nodes: Vec::new(),
            ids: HashMap::new(),
        };
        let zero = interner.intern(Node::Zero);
        assert_eq!(zero, Sym::ZERO, "the zero symbol is the first node");
        interner
    }

    fn intern(&mut self, node: Node) -> Sym {
        if let Some(&id) = self.ids.get(&node) {
            return id;
        }
        let id = Sym(u32::try_from(self.nodes.len()).expect("at most 2^32 symbols on one thread"));
        self.nodes.push(node);
        self.ids.insert(node, id);
        id
    }

    /// The node `s` names. Panics for an id this thread never made.
    fn get(&self, s: Sym) -> Node {
        match self.nodes.get(s.0 as usize) {
            Some(&node) => node,
            None => panic!(
                "{s:?} was not made on this thread ({} symbols here): symbols compare only \
                 within the thread that interned them",
                self.nodes.len()
            ),
        }
    }
}

thread_local! {
    static INTERNER: RefCell<Interner> = RefCell::new(Interner::new());
}

fn with_interner<R>(f: impl FnOnce(&mut Interner) -> R) -> R {
    INTERNER.with(|i| f(&mut i.borrow_mut()))
}

/// The symbol of input element `id` (the same symbol for the same id on
/// one thread).
pub fn leaf(id: u64) -> Sym {
    with_interner(|i| i.intern(Node::Leaf(id)))
}

/// The symbol of `a ⊕ b` under `op`, `a` the left operand (normalised as the
/// module docs say: [`ReduceOp::Avg`] becomes [`ReduceOp::Sum`], and sum
/// and product put the smaller id on the left).
///
/// # Panics
/// If `a` or `b` was not made on this thread.
pub fn combine(op: ReduceOp, a: Sym, b: Sym) -> Sym {
    let op = if op == ReduceOp::Avg {
        ReduceOp::Sum
    } else {
        op
    };
    let (left, right) = match op {
        ReduceOp::Sum | ReduceOp::Prod if b < a => (b, a),
        _ => (a, b),
    };
    with_interner(|i| {
        i.get(left);
        i.get(right);
        i.intern(Node::Combine { op, left, right })
    })
}

/// The symbol of `value / ranks`.
///
/// # Panics
/// If `value` was not made on this thread.
pub fn divide(value: Sym, ranks: usize) -> Sym {
    with_interner(|i| {
        i.get(value);
        i.intern(Node::Divide { value, ranks })
    })
}

/// The node `s` names.
///
/// # Panics
/// If `s` was not made on this thread.
pub fn node(s: Sym) -> Node {
    with_interner(|i| i.get(s))
}

/// The number of nodes this thread's interner holds (zero included); it
/// only grows.
pub fn interned() -> usize {
    with_interner(|i| i.nodes.len())
}

/// The leaf ids under `s`, sorted, each as many times as it occurs in the
/// tree (a shared subtree counts once per occurrence); [`Node::Zero`]
/// contributes nothing.
///
/// # Panics
/// If `s` was not made on this thread.
pub fn leaves(s: Sym) -> Vec<u64> {
    with_interner(|i| {
        let mut out = Vec::new();
        let mut stack = vec![s];
        while let Some(s) = stack.pop() {
            match i.get(s) {
                Node::Zero => {}
                Node::Leaf(id) => out.push(id),
                Node::Combine { left, right, .. } => {
                    stack.push(right);
                    stack.push(left);
                }
                Node::Divide { value, .. } => stack.push(value),
            }
        }
        out.sort_unstable();
        out
    })
}

/// The distinct operators of the [`Node::Combine`] nodes under `s`, in
/// [`ReduceOp`] order (never [`ReduceOp::Avg`]: an average shows as
/// [`ReduceOp::Sum`] under a [`Node::Divide`], which [`node`] reveals).
///
/// # Panics
/// If `s` was not made on this thread.
pub fn ops(s: Sym) -> Vec<ReduceOp> {
    with_interner(|i| {
        let mut found = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![s];
        while let Some(s) = stack.pop() {
            if !seen.insert(s) {
                continue;
            }
            match i.get(s) {
                Node::Zero | Node::Leaf(_) => {}
                Node::Combine { op, left, right } => {
                    if !found.contains(&op) {
                        found.push(op);
                    }
                    stack.push(right);
                    stack.push(left);
                }
                Node::Divide { value, .. } => stack.push(value),
            }
        }
        found.sort_unstable();
        found
    })
}

/// A piece of [`describe`]'s output still to write.
enum Piece {
    Tree(Sym),
    Text(&'static str),
    Owned(String),
}

/// `s` as an expression, naming leaves with `leaf_name`: `0` for zero,
/// `(a + b)` and `(a * b)` for sums and products (operands in id order),
/// `min(a, b)` and `max(a, b)`, and `(a / 4)` for a division, for example
/// `((r0[1] + r1[1]) + r2[1])`. Shared subtrees are written out each time
/// they occur. `leaf_name` may itself build symbols.
///
/// # Panics
/// If `s` was not made on this thread.
pub fn describe(s: Sym, leaf_name: &dyn Fn(u64) -> String) -> String {
    let mut out = String::new();
    let mut todo = vec![Piece::Tree(s)];
    while let Some(piece) = todo.pop() {
        let s = match piece {
            Piece::Text(t) => {
                out.push_str(t);
                continue;
            }
            Piece::Owned(t) => {
                out.push_str(&t);
                continue;
            }
            Piece::Tree(s) => s,
        };
        // The interner is not borrowed while `leaf_name` runs.
        match node(s) {
            Node::Zero => out.push('0'),
            Node::Leaf(id) => out.push_str(&leaf_name(id)),
            Node::Combine { op, left, right } => {
                let (open, mid) = match op {
                    ReduceOp::Sum | ReduceOp::Avg => ("(", " + "),
                    ReduceOp::Prod => ("(", " * "),
                    ReduceOp::Min => ("min(", ", "),
                    ReduceOp::Max => ("max(", ", "),
                };
                out.push_str(open);
                todo.extend([
                    Piece::Text(")"),
                    Piece::Tree(right),
                    Piece::Text(mid),
                    Piece::Tree(left),
                ]);
            }
            Node::Divide { value, ranks } => {
                out.push('(');
                todo.extend([Piece::Owned(format!(" / {ranks})")), Piece::Tree(value)]);
            }
        }
    }
    out
}

impl Element for Sym {
    const DTYPE: DType = DType::Sym;

    /// Interns `a ⊕ b` (see [`combine`]).
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
        combine(op, a, b)
    }

    /// Interns `self / ranks` (see [`divide`]).
    fn divide(self, ranks: usize) -> Self {
        divide(self, ranks)
    }

    /// Id equality: on one thread, the same tree.
    fn same_bits(self, other: Self) -> bool {
        self == other
    }

    /// The leaf `v as u64`.
    fn from_i64(v: i64) -> Self {
        leaf(v as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(id: u64) -> String {
        format!("x{id}")
    }

    #[test]
    fn zero_is_id_zero_and_equal_trees_are_equal_ids() {
        assert_eq!(node(Sym::ZERO), Node::Zero);
        assert_eq!(node(Sym(0)), Node::Zero);
        // Ids no other test uses, so the counts hold on a shared thread.
        let (a, b) = (leaf(1_000_001), leaf(1_000_002));
        assert_eq!(leaf(1_000_001), a);
        assert_ne!(a, b);
        let before = interned();
        let ab = combine(ReduceOp::Max, a, b);
        assert_eq!(interned(), before + 1);
        assert_eq!(combine(ReduceOp::Max, leaf(1_000_001), leaf(1_000_002)), ab);
        assert_eq!(interned(), before + 1, "a known node adds nothing");
        assert_eq!(
            node(ab),
            Node::Combine {
                op: ReduceOp::Max,
                left: a,
                right: b
            }
        );
        assert_eq!(node(a), Node::Leaf(1_000_001));
    }

    #[test]
    fn sum_and_prod_commute_min_and_max_do_not() {
        let (a, b) = (leaf(10), leaf(11));
        for op in [ReduceOp::Sum, ReduceOp::Prod] {
            assert_eq!(combine(op, a, b), combine(op, b, a), "{op}");
        }
        for op in [ReduceOp::Min, ReduceOp::Max] {
            assert_ne!(combine(op, a, b), combine(op, b, a), "{op}");
        }
        assert_eq!(combine(ReduceOp::Avg, b, a), combine(ReduceOp::Sum, a, b));
        assert_ne!(combine(ReduceOp::Sum, a, b), combine(ReduceOp::Prod, a, b));
        let Node::Combine { left, right, .. } = node(combine(ReduceOp::Sum, b, a)) else {
            panic!("a sum is a combine");
        };
        assert!(left < right);
    }

    #[test]
    fn association_is_kept() {
        let (a, b, c) = (leaf(20), leaf(21), leaf(22));
        let left = combine(ReduceOp::Sum, combine(ReduceOp::Sum, a, b), c);
        let right = combine(ReduceOp::Sum, a, combine(ReduceOp::Sum, b, c));
        assert_ne!(left, right);
        assert_eq!(leaves(left), leaves(right));
    }

    #[test]
    fn leaves_ops_and_descriptions() {
        let (a, b, c) = (leaf(3), leaf(1), leaf(2));
        let s = combine(ReduceOp::Max, combine(ReduceOp::Sum, a, b), a);
        assert_eq!(leaves(s), vec![1, 3, 3]);
        assert_eq!(ops(s), vec![ReduceOp::Sum, ReduceOp::Max]);
        assert_eq!(describe(s, &name), "max((x3 + x1), x3)");
        let avg = divide(combine(ReduceOp::Avg, c, Sym::ZERO), 4);
        assert_eq!(leaves(avg), vec![2]);
        assert_eq!(ops(avg), vec![ReduceOp::Sum]);
        assert_eq!(describe(avg, &name), "((0 + x2) / 4)");
        let m = combine(ReduceOp::Min, c, combine(ReduceOp::Prod, a, b));
        assert_eq!(describe(m, &name), "min(x2, (x3 * x1))");
        assert_eq!(leaves(Sym::ZERO), Vec::<u64>::new());
        assert!(ops(a).is_empty());
    }

    #[test]
    fn leaf_names_may_build_symbols() {
        let s = combine(ReduceOp::Min, leaf(7), leaf(8));
        let naming = |id: u64| format!("{:?}", leaf(id + 100));
        let text = describe(s, &naming);
        assert_eq!(text, format!("min({:?}, {:?})", leaf(107), leaf(108)));
    }

    #[test]
    fn deep_chains_do_not_overflow_the_stack() {
        let n = 100_000u64;
        let mut s = leaf(0);
        for k in 1..n {
            s = combine(ReduceOp::Sum, s, leaf(k));
        }
        let mut m = leaf(0);
        for k in 1..n {
            m = combine(ReduceOp::Max, leaf(k), m);
        }
        assert_eq!(leaves(s), (0..n).collect::<Vec<_>>());
        assert_eq!(leaves(m).len(), n as usize);
        assert_eq!(ops(m), vec![ReduceOp::Max]);
        let text = describe(s, &name);
        assert!(text.starts_with(&"(".repeat(99_999)));
        assert!(text.ends_with("x99998) + x99999)"));
        assert!(describe(m, &name).starts_with("max(x99999, max(x99998, "));
    }

    #[test]
    fn ids_are_per_thread() {
        let here = leaf(12345);
        let there = std::thread::spawn(|| (leaf(999), leaf(12345), interned(), node(Sym(1))))
            .join()
            .expect("the thread finishes");
        // A fresh thread's interner holds only zero and what it made, in
        // the order it made it.
        assert_eq!(there.2, 3);
        assert_eq!((there.0, there.1), (Sym(1), Sym(2)));
        assert_eq!(there.3, Node::Leaf(999));
        assert_eq!(node(here), Node::Leaf(12345));
    }

    #[test]
    #[should_panic(expected = "was not made on this thread")]
    fn a_foreign_id_is_refused() {
        let _ = combine(ReduceOp::Sum, Sym(u32::MAX), Sym::ZERO);
    }
}
