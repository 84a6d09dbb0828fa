//! How a buffer of `count` elements is split into per-rank blocks.
//!
//! Every collective that splits a buffer among `N` ranks (reduce-scatter,
//! allgather, gather, scatter, alltoall and the ring allreduce's segments)
//! uses the same split: block `j` holds `count / N` elements, plus one if
//! `j < count % N`, and blocks are laid out in rank order.

use std::ops::Range;

/// The elements of block `j` when `count` elements are split among
/// `world_size` ranks: the first `count % world_size` blocks get one more.
pub fn block_range(count: usize, world_size: usize, j: usize) -> Range<usize> {
    let base = count / world_size;
    let rem = count % world_size;
    let start = j * base + j.min(rem);
    let len = base + usize::from(j < rem);
    start..start + len
}

/// The elements of blocks `first..first + blocks` (contiguous, no wrap).
pub fn blocks_range(count: usize, world_size: usize, first: usize, blocks: usize) -> Range<usize> {
    if blocks == 0 {
        let at = block_range(count, world_size, first.min(world_size - 1)).start;
        return at..at;
    }
    block_range(count, world_size, first).start
        ..block_range(count, world_size, first + blocks - 1).end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_buffer_in_order() {
        for count in 0..40 {
            for n in 1..9 {
                let mut next = 0;
                for j in 0..n {
                    let b = block_range(count, n, j);
                    assert_eq!(b.start, next);
                    next = b.end;
                }
                assert_eq!(next, count);
                assert_eq!(blocks_range(count, n, 0, n), 0..count);
            }
        }
    }
}
