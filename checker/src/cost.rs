//! The cost property: an algorithm's traffic and critical path against its
//! closed-form cost formula ([`algorithms::Algorithm::cost_ps`]).
//!
//! Two checks. On every explored schedule, each rank sends the same bytes
//! and messages as on the first (traffic does not depend on the order of
//! deliveries). On the timed schedule (each step delivers the message that
//! arrives first under a timing model, as the simulator's ideal links
//! would, with eager sends into unbounded buffers as the formulas
//! assume), the critical path equals the formula under the same model: with
//! latency only (alpha = 1 ps, infinite bandwidth) it counts the steps of
//! the longest chain of messages; with bandwidth only (1 byte per ps,
//! alpha = 0) it measures the bytes on the critical path. A performance
//! bug (an extra round, a block sent twice) is then a counterexample.

use std::rc::Rc;

use algorithms::{CostModel, DType};

use super::exec::Execution;
use super::explore::{SearchError, Target, replay};
use super::program::{Program, params};
use super::properties::Violation;
use super::spec::{Buffering, Point, Verdict};
use super::world::{Choice, TIMINGS};

/// The cost model matching timing model `m` of [`TIMINGS`].
fn model(m: usize) -> CostModel {
    let t = TIMINGS[m];
    CostModel {
        latency_ps: t.latency_ps,
        bandwidth_bytes_per_s: if t.ps_per_byte == 0 {
            f64::INFINITY
        } else {
            1e12 / t.ps_per_byte as f64
        },
        reduce_bytes_per_s: None,
    }
}

/// Runs the timed schedule of model `m` to its end: the schedule and the
/// execution.
fn timed(target: &Target<'_>, m: usize) -> Result<Execution, SearchError> {
    let mut exec = replay(target, &[])?;
    loop {
        if exec.steps.len() >= target.bounds.max_depth {
            break;
        }
        let enabled = exec.enabled();
        let next = {
            let world = exec.world.borrow();
            enabled
                .iter()
                .filter_map(|&c| match c {
                    Choice::Deliver(k) => world.arrival(k, m).map(|t| (t, c)),
                    _ => None,
                })
                .min()
                .map(|(_, c)| c)
        };
        match next {
            Some(c) => exec.apply(c),
            None => break,
        }
    }
    Ok(exec)
}

/// Checks the critical path of a one-call program against its formula at
/// `point`; `None` when it matches or the property does not apply (several
/// calls, an algorithm without a cost formula, a run that did not finish). A mismatch comes
/// with the timed schedule that shows it.
pub fn check_formula(
    program: &Rc<Program>,
    point: Point,
) -> Result<Option<(Violation, Execution)>, SearchError> {
    let [call] = program.calls.as_slice() else {
        return Ok(None);
    };
    let algorithm = &call.algorithm;
    if algorithm.facts().formula().is_none() {
        return Ok(None);
    }
    // The formulas assume the simulator's ideal links: eager sends into
    // unbounded buffers.
    let point = Point {
        buffering: Buffering::Unbounded,
        ..point
    };
    let target = Target {
        program,
        point,
        faults: Default::default(),
        bounds: program.bounds,
    };
    let mut lines = Vec::new();
    let mut shown = None;
    for (m, what) in [
        (0, "steps (latency only)"),
        (1, "critical-path bytes (bandwidth only)"),
    ] {
        let exec = timed(&target, m)?;
        if !exec.all_done() {
            return Ok(None);
        }
        let measured = exec
            .world
            .borrow()
            .ranks
            .iter()
            .map(|r| r.clock[m])
            .max()
            .unwrap_or(0);
        let formula = algorithm.cost_ps(
            &model(m),
            point.world_size,
            point.count,
            DType::Sym,
            &params(call, point),
        );
        if let Some(f) = formula.filter(|&f| f != measured) {
            lines.push(format!(
                "{what}: measured {measured}, the formula gives {f}"
            ));
            shown.get_or_insert(exec);
        }
    }
    let Some(exec) = shown else {
        return Ok(None);
    };
    let violation = Violation {
        verdict: Verdict::Cost,
        summary: format!(
            "call `{}` ({} {}): the critical path differs from the cost formula",
            call.id, call.collective, algorithm
        ),
        details: lines,
    };
    Ok(Some((violation, exec)))
}
