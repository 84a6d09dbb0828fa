//! [`WokenJoin`]: `join_all` of a few branches that polls only the woken.
//!
//! `futures_util`'s `join_all` of up to 30 futures polls every unfinished
//! one, in order, each time its task wakes. An NCCL call joins one branch
//! per channel (16 or more), each waiting on a receive most of the time,
//! so every message delivered to a rank polled all of them: one woken
//! branch and fifteen that had nothing new. Here each branch gets a waker
//! of its own that marks it and wakes the task; a poll of the join polls
//! the marked branches, in index order. A branch not woken since its last
//! poll would have returned `Pending` with nothing done (futures only make
//! progress after a wake), so the branches that do run, run in the same
//! order and at the same moments as under `join_all`: the same operations
//! in the same order, fewer polls.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The most branches [`WokenJoin`] takes (`join_all`'s own limit for
/// polling in order; above it, `join_all` polls the woken ones in wake
/// order).
pub(crate) const SMALL: usize = 30;

/// What the branches' wakers share: a mark per branch and the task's
/// waker.
struct Marks {
    woken: Vec<AtomicBool>,
    task: AtomicWaker,
}

/// Branch `index`'s waker: marks it and wakes the task.
struct BranchWaker {
    marks: Arc<Marks>,
    index: usize,
}

impl Wake for BranchWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.marks.woken[self.index].store(true, Ordering::Release);
        self.marks.task.wake();
    }
}

/// Every branch's output, in order, once all have returned; see the
/// module docs.
pub(crate) struct WokenJoin<Fut: Future> {
    branches: Vec<Option<Pin<Box<Fut>>>>,
    outputs: Vec<Option<Fut::Output>>,
    wakers: Vec<Waker>,
    marks: Arc<Marks>,
    unfinished: usize,
}

impl<Fut: Future> WokenJoin<Fut> {
    /// Joins `branches`, every one marked for its first poll.
    pub(crate) fn new(branches: Vec<Fut>) -> Self {
        let n = branches.len();
        let marks = Arc::new(Marks {
            woken: (0..n).map(|_| AtomicBool::new(true)).collect(),
            task: AtomicWaker::new(),
        });
        let wakers = (0..n)
            .map(|index| {
                Waker::from(Arc::new(BranchWaker {
                    marks: Arc::clone(&marks),
                    index,
                }))
            })
            .collect();
        WokenJoin {
            branches: branches.into_iter().map(|b| Some(Box::pin(b))).collect(),
            outputs: (0..n).map(|_| None).collect(),
            wakers,
            marks,
            unfinished: n,
        }
    }
}

// The branches are boxed; nothing else is pinned.
impl<Fut: Future> Unpin for WokenJoin<Fut> {}

impl<Fut: Future> Future for WokenJoin<Fut> {
    type Output = Vec<Fut::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.marks.task.register(cx.waker());
        for i in 0..this.branches.len() {
            let Some(branch) = this.branches[i].as_mut() else {
                continue;
            };
            if !this.marks.woken[i].swap(false, Ordering::AcqRel) {
                continue;
            }
            let mut branch_cx = Context::from_waker(&this.wakers[i]);
            if let Poll::Ready(out) = branch.as_mut().poll(&mut branch_cx) {
                this.branches[i] = None;
                this.outputs[i] = Some(out);
                this.unfinished -= 1;
            }
        }
        if this.unfinished > 0 {
            return Poll::Pending;
        }
        Poll::Ready(
            this.outputs
                .iter_mut()
                .map(|o| o.take().expect("every branch returned"))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Ready after `waits` polls that were each preceded by a wake (it
    /// wakes itself once per poll while `wake` is set), counting polls.
    struct Countdown {
        waits: usize,
        wake: bool,
        polls: Rc<Cell<usize>>,
    }

    impl Future for Countdown {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls.set(self.polls.get() + 1);
            if self.waits == 0 {
                return Poll::Ready(self.polls.get());
            }
            self.waits -= 1;
            if self.wake {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }

    #[test]
    fn polls_only_woken_branches_and_returns_outputs_in_order() {
        let polls: Vec<Rc<Cell<usize>>> = (0..3).map(|_| Rc::new(Cell::new(0))).collect();
        let branches = vec![
            Countdown {
                waits: 3,
                wake: true,
                polls: polls[0].clone(),
            },
            Countdown {
                waits: 1,
                wake: false,
                polls: polls[1].clone(),
            },
            Countdown {
                waits: 0,
                wake: false,
                polls: polls[2].clone(),
            },
        ];
        let mut join = WokenJoin::new(branches);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..3 {
            assert!(Pin::new(&mut join).poll(&mut cx).is_pending());
        }
        // Branch 1 was never woken after its first poll: polled once,
        // while join_all would have polled it on each of the three.
        assert_eq!(polls[1].get(), 1);
        join.wakers[1].wake_by_ref();
        match Pin::new(&mut join).poll(&mut cx) {
            Poll::Ready(out) => assert_eq!(out, vec![4, 2, 1]),
            Poll::Pending => panic!("every branch was ready"),
        }
    }
}
