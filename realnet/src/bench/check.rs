//! The inputs of a checked benchmark and the count of wrong elements.
//!
//! Every rank can compute every rank's input (element `k` of rank `r` is a
//! hash of `(r, k)` mapped to a small integer), so each rank checks its own
//! output without receiving anything: the expected values are generated
//! window by window, in memory independent of the message size. The values
//! make every reduction order give the same bits (small integers for float
//! sums, `±1` for float products, anything for min, max and the wrapping
//! integer operations), so the check holds for every algorithm.

use std::ops::Range;

use algorithms::collective::defined_output;
use algorithms::layout::block_range;
use algorithms::payload::IntoBuffer;
use algorithms::reference::rank_order_reference;
use algorithms::symbolic::Sym;
use algorithms::{Collective, DType, Payload, Rank, ReduceOp};

/// Elements generated at a time when computing expected values.
const WINDOW: usize = 1 << 16;

/// Rank `rank`'s input elements `range` for a benchmark of `dtype` and `op`.
pub fn input(dtype: DType, op: ReduceOp, rank: Rank, range: Range<usize>) -> Payload {
    match dtype {
        DType::F32 => values::<f32>(op, rank, range, true),
        DType::F64 => values::<f64>(op, rank, range, true),
        DType::I32 => values::<i32>(op, rank, range, false),
        DType::I64 => values::<i64>(op, rank, range, false),
        DType::U8 => values::<u8>(op, rank, range, false),
        // Refused by `BenchOptions::validate` and by every real fabric's
        // send; as leaves these are harmless on one thread.
        DType::Sym => values::<Sym>(op, rank, range, false),
    }
}

fn values<T: IntoBuffer>(op: ReduceOp, rank: Rank, range: Range<usize>, float: bool) -> Payload {
    let v = range
        .map(|k| {
            let h = mix(((rank as u64) << 40) ^ k as u64);
            let x: i64 = match (op, float) {
                (ReduceOp::Prod, true) => 1 - 2 * (h & 1) as i64,
                (ReduceOp::Sum | ReduceOp::Avg, true) => (h % 17) as i64 - 8,
                _ => (h % 201) as i64 - 100,
            };
            T::from_i64(x)
        })
        .collect();
    Payload::from_vec(v)
}

/// SplitMix64's finaliser: neighbouring ranks and indices get unrelated values.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where the expected values of part of a rank's output come from.
enum Source {
    /// The reduction over all ranks of the same elements.
    Reduced,
    /// Rank `.0`'s input, starting at element `.1`.
    Copied(Rank, usize),
}

/// Counts the elements of rank `rank`'s defined output in `buf` (after
/// `collective` on `n` ranks with `count` elements) that differ bit for bit
/// from the exact result.
pub fn count_wrong(
    collective: Collective,
    op: ReduceOp,
    root: Rank,
    rank: Rank,
    n: usize,
    buf: &Payload,
) -> u64 {
    let dtype = buf.shape().dtype;
    let count = buf.len();
    let block = |j| block_range(count, n, j);
    let parts: Vec<(Range<usize>, Source)> = match collective {
        Collective::Allreduce | Collective::ReduceScatter | Collective::Reduce => {
            vec![(
                defined_output(collective, rank, n, count, root),
                Source::Reduced,
            )]
        }
        Collective::Allgather => (0..n)
            .map(|j| (block(j), Source::Copied(j, block(j).start)))
            .collect(),
        Collective::Gather if rank == root => (0..n)
            .map(|j| (block(j), Source::Copied(j, block(j).start)))
            .collect(),
        Collective::Broadcast => vec![(0..count, Source::Copied(root, 0))],
        Collective::Alltoall => (0..n)
            .map(|j| (block(j), Source::Copied(j, block(rank).start)))
            .collect(),
        Collective::Scatter => vec![(block(rank), Source::Copied(root, block(rank).start))],
        Collective::SendRecv => vec![(0..count, Source::Copied((rank + n - 1) % n, 0))],
        Collective::Gather | Collective::Barrier => Vec::new(),
    };
    let mut wrong = 0u64;
    for (dst, source) in parts {
        let mut at = dst.start;
        while at < dst.end {
            let end = (at + WINDOW).min(dst.end);
            let expected = match source {
                Source::Reduced => {
                    let inputs: Vec<Payload> =
                        (0..n).map(|r| input(dtype, op, r, at..end)).collect();
                    rank_order_reference(&inputs, op)
                }
                Source::Copied(from, start) => {
                    let offset = start + (at - dst.start);
                    input(dtype, op, from, offset..offset + (end - at))
                }
            };
            wrong += buf.extract(at..end).count_wrong(&expected) as u64;
            at = end;
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_exact_under_any_order_and_differ_between_ranks() {
        let a = input(DType::F32, ReduceOp::Sum, 0, 0..1000);
        let b = input(DType::F32, ReduceOp::Sum, 17, 0..1000);
        assert!(a.count_wrong(&b) > 900);
        let s = a.as_slice::<f32>().unwrap();
        assert!(
            s.iter()
                .all(|v| v.fract() == 0.0 && (-8.0..=8.0).contains(v))
        );
        let p = input(DType::F64, ReduceOp::Prod, 3, 0..100);
        assert!(p.as_slice::<f64>().unwrap().iter().all(|v| v.abs() == 1.0));
        // A range is the same elements as the whole.
        assert_eq!(
            input(DType::I32, ReduceOp::Max, 2, 10..20),
            input(DType::I32, ReduceOp::Max, 2, 0..30).extract(10..20)
        );
    }

    #[test]
    fn a_correct_allreduce_has_no_wrong_elements_and_a_changed_one_does() {
        let n = 3;
        let count = WINDOW + 5; // two windows
        let inputs: Vec<Payload> = (0..n)
            .map(|r| input(DType::F32, ReduceOp::Sum, r, 0..count))
            .collect();
        let mut out = rank_order_reference(&inputs, ReduceOp::Sum);
        assert_eq!(
            count_wrong(Collective::Allreduce, ReduceOp::Sum, 0, 1, n, &out),
            0
        );
        out.reduce_from(
            count - 1..count,
            &Payload::from_vec(vec![1.0f32]),
            ReduceOp::Sum,
        )
        .unwrap();
        assert_eq!(
            count_wrong(Collective::Allreduce, ReduceOp::Sum, 0, 1, n, &out),
            1
        );
    }

    #[test]
    fn alltoall_expects_block_j_from_rank_j() {
        let n = 4;
        let count = 8;
        let rank = 2;
        let mut out = Payload::zeros(DType::I64, count, false);
        for j in 0..n {
            let piece = input(DType::I64, ReduceOp::Sum, j, block_range(count, n, rank));
            out.copy_from(block_range(count, n, j), &piece).unwrap();
        }
        assert_eq!(
            count_wrong(Collective::Alltoall, ReduceOp::Sum, 0, rank, n, &out),
            0
        );
        // Blocks from the wrong ranks are all wrong.
        assert!(count_wrong(Collective::Alltoall, ReduceOp::Sum, 0, 1, n, &out) > 0);
    }
}
