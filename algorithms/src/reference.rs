//! Sequential reference results, used to check collectives.
//!
//! [`ring_allreduce_reference`] follows the ring's documented reduction
//! order exactly, so floating-point results can be compared bit for bit.
//! [`rank_order_reference`] folds in rank order `0, 1, ..., N-1`; it equals
//! any algorithm's result when the data make the reduction exact (as the
//! simulator's generated inputs do).

use crate::dtype::{DType, ReduceOp};
use crate::payload::{IntoBuffer, Payload};
use crate::ring::segment_range;

/// The allreduce of `inputs` (one per rank) with each element folded over
/// the ranks in the order `order(element index)` returns.
fn fold_by<T: IntoBuffer>(
    inputs: &[Payload],
    op: ReduceOp,
    start_rank: impl Fn(usize) -> usize,
) -> Payload {
    let n = inputs.len();
    let slices: Vec<&[T]> = inputs
        .iter()
        .map(|p| {
            p.as_slice::<T>()
                .expect("reference inputs are real data of one type")
        })
        .collect();
    let count = slices[0].len();
    let out = (0..count)
        .map(|i| {
            let first = start_rank(i);
            let mut acc = slices[first][i];
            for step in 1..n {
                acc = T::combine(op, acc, slices[(first + step) % n][i]);
            }
            if op == ReduceOp::Avg {
                acc.divide(n)
            } else {
                acc
            }
        })
        .collect();
    Payload::from_vec(out)
}

fn dispatch(inputs: &[Payload], op: ReduceOp, start_rank: impl Fn(usize) -> usize) -> Payload {
    assert!(!inputs.is_empty(), "a reference needs at least one rank");
    match inputs[0].shape().dtype {
        DType::F32 => fold_by::<f32>(inputs, op, start_rank),
        DType::F64 => fold_by::<f64>(inputs, op, start_rank),
        DType::I32 => fold_by::<i32>(inputs, op, start_rank),
        DType::I64 => fold_by::<i64>(inputs, op, start_rank),
        DType::U8 => fold_by::<u8>(inputs, op, start_rank),
    }
}

/// The result [`crate::ring_allreduce`] must produce, bit for bit: element
/// `i` of segment `j` is folded over ranks `j, j+1, ..., j+N-1 (mod N)`.
pub fn ring_allreduce_reference(inputs: &[Payload], op: ReduceOp) -> Payload {
    let n = inputs.len();
    let count = inputs[0].len();
    // Segment of each element, found by walking the segment bounds once.
    let mut owner = Vec::with_capacity(count);
    for j in 0..n {
        owner.extend(std::iter::repeat_n(j, segment_range(count, n, j).len()));
    }
    dispatch(inputs, op, |i| owner[i])
}

/// The allreduce of `inputs` folded in rank order `0..N` for every element.
pub fn rank_order_reference(inputs: &[Payload], op: ReduceOp) -> Payload {
    dispatch(inputs, op, |_| 0)
}
