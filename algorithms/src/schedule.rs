//! Schedules as data: the steps one rank performs, executed by
//! [`execute`] and timed by [`simulate`].
//!
//! The log-step algorithms (recursive halving and doubling with their
//! non-power-of-two folds, Bruck) and the rings describe each rank's part
//! as a list of [`Step`]s. Running and costing the same list
//! keeps the two from drifting apart: the cost is the schedule evaluated in
//! the ideal-link model rather than a second description of it.

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

/// Runs this rank's part of a collective described by `steps(n, count,
/// rank)`: nothing for one rank or an empty buffer.
pub(crate) async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    tag: Tag,
    steps: impl FnOnce(usize, usize, Rank) -> Vec<Step>,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let count = buf.len();
    if n == 1 || count == 0 {
        return Ok(());
    }
    let mine = steps(n, count, fabric.rank());
    execute(fabric, buf, op, tag, &mine).await
}

/// The modelled time of a collective described by `steps(rank)`, every
/// rank's steps timed together: zero for one rank or an empty buffer.
pub(crate) fn cost(
    model: &CostModel,
    n: usize,
    count: usize,
    elem_bytes: usize,
    steps: impl Fn(Rank) -> Vec<Step>,
) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    let plans: Vec<Vec<Step>> = (0..n).map(steps).collect();
    simulate(model, elem_bytes, &plans)
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

/// One [`Step::Move`]: the send and the receive are one
/// [`Fabric::exchange`] rather than the send issued first, so back-ends
/// with rendezvous sends cannot deadlock on a pairwise exchange. A step
/// of one range each way whose received part is copied or reduced on the
/// left is one [`Fabric::exchange_in_place`] (a real transport lends the
/// sent part instead of copying it; the default is the same copy,
/// exchange, combine and recycle as below).
async fn move_step<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    tag: Tag,
    send: Option<&Part>,
    recv: Option<&(Part, Combine)>,
) -> Result<(), CollectiveError> {
    if let (Some(out), Some((into, combine))) = (send, recv)
        && let ([sent], [received]) = (out.ranges.as_slice(), into.ranges.as_slice())
    {
        let in_place = match combine {
            Combine::Copy => Some(None),
            Combine::IncomingLeft => Some(Some(op)),
            Combine::IncomingRight => None,
        };
        if let Some(reduce) = in_place {
            fabric
                .exchange_in_place(
                    out.peer,
                    into.peer,
                    tag,
                    buf,
                    sent.clone(),
                    received.clone(),
                    reduce,
                )
                .await?;
            if reduce.is_some() {
                let bytes = Shape::new(buf.shape().dtype, received.len()).bytes();
                fabric.compute(Work::Reduce { bytes }).await?;
            }
            return Ok(());
        }
    }
    if let (Some(out), None) = (send, recv)
        && let [sent] = out.ranges.as_slice()
    {
        fabric.send_from(out.peer, tag, buf, sent.clone()).await?;
        return Ok(());
    }
    let dtype = buf.shape().dtype;
    let outgoing = send.map(|part| (part.peer, gather(fabric, buf, &part.ranges)));
    let expect = |part: &Part| Shape::new(dtype, part.len());
    let received = match (outgoing, recv) {
        (Some((peer, payload)), Some((part, _))) => Some(
            fabric
                .exchange(peer, payload, part.peer, expect(part), tag)
                .await?,
        ),
        (Some((peer, payload)), None) => {
            fabric.send(peer, tag, payload).await?;
            None
        }
        (None, Some((part, _))) => Some(fabric.recv(part.peer, tag, expect(part)).await?),
        (None, None) => None,
    };
    let (Some((part, combine)), Some(incoming)) = (recv, received) else {
        return Ok(());
    };
    scatter(buf, &part.ranges, &incoming, *combine, op)?;
    let bytes = incoming.shape().bytes();
    fabric.recycle(incoming);
    if *combine != Combine::Copy {
        fabric.compute(Work::Reduce { bytes }).await?;
    }
    Ok(())
}

/// The elements of `ranges`, concatenated into one payload (one range:
/// [`Fabric::send_copy`]'s copy).
fn gather<F: Fabric>(fabric: &F, buf: &Payload, ranges: &[Range<usize>]) -> Payload {
    if let [range] = ranges {
        return fabric.send_copy(buf, range.clone());
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
                buf.reduce_from_right(range.clone(), &piece, op)?;
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
