//! Double-binary-tree allreduce, NCCL style: two complementary binary
//! trees each reduce half of the buffer to their root and broadcast it back,
//! chunked and pipelined.
//!
//! # The two trees
//! Tree 0 is NCCL's `ncclGetBtree` on ranks `0..N` (`src/graph/trees.cc`):
//! rank `i > 0` with lowest set bit `b` has parent `(i ^ b) | 2b` (or
//! `i ^ b` if that is out of range) and children `i - b/2` and
//! `i + b/2` (halving the offset until it is in range); rank 0 is the root
//! and its only child is the largest power of two below `N`. It is an
//! in-order tree: the left subtree of `i` holds smaller ranks, the right one
//! larger. Its interior ranks are exactly the even ranks.
//!
//! Tree 1 follows NCCL's `ncclGetDtree`:
//! - `N` even: the mirror image, the same tree on index `N - 1 - rank`;
//!   its interior ranks are the odd ranks.
//! - `N` odd: NCCL shifts the tree by one rank, which leaves rank 0
//!   interior in both trees. Instead, the tree here is the same tree on
//!   index `rank - 1` over the `N - 1` ranks `1..N` (interior: the odd
//!   ranks), and rank 0 hangs off its root, rank 1, as a left child (the
//!   root has only a right child otherwise), i.e. at index `-1`.
//!
//! Either way every rank is a leaf in one tree and interior in the other
//! (for `N >= 2`), so each rank reduces for one tree only. Tree `t` carries
//! half `t` of the buffer (`block_range(count, 2, t)`); its chunks travel
//! with tag `params.tag.phase(t)` and its credits (below) with
//! `params.tag.phase(2 + t)`. Within a tree a directed pair of ranks carries
//! only up or only down chunks.
//!
//! # Pipeline
//! Each half is cut into `K` chunks of at most `chunk_bytes` (as many as the
//! larger half needs; chunks of the smaller half may be empty and are still
//! sent). Per tree and chunk `c` a rank has up to two groups of operations:
//! - **up(c)**: a non-root first waits for the parent's credit for chunk
//!   `c - W` (if `c >= W`); an interior node receives chunk `c` from its
//!   left child and reduces it, then from its right child and reduces it;
//!   then it sends the partial chunk to its parent or, at the root, divides
//!   it for [`ReduceOp::Avg`] and sends the final chunk to its children;
//!   last it sends each child a zero-byte credit for chunk `c` (if
//!   `c + W < K`): that child's slot is free again.
//! - **down(c)** (non-roots): receive the final chunk from the parent and
//!   forward it to the children.
//!
//! `W = min(slots, K)` is the number of slots per connection, NCCL's
//! `NCCL_STEPS`: a child has at most `W` chunks in flight to its parent,
//! and the flow control is hop by hop, like NCCL's, so the window needs to
//! cover one hop's round trip, not the whole tree's.
//!
//! Each rank runs one sequential program: all its groups ordered by a
//! planned time, in units of `1/W` hop, `2c + W·(H_t - depth)` for up(c)
//! and `2c + W·(H_t + depth)` for down(c) (`H_t` the tree's height; ties in
//! order of chunk, then tree), i.e. chunks enter every `2/W` hops, the rate
//! the credits allow when latency dominates. Sends go to an
//! outbox (`outbox.rs`): they start where the rank next waits for a
//! receive, in program order, and stay in flight while it receives and
//! computes (one lane per destination and tag keeps each stream in order);
//! the call returns once all have completed. Every message goes from a
//! group to one planned `W` units (one hop) later, credits included, and
//! every rank runs its groups in planned order, so by induction on the
//! planned time no rank waits forever on a receive; since a rank never
//! waits for its own sends before its next receive, this holds under any
//! buffering, rendezvous included, whatever the parameters. (Awaiting the
//! sends with the next receive, as this program once did, deadlocked under
//! rendezvous on 6 and 10 ranks: ranks 2 and 3 on 6 are each other's child
//! in the two trees, and each waited for the other to take its send before
//! posting the receive that would take it.) On the simulator, whose sends
//! complete at once, the timing is that of sending right before the next
//! receive. A single program per rank also fixes the order of the
//! messages on every link, which is what makes the cost exact.
//!
//! # Reduction order (floating point)
//! Node `v` of a tree computes `S(v) = (S(left) ⊕ x_v) ⊕ S(right)`,
//! leaving out missing children, so the root's result is the tree's
//! in-order fold: over ranks `0, 1, ..., N-1` for tree 0, bracketed by the
//! tree; for tree 1 over ranks `N-1, ..., 0` (`N` even) or `0, ..., N-1`
//! (`N` odd). For [`ReduceOp::Avg`] the root divides by `N` once and
//! broadcasts the quotient, so every rank holds the same bits.
//!
//! # Cost (ideal links)
//! Every operation of a rank's program ends at a time given by a max-plus
//! recurrence: a send of `b` bytes on link `u -> v` posted at `τ` occupies
//! the link from `max(τ, F_uv)` to `F_uv' = max(τ, F_uv) + t(b)`
//! (`t(b) = b/B`) and arrives at `F_uv' + α`; a receive posted at `τ` ends
//! at `max(τ, arrival)`, plus `γ·b` if it reduces; every operation starts
//! when the previous one of its rank ended. The completion time is the
//! longest path through this system, which [`cost_ps`] evaluates exactly,
//! operation by operation (linear in `N·K`), for every `N`, count and chunk
//! size.
//!
//! In closed form, for `K = 1` and `γ = 0` the critical path is the chunk
//! going up and down the deeper tree:
//!
//! ```text
//! T = 2·H·(α + t),   H = max(H_0, H_1) ≈ log2 N,   t = ⌈n/2⌉/B
//! ```
//!
//! (a unit test checks it for `N <= 64`). With `γ > 0` each interior node
//! on the critical path adds one `γ·n/2` per child. With `K` chunks of `c`
//! bytes the same path takes `2H·(α + t(c))` and the pipeline then streams
//! a chunk every `max(t(c), (2α + t(c))/W)` roughly (a hop and its credit
//! per `W` chunks, or the link), so `T ≈ 2H·(α + t(c)) + (K-1)·max(t(c),
//! (2α + t(c))/W)`; the exact value is the evaluated longest path.

use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Work};
use crate::layout::block_range;
use crate::outbox::Outbox;
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

mod shape;
pub(crate) use shape::{Node, node};
#[cfg(test)]
use shape::{btree, height};
use shape::{root, subtree_order, tree_heights};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "K = 1, γ = 0: 2H·(α + n/(2B)), H = tree height ≈ log2 N; K chunks of c bytes: ≈ 2H·(α + c/B) + (K-1)·max(c/B, (2α + c/B)/W) (exact: longest path of the max-plus system)";

/// Double-binary-tree allreduce, in place: on return every rank's `buf`
/// holds the reduction of all ranks' inputs, in the order of the module
/// docs. All ranks must call it with buffers of the same shape, the same
/// `op` and the same parameters. Works for any world size and any count.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let shape = buf.shape();
    let n = fabric.world_size();
    let plan = Plan::new(shape.count, n, shape.dtype.size_bytes(), params);
    let start = |to, tag, payload| fabric.send(to, tag, payload);
    let mut outbox = Outbox::new(fabric);
    for step in Program::new(&plan, fabric.rank()) {
        match step {
            Op::Send {
                to,
                tree,
                chunk,
                credit,
            } => {
                let range = plan.range(tree, chunk, credit);
                let tag = params.tag.phase(stream(tree, credit));
                outbox.push(to, tag, buf.extract(range));
            }
            Op::Recv {
                from,
                tree,
                chunk,
                action,
            } => {
                let credit = action == Action::Credit;
                let range = plan.range(tree, chunk, credit);
                let expect = Shape::new(shape.dtype, range.len());
                let tag = params.tag.phase(stream(tree, credit));
                let recv = fabric.recv(from, tag, expect);
                let received = outbox.alongside(recv, &start).await??;
                apply(fabric, buf, range, received, op, action).await?;
            }
            Op::Average { tree, chunk } if op == ReduceOp::Avg => {
                buf.divide(plan.chunk(tree, chunk), n);
            }
            Op::Average { .. } => {}
        }
    }
    Ok(outbox.flush(&start).await?)
}

/// Modelled time of one call in picoseconds under ideal links: the longest
/// path of the max-plus system of the module docs, evaluated exactly.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let plan = Plan::new(count, n, dtype.size_bytes(), params);
    let programs: Vec<Program> = (0..n).map(|r| Program::new(&plan, r)).collect();
    Evaluation::new(model, &plan, dtype.size_bytes() as u64).run(programs)
}

/// Every rank's buffer after the call: half `t` folded in tree `t`'s
/// in-order bracketing, the same on every rank.
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    if n == 1 {
        return inputs.to_vec();
    }
    let parts: Vec<(Range<usize>, Order)> = (0..2u8)
        .map(|t| {
            let half = block_range(count, 2, usize::from(t));
            (half, subtree_order(n, t, root(n, t)))
        })
        .collect();
    vec![fold_reference(inputs, op, &parts); n]
}

/// The chunking of one call.
#[derive(Clone, Copy, Debug)]
struct Plan {
    count: usize,
    world_size: usize,
    chunk_elems: usize,
    chunks: usize,
    window: usize,
    /// The height `H_t` of each tree.
    heights: [usize; 2],
}

impl Plan {
    fn new(count: usize, world_size: usize, elem_bytes: usize, params: &Params) -> Plan {
        let largest = block_range(count, 2, 0).len().max(1);
        // Never more than a half, so chunk arithmetic cannot overflow.
        let chunk_elems = usize::try_from(params.chunk_bytes / elem_bytes as u64)
            .unwrap_or(usize::MAX)
            .clamp(1, largest);
        let chunks = largest.div_ceil(chunk_elems);
        Plan {
            count,
            world_size,
            chunk_elems,
            chunks,
            window: params.slots.clamp(1, chunks),
            heights: tree_heights(world_size),
        }
    }

    /// The planned time of an event `offset` hops into the life of chunk
    /// `c`, in units of `1/W` hop: chunks start `2/W` hops apart, the
    /// credit-limited rate of `W` chunks per two hops.
    fn key(&self, c: usize, offset: usize) -> usize {
        2 * c + self.window * offset
    }

    /// What a message of chunk `chunk` of half `tree` carries: the chunk,
    /// or nothing for a credit.
    fn range(&self, tree: u8, chunk: usize, credit: bool) -> Range<usize> {
        let range = self.chunk(tree, chunk);
        if credit {
            range.start..range.start
        } else {
            range
        }
    }

    /// Elements of chunk `k` of half `tree` (possibly empty).
    fn chunk(&self, tree: u8, k: usize) -> Range<usize> {
        let half = block_range(self.count, 2, usize::from(tree));
        let start = half
            .start
            .saturating_add(k.saturating_mul(self.chunk_elems))
            .min(half.end);
        let end = start.saturating_add(self.chunk_elems).min(half.end);
        start..end
    }
}

/// What a receive does with the incoming chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// `incoming ⊕ local` (from a left child).
    ReduceLeft,
    /// `local ⊕ incoming` (from a right child).
    ReduceRight,
    /// Overwrite with the final result (from the parent).
    Copy,
    /// Nothing: a credit (from the parent) that frees a slot.
    Credit,
}

/// The tag phase of tree `tree`'s chunks (`0`, `1`) or credits (`2`, `3`).
fn stream(tree: u8, credit: bool) -> u8 {
    tree + 2 * u8::from(credit)
}

/// One operation of a rank's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Send chunk `chunk` of half `tree` to `to`, or the credit that
    /// says it has been consumed.
    Send {
        to: Rank,
        tree: u8,
        chunk: usize,
        credit: bool,
    },
    /// Receive chunk `chunk` of half `tree` from `from`.
    Recv {
        from: Rank,
        tree: u8,
        chunk: usize,
        action: Action,
    },
    /// At the root: the chunk is complete (divide it for an average).
    Average { tree: u8, chunk: usize },
}

/// The sequential program of rank `rank`: every group of operations at its
/// planned time (see the module docs), earliest first; ties in order of
/// chunk, then tree, then up before down.
///
/// Generated as it runs: a program has `O(K)` operations, and at 32 GiB in
/// 512 KiB chunks holding every rank's at once took gigabytes. It merges
/// four streams of groups (up and down, per tree), each in chunk order
/// with planned times two units apart, so the next group is always the
/// head of one stream: the order is the stable sort of all groups by
/// planned time, without the sort.
struct Program {
    plan: Plan,
    places: [Place; 2],
    /// The next chunk of each stream (`2·tree + down`); `plan.chunks` once
    /// it is exhausted (at once for the down stream of a root).
    next: [usize; 4],
    /// The operations of the current group not yet returned, last first.
    pending: Vec<Op>,
}

impl Program {
    fn new(plan: &Plan, rank: Rank) -> Program {
        let n = plan.world_size;
        let places = [Place::new(n, 0, rank), Place::new(n, 1, rank)];
        let mut next = [0; 4];
        for (t, place) in places.iter().enumerate() {
            if place.node.parent.is_none() {
                next[2 * t + 1] = plan.chunks;
            }
        }
        Program {
            plan: *plan,
            places,
            next,
            pending: Vec::with_capacity(8),
        }
    }

    /// The planned time of stream `s`'s group for chunk `c`.
    fn key(&self, s: usize, c: usize) -> usize {
        let t = s / 2;
        let (height, depth) = (self.plan.heights[t], self.places[t].depth);
        let offset = if s.is_multiple_of(2) {
            height - depth
        } else {
            height + depth
        };
        self.plan.key(c, offset)
    }

    /// Appends the next group's operations to `pending` (reversed);
    /// `false` once every stream is exhausted.
    fn next_group(&mut self) -> bool {
        let chunks = self.plan.chunks;
        let Some(s) = (0..4)
            .filter(|&s| self.next[s] < chunks)
            .min_by_key(|&s| (self.key(s, self.next[s]), self.next[s], s))
        else {
            return false;
        };
        let c = self.next[s];
        self.next[s] += 1;
        let (tree, node) = ((s / 2) as u8, self.places[s / 2].node);
        if s.is_multiple_of(2) {
            let up = Up {
                node,
                tree,
                chunk: c,
                window: self.plan.window,
                chunks,
            };
            up.ops(&mut self.pending);
        } else {
            down_chunk(node, tree, c, &mut self.pending);
        }
        self.pending.reverse();
        true
    }
}

impl Iterator for Program {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        loop {
            if let Some(op) = self.pending.pop() {
                return Some(op);
            }
            if !self.next_group() {
                return None;
            }
        }
    }
}

/// A rank's place in one tree: its node and depth (root 0).
#[derive(Clone, Copy, Debug)]
struct Place {
    node: Node,
    depth: usize,
}

impl Place {
    fn new(n: usize, tree: u8, rank: Rank) -> Place {
        let me = node(n, tree, rank);
        let mut depth = 0;
        let mut up = me.parent;
        while let Some(p) = up {
            depth += 1;
            up = node(n, tree, p).parent;
        }
        Place { node: me, depth }
    }
}

/// The reduce-up of one chunk of one tree at one rank.
#[derive(Clone, Copy, Debug)]
struct Up {
    node: Node,
    tree: u8,
    chunk: usize,
    window: usize,
    chunks: usize,
}

impl Up {
    /// A non-root first waits for the credit of chunk `chunk - W` (its slot
    /// at the parent is free again); an interior node receives and reduces
    /// its children's chunks (left, then right); then the partial result
    /// goes to the parent, or at the root the complete chunk goes down to
    /// the children; finally each child gets a credit for this chunk if it
    /// has a chunk `chunk + W` to send.
    fn ops(self, ops: &mut Vec<Op>) {
        let Up {
            node, tree, chunk, ..
        } = self;
        let recv = |from, chunk, action| Op::Recv {
            from,
            tree,
            chunk,
            action,
        };
        let send = |to, credit| Op::Send {
            to,
            tree,
            chunk,
            credit,
        };
        if let (Some(parent), Some(slot)) = (node.parent, chunk.checked_sub(self.window)) {
            ops.push(recv(parent, slot, Action::Credit));
        }
        ops.extend(node.left.map(|c| recv(c, chunk, Action::ReduceLeft)));
        ops.extend(node.right.map(|c| recv(c, chunk, Action::ReduceRight)));
        match node.parent {
            Some(to) => ops.push(send(to, false)),
            None => {
                ops.push(Op::Average { tree, chunk });
                ops.extend(node.children().map(|to| send(to, false)));
            }
        }
        if chunk + self.window < self.chunks {
            ops.extend(node.children().map(|to| send(to, true)));
        }
    }
}

/// The broadcast-down of chunk `chunk` of tree `tree` at a non-root `node`:
/// receive the final chunk from the parent and forward it to the children
/// (appended to `ops`).
fn down_chunk(node: Node, tree: u8, chunk: usize, ops: &mut Vec<Op>) {
    let from = node.parent.expect("only non-roots receive from above");
    ops.push(Op::Recv {
        from,
        tree,
        chunk,
        action: Action::Copy,
    });
    ops.extend(node.children().map(|to| Op::Send {
        to,
        tree,
        chunk,
        credit: false,
    }));
}

/// Applies a received chunk to `buf[range]` and charges any reduction.
async fn apply<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    range: Range<usize>,
    incoming: Payload,
    op: ReduceOp,
    action: Action,
) -> Result<(), CollectiveError> {
    let bytes = incoming.shape().bytes();
    match action {
        Action::Copy => return Ok(buf.copy_from(range, &incoming)?),
        Action::Credit => return Ok(()),
        Action::ReduceLeft => buf.reduce_from(range, &incoming, op)?,
        Action::ReduceRight => {
            buf.reduce_from_right(range, &incoming, op)?;
        }
    }
    fabric.compute(Work::Reduce { bytes }).await?;
    Ok(())
}

/// The double binary tree allreduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Tree;

impl CollectiveAlgorithm for Tree {
    fn name(&self) -> &str {
        "tree"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    module_items!();

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn messages_bound(&self, n: usize, count: usize, elem: usize, chunk: u64) -> u64 {
        messages_bound::per_chunk(n, count, elem, chunk)
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("tree")
    }
}

mod evaluation;
use evaluation::Evaluation;
#[cfg(test)]
mod tests;
