//! Reduce-scatter by recursive halving, for any number of ranks.
//!
//! # Schedule
//! Let `p` be the largest power of two `≤ N` and `e = N - p` the extra
//! ranks. The standard non-power-of-two handling folds them in first:
//!
//! 1. **Fold in.** For `i < e`, rank `2i` sends its whole buffer to rank
//!    `2i + 1`, which reduces it in and stands for both from now on; rank
//!    `2i` sits out. The `p` remaining ranks get new numbers: rank `2i + 1`
//!    is `i` (`i < e`), rank `r ≥ 2e` is `r - e`. New rank `i` *owns* the
//!    blocks of the ranks it stands for (`2i, 2i+1` for `i < e`, else
//!    `i + e`), so the blocks of new ranks `lo..hi` are one contiguous
//!    range of the buffer.
//! 2. **Halving.** For `m = p/2, p/4, ..., 1`, new rank `i` exchanges with
//!    `i XOR m`: of the new-rank interval `[lo, lo + 2m)` both currently
//!    reduce, the lower partner keeps `[lo, lo + m)` and sends the upper
//!    half, the upper partner the reverse; each reduces what it receives
//!    into the half it keeps. Message sizes halve every step.
//! 3. **Fold out.** New rank `i < e` now holds the complete blocks `2i` and
//!    `2i + 1` and sends block `2i` to rank `2i`.
//!
//! # Reduction order (floating point)
//! Every combination puts the lower rank's partial result on the left: the
//! fold-in computes `x_{2i} ⊕ x_{2i+1}`, and in the halving both partners
//! compute `lower ⊕ upper`. Writing `leaf(a)` for new rank `a`'s input
//! after the fold-in, every element is reduced by the same tree
//! `T(a, m) = T(a, 2m) ⊕ T(a | m, 2m)` for `a` with bit `m` clear,
//! `T(a, p) = leaf(a)`, result `T(0, 1)`: the top split is by the lowest
//! bit of the new rank (the last exchange), the leaves are the deepest.
//! For [`ReduceOp::Avg`] the owner divides the complete sum by `N` once,
//! before the fold-out. Partners apply the same tree, so results are
//! identical wherever they are computed.
//!
//! # Cost (ideal links)
//! With `N` dividing the buffer of `n` bytes, a power-of-two `N` costs
//!
//! ```text
//! T = log2(N)·α + (N-1)/N · n/B + (N-1)/N · n·γ
//! ```
//!
//! (step `k` moves and reduces `n/2^k` bytes). Otherwise the fold-in adds
//! `α + n/B + n·γ` on the folded ranks and the fold-out `α + n/(N·B)`; the
//! folded ranks start the halving late, which their partners wait for.
//! [`cost_ps`] evaluates the schedule exactly in the ideal-link model
//! (each message `α + ⌈b/B⌉` after its link frees, each reduction
//! `⌈b·γ⌉` on the receiver), which is the closed form above in the
//! power-of-two case. Chunking (`chunk_bytes`) is not used.

use std::ops::Range;

use crate::collective::Params;
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::layout::blocks_range;
use crate::payload::Payload;
use crate::reference::{Order, fold_reference};

use schedule::{Combine, Part, Step};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "N = 2^k: log2(N)·α + (N-1)/N·n/B + (N-1)/N·n·γ; otherwise + α + n/B + n·γ (fold in) + α + n/(N·B) (fold out)";

/// Modelled time of one call in picoseconds under ideal links: the
/// schedule of the module docs evaluated exactly (zero for `N = 1` or an
/// empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let plans: Vec<Vec<Step>> = (0..n).map(|r| Fold::new(n, count).steps(r)).collect();
    schedule::simulate(model, dtype.size_bytes(), &plans)
}

/// Every rank's buffer after the call: each element reduced by the tree of
/// the module docs (only block `r` of rank `r` is defined).
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let fold = Fold::new(n, count);
    let order = fold.tree(0, 1);
    vec![fold_reference(inputs, op, &[(0..count, order)]); n]
}

/// Recursive-halving reduce-scatter, in place: on return block `r` of
/// rank `r`'s `buf` (see [`crate::layout::block_range`]) holds the
/// reduction of every rank's block `r`; the rest of `buf` is scratch.
/// Works for any world size and count; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let count = buf.len();
    if n == 1 || count == 0 {
        return Ok(());
    }
    let steps = Fold::new(n, count).steps(fabric.rank());
    schedule::execute(fabric, buf, op, params.tag, &steps).await
}

/// The non-power-of-two fold shared by the schedule and the reference.
#[derive(Clone, Copy, Debug)]
struct Fold {
    n: usize,
    count: usize,
    /// The largest power of two not above `n`.
    p: usize,
    /// Ranks folded in: `n - p`.
    extra: usize,
}

impl Fold {
    fn new(n: usize, count: usize) -> Fold {
        let p = 1 << n.ilog2();
        Fold {
            n,
            count,
            p,
            extra: n - p,
        }
    }

    /// The rank that new rank `i` is.
    fn rank_of(&self, i: usize) -> Rank {
        if i < self.extra {
            2 * i + 1
        } else {
            i + self.extra
        }
    }

    /// The new rank of `r`, or `None` for a rank that sits out.
    fn new_rank(&self, r: Rank) -> Option<usize> {
        if r >= 2 * self.extra {
            Some(r - self.extra)
        } else {
            (r % 2 == 1).then_some(r / 2)
        }
    }

    /// The first block owned by new rank `i` (`N` for `i = p`).
    fn first_block(&self, i: usize) -> usize {
        if i < self.extra {
            2 * i
        } else {
            i + self.extra
        }
    }

    /// The buffer elements owned by new ranks `lo..hi`.
    fn owned(&self, lo: usize, hi: usize) -> Range<usize> {
        let first = self.first_block(lo);
        blocks_range(self.count, self.n, first, self.first_block(hi) - first)
    }

    /// Rank `r`'s steps.
    fn steps(&self, r: Rank) -> Vec<Step> {
        let whole = 0..self.count;
        let Some(i) = self.new_rank(r) else {
            // A folded rank hands its buffer over and gets its block back.
            let block = blocks_range(self.count, self.n, r, 1);
            return vec![
                Step::Move {
                    send: Some(Part::one(r + 1, whole)),
                    recv: None,
                },
                Step::Move {
                    send: None,
                    recv: Some((Part::one(r + 1, block), Combine::Copy)),
                },
            ];
        };
        let mut steps = Vec::new();
        if i < self.extra {
            // The sender is the lower rank, hence the left operand.
            let recv = Part::one(r - 1, whole);
            steps.push(Step::Move {
                send: None,
                recv: Some((recv, Combine::IncomingLeft)),
            });
        }
        let mut lo = 0;
        let mut m = self.p / 2;
        while m > 0 {
            let peer = self.rank_of(i ^ m);
            let mid = lo + m;
            let (keep, give, combine) = if i & m == 0 {
                ((lo, mid), (mid, mid + m), Combine::IncomingRight)
            } else {
                ((mid, mid + m), (lo, mid), Combine::IncomingLeft)
            };
            steps.push(Step::exchange(
                Part::one(peer, self.owned(give.0, give.1)),
                Part::one(peer, self.owned(keep.0, keep.1)),
                combine,
            ));
            lo = keep.0;
            m /= 2;
        }
        steps.push(Step::Divide {
            range: self.owned(i, i + 1),
            ranks: self.n,
        });
        if i < self.extra {
            let block = blocks_range(self.count, self.n, r - 1, 1);
            steps.push(Step::Move {
                send: Some(Part::one(r - 1, block)),
                recv: None,
            });
        }
        steps
    }

    /// The input of new rank `a` after the fold-in.
    fn leaf(&self, a: usize) -> Order {
        if a < self.extra {
            Order::combine(Order::Rank(2 * a), Order::Rank(2 * a + 1))
        } else {
            Order::Rank(a + self.extra)
        }
    }

    /// `T(a, m)` of the module docs: what the exchanges at distances
    /// below `m` combine, for new ranks agreeing with `a` on those bits.
    fn tree(&self, a: usize, m: usize) -> Order {
        if m >= self.p {
            return self.leaf(a);
        }
        let lower = self.tree(a & !m, 2 * m);
        let upper = self.tree(a | m, 2 * m);
        Order::combine(lower, upper)
    }
}

/// Schedules as data: the steps one rank performs, executed by
/// [`schedule::execute`] and timed by [`schedule::simulate`].
///
/// The log-step algorithms (recursive halving and doubling with their
/// non-power-of-two folds, Bruck) and the rings describe each rank's part
/// as a list of [`schedule::Step`]s. Running and costing the same list
/// keeps the two from drifting apart: the cost is the schedule evaluated in
/// the ideal-link model rather than a second description of it.
///
/// This belongs in a shared module; it lives here because this file is
/// owned by the same author as its other users.
pub(crate) mod schedule {
    use std::collections::{HashMap, VecDeque};
    use std::ops::Range;

    use crate::cost::CostModel;
    use crate::dtype::ReduceOp;
    use crate::error::CollectiveError;
    use crate::fabric::{Fabric, Rank, Tag, Work};
    use crate::payload::{Payload, Shape};

    /// Elements of the local buffer that travel as one message, in order.
    /// Several ranges let a block set that wraps around the end of the
    /// buffer (Bruck) go as one message instead of two.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) struct Part {
        /// The other rank.
        pub(crate) peer: Rank,
        /// The buffer ranges, concatenated in this order.
        pub(crate) ranges: Vec<Range<usize>>,
    }

    impl Part {
        /// One contiguous range exchanged with `peer`.
        pub(crate) fn one(peer: Rank, range: Range<usize>) -> Part {
            Part {
                peer,
                ranges: vec![range],
            }
        }

        /// Total elements of the message.
        pub(crate) fn len(&self) -> usize {
            self.ranges.iter().map(|r| r.len()).sum()
        }
    }

    /// What a received message does to the local buffer.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Combine {
        /// Overwrite the local elements.
        Copy,
        /// `local = incoming ⊕ local`: the sender is the left operand.
        IncomingLeft,
        /// `local = local ⊕ incoming`: the receiver is the left operand.
        IncomingRight,
    }

    /// One step of one rank.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) enum Step {
        /// Sends one message and receives one, concurrently (either may be
        /// absent), then applies the received one.
        Move {
            /// What to send, if anything.
            send: Option<Part>,
            /// What to receive and how to apply it, if anything.
            recv: Option<(Part, Combine)>,
        },
        /// Divides `range` by `ranks` if the operator is an average: the
        /// rank that completes a sum ends it before passing it on.
        Divide {
            /// The completed elements.
            range: Range<usize>,
            /// The divisor, the world size.
            ranks: usize,
        },
    }

    impl Step {
        /// A step that sends `send` and receives `recv`, applied by `combine`.
        pub(crate) fn exchange(send: Part, recv: Part, combine: Combine) -> Step {
            Step::Move {
                send: Some(send),
                recv: Some((recv, combine)),
            }
        }
    }

    /// Runs `steps` on this rank, all messages tagged `tag`.
    pub(crate) async fn execute<F: Fabric>(
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        tag: Tag,
        steps: &[Step],
    ) -> Result<(), CollectiveError> {
        for step in steps {
            match step {
                Step::Move { send, recv } => {
                    move_step(fabric, buf, op, tag, send.as_ref(), recv.as_ref()).await?;
                }
                Step::Divide { range, ranks } => {
                    if op == ReduceOp::Avg {
                        buf.divide(range.clone(), *ranks);
                    }
                }
            }
        }
        Ok(())
    }

    /// One [`Step::Move`]: the send is joined with the receive rather
    /// than issued first, so back-ends with rendezvous sends cannot
    /// deadlock on a pairwise exchange.
    async fn move_step<F: Fabric>(
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        tag: Tag,
        send: Option<&Part>,
        recv: Option<&(Part, Combine)>,
    ) -> Result<(), CollectiveError> {
        let dtype = buf.shape().dtype;
        let outgoing = send.map(|part| (part.peer, gather(buf, &part.ranges)));
        let sending = async {
            match outgoing {
                Some((peer, payload)) => fabric.send(peer, tag, payload).await,
                None => Ok(()),
            }
        };
        let receiving = async {
            match recv {
                Some((part, _)) => {
                    let expect = Shape::new(dtype, part.len());
                    fabric.recv(part.peer, tag, expect).await.map(Some)
                }
                None => Ok(None),
            }
        };
        let (sent, received) = futures_util::join!(sending, receiving);
        sent?;
        let (Some((part, combine)), Some(incoming)) = (recv, received?) else {
            return Ok(());
        };
        scatter(buf, &part.ranges, &incoming, *combine, op)?;
        if *combine != Combine::Copy {
            let bytes = incoming.shape().bytes();
            fabric.compute(Work::Reduce { bytes }).await?;
        }
        Ok(())
    }

    /// The elements of `ranges`, concatenated into one payload.
    fn gather(buf: &Payload, ranges: &[Range<usize>]) -> Payload {
        if let [range] = ranges {
            return buf.extract(range.clone());
        }
        let total = ranges.iter().map(|r| r.len()).sum();
        let mut out = Payload::zeros(buf.shape().dtype, total, buf.is_phantom());
        let mut at = 0;
        for range in ranges {
            out.copy_from(at..at + range.len(), &buf.extract(range.clone()))
                .expect("the ranges fit the message by construction");
            at += range.len();
        }
        out
    }

    /// Applies the concatenated `incoming` to `ranges` of `buf`.
    fn scatter(
        buf: &mut Payload,
        ranges: &[Range<usize>],
        incoming: &Payload,
        combine: Combine,
        op: ReduceOp,
    ) -> Result<(), CollectiveError> {
        let mut at = 0;
        for range in ranges {
            let piece = incoming.extract(at..at + range.len());
            at += range.len();
            match combine {
                Combine::Copy => buf.copy_from(range.clone(), &piece)?,
                Combine::IncomingLeft => buf.reduce_from(range.clone(), &piece, op)?,
                Combine::IncomingRight => {
                    // `reduce_from` puts its argument on the left, so the
                    // local elements reduce into the incoming copy.
                    let mut result = piece;
                    result.reduce_from(0..range.len(), &buf.extract(range.clone()), op)?;
                    buf.copy_from(range.clone(), &result)?;
                }
            }
        }
        Ok(())
    }

    /// The time at which the last rank finishes `plans` (one step list per
    /// rank, `elem_bytes` per element) under ideal links: each ordered pair
    /// has its own FIFO link, a message starts when posted or when the link
    /// frees, occupies it `wire_ps`, arrives `α` later; a receive completes
    /// at the later of the rank's clock and the arrival, then reduces.
    ///
    /// Ranks are advanced in turn as far as their messages allow. Each
    /// message's timing depends only on its sender's clock and earlier
    /// messages on its link, so the order of evaluation does not matter.
    pub(crate) fn simulate(model: &CostModel, elem_bytes: usize, plans: &[Vec<Step>]) -> u64 {
        let mut sim = Timing {
            model,
            elem_bytes: elem_bytes as u64,
            clock: vec![0; plans.len()],
            next: vec![0; plans.len()],
            posted: vec![false; plans.len()],
            link_free: HashMap::new(),
            in_flight: HashMap::new(),
        };
        loop {
            let progressed = (0..plans.len()).fold(false, |p, r| sim.advance(r, &plans[r]) | p);
            if !progressed {
                break;
            }
        }
        debug_assert!(
            sim.next.iter().zip(plans).all(|(&i, p)| i == p.len()),
            "a schedule deadlocked"
        );
        sim.clock.into_iter().max().unwrap_or(0)
    }

    /// The state of [`simulate`].
    struct Timing<'a> {
        model: &'a CostModel,
        elem_bytes: u64,
        clock: Vec<u64>,
        next: Vec<usize>,
        /// Whether the current step's send has been posted.
        posted: Vec<bool>,
        link_free: HashMap<(Rank, Rank), u64>,
        in_flight: HashMap<(Rank, Rank), VecDeque<u64>>,
    }

    impl Timing<'_> {
        /// Runs rank `r` until it waits for a message not yet sent;
        /// returns whether it took any step.
        fn advance(&mut self, r: Rank, plan: &[Step]) -> bool {
            let mut progressed = false;
            while let Some(step) = plan.get(self.next[r]) {
                if let Step::Move { send, recv } = step {
                    if !self.posted[r] {
                        if let Some(part) = send {
                            self.post(r, part);
                        }
                        self.posted[r] = true;
                    }
                    if let Some((part, combine)) = recv
                        && !self.deliver(r, part, *combine)
                    {
                        return progressed;
                    }
                }
                self.posted[r] = false;
                self.next[r] += 1;
                progressed = true;
            }
            progressed
        }

        fn post(&mut self, r: Rank, part: &Part) {
            let free = self.link_free.entry((r, part.peer)).or_insert(0);
            let start = (*free).max(self.clock[r]);
            *free = start + self.model.wire_ps(part.len() as u64 * self.elem_bytes);
            let arrival = *free + self.model.latency_ps;
            self.in_flight
                .entry((r, part.peer))
                .or_default()
                .push_back(arrival);
        }

        /// Completes a receive on `r` if its message was sent.
        fn deliver(&mut self, r: Rank, part: &Part, combine: Combine) -> bool {
            let queue = self.in_flight.entry((part.peer, r)).or_default();
            let Some(arrival) = queue.pop_front() else {
                return false;
            };
            let reduce = match combine {
                Combine::Copy => 0,
                _ => self.model.reduce_ps(part.len() as u64 * self.elem_bytes),
            };
            self.clock[r] = self.clock[r].max(arrival) + reduce;
            true
        }
    }
}
