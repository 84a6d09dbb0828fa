//! The tree allreduce's cost on ideal links: every rank's program evaluated in max-plus time.

use std::collections::{HashMap, VecDeque};

use super::*;

/// The max-plus evaluation of every rank's program under ideal links:
/// each rank runs until it must wait for a message not yet sent, and
/// rounds repeat until every program has finished.
pub(super) struct Evaluation<'a> {
    model: &'a CostModel,
    plan: &'a Plan,
    elem_bytes: u64,
    link_free: HashMap<(Rank, Rank), u64>,
    /// Arrival times of messages sent but not yet received, per
    /// `(from, to, stream)` in FIFO order.
    inbox: HashMap<(Rank, Rank, u8), VecDeque<u64>>,
}

impl<'a> Evaluation<'a> {
    pub(super) fn new(model: &'a CostModel, plan: &'a Plan, elem_bytes: u64) -> Evaluation<'a> {
        Evaluation {
            model,
            plan,
            elem_bytes,
            link_free: HashMap::new(),
            inbox: HashMap::new(),
        }
    }

    /// When the last rank finishes its program.
    ///
    /// Ranks run until they block on a message not yet sent; a send wakes
    /// the rank blocked on its stream, so every operation is visited once.
    /// The result does not depend on the order ranks run in: each link has
    /// one sender, which uses it in program order.
    pub(super) fn run(mut self, mut programs: Vec<Program>) -> u64 {
        let n = programs.len();
        let mut clock = vec![0u64; n];
        // Each rank's operation in progress (the next one to run).
        let mut current: Vec<Option<Op>> = programs.iter_mut().map(Iterator::next).collect();
        let mut ready: VecDeque<Rank> = (0..n).collect();
        let mut blocked: HashMap<(Rank, Rank, u8), Rank> = HashMap::new();
        while let Some(r) = ready.pop_front() {
            while let Some(op) = current[r] {
                let Some(t) = self.advance(r, clock[r], op) else {
                    if let Op::Recv {
                        from, tree, action, ..
                    } = op
                    {
                        blocked.insert((from, r, stream(tree, action == Action::Credit)), r);
                    }
                    break;
                };
                clock[r] = t;
                current[r] = programs[r].next();
                if let Op::Send {
                    to, tree, credit, ..
                } = op
                    && let Some(waiter) = blocked.remove(&(r, to, stream(tree, credit)))
                {
                    ready.push_back(waiter);
                }
            }
        }
        assert!(
            current.iter().all(Option::is_none),
            "tree schedule must not deadlock"
        );
        clock.into_iter().max().unwrap_or(0)
    }

    /// Runs `op` on rank `r` at time `now`: its end time, or `None` if it
    /// waits for a message that has not been sent yet.
    pub(super) fn advance(&mut self, r: Rank, now: u64, op: Op) -> Option<u64> {
        match op {
            Op::Send {
                to,
                tree,
                chunk,
                credit,
            } => {
                let bytes = self.bytes(tree, chunk, credit);
                let free = self.link_free.entry((r, to)).or_insert(0);
                let done = now.max(*free).saturating_add(self.model.wire_ps(bytes));
                *free = done;
                let arrival = done.saturating_add(self.model.latency_ps);
                self.inbox
                    .entry((r, to, stream(tree, credit)))
                    .or_default()
                    .push_back(arrival);
                Some(now)
            }
            Op::Recv {
                from,
                tree,
                chunk,
                action,
            } => {
                let credit = action == Action::Credit;
                let key = (from, r, stream(tree, credit));
                let arrival = self.inbox.get_mut(&key)?.pop_front()?;
                let reduce = match action {
                    Action::Copy | Action::Credit => 0,
                    Action::ReduceLeft | Action::ReduceRight => {
                        self.model.reduce_ps(self.bytes(tree, chunk, false))
                    }
                };
                Some(now.max(arrival).saturating_add(reduce))
            }
            Op::Average { .. } => Some(now),
        }
    }

    /// Payload bytes of a message.
    pub(super) fn bytes(&self, tree: u8, chunk: usize, credit: bool) -> u64 {
        self.plan.range(tree, chunk, credit).len() as u64 * self.elem_bytes
    }
}
