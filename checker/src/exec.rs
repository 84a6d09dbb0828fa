//! One checked execution: every rank's program as a task over a
//! [`CheckFabric`], run to quiescence after each [`Choice`].
//!
//! Between two choices the ranks' own computation is deterministic: woken
//! ranks are polled in rank order until none is ready. Executions cannot
//! be copied (futures cannot be cloned), so the explorer re-runs a schedule
//! from the start to reach a state again (stateless model checking).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use super::fabric::CheckFabric;
use super::program::{Program, RankResult, rank_program};
use super::spec::{Faults, Point};
use super::world::{Causes, Choice, Digest, Effect, RankStatus, Units, World, hash_payload};

/// Ranks whose tasks were woken, polled in rank order.
#[derive(Default)]
struct Ready(Mutex<BTreeSet<usize>>);

struct RankWaker {
    rank: usize,
    ready: Arc<Ready>,
}

impl Wake for RankWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready
            .0
            .lock()
            .expect("ready set lock is never poisoned")
            .insert(self.rank);
    }
}

type Task = Pin<Box<dyn Future<Output = RankResult>>>;

/// A step of a schedule as the explorer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The choice made.
    pub choice: Choice,
    /// The steps it causally follows.
    pub causes: Causes,
    /// What it changed, its woken ranks' computation included.
    pub effect: Effect,
}

/// One execution in progress.
pub struct Execution {
    /// The world the ranks act on.
    pub world: Rc<RefCell<World>>,
    tasks: Vec<Option<Task>>,
    wakers: Vec<Waker>,
    ready: Arc<Ready>,
    /// Each rank's results, once its program has returned.
    pub results: Vec<Option<RankResult>>,
    /// The choices applied so far.
    pub steps: Vec<Step>,
    /// For each step, whether another choice was enabled there.
    pub branching: Vec<bool>,
}

impl Execution {
    /// Starts `program` at `point` and runs every rank until it blocks.
    pub fn start(program: &Rc<Program>, point: Point, faults: Faults) -> Execution {
        Execution::start_with(program, point, faults, Units::default())
    }

    /// [`Execution::start`], with the concurrent calls of each rank, or
    /// the branches of their joins, as separate units of the dependence
    /// relation as `units` says (see [`effect`](super::effect)).
    pub fn start_with(
        program: &Rc<Program>,
        point: Point,
        faults: Faults,
        units: Units,
    ) -> Execution {
        Execution::start_inner(program, point, faults, units, false)
    }

    /// [`Execution::start_with`], keeping what each unit observes so that
    /// [`Execution::state_key`] can name the state (the stateful search).
    pub fn start_observed(
        program: &Rc<Program>,
        point: Point,
        faults: Faults,
        units: Units,
    ) -> Execution {
        Execution::start_inner(program, point, faults, units, true)
    }

    fn start_inner(
        program: &Rc<Program>,
        point: Point,
        faults: Faults,
        units: Units,
        observe: bool,
    ) -> Execution {
        let n = point.world_size;
        let mut world = World::new(n, point.buffering, faults);
        world.calls_independent = units.calls;
        world.branches_independent = units.branches;
        if observe {
            world.observe();
        }
        let world = Rc::new(RefCell::new(world));
        let ready = Arc::new(Ready::default());
        let tasks = (0..n)
            .map(|rank| {
                let fabric = CheckFabric::new(rank, world.clone());
                let task: Task = Box::pin(rank_program(fabric, program.clone(), point));
                Some(task)
            })
            .collect();
        let wakers = (0..n)
            .map(|rank| {
                Waker::from(Arc::new(RankWaker {
                    rank,
                    ready: ready.clone(),
                }))
            })
            .collect();
        ready
            .0
            .lock()
            .expect("ready set lock is never poisoned")
            .extend(0..n);
        let mut exec = Execution {
            world,
            tasks,
            wakers,
            ready,
            results: (0..n).map(|_| None).collect(),
            steps: Vec::new(),
            branching: Vec::new(),
        };
        exec.run_ready();
        exec
    }

    /// The choices enabled now.
    pub fn enabled(&self) -> Vec<Choice> {
        self.world.borrow().enabled()
    }

    /// Applies `choice` (which must be enabled) and runs the ranks it wakes
    /// until they block again.
    pub fn apply(&mut self, choice: Choice) {
        let step = self.steps.len();
        let alternatives = self.world.borrow().enabled().len() > 1;
        self.branching.push(alternatives);
        let mut causes = self.world.borrow_mut().apply(choice, step);
        self.drop_stopped();
        self.run_ready();
        let mut world = self.world.borrow_mut();
        for c in world.end_step() {
            if c != step && !causes.after.contains(&c) {
                causes.after.push(c);
            }
        }
        let effect = std::mem::take(&mut world.effect);
        drop(world);
        self.steps.push(Step {
            choice,
            causes,
            effect,
        });
    }

    /// Drops the tasks of ranks the world has stopped (crashed): they never
    /// run again.
    fn drop_stopped(&mut self) {
        let stopped: Vec<usize> = {
            let world = self.world.borrow();
            (0..self.tasks.len())
                .filter(|&r| matches!(world.ranks[r].status, RankStatus::Crashed(_)))
                .collect()
        };
        for rank in stopped {
            // Dropped outside any borrow of the world.
            drop(self.tasks[rank].take());
        }
    }

    fn next_ready(&self) -> Option<usize> {
        let mut ready = self
            .ready
            .0
            .lock()
            .expect("ready set lock is never poisoned");
        ready.pop_first()
    }

    fn run_ready(&mut self) {
        while let Some(rank) = self.next_ready() {
            let Some(task) = self.tasks[rank].as_mut() else {
                continue;
            };
            let mut cx = Context::from_waker(&self.wakers[rank]);
            if let Poll::Ready(result) = task.as_mut().poll(&mut cx) {
                self.tasks[rank] = None;
                let error = result
                    .iter()
                    .flatten()
                    .find_map(|r| r.as_ref().err())
                    .map(|e| e.to_string());
                self.world.borrow_mut().finish(rank, error);
                self.results[rank] = Some(result);
                self.drop_stopped();
            }
        }
    }

    /// The outcome in one string: each rank's status and results (symbol
    /// ids, comparable within one thread) and the messages left over; two
    /// schedules with equal fingerprints ended in the same state.
    pub fn fingerprint(&self) -> String {
        let world = self.world.borrow();
        let mut out = String::new();
        for (rank, state) in world.ranks.iter().enumerate() {
            out += &format!("{rank}: {:?} {:?}\n", state.status, self.results[rank]);
        }
        out += &format!("left: {:?}", world.leftovers());
        out
    }

    /// The state's key for the stateful search: the world's
    /// ([`World::state_key`]) and each finished rank's results; needs an
    /// execution begun with [`Execution::start_observed`]. `clocks`: keep
    /// the latency timing model (a property reads it).
    pub fn state_key(&self, clocks: bool) -> u128 {
        let mut d = Digest::default();
        self.world.borrow().state_key(clocks, &mut d);
        for (rank, result) in self.results.iter().enumerate() {
            let Some(calls) = result else { continue };
            rank.hash(&mut d);
            for call in calls {
                match call {
                    None => 0u8.hash(&mut d),
                    Some(Ok(p)) => {
                        1u8.hash(&mut d);
                        hash_payload(p, &mut d);
                    }
                    Some(Err(e)) => (2u8, e.to_string()).hash(&mut d),
                }
            }
        }
        d.finish128()
    }

    /// Whether every rank has finished or stopped.
    pub fn all_done(&self) -> bool {
        self.tasks.iter().all(Option::is_none)
    }
}
