//! The executor: drives every rank's program as a task in virtual time.
//!
//! ```text
//!            +----------------------- wake ------------------------+
//!            v                                                     |
//!   ready queue --poll--> rank task --send/recv/compute--> World --+
//!                                                            | schedule
//!                                                            v
//!                      pop earliest (time, seq) <------ EventQueue
//! ```
//!
//! The loop polls every woken task (in the order they were woken) until none
//! is ready, then advances virtual time to the earliest event and applies
//! it, which may wake tasks again. When no task is ready and no event is
//! left, the run is over; a rank that has not finished then is deadlocked,
//! and the run returns a [`DeadlockReport`] instead of hanging.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use algorithms::{Rank, Time};

use crate::deadlock::{BlockedRank, DeadlockReport, PendingRecv};
use crate::event::EventKind;
use crate::fabric::SimFabric;
use crate::fold::RankAction;
use crate::network::LinkUsage;
use crate::network::timeline::LinkTimeline;
use crate::trace::TraceLog;
use crate::world::{EngineStats, World, WorldConfig};

/// Ranks whose tasks were woken and must be polled, without duplicates.
struct ReadyQueue {
    queue: Mutex<VecDeque<Rank>>,
    /// Set (under the lock) when `queue` gets a rank, cleared when it is
    /// drained: the executor looks for woken ranks after every event,
    /// and most events wake nobody, so an empty queue is seen without
    /// taking the lock.
    nonempty: AtomicBool,
    queued: Vec<AtomicBool>,
}

impl ReadyQueue {
    fn push(&self, rank: Rank) {
        if !self.queued[rank].swap(true, Ordering::Relaxed) {
            let mut queue = self
                .queue
                .lock()
                .expect("ready queue lock is never poisoned");
            queue.push_back(rank);
            self.nonempty.store(true, Ordering::Release);
        }
    }

    /// Moves every queued rank, in order, into the empty `batch` (one lock
    /// for the lot, none if nothing is queued; the two buffers swap, so
    /// nothing allocates). Each stays marked as queued until
    /// [`Self::taken`], so a wake-up before its turn does not queue it
    /// twice.
    fn drain_into(&self, batch: &mut VecDeque<Rank>) {
        debug_assert!(batch.is_empty(), "a batch is drained before the next");
        if !self.nonempty.load(Ordering::Acquire) {
            return;
        }
        let mut queue = self
            .queue
            .lock()
            .expect("ready queue lock is never poisoned");
        std::mem::swap(&mut *queue, batch);
        self.nonempty.store(false, Ordering::Release);
    }

    /// Marks `rank`, just taken from a batch, as no longer queued: a
    /// wake-up from now on queues it again.
    fn taken(&self, rank: Rank) {
        self.queued[rank].store(false, Ordering::Relaxed);
    }
}

/// The waker of one rank's task: waking it queues the rank for polling.
struct RankWaker {
    rank: Rank,
    ready: Arc<ReadyQueue>,
}

impl Wake for RankWaker {
    fn wake(self: Arc<Self>) {
        self.ready.push(self.rank);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.rank);
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct Execution<T> {
    /// Each rank's program output, or `None` if it never finished. In a
    /// folded run, each simulated rank's, by slot (the rank at slot `s` is
    /// [`WorldConfig::simulated_rank`]`(s)`).
    pub outputs: Vec<Option<T>>,
    /// When each rank's program finished (by slot in a folded run).
    pub finished_at: Vec<Option<Time>>,
    /// Virtual time of the last event.
    pub end_time: Time,
    /// Set when some rank could not finish.
    pub deadlock: Option<DeadlockReport>,
    /// Set when an event would have fallen after the end of virtual time
    /// (2^64 ps, about 213 days); the run stopped there.
    pub out_of_time: bool,
    /// Set when a message was refused because its route crosses a link
    /// the topology's partial rotation does not carry (see
    /// [`crate::fold`]): the sender and why, naming the link. The run
    /// stopped there (its sender's call failed too).
    pub refused: Option<(Rank, String)>,
    /// Engine counters.
    pub stats: EngineStats,
    /// Per-link-direction counters of a topology model (`None` with ideal
    /// links), indexed by `LinkId::index`.
    pub link_usage: Option<Vec<LinkUsage>>,
    /// What the run recorded, if the config asked for a trace.
    pub trace: Option<TraceLog>,
    /// Ranks stopped by a scheduled crash, with when (their outputs are
    /// `None`).
    pub crashed: Vec<(Rank, Time)>,
    /// Link traffic per time bin, if the network config asked for it.
    pub link_timeline: Option<LinkTimeline>,
}

/// Stops the tasks of the ranks whose crash time has come: dropping a task
/// drops its pending receives (they leave the world's waits) and it never
/// runs again; if it was waiting at the synchronisation point, it leaves
/// it, so the others are seen waiting there for it.
fn stop_crashed<F>(
    world: &Rc<RefCell<World>>,
    tasks: &mut [Option<Pin<Box<F>>>],
    crashed: &mut Vec<(Rank, Time)>,
) {
    let (crashing, now) = {
        let mut w = world.borrow_mut();
        let crashing = std::mem::take(&mut w.crashing);
        for rank in &crashing {
            w.sync.waiting.retain(|(r, _)| r != rank);
        }
        (crashing, w.now)
    };
    for rank in crashing {
        if tasks[rank].take().is_some() {
            crashed.push((rank, now));
        }
    }
}

/// Runs `program` on every rank of a world described by `config`, each as a
/// task with its own [`SimFabric`], until all finish or nothing is left to
/// happen.
///
/// Deterministic: the same config and program give the same execution.
pub fn run<T, Fut>(config: WorldConfig, mut program: impl FnMut(SimFabric) -> Fut) -> Execution<T>
where
    Fut: Future<Output = T>,
{
    let n = config.simulated_ranks();
    let world_size = config.world_size;
    // The rank each slot runs, and the fold's action (see `crate::fold`).
    let simulated: Vec<Rank> = (0..n).map(|slot| config.simulated_rank(slot)).collect();
    let action = config.fold.clone();
    let world = Rc::new(RefCell::new(World::new(config)));
    let ready = Arc::new(ReadyQueue {
        queue: Mutex::new(VecDeque::with_capacity(n)),
        nonempty: AtomicBool::new(false),
        queued: (0..n).map(|_| AtomicBool::new(false)).collect(),
    });
    let wakers: Vec<Waker> = (0..n)
        .map(|rank| {
            Waker::from(Arc::new(RankWaker {
                rank,
                ready: Arc::clone(&ready),
            }))
        })
        .collect();
    let mut tasks: Vec<Option<Pin<Box<Fut>>>> = (0..n)
        .map(|slot| {
            let fabric = SimFabric::new(simulated[slot], Rc::clone(&world));
            Some(Box::pin(program(fabric)))
        })
        .collect();
    let mut outputs: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut finished_at = vec![None; n];
    for rank in 0..n {
        ready.push(rank);
    }
    let mut batch: VecDeque<Rank> = VecDeque::with_capacity(n);
    let mut timed_out = None;
    let mut crashed: Vec<(Rank, Time)> = Vec::new();
    // Ranks that crash at time 0 never run.
    stop_crashed(&world, &mut tasks, &mut crashed);
    // Unfinished ranks, kept as a count so the loop never scans `tasks`.
    let mut live = n - crashed.len();
    // When a rank last ran: a deadlock is reported from then (or from the
    // last message's arrival), not from later events that changed nothing
    // (a link restored too late, a dead rank's timer).
    let mut last_progress = Time::ZERO;

    loop {
        // Ranks are polled in the order they were woken, as if popped one
        // by one from the ready queue, but it is locked once per batch.
        loop {
            if batch.is_empty() {
                ready.drain_into(&mut batch);
            }
            let Some(rank) = batch.pop_front() else {
                break;
            };
            ready.taken(rank);
            let Some(task) = tasks[rank].as_mut() else {
                continue; // a stale wake-up of a finished task
            };
            last_progress = world.borrow().now;
            let mut cx = Context::from_waker(&wakers[rank]);
            if let Poll::Ready(out) = task.as_mut().poll(&mut cx) {
                outputs[rank] = Some(out);
                finished_at[rank] = Some(world.borrow().now);
                tasks[rank] = None;
                live -= 1;
            }
        }
        let mut w = world.borrow_mut();
        if w.out_of_time || w.refused.is_some() {
            break;
        }
        if live == 0 {
            // Every rank is done: what is left (scheduled link changes or
            // crashes, messages nobody receives) cannot change the result,
            // and the run ends at its last rank's last event.
            break;
        }
        // The watchdog fires before anything later than its deadline.
        if let Some((started, deadline)) = w.watchdog
            && w.queue.peek_time().is_some_and(|t| t > deadline)
        {
            w.now = deadline;
            timed_out = Some((started, deadline));
            break;
        }
        // Results leaving the switches at this instant go down once
        // nothing else happens at it, in an order of their own.
        if !w.pending_down.is_empty() && w.queue.peek_time().is_none_or(|t| t > w.now) {
            w.flush_down_legs();
            continue;
        }
        let Some(event) = w.queue.pop() else {
            break;
        };
        if let EventKind::Crash { rank } = event.kind
            && tasks[rank].is_none()
        {
            continue; // it had already finished: the crash changes nothing
        }
        debug_assert!(event.time >= w.now, "time never goes backwards");
        w.now = event.time;
        w.apply(event.kind);
        let crash = !w.crashing.is_empty();
        drop(w);
        if crash {
            let before = crashed.len();
            stop_crashed(&world, &mut tasks, &mut crashed);
            live -= crashed.len() - before;
        }
    }

    let mut w = world.borrow_mut();
    let out_of_time = w.out_of_time;
    let refused = w.refused.take();
    let deadlock = (!out_of_time && refused.is_none() && tasks.iter().any(Option::is_some)).then(|| {
        let blocked = (0..n)
            .filter(|&slot| tasks[slot].is_some())
            .map(|slot| BlockedRank {
                rank: simulated[slot],
                waiting_for: w
                    .waits_of(slot)
                    .map(|wait| PendingRecv {
                        from: wait.from,
                        tag: wait.tag,
                        bytes: wait.expect.bytes(),
                        from_finished: tasks[w.config.slot_of(wait.from)].is_none(),
                        from_crashed: crashed.iter().any(|(r, _)| *r == wait.from),
                        label: None,
                    })
                    .collect(),
                at_sync: w.sync.waiting.iter().any(|(r, _)| *r == simulated[slot]),
            })
            .collect();
        let blocked = match &action {
            Some(action) => unfold_blocked(blocked, action),
            None => blocked,
        };
        let at = if timed_out.is_some() {
            w.now
        } else {
            last_progress.max(w.last_activity)
        };
        let report = DeadlockReport::new(at, blocked, world_size)
            .with_crashes(crashed.clone())
            .with_down_links(w.down_links())
            .with_transport_failures(
                w.transport_timeouts
                    .iter()
                    .map(|f| {
                        format!(
                            "the {} transport from rank {} to rank {} gave up at {} after {} retries: {}",
                            f.transport.name(),
                            f.src,
                            f.dst,
                            f.at,
                            f.retries,
                            f.cause()
                        )
                    })
                    .collect(),
            );
        match timed_out {
            Some((started, deadline)) => {
                report.timed_out(started, deadline.as_ps() - started.as_ps())
            }
            // With no event left, a message still in flight can never
            // arrive; the buffers it waits in may form a cycle (a cycle
            // seen while things still move, at a watchdog, may pass).
            None => report
                .with_stuck_messages(w.undelivered())
                .with_buffer_cycle(w.buffer_cycle()),
        }
    });
    // A deadlocked run counts its pauses up to the deadlock, not to the
    // timers that found it.
    let link_usage = w.link_usage(deadlock.as_ref().map_or(w.now, |d| d.time));
    Execution {
        outputs,
        finished_at,
        end_time: w.now,
        deadlock,
        out_of_time,
        refused,
        stats: w.stats(),
        link_usage,
        trace: w.take_trace(),
        link_timeline: w.take_timeline(),
        crashed,
    }
}

/// The blocked ranks of a folded run (one representative per orbit of
/// `action` simulated) as the full run has them: rank `g^k(b)` waits for
/// what `b` waits for, moved `k` steps, so the report lists every rank and
/// finds the cycle through them (a representative waiting for rank `d`
/// waits for `d`'s moved copy, which only the unfolded list shows).
fn unfold_blocked(blocked: Vec<BlockedRank>, action: &RankAction) -> Vec<BlockedRank> {
    if action.order() == 1 {
        return blocked;
    }
    (0..action.order())
        .flat_map(|k| {
            blocked.iter().map(move |b| BlockedRank {
                rank: action.apply(b.rank, k),
                waiting_for: b
                    .waiting_for
                    .iter()
                    .map(|w| PendingRecv {
                        from: action.apply(w.from, k),
                        ..w.clone()
                    })
                    .collect(),
                at_sync: b.at_sync,
            })
        })
        .collect()
}
