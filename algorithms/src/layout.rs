//! How a buffer of `count` elements is split into per-rank blocks.
//!
//! Every collective that splits a buffer among `N` ranks (reduce-scatter,
//! allgather, gather, scatter, alltoall and the ring allreduce's segments)
//! uses the same split: block `j` holds `count / N` elements, plus one if
//! `j < count % N`, and blocks are laid out in rank order.

use std::ops::Range;

use crate::collective::Params;

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

/// A buffer cut into pipeline chunks for a chain (broadcast and reduce):
/// chunk size, number of chunks and window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChainPlan {
    /// Elements in the buffer.
    pub count: usize,
    /// Elements per chunk (the last may be shorter).
    pub chunk_elems: usize,
    /// Number of chunks, at least one.
    pub chunks: usize,
    /// Chunks a rank may have in flight: `slots`, at most `chunks`.
    pub window: usize,
}

impl ChainPlan {
    /// The plan for a non-empty buffer of `count` elements of
    /// `elem_bytes` bytes each.
    pub(crate) fn new(count: usize, elem_bytes: usize, params: &Params) -> ChainPlan {
        // Never more than the buffer, so chunk arithmetic cannot overflow.
        let chunk_elems = usize::try_from(params.chunk_bytes / elem_bytes as u64)
            .unwrap_or(usize::MAX)
            .clamp(1, count.max(1));
        let chunks = count.div_ceil(chunk_elems).max(1);
        ChainPlan {
            count,
            chunk_elems,
            chunks,
            window: params.slots.clamp(1, chunks),
        }
    }

    /// The elements of chunk `i`.
    pub(crate) fn chunk(&self, i: usize) -> Range<usize> {
        let start = i * self.chunk_elems;
        start..(start + self.chunk_elems).min(self.count)
    }
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

    #[test]
    fn chain_chunks_tile_the_buffer() {
        let params = crate::collective::Params {
            chunk_bytes: 40,
            slots: 8,
            ..Params::default()
        };
        let plan = ChainPlan::new(103, 4, &params); // 10 elements per chunk
        assert_eq!(plan.chunks, 11);
        assert_eq!(plan.window, 8);
        assert_eq!(plan.chunk(10), 100..103);
        let below_one = Params {
            chunk_bytes: 4,
            ..params
        };
        let tiny = ChainPlan::new(3, 8, &below_one); // a chunk below one element
        assert_eq!((tiny.chunk_elems, tiny.chunks, tiny.window), (1, 3, 3));
    }
}
