//! Parallel Aggregated Trees (PAT) arithmetic, shared by the PAT
//! allgather ([`crate::allgather::pat`]), reduce-scatter
//! ([`crate::reduce_scatter::pat`]) and NCCL's channel variant
//! ([`crate::nccl::pat`]).
//!
//! NCCL's PAT (v2.23+, `src/include/collectives.h:398-919` @b91894bd,
//! `PatRSAlgorithm`/`PatAGAlgorithm`) connects each rank to the peers at
//! `±2^d (mod N)` for every dimension `d < D = ⌈log2 N⌉`
//! (`src/transport/generic.cc:67-79`). Every rank is the root of its own
//! binomial tree: in the allgather, the block that must travel `s` ranks
//! forward hops along the set bits of `s`, highest first; the
//! reduce-scatter is the mirror image, contributions travelling backwards
//! along the set bits of their distance, lowest first, reduced at each
//! hop. Per dimension, the blocks that cross it are **aggregated**: they
//! go as few messages as the chunk size allows (one per dimension at
//! small sizes, `log2 N` messages in all; `N/2, N/4, ...` per dimension
//! at large sizes, `N-1` blocks in all as in a ring).
//!
//! # The offsets crossing a dimension
//! Dimension `d` is crossed by the offsets `t` whose bits are all above
//! `d` and with `t + 2^d ≤ N-1` ([`offsets`]), in increasing order: in the
//! allgather, rank `r` sends the blocks of ranks `r - t` to `r + 2^d`; in
//! the reduce-scatter, the partial results of blocks `r - t - 2^d` to
//! `r - 2^d`. Every distance `s` in `1..N` is reached exactly once, so any
//! `N` works, powers of two or not.
//!
//! # Messages
//! Items are pieces of blocks: a block larger than the chunk is cut into
//! `P = ⌈L / chunk⌉` pieces ([`crate::layout::block_range`] of the block),
//! and smaller blocks are aggregated `A = ⌊chunk / L⌋` items to a message,
//! `L` the largest block's bytes, so that every rank computes the same
//! message structure even when blocks differ by an element. The items of a
//! dimension go in order: offsets increasing, then pieces.
//!
//! Every message is one step: sent joined with the matching receive of
//! the same dimension (from the opposite peer), then applied. A rank
//! sends at most one message ahead of what it has received, so the
//! schedule runs on back-ends with rendezvous sends.

use std::ops::Range;

use crate::cost::CostModel;
use crate::fabric::Rank;
use crate::layout::block_range;
use crate::reference::Order;
use crate::schedule::{Combine, Part, Step};

/// Number of dimensions for `n` ranks: `⌈log2 n⌉` (0 for one rank).
pub fn dimensions(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

/// The offsets crossing dimension `d` for `n` ranks: multiples of
/// `2^(d+1)` with `t + 2^d ≤ n - 1`, increasing.
pub fn offsets(n: usize, d: usize) -> impl Iterator<Item = usize> {
    let hop = 1usize << d;
    (0..n).step_by(hop << 1).take_while(move |&t| t + hop < n)
}

/// How blocks become messages: pieces per block and items per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Pieces each block is cut into (`P`, at least 1).
    pub pieces: usize,
    /// Items (block pieces) per message (`A`, at least 1).
    pub per_message: usize,
}

impl Packing {
    /// The packing for a largest block of `largest` elements of
    /// `elem_bytes` bytes and chunks of `chunk_bytes`: either pieces (at
    /// most one per element) or aggregation, never both.
    pub fn new(largest: usize, elem_bytes: usize, chunk_bytes: u64) -> Packing {
        let chunk = chunk_bytes.max(1);
        let bytes = (largest as u64).saturating_mul(elem_bytes as u64);
        if bytes == 0 {
            return Packing {
                pieces: 1,
                per_message: usize::MAX,
            };
        }
        Packing {
            pieces: usize::try_from(bytes.div_ceil(chunk))
                .unwrap_or(usize::MAX)
                .min(largest),
            per_message: usize::try_from(chunk / bytes).unwrap_or(usize::MAX).max(1),
        }
    }

    /// Messages one rank sends across dimension `d` of `n` ranks.
    pub fn messages_in(&self, n: usize, d: usize) -> usize {
        (offsets(n, d).count().saturating_mul(self.pieces)).div_ceil(self.per_message)
    }

    /// Messages one rank sends in a whole call on `n` ranks.
    pub fn messages(&self, n: usize) -> u64 {
        (0..dimensions(n))
            .map(|d| self.messages_in(n, d) as u64)
            .sum()
    }
}

/// One message of a dimension: for each item, the block index (relative
/// to the sender, as an offset) and the piece's range inside the block.
pub type Message = Vec<(usize, Range<usize>)>;

/// The messages crossing dimension `d` for `n` ranks, each a list of
/// `(offset, piece)` items: `piece` is the range of the piece within a
/// block of `block_len` elements (`block_len(offset)` gives it).
pub fn messages_in(
    n: usize,
    d: usize,
    packing: Packing,
    block_len: impl Fn(usize) -> usize,
) -> Vec<Message> {
    let items: Vec<(usize, Range<usize>)> = offsets(n, d)
        .flat_map(|t| {
            let len = block_len(t);
            (0..packing.pieces).map(move |k| (t, block_range(len, packing.pieces, k)))
        })
        .collect();
    items
        .chunks(packing.per_message.min(items.len().max(1)))
        .map(<[_]>::to_vec)
        .collect()
}

/// Rank `r`'s steps of the PAT allgather on `n` ranks, block `j` of the
/// buffer at `block(j)`: dimensions from the highest down; across
/// dimension `d`, the blocks of ranks `r - t` go to `r + 2^d` and those of
/// `r - 2^d - t` come from `r - 2^d`, copied into place.
pub(crate) fn allgather_steps(
    n: usize,
    r: Rank,
    packing: Packing,
    block: impl Fn(usize) -> Range<usize>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for d in (0..dimensions(n)).rev() {
        let hop = 1usize << d;
        let (to, from) = ((r + hop) % n, (r + n - hop) % n);
        // The block a rank `at` holds at offset `t` came from `at - t`.
        let held = |at: Rank, t: usize| block((at + n - t) % n);
        exchange_dimension(
            &mut steps,
            n,
            d,
            packing,
            (to, from),
            &held,
            Combine::Copy,
            r,
        );
    }
    steps
}

/// Rank `r`'s steps of the PAT reduce-scatter on `n` ranks: dimensions
/// from 0 up; across dimension `d`, the partial results of blocks
/// `r - 2^d - t` go to `r - 2^d` and those of blocks `r - t` come from
/// `r + 2^d`, reduced as `local ⊕ incoming`; then block `r` is divided
/// for an average.
pub(crate) fn reduce_scatter_steps(
    n: usize,
    r: Rank,
    packing: Packing,
    block: impl Fn(usize) -> Range<usize>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for d in 0..dimensions(n) {
        let hop = 1usize << d;
        let (to, from) = ((r + n - hop) % n, (r + hop) % n);
        // What a rank `at` sends at offset `t` is the partial of block
        // `at - 2^d - t`, which its receiver holds at offset `t`.
        let held = |at: Rank, t: usize| block((at + 2 * n - hop - t) % n);
        exchange_dimension(
            &mut steps,
            n,
            d,
            packing,
            (to, from),
            &held,
            Combine::IncomingRight,
            r,
        );
    }
    steps.push(Step::Divide {
        range: block(r),
        ranks: n,
    });
    steps
}

/// Appends rank `me`'s steps across dimension `d`: message `i` to `to`
/// joined with message `i` from `from`; `sent(at, t)` is the block a rank
/// `at` sends at offset `t`.
#[allow(clippy::too_many_arguments)]
fn exchange_dimension(
    steps: &mut Vec<Step>,
    n: usize,
    d: usize,
    packing: Packing,
    (to, from): (Rank, Rank),
    sent: &impl Fn(Rank, usize) -> Range<usize>,
    combine: Combine,
    me: Rank,
) {
    let part = |at: Rank, peer: Rank| {
        messages_in(n, d, packing, |t| sent(at, t).len())
            .into_iter()
            .map(move |items| Part {
                peer,
                ranges: items
                    .into_iter()
                    .map(|(t, piece)| {
                        let start = sent(at, t).start;
                        start + piece.start..start + piece.end
                    })
                    .collect(),
            })
    };
    // The receiver stores each block where its sender read it: the same
    // block index, whichever rank holds it.
    let ours = part(me, to);
    let theirs = part(from, from);
    steps.extend(
        ours.zip(theirs)
            .map(|(send, recv)| Step::exchange(send, recv, combine)),
    );
}

/// The modelled time of a PAT call on `n` ranks under ideal links with
/// every block `largest` elements of `elem_bytes` bytes: every rank moves
/// in lockstep, so each message costs `α + wire + reduction` one after
/// the other (`reduces`: the reduce-scatter).
pub(crate) fn cost_ps(
    model: &CostModel,
    n: usize,
    largest: usize,
    elem_bytes: usize,
    packing: Packing,
    reduces: bool,
) -> u64 {
    let message = |elems: usize| {
        let bytes = (elems as u64).saturating_mul(elem_bytes as u64);
        let reduce = if reduces { model.reduce_ps(bytes) } else { 0 };
        model
            .latency_ps
            .saturating_add(model.wire_ps(bytes))
            .saturating_add(reduce)
    };
    let per_block: u64 = (0..packing.pieces)
        .map(|k| message(block_range(largest, packing.pieces, k).len()))
        .fold(0, u64::saturating_add);
    (0..dimensions(n))
        .map(|d| {
            let blocks = offsets(n, d).count();
            if packing.pieces > 1 {
                (blocks as u64).saturating_mul(per_block)
            } else {
                let a = packing.per_message.min(blocks.max(1));
                let full = (blocks / a) as u64;
                let rest = blocks % a;
                let tail = if rest > 0 { message(rest * largest) } else { 0 };
                full.saturating_mul(message(a * largest))
                    .saturating_add(tail)
            }
        })
        .fold(0, u64::saturating_add)
}

/// The reduce-scatter's reduction order of the contributions at offsets
/// `u, u+1, ...` below `u + 2^d` (and below `n`) from the block's owner:
/// `T(u, 0) = u` and `T(u, d+1) = T(u, d) ⊕ T(u + 2^d, d)` when
/// `u + 2^d < n`, else `T(u, d)`. Leaves are offsets; [`block_order`]
/// turns them into ranks.
fn tree(n: usize, u: usize, d: usize, leaf: &impl Fn(usize) -> Order) -> Order {
    if d == 0 {
        return leaf(u);
    }
    let half = 1usize << (d - 1);
    let left = tree(n, u, d - 1, leaf);
    if u + half < n {
        Order::combine(left, tree(n, u + half, d - 1, leaf))
    } else {
        left
    }
}

/// The order in which the PAT reduce-scatter combines block `j` on `n`
/// ranks: the balanced binary tree over ranks `j, j+1, ..., j+n-1 (mod
/// n)` in that cyclic order, each pair left operand first, pairs of
/// neighbours first ([`crate::reduce_scatter::pat`] derives it).
pub fn block_order(n: usize, j: usize) -> Order {
    tree(n, 0, dimensions(n), &|u| Order::Rank((j + u) % n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_distance_is_reached_once_along_its_bits() {
        for n in 1..=40 {
            let mut reached = vec![0usize; n];
            reached[0] = 1;
            // High dimension first: an offset t grows by 2^d.
            for d in (0..dimensions(n)).rev() {
                for t in offsets(n, d) {
                    assert_eq!(reached[t], 1, "n={n} d={d}: offset {t} not held yet");
                    reached[t + (1 << d)] += 1;
                }
            }
            assert!(reached.iter().all(|&c| c == 1), "n={n}: {reached:?}");
        }
    }

    #[test]
    fn small_blocks_go_as_one_message_per_dimension_large_ones_as_a_ring_does() {
        // n = 64: 1 KiB blocks in 128 KiB chunks: one message per dimension.
        let small = Packing::new(1024, 1, 128 * 1024);
        assert_eq!(small.messages(64), 6);
        let counts: Vec<usize> = (0..6).map(|d| small.messages_in(64, d)).collect();
        assert_eq!(counts, [1, 1, 1, 1, 1, 1]);
        // 128 KiB blocks: 32, 16, 8, 4, 2, 1 (the notes' table, §3).
        let large = Packing::new(128 * 1024, 1, 128 * 1024);
        let counts: Vec<usize> = (0..6).map(|d| large.messages_in(64, d)).collect();
        assert_eq!(counts, [32, 16, 8, 4, 2, 1]);
        assert_eq!(large.messages(64), 63);
        // 1 MiB blocks in 8 pieces on 8 ranks: 8 x (4, 2, 1).
        assert_eq!(Packing::new(1 << 20, 1, 128 * 1024).messages(8), 56);
        // Non-powers of two: every one of the N-1 blocks crosses once.
        assert_eq!(large.messages(6), 5);
        assert_eq!(Packing::new(0, 4, 1).messages(6), 3);
        // Never more pieces than elements.
        assert_eq!(Packing::new(2, 4, 1).pieces, 2);
    }

    #[test]
    fn messages_cover_every_piece_in_order() {
        let packing = Packing::new(10, 4, 16); // 3 pieces per block
        let msgs = messages_in(5, 0, packing, |_| 10);
        // Offsets 0 and 2 cross dimension 0 (t + 1 <= 4): 6 items, 6 messages.
        assert_eq!(msgs.len(), 6);
        assert_eq!(msgs[0], vec![(0, 0..4)]);
        assert_eq!(msgs[5], vec![(2, 7..10)]);
        let aggregated = messages_in(5, 0, Packing::new(1, 4, 64), |_| 1);
        assert_eq!(aggregated, vec![vec![(0, 0..1), (2, 0..1)]]);
    }

    #[test]
    fn the_order_pairs_neighbours_first() {
        let leaf = |r| Order::Rank(r);
        // n = 4, block 1: ((1 ⊕ 2) ⊕ (3 ⊕ 0)).
        assert_eq!(
            block_order(4, 1),
            Order::combine(
                Order::combine(leaf(1), leaf(2)),
                Order::combine(leaf(3), leaf(0))
            )
        );
        // n = 3, block 0: (0 ⊕ 1) ⊕ 2.
        assert_eq!(
            block_order(3, 0),
            Order::combine(Order::combine(leaf(0), leaf(1)), leaf(2))
        );
        assert_eq!(block_order(1, 0), leaf(0));
    }
}
