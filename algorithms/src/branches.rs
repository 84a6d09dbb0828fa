//! Independent branches of one call, joined: [`join_branches`] and
//! [`try_join_branches`], the joins NCCL-style algorithms run their
//! channels with; and the events by which an outbox's lanes (sends kept in
//! flight while the rank receives) tell the fabric which lane runs.
//!
//! A call that runs several futures at once which never look at each
//! other (NCCL's channels: disjoint parts of the buffer, disjoint tags,
//! results gathered once every channel is done) says so by joining them
//! here rather than with `futures_util::future::join_all`. On the
//! simulator and the real transports, whose [`Fabric::branching`] does
//! not listen, the join *is* `join_all` (or `try_join_all`); the model
//! checker listens, and uses the [`Branching`] events to know which branch posts each operation, so it
//! can treat the branches as separate units of its search (their
//! completions on one rank commute) and check that they are (see the
//! checker's `world::branches` module).
//!
//! # Contract
//! Branches observe each other only through the fabric: none reads the
//! clock, waits for another's operation or shares mutable state with
//! another (a `Cell`, a `RefCell`, a channel between them), and the
//! parent reads their outputs only once the join returns. The checker
//! falls back to its full search when it sees a breach, but a branch that
//! reads state another branch writes, only when its own operations
//! complete, can hide one from it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::{join_all, try_join_all};

use crate::fabric::Fabric;

mod woken;

/// What a join of branches tells its fabric ([`Fabric::branching`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Branching {
    /// A join of `branches` branches starts, polled by its parent; a
    /// fabric that listens returns the join's id, and is told the rest.
    Begin {
        /// How many branches it joins.
        branches: usize,
    },
    /// Branch `branch` of join `join` is about to be polled.
    Enter {
        /// The join's id.
        join: u64,
        /// The branch's index.
        branch: usize,
    },
    /// Branch `branch` of join `join` was polled; `finished` if it
    /// returned.
    Leave {
        /// The join's id.
        join: u64,
        /// The branch's index.
        branch: usize,
        /// Whether it returned.
        finished: bool,
    },
    /// Every branch of join `join` has returned; the parent goes on.
    End {
        /// The join's id.
        join: u64,
    },
    /// Join `join` ends without waiting for every branch: a branch
    /// failed (`try_join_branches`; `unfinished` branches, perhaps none,
    /// had not returned) or the join was dropped before its end.
    Abandon {
        /// The join's id.
        join: u64,
        /// Branches that had not returned.
        unfinished: usize,
    },
    /// An outbox (`outbox.rs`: sends kept in flight in lanes, one per
    /// destination and tag) opens in the flow polling it: until it closes,
    /// that flow (its *main flow*) and each lane are told apart, a lane's
    /// sends being started by the outbox alone. A fabric that listens
    /// returns an id (and is told the rest), as for [`Branching::Begin`].
    LanesOpen,
    /// Lane `lane` of the outbox is about to be polled or to start a send.
    LaneEnter {
        /// The lane's index (in order of first use).
        lane: usize,
    },
    /// The lane entered last was polled.
    LaneLeave,
    /// The main flow observed the lanes: every send of every lane has
    /// completed (`all_done`, the outbox was flushed), or one failed (its
    /// error goes to the main flow).
    LanesSeen {
        /// Whether every send completed (rather than one failing).
        all_done: bool,
    },
    /// The main flow waits for the lanes (a flush found a send not
    /// complete: `waiting`), or waits for something else (it drives the
    /// lanes alongside a receive: not `waiting`). While it waits, a lane's
    /// completion may be the one it waits for.
    LanesAwaited {
        /// Whether the main flow waits for the lanes.
        waiting: bool,
    },
    /// The outbox is gone: what its flow posts now is the flow's again.
    LanesClose,
}

/// Runs `branches` at once and returns their outputs in order, once every
/// one has returned (`join_all`, with the fabric told of each branch).
/// On a fabric that does not listen, up to 30 branches are polled in
/// order as `join_all` polls them, but only those woken since their last
/// poll (see the `woken` module); more go to `join_all`, which polls the
/// woken ones in wake order.
pub async fn join_branches<F, I>(fabric: &F, branches: I) -> Vec<<I::Item as Future>::Output>
where
    F: Fabric + ?Sized,
    I: IntoIterator,
    I::Item: Future,
{
    let branches: Vec<_> = branches.into_iter().collect();
    let begin = Branching::Begin {
        branches: branches.len(),
    };
    let Some(join) = fabric.branching(begin) else {
        if branches.len() <= woken::SMALL {
            return woken::WokenJoin::new(branches).await;
        }
        return join_all(branches).await;
    };
    match Join::new(fabric, join, branches, |_| false).await {
        Ok(outputs) => outputs,
        Err(_) => unreachable!("a join that never stops early"),
    }
}

/// Runs `branches` at once: their outputs in order once every one has
/// returned `Ok`, or the first error (in the order the branches return),
/// the others dropped (`try_join_all`, with the fabric told of each
/// branch).
pub async fn try_join_branches<F, I, T, E>(fabric: &F, branches: I) -> Result<Vec<T>, E>
where
    F: Fabric + ?Sized,
    I: IntoIterator,
    I::Item: Future<Output = Result<T, E>>,
{
    let branches: Vec<_> = branches.into_iter().collect();
    let begin = Branching::Begin {
        branches: branches.len(),
    };
    let Some(join) = fabric.branching(begin) else {
        return try_join_all(branches).await;
    };
    match Join::new(fabric, join, branches, Result::is_err).await {
        Ok(outputs) => outputs.into_iter().collect(),
        Err(failed) => failed.map(|_| Vec::new()),
    }
}

/// The join behind both functions on a fabric that listens: every
/// branch's output in order, or the first output that `stops` it (the
/// others dropped).
struct Join<'a, F: Fabric + ?Sized, Fut: Future> {
    fabric: &'a F,
    /// Its id.
    id: u64,
    branches: Vec<Option<Pin<Box<Fut>>>>,
    outputs: Vec<Option<Fut::Output>>,
    /// Whether an output ends the join early.
    stops: fn(&Fut::Output) -> bool,
    done: bool,
}

impl<'a, F: Fabric + ?Sized, Fut: Future> Join<'a, F, Fut> {
    fn new(
        fabric: &'a F,
        id: u64,
        branches: impl IntoIterator<Item = Fut>,
        stops: fn(&Fut::Output) -> bool,
    ) -> Self {
        let branches: Vec<_> = branches.into_iter().map(|b| Some(Box::pin(b))).collect();
        let outputs = branches.iter().map(|_| None).collect();
        Join {
            fabric,
            id,
            branches,
            outputs,
            stops,
            done: false,
        }
    }

    fn unfinished(&self) -> usize {
        self.branches.iter().filter(|b| b.is_some()).count()
    }
}

// Nothing of a `Join` is ever pinned in place: its branches are boxed, and
// its outputs are only moved.
impl<F: Fabric + ?Sized, Fut: Future> Unpin for Join<'_, F, Fut> {}

impl<F: Fabric + ?Sized, Fut: Future> Future for Join<'_, F, Fut> {
    type Output = Result<Vec<Fut::Output>, Fut::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Join` is `Unpin`: its branches are boxed.
        let this = self.get_mut();
        let join = this.id;
        for i in 0..this.branches.len() {
            let Some(branch) = this.branches[i].as_mut() else {
                continue;
            };
            this.fabric.branching(Branching::Enter { join, branch: i });
            let polled = branch.as_mut().poll(cx);
            this.fabric.branching(Branching::Leave {
                join,
                branch: i,
                finished: polled.is_ready(),
            });
            let Poll::Ready(out) = polled else { continue };
            this.branches[i] = None;
            if (this.stops)(&out) {
                let unfinished = this.unfinished();
                this.fabric
                    .branching(Branching::Abandon { join, unfinished });
                this.done = true;
                this.branches.clear();
                return Poll::Ready(Err(out));
            }
            this.outputs[i] = Some(out);
        }
        if this.unfinished() > 0 {
            return Poll::Pending;
        }
        this.done = true;
        this.fabric.branching(Branching::End { join });
        Poll::Ready(Ok(this
            .outputs
            .iter_mut()
            .map(|o| o.take().expect("every branch returned"))
            .collect()))
    }
}

impl<F: Fabric + ?Sized, Fut: Future> Drop for Join<'_, F, Fut> {
    fn drop(&mut self) {
        let unfinished = self.unfinished();
        if !self.done && unfinished > 0 {
            let join = self.id;
            self.fabric
                .branching(Branching::Abandon { join, unfinished });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    /// A fabric that records the branching events it is told of, and
    /// listens (returns a join's id) if `.1`.
    struct Recording(std::cell::RefCell<Vec<Branching>>, bool);

    impl Fabric for Recording {
        fn rank(&self) -> crate::Rank {
            0
        }
        fn world_size(&self) -> usize {
            1
        }
        fn now(&self) -> crate::Time {
            crate::Time(0)
        }
        async fn send(
            &self,
            _to: crate::Rank,
            _tag: crate::Tag,
            _payload: crate::Payload,
        ) -> Result<(), crate::FabricError> {
            Ok(())
        }
        async fn recv(
            &self,
            _from: crate::Rank,
            _tag: crate::Tag,
            expect: crate::Shape,
        ) -> Result<crate::Payload, crate::FabricError> {
            Ok(crate::Payload::phantom(expect.dtype, expect.count))
        }
        async fn compute(&self, _work: crate::Work) -> Result<(), crate::FabricError> {
            Ok(())
        }
        fn branching(&self, event: Branching) -> Option<u64> {
            self.0.borrow_mut().push(event);
            self.1.then_some(7)
        }
    }

    #[test]
    fn join_returns_outputs_in_order_and_tells_the_fabric() {
        let fabric = Recording(Default::default(), true);
        let out = join_branches(&fabric, (0..2).map(|i| async move { i * 10 }))
            .now_or_never()
            .expect("ready branches");
        assert_eq!(out, vec![0, 10]);
        let events = fabric.0.borrow();
        assert_eq!(events[0], Branching::Begin { branches: 2 });
        assert_eq!(events[1], Branching::Enter { join: 7, branch: 0 });
        assert_eq!(
            events[2],
            Branching::Leave {
                join: 7,
                branch: 0,
                finished: true
            }
        );
        assert_eq!(events.last(), Some(&Branching::End { join: 7 }));
    }

    #[test]
    fn try_join_stops_at_the_first_error_and_abandons_the_rest() {
        let fabric = Recording(Default::default(), true);
        type Branch = std::pin::Pin<Box<dyn Future<Output = Result<u32, u32>>>>;
        let branches: Vec<Branch> = vec![
            Box::pin(async { Err(1) }),
            Box::pin(futures_util::future::pending()),
        ];
        let out = try_join_branches(&fabric, branches)
            .now_or_never()
            .expect("the error ends it");
        assert_eq!(out, Err(1));
        let events = fabric.0.borrow();
        assert!(events.contains(&Branching::Abandon {
            join: 7,
            unfinished: 1
        }));
        assert!(!events.contains(&Branching::End { join: 7 }));
    }

    /// A fabric that does not listen gets the plain joins, told only of
    /// their beginning.
    #[test]
    fn a_fabric_that_does_not_listen_gets_join_all() {
        let fabric = Recording(Default::default(), false);
        let out = join_branches(&fabric, (0..3).map(|i| async move { i }))
            .now_or_never()
            .expect("ready branches");
        assert_eq!(out, vec![0, 1, 2]);
        let results = [Ok(1), Err(2)];
        let failed = try_join_branches(&fabric, results.map(|r| async move { r }))
            .now_or_never()
            .expect("ready branches");
        assert_eq!(failed, Err::<Vec<u32>, u32>(2));
        assert_eq!(
            *fabric.0.borrow(),
            vec![
                Branching::Begin { branches: 3 },
                Branching::Begin { branches: 2 }
            ]
        );
    }
}
