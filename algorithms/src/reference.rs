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
use crate::symbolic::Sym;

/// How one element's contributions are combined: a binary tree whose
/// leaves are ranks. `Combine(a, b)` computes `a ⊕ b` with `a` on the left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// The input of one rank.
    Rank(usize),
    /// The combination of two partial results, left operand first.
    Combine(Box<Order>, Box<Order>),
    /// `((r0 ⊕ r1) ⊕ r2) ⊕ ...` over the ranks in this order: a left fold
    /// kept flat, so that folds over many ranks need no deep recursion.
    LeftFold(Vec<usize>),
}

impl Order {
    /// `a ⊕ b`.
    pub fn combine(a: Order, b: Order) -> Order {
        Order::Combine(Box::new(a), Box::new(b))
    }

    /// `((r0 ⊕ r1) ⊕ r2) ⊕ ...` over `ranks` in the order given.
    pub fn left_fold(ranks: impl IntoIterator<Item = usize>) -> Order {
        let ranks: Vec<usize> = ranks.into_iter().collect();
        assert!(!ranks.is_empty(), "a fold needs at least one rank");
        Order::LeftFold(ranks)
    }

    fn eval<T: IntoBuffer>(&self, inputs: &[&[T]], i: usize, op: ReduceOp) -> T {
        match self {
            Order::Rank(r) => inputs[*r][i],
            Order::Combine(a, b) => T::combine(op, a.eval(inputs, i, op), b.eval(inputs, i, op)),
            Order::LeftFold(ranks) => ranks[1..].iter().fold(inputs[ranks[0]][i], |acc, &r| {
                T::combine(op, acc, inputs[r][i])
            }),
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
    for (range, order) in parts.iter().filter(|(range, _)| !range.is_empty()) {
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
        DType::Sym => fold_typed::<Sym>(inputs, op, parts),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_over_many_ranks_need_no_deep_recursion() {
        let n = 200_000;
        let inputs: Vec<Payload> = (0..n)
            .map(|r| Payload::from_vec(vec![(r % 7) as i64]))
            .collect();
        let sum = rank_order_reference(&inputs, ReduceOp::Sum);
        let want: i64 = (0..n).map(|r| (r % 7) as i64).sum();
        assert_eq!(sum.as_slice::<i64>().unwrap(), &[want]);
    }

    #[test]
    fn operand_order_is_kept() {
        // min(+0, -0) keeps the right operand: order is visible in the bits.
        let inputs = vec![
            Payload::from_vec(vec![0.0f32]),
            Payload::from_vec(vec![-0.0f32]),
        ];
        let a = fold_reference(&inputs, ReduceOp::Min, &[(0..1, Order::left_fold([0, 1]))]);
        let b = fold_reference(
            &inputs,
            ReduceOp::Min,
            &[(0..1, Order::combine(Order::Rank(1), Order::Rank(0)))],
        );
        assert_ne!(
            a.as_slice::<f32>().unwrap()[0].to_bits(),
            b.as_slice::<f32>().unwrap()[0].to_bits()
        );
    }
}
