//! Sequential reference results, used to check collectives.
//!
//! A reducing algorithm documents, for every element, the order in which it
//! combines the ranks' contributions as a binary [`Order`] (which operand
//! is on the left matters for floats, and even for `min`/`max` of `+0.0`
//! and `-0.0`). [`fold_reference`] evaluates such orders sequentially, so
//! an algorithm's result can be compared bit for bit.
//! [`rank_order_reference`] folds in rank order `0, 1, ..., N-1`; it equals
//! any algorithm's result when the data make the reduction exact (as the
//! simulator's generated inputs do).

use std::ops::Range;

use crate::dtype::{DType, ReduceOp};
use crate::layout::block_range;
use crate::payload::{IntoBuffer, Payload};

/// How one element's contributions are combined: a binary tree whose
/// leaves are ranks. `Combine(a, b)` computes `a ⊕ b` with `a` on the left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// The input of one rank.
    Rank(usize),
    /// The combination of two partial results, left operand first.
    Combine(Box<Order>, Box<Order>),
}

impl Order {
    /// `a ⊕ b`.
    pub fn combine(a: Order, b: Order) -> Order {
        Order::Combine(Box::new(a), Box::new(b))
    }

    /// `((r0 ⊕ r1) ⊕ r2) ⊕ ...` over `ranks` in the order given.
    pub fn left_fold(ranks: impl IntoIterator<Item = usize>) -> Order {
        let mut ranks = ranks.into_iter();
        let first = ranks.next().expect("a fold needs at least one rank");
        ranks.fold(Order::Rank(first), |acc, r| {
            Order::combine(acc, Order::Rank(r))
        })
    }

    fn eval<T: IntoBuffer>(&self, inputs: &[&[T]], i: usize, op: ReduceOp) -> T {
        match self {
            Order::Rank(r) => inputs[*r][i],
            Order::Combine(a, b) => T::combine(op, a.eval(inputs, i, op), b.eval(inputs, i, op)),
        }
    }
}

fn fold_typed<T: IntoBuffer>(
    inputs: &[Payload],
    op: ReduceOp,
    parts: &[(Range<usize>, Order)],
) -> Payload {
    let n = inputs.len();
    let slices: Vec<&[T]> = inputs
        .iter()
        .map(|p| {
            p.as_slice::<T>()
                .expect("reference inputs are real data of one type")
        })
        .collect();
    let mut out: Vec<T> = slices[0].to_vec();
    for (range, order) in parts {
        for i in range.clone() {
            let v = order.eval(&slices, i, op);
            out[i] = if op == ReduceOp::Avg { v.divide(n) } else { v };
        }
    }
    Payload::from_vec(out)
}

/// The elementwise reduction of `inputs` (one per rank, all the same
/// shape): each element in `parts[k].0` is combined in order `parts[k].1`
/// (and for [`ReduceOp::Avg`] divided by `N` once at the end). Elements in
/// no part keep rank 0's input.
pub fn fold_reference(
    inputs: &[Payload],
    op: ReduceOp,
    parts: &[(Range<usize>, Order)],
) -> Payload {
    assert!(!inputs.is_empty(), "a reference needs at least one rank");
    match inputs[0].shape().dtype {
        DType::F32 => fold_typed::<f32>(inputs, op, parts),
        DType::F64 => fold_typed::<f64>(inputs, op, parts),
        DType::I32 => fold_typed::<i32>(inputs, op, parts),
        DType::I64 => fold_typed::<i64>(inputs, op, parts),
        DType::U8 => fold_typed::<u8>(inputs, op, parts),
    }
}

/// The allreduce of `inputs` folded in rank order `0..N` for every element.
pub fn rank_order_reference(inputs: &[Payload], op: ReduceOp) -> Payload {
    let count = inputs[0].len();
    fold_reference(inputs, op, &[(0..count, Order::left_fold(0..inputs.len()))])
}

/// The result the ring allreduce must produce, bit for bit: the elements of
/// block `j` are folded over ranks `j, j+1, ..., j+N-1 (mod N)`.
pub fn ring_allreduce_reference(inputs: &[Payload], op: ReduceOp) -> Payload {
    let n = inputs.len();
    let count = inputs[0].len();
    let parts: Vec<_> = (0..n)
        .map(|j| {
            (
                block_range(count, n, j),
                Order::left_fold((0..n).map(|s| (j + s) % n)),
            )
        })
        .collect();
    fold_reference(inputs, op, &parts)
}
