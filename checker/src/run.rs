//! A whole check: every parameter point searched in turn; a violation is
//! shrunk to the smallest failing parameters, then to the shortest failing
//! schedule, and the step after which failure became unavoidable is found.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::exec::Execution;
use super::explore::{self, Control, Reduction, SearchError, SearchStats, Target};
use super::program::Program;
use super::properties::{Baseline, Violation, describe_waits, evaluate};
use super::spec::{Buffering, Point, Search, Verdict};
use super::world::Choice;

/// A point whose reduced search ran at most this many schedules also gets
/// a naive count, to report what the reduction pruned.
const NAIVE_SMALL_DPOR: u64 = 1000;
/// The most schedules that automatic naive count runs.
const NAIVE_SMALL_CAP: u64 = 5000;

/// How `sim check` was asked to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Also run the naive exhaustive search on every point, to count what
    /// the reduction pruned.
    pub compare_naive: bool,
    /// Skip shrinking (report the first counterexample found).
    pub no_shrink: bool,
}

/// A failing case, minimal after shrinking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The parameters.
    pub point: Point,
    /// The schedule, choice by choice.
    pub choices: Vec<Choice>,
    /// Which choices had an alternative (more than one choice enabled).
    pub branching: Vec<bool>,
    /// What failed.
    pub violation: Violation,
    /// The number of steps after which every continuation fails (0: it
    /// fails whatever the schedule), if it was computed.
    pub unavoidable_after: Option<usize>,
    /// Each rank's state at the end.
    pub final_state: Vec<String>,
}

/// The search of one point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointReport {
    /// The parameters.
    pub point: Point,
    /// The search's counters.
    pub stats: SearchStats,
    /// The naive search's counters, if asked for.
    pub naive: Option<SearchStats>,
    /// Wall time of the search (the naive one excluded).
    pub wall: Duration,
    /// The violation found, if any.
    pub violation: Option<Verdict>,
}

/// What a check found.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Every point searched, in order (shrinking's searches excluded).
    pub points: Vec<PointReport>,
    /// The verdict.
    pub verdict: Verdict,
    /// The minimal counterexample, for any verdict but verified.
    pub counterexample: Option<Counterexample>,
    /// Whether every point was searched completely (no bound hit).
    pub complete: bool,
    /// Schedules run in total, shrinking included.
    pub schedules: u64,
    /// Wall time.
    pub wall: Duration,
}

/// A failing schedule: its choices, which had alternatives, the violation,
/// each rank's state at the end.
type Captured = (Vec<Choice>, Vec<bool>, Violation, Vec<String>);

/// One point's search: the first violation's schedule, if any.
struct Found {
    stats: SearchStats,
    first: Option<Captured>,
}

fn target<'a>(program: &'a Rc<Program>, point: Point) -> Target<'a> {
    Target {
        program,
        point,
        faults: program.faults,
        bounds: program.bounds,
    }
}

/// Records a failing execution as a schedule.
fn capture(exec: &Execution, program: &Program, violation: Violation) -> Captured {
    let choices: Vec<Choice> = exec.steps.iter().map(|s| s.choice).collect();
    let world = exec.world.borrow();
    let mut state = describe_waits(program, &world);
    for (r, rank) in world.ranks.iter().enumerate() {
        let line = match &rank.status {
            super::world::RankStatus::Running => continue,
            super::world::RankStatus::Finished(None) => format!("rank {r} finished"),
            super::world::RankStatus::Finished(Some(c)) => format!("rank {r} failed: {c}"),
            super::world::RankStatus::Crashed(c) => format!("rank {r} stopped: {c}"),
        };
        state.push(line);
    }
    state.sort_by_key(|l| {
        l.split_whitespace()
            .nth(1)
            .and_then(|x| x.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
    (choices, exec.branching.clone(), violation, state)
}

/// Searches one point, stopping at the first violation.
fn search_point(
    program: &Rc<Program>,
    point: Point,
    prefix: &[Choice],
    baseline: &mut Baseline,
    mut keep: impl FnMut(&Captured) -> Control,
) -> Result<Found, SearchError> {
    let t = target(program, point);
    if prefix.is_empty() {
        // Results are compared with the default schedule's (first enabled
        // choice at every step), whatever the search.
        seed_baseline(program, point, baseline)?;
    }
    let mut first: Option<Captured> = None;
    let visit = |exec: &Execution| {
        let cut = exec.steps.len() >= t.bounds.max_depth;
        match evaluate(program, point, exec, cut, baseline) {
            None => Control::Continue,
            Some(v) => {
                let found = capture(exec, program, v);
                let control = keep(&found);
                let better = match &first {
                    None => true,
                    Some((c, ..)) => found.0.len() < c.len(),
                };
                if better {
                    first = Some(found);
                }
                control
            }
        }
    };
    let stats = match program.search {
        Search::Exhaustive => explore::exhaustive(&t, Reduction::Dpor, prefix, visit)?,
        random => explore::random(&t, random, visit),
    };
    Ok(Found { stats, first })
}

/// Whether `smaller` is no larger than `p` on every axis (buffering kept).
fn dominated(smaller: &Point, p: &Point) -> bool {
    smaller != p
        && smaller.buffering == p.buffering
        && smaller.world_size <= p.world_size
        && smaller.count <= p.count
        && smaller.chunks <= p.chunks
        && smaller.root <= p.root
        && (smaller.in_place || !p.in_place)
}

/// Runs the whole check.
pub fn check(program: &Rc<Program>, options: Options) -> Result<CheckReport, SearchError> {
    #[allow(clippy::disallowed_methods)] // the report's wall time, never a result
    let started = Instant::now();
    let mut points = Vec::new();
    let mut schedules = 0;
    let mut complete = true;
    let mut failing: Option<(Point, Found)> = None;
    for point in program.points() {
        let cost = match program.check_cost {
            true => super::cost::check_formula(program, point)?,
            false => None,
        };
        {
            if let Some((violation, exec)) = cost {
                let first = capture(&exec, program, violation);
                let verdict = first.2.verdict;
                points.push(PointReport {
                    point,
                    stats: SearchStats::default(),
                    wall: Duration::ZERO,
                    naive: None,
                    violation: Some(verdict),
                });
                let (choices, branching, violation, final_state) = first;
                return Ok(CheckReport {
                    points,
                    verdict,
                    counterexample: Some(Counterexample {
                        point,
                        choices,
                        branching,
                        violation,
                        unavoidable_after: None,
                        final_state,
                    }),
                    complete,
                    schedules,
                    wall: started.elapsed(),
                });
            }
        }
        let mut baseline = Baseline::default();
        #[allow(clippy::disallowed_methods)] // the report's wall time, never a result
        let searched = Instant::now();
        let found = search_point(program, point, &[], &mut baseline, |_| Control::Stop)?;
        let wall = searched.elapsed();
        schedules += found.stats.schedules;
        complete &= found.stats.complete() || found.first.is_some();
        if program.search != Search::Exhaustive {
            complete = false;
        }
        // What the reduction pruned: asked for, or on small cases (a few
        // thousand interleavings at most), always.
        let small = found.stats.complete() && found.stats.schedules <= NAIVE_SMALL_DPOR;
        let naive = if program.search == Search::Exhaustive && (options.compare_naive || small) {
            let mut t = target(program, point);
            if !options.compare_naive {
                t.bounds.max_schedules = t.bounds.max_schedules.min(NAIVE_SMALL_CAP);
            }
            let stats = explore::exhaustive(&t, Reduction::Naive, &[], |_| Control::Continue)?;
            Some(stats)
        } else {
            None
        };
        points.push(PointReport {
            point,
            stats: found.stats,
            wall,
            naive,
            violation: found.first.as_ref().map(|f| f.2.verdict),
        });
        if found.first.is_some() {
            failing = Some((point, found));
            break;
        }
    }
    let Some((mut point, mut found)) = failing else {
        return Ok(CheckReport {
            points,
            verdict: Verdict::Verified,
            counterexample: None,
            complete,
            schedules,
            wall: started.elapsed(),
        });
    };
    if !options.no_shrink {
        // Smallest parameters: the first failing point among those no
        // larger on any axis, smallest first.
        let mut smaller: Vec<Point> = program
            .points()
            .into_iter()
            .filter(|q| dominated(q, &point))
            .collect();
        smaller.sort_by_key(|q| (q.world_size, q.count, q.chunks, q.root, !q.in_place));
        for q in smaller {
            let mut baseline = Baseline::default();
            let f = search_point(program, q, &[], &mut baseline, |_| Control::Stop)?;
            schedules += f.stats.schedules;
            if f.first.is_some() {
                point = q;
                found = f;
                break;
            }
        }
        // Shortest schedule: search the point through, keeping the shortest
        // violation of the same property.
        if program.search == Search::Exhaustive {
            let verdict = found.first.as_ref().map(|f| f.2.verdict);
            let mut baseline = Baseline::default();
            let f = search_point(program, point, &[], &mut baseline, |_| Control::Continue)?;
            schedules += f.stats.schedules;
            if let Some(short) = f.first {
                let shorter = found
                    .first
                    .as_ref()
                    .is_none_or(|old| short.0.len() < old.0.len());
                if Some(short.2.verdict) == verdict && shorter {
                    found.first = Some(short);
                }
            }
        }
    }
    let (choices, branching, violation, final_state) = found.first.expect("a failing point");
    let unavoidable_after = if program.search == Search::Exhaustive && !options.no_shrink {
        let (after, runs) = unavoidable(program, point, &choices)?;
        schedules += runs;
        after
    } else {
        None
    };
    Ok(CheckReport {
        points,
        verdict: violation.verdict,
        counterexample: Some(Counterexample {
            point,
            choices,
            branching,
            violation,
            unavoidable_after,
            final_state,
        }),
        complete,
        schedules,
        wall: started.elapsed(),
    })
}

/// The fewest steps of `choices` after which every continuation violates a
/// property (`None` if a search hit its bounds), and the schedules run.
/// Failure stays unavoidable once it is, so the answer is found by
/// bisection.
fn unavoidable(
    program: &Rc<Program>,
    point: Point,
    choices: &[Choice],
) -> Result<(Option<usize>, u64), SearchError> {
    let mut runs = 0;
    let (mut lo, mut hi) = (0usize, choices.len());
    // Invariant: failure is unavoidable after `hi` steps; unknown below.
    while lo < hi {
        let mid = (lo + hi) / 2;
        let mut baseline = Baseline::default();
        seed_baseline(program, point, &mut baseline)?;
        let mut escaped = false;
        let mut bounded = false;
        let t = target(program, point);
        let stats = explore::exhaustive(&t, Reduction::Dpor, &choices[..mid], |exec| {
            let cut = exec.steps.len() >= t.bounds.max_depth;
            if evaluate(program, point, exec, cut, &mut baseline).is_none() && !cut {
                escaped = true;
                return Control::Stop;
            }
            Control::Continue
        })?;
        runs += stats.schedules;
        if !stats.complete() && !escaped {
            bounded = true;
        }
        if bounded {
            return Ok((None, runs));
        }
        if escaped {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok((Some(hi), runs))
}

/// Puts the default schedule's results in `baseline`.
fn seed_baseline(
    program: &Rc<Program>,
    point: Point,
    baseline: &mut Baseline,
) -> Result<(), SearchError> {
    let t = target(program, point);
    let mut exec = explore::replay(&t, &[])?;
    while let Some(&c) = exec.enabled().first() {
        if exec.steps.len() >= t.bounds.max_depth {
            break;
        }
        exec.apply(c);
    }
    let _ = evaluate(program, point, &exec, true, baseline);
    Ok(())
}

/// What `min_buffering` found: the smallest passing capacity, if any, and
/// the report of every capacity tried.
pub type MinBuffering = (Option<usize>, Vec<(usize, CheckReport)>);

/// The smallest number of eager slots per connection with which the check
/// passes, trying `0..=max_slots`; with the report of the last failing
/// capacity (its deadlock) and of the passing one.
pub fn min_buffering(
    program: &Program,
    max_slots: usize,
    options: Options,
) -> Result<MinBuffering, SearchError> {
    let mut reports = Vec::new();
    for slots in 0..=max_slots {
        let mut p = program.clone();
        p.axes.buffering = vec![Buffering::Eager(slots)];
        let report = check(&Rc::new(p), options)?;
        let passed = report.verdict == Verdict::Verified;
        reports.push((slots, report));
        if passed {
            return Ok((Some(slots), reports));
        }
    }
    Ok((None, reports))
}
