//! Recursive-doubling allreduce: pairwise exchanges of the whole buffer at
//! distance 1, 2, 4, ... among a power-of-two set of ranks, with the
//! standard fold-in and fold-out of the ranks beyond it (MPICH's
//! `MPIR_Allreduce_intra_recursive_doubling`).
//!
//! # Schedule
//! Let `p` be the largest power of two `<= N` and `rem = N - p`.
//! 1. **Fold-in.** Among the first `2·rem` ranks, each even rank `2i` sends
//!    its whole buffer to `2i + 1`, which reduces it into its own. The even
//!    ranks then sit out until step 3.
//! 2. **Core.** The `p` remaining ranks get core indices: rank `2i + 1` is
//!    core `i` (`i < rem`), rank `r >= 2·rem` is core `r - rem`. At step
//!    `k = 0, 1, ..., log2(p) - 1`, core `j` exchanges its whole buffer with
//!    core `j XOR 2^k` and reduces what it receives.
//! 3. **Fold-out.** Rank `2i + 1` sends the result to rank `2i`.
//!
//! Every message carries `params.tag`: a pair of ranks exchanges at most
//! once per direction in steps 1 and 2 together, and the fold-out goes the
//! other way round.
//!
//! # Reduction order (floating point)
//! In every exchange both partners compute `lower ⊕ upper`, where `lower`
//! is the partial result of the partner with the lower core index, so both
//! hold the same bits. The fold-in computes `x_{2i} ⊕ x_{2i+1}`. The result
//! is therefore, for every element, a perfect binary tree over the core
//! indices `0..p` in increasing order whose leaf `j` is `x_{2j} ⊕ x_{2j+1}`
//! for `j < rem` and `x_{j+rem}` otherwise. For [`ReduceOp::Avg`] every core
//! rank divides that sum by `N` once after the last step (all hold the same
//! bits, so the quotients agree) before the fold-out.
//!
//! # Cost (ideal links)
//! With `b` bytes per rank, `t = b/B`, `g = γ·b` and `L = log2 p`, every
//! message is the whole buffer and each step is "send at ready time `T_j`,
//! receive at `T_peer + α + t`, reduce":
//!
//! ```text
//! T_j' = max(T_j, T_peer + α + t) + g
//! ```
//!
//! a max-plus recurrence. For `N = p` all ranks start at 0 and stay in
//! lockstep, so `T = L·(α + t + g)`. Otherwise the folded ranks start the
//! core at `α + t + g` and the others at 0; the longest path crosses to the
//! partner whenever that is later, and the fold-out adds `α + t` to the
//! folded ranks' finish. [`cost_ps`] evaluates the recurrence step by step
//! (per-rank ready times and per-link free times), which is exact for any
//! `N`; `chunk_bytes` is not used (one message per exchange).

use std::collections::HashMap;
use std::ops::Range;

use crate::algorithm::{CollectiveAlgorithm, messages_bound, module_items};
use crate::collective::Collective;
use crate::collective::{Params, reduction_is_trivial};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::payload::{Payload, Shape};
use crate::reference::{Order, fold_reference};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "N = 2^L: L·(α + n/B + γ·n); otherwise fold-in α + n/B + γ·n, then L = ⌊log2 N⌋ exchanges (max-plus), then fold-out α + n/B";

/// Recursive-doubling allreduce, in place: on return every rank's `buf`
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
    let fold = Fold::new(n);
    let tag = params.tag;
    // A power of two folds nothing: every rank is a core rank, and the
    // fold's (empty) steps are not even entered (a small call's cost is
    // its futures).
    let core = if fold.rem == 0 {
        fabric.rank()
    } else {
        match fold.fold_in(fabric, buf, op, tag).await? {
            Some(core) => core,
            None => return fold.fold_out(fabric, buf, tag).await,
        }
    };
    let whole = 0..shape.count;
    let mut mask = 1;
    while mask < fold.p {
        let peer = core ^ mask;
        let partner = fold.core_rank(peer);
        // `exchange_reduce` of the whole buffer, written out: one future
        // fewer nested in this one (for a buffer of a few bytes the
        // futures are most of a call's work). The same operations in the
        // same order.
        let outgoing = fabric.send_copy(buf, whole.clone());
        let received = fabric
            .exchange(partner, outgoing, partner, shape, tag)
            .await?;
        let bytes = received.shape().bytes();
        // The lower core's partial result is the left operand.
        if core < peer {
            buf.reduce_from_right(whole.clone(), &received, op)?;
        } else {
            buf.reduce_from(whole.clone(), &received, op)?;
        }
        fabric.recycle(received);
        fabric.compute(Work::Reduce { bytes }).await?;
        mask <<= 1;
    }
    if op == ReduceOp::Avg {
        buf.divide(whole, n);
    }
    if fold.rem == 0 {
        return Ok(());
    }
    fold.fold_out(fabric, buf, tag).await
}

/// Modelled time of one call in picoseconds under ideal links: the
/// max-plus recurrence of the module docs, evaluated exactly.
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let bytes = (count * dtype.size_bytes()) as u64;
    let fold = Fold::new(n);
    let mut timeline = Timeline::new(model, n);
    timeline.step(&fold.fold_in_messages(bytes));
    let mut mask = 1;
    while mask < fold.p {
        let messages: Vec<Message> = (0..fold.p)
            .map(|j| Message {
                from: fold.core_rank(j),
                to: fold.core_rank(j ^ mask),
                bytes,
                reduce: true,
            })
            .collect();
        timeline.step(&messages);
        mask <<= 1;
    }
    timeline.step(&fold.fold_out_messages(bytes));
    timeline.finish()
}

/// Every rank's buffer after the call: the perfect binary tree over core
/// indices described in the module docs, the same on every rank.
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    if n == 1 {
        return inputs.to_vec();
    }
    let fold = Fold::new(n);
    let order = fold.core_tree(0, fold.p);
    vec![fold_reference(inputs, op, &[(0..count, order)]); n]
}

/// How `N` ranks map onto the `p` (largest power of two `<= N`) core ranks:
/// the first `2·rem` ranks pair up, the odd one of each pair stays.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fold {
    /// The number of core ranks, the largest power of two `<= n`.
    pub p: usize,
    /// The number of pairs folded together, `n - p`.
    pub rem: usize,
}

impl Fold {
    /// The fold of a world of `n >= 1` ranks.
    pub fn new(n: usize) -> Fold {
        let p = 1 << n.ilog2();
        Fold { p, rem: n - p }
    }

    /// The core index of `rank`, or `None` for an even rank of the first
    /// `2·rem`, which sits the core out.
    pub fn core_index(self, rank: Rank) -> Option<usize> {
        if rank >= 2 * self.rem {
            Some(rank - self.rem)
        } else {
            (rank % 2 == 1).then_some(rank / 2)
        }
    }

    /// The rank of core index `j`.
    pub fn core_rank(self, j: usize) -> Rank {
        if j < self.rem {
            2 * j + 1
        } else {
            j + self.rem
        }
    }

    /// What core `j` holds after the fold-in, as a reduction order.
    pub fn leaf(self, j: usize) -> Order {
        if j < self.rem {
            Order::combine(Order::Rank(2 * j), Order::Rank(2 * j + 1))
        } else {
            Order::Rank(j + self.rem)
        }
    }

    /// The perfect binary tree over core indices `first..first + len`
    /// (`len` a power of two), lower half on the left.
    pub fn core_tree(self, first: usize, len: usize) -> Order {
        if len == 1 {
            return self.leaf(first);
        }
        let half = len / 2;
        Order::combine(
            self.core_tree(first, half),
            self.core_tree(first + half, half),
        )
    }

    /// Runs the fold-in on this rank: returns its core index, or `None` if
    /// it sent its buffer away and must wait for the fold-out.
    pub async fn fold_in<F: Fabric>(
        self,
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        tag: Tag,
    ) -> Result<Option<usize>, CollectiveError> {
        let r = fabric.rank();
        let whole = 0..buf.len();
        match self.core_index(r) {
            None => {
                fabric.send(r + 1, tag, buf.clone()).await?;
                Ok(None)
            }
            Some(core) if core < self.rem => {
                let incoming = fabric.recv(r - 1, tag, buf.shape()).await?;
                // The even partner's data is the left operand.
                reduce_into(fabric, buf, whole, incoming, op, true).await?;
                Ok(Some(core))
            }
            Some(core) => Ok(Some(core)),
        }
    }

    /// Runs the fold-out on this rank: a folded core rank sends the result
    /// to its even partner, which receives it.
    pub async fn fold_out<F: Fabric>(
        self,
        fabric: &F,
        buf: &mut Payload,
        tag: Tag,
    ) -> Result<(), CollectiveError> {
        let r = fabric.rank();
        match self.core_index(r) {
            None => {
                *buf = fabric.recv(r + 1, tag, buf.shape()).await?;
                Ok(())
            }
            Some(core) if core < self.rem => {
                fabric.send(r - 1, tag, buf.clone()).await?;
                Ok(())
            }
            Some(_) => Ok(()),
        }
    }

    /// The fold-in's messages, for the cost model.
    pub fn fold_in_messages(self, bytes: u64) -> Vec<Message> {
        (0..self.rem)
            .map(|i| Message {
                from: 2 * i,
                to: 2 * i + 1,
                bytes,
                reduce: true,
            })
            .collect()
    }

    /// The fold-out's messages, for the cost model.
    pub fn fold_out_messages(self, bytes: u64) -> Vec<Message> {
        (0..self.rem)
            .map(|i| Message {
                from: 2 * i + 1,
                to: 2 * i,
                bytes,
                reduce: false,
            })
            .collect()
    }
}

/// The partner of one pairwise exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    /// The partner's rank.
    pub peer: Rank,
    /// The tag of the exchange.
    pub tag: Tag,
    /// Whether this rank's partial result is the left operand.
    pub lower: bool,
}

/// Sends `send` to the partner while receiving its data for `keep`, then
/// sets `keep` to `lower ⊕ upper`, the order both partners agree on. The
/// outgoing copy is [`Fabric::send_copy`]'s and the received payload goes
/// back through [`Fabric::recycle`] (on the simulator and the checker an
/// `extract` and a drop; a real transport reuses the memory, so a small
/// exchange allocates nothing).
pub(crate) async fn exchange_reduce<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    send: Range<usize>,
    keep: Range<usize>,
    link: Link,
    op: ReduceOp,
) -> Result<(), CollectiveError> {
    let outgoing = fabric.send_copy(buf, send);
    let expect = Shape::new(buf.shape().dtype, keep.len());
    let received = fabric
        .exchange(link.peer, outgoing, link.peer, expect, link.tag)
        .await?;
    reduce_into(fabric, buf, keep, received, op, !link.lower).await
}

/// Sets `buf[range]` to `incoming ⊕ buf[range]` if `incoming_left`, else to
/// `buf[range] ⊕ incoming`, hands `incoming` back through
/// [`Fabric::recycle`], and charges the reduction.
pub(crate) async fn reduce_into<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    range: Range<usize>,
    incoming: Payload,
    op: ReduceOp,
    incoming_left: bool,
) -> Result<(), CollectiveError> {
    let bytes = incoming.shape().bytes();
    if incoming_left {
        buf.reduce_from(range, &incoming, op)?;
    } else {
        buf.reduce_from_right(range, &incoming, op)?;
    }
    fabric.recycle(incoming);
    fabric.compute(Work::Reduce { bytes }).await?;
    Ok(())
}

/// One message of a cost-model step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Message {
    /// The sender.
    pub from: Rank,
    /// The receiver.
    pub to: Rank,
    /// Payload bytes.
    pub bytes: u64,
    /// Whether the receiver reduces the payload (costing `γ·bytes`).
    pub reduce: bool,
}

/// The max-plus evaluation of a schedule made of steps in which every rank
/// posts its sends at its ready time and then waits for at most one
/// message: per-rank ready times and per-link free times, exactly as the
/// ideal-link simulator advances them.
#[derive(Debug)]
pub(crate) struct Timeline<'a> {
    model: &'a CostModel,
    ready: Vec<u64>,
    link_free: HashMap<(Rank, Rank), u64>,
}

impl<'a> Timeline<'a> {
    /// Every rank ready at time zero, every link free.
    pub fn new(model: &'a CostModel, n: usize) -> Timeline<'a> {
        Timeline {
            model,
            ready: vec![0; n],
            link_free: HashMap::new(),
        }
    }

    /// Applies one step: all sends leave at their sender's ready time
    /// (eager sends), then each receiver waits for its message and reduces.
    pub fn step(&mut self, messages: &[Message]) {
        let arrivals: Vec<u64> = messages.iter().map(|m| self.post(m)).collect();
        for (m, arrival) in messages.iter().zip(arrivals) {
            let done = self.ready[m.to].max(arrival);
            let reduce = if m.reduce {
                self.model.reduce_ps(m.bytes)
            } else {
                0
            };
            self.ready[m.to] = done.saturating_add(reduce);
        }
    }

    /// When the last rank is done.
    pub fn finish(&self) -> u64 {
        self.ready.iter().copied().max().unwrap_or(0)
    }

    /// Puts `m` on its link at the sender's ready time; returns its arrival.
    fn post(&mut self, m: &Message) -> u64 {
        let free = self.link_free.entry((m.from, m.to)).or_insert(0);
        let start = self.ready[m.from].max(*free);
        let done = start.saturating_add(self.model.wire_ps(m.bytes));
        *free = done;
        done.saturating_add(self.model.latency_ps)
    }
}

/// The recursive-doubling allreduce, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RecursiveDoubling;

impl CollectiveAlgorithm for RecursiveDoubling {
    fn name(&self) -> &str {
        "recursive_doubling"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    module_items!();

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_maps_ranks_onto_a_power_of_two() {
        let fold = Fold::new(7); // p = 4, rem = 3
        assert_eq!((fold.p, fold.rem), (4, 3));
        assert_eq!(fold.core_index(0), None);
        assert_eq!(fold.core_index(5), Some(2));
        assert_eq!(fold.core_index(6), Some(3));
        for j in 0..fold.p {
            assert_eq!(fold.core_index(fold.core_rank(j)), Some(j));
        }
        assert_eq!(Fold::new(8).rem, 0);
    }

    #[test]
    fn power_of_two_cost_is_lockstep() {
        let model = CostModel {
            latency_ps: 1000,
            bandwidth_bytes_per_s: 1e11,
            reduce_bytes_per_s: None,
        };
        // 400 bytes at 10 ps per byte: 3 steps of 1000 + 4000.
        assert_eq!(
            cost_ps(&model, 8, 100, DType::F32, &Params::default()),
            15_000
        );
    }
}
