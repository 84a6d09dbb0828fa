//! What a finished run's outputs say: the failure that explains them (a
//! rank's error before the deadlock it caused), or the ranks' results and
//! how many of their elements differ from the reference.

use algorithms::collective::{self, defined_output};
use algorithms::{Algorithm, CollectiveError, DType, FabricError, Params, Payload, Time};

use super::{Failure, program};
use crate::deadlock::DeadlockReport;
use crate::scenario::CollectiveSpec;

/// What the ranks that finished returned: `(rank, (call spans, buffer))`.
pub(super) type Finished = Vec<(usize, (Vec<(Time, Time)>, Payload))>;

/// Sorts a run's outputs into the ranks' results or the failure that
/// explains them. A rank's error is the root cause of whatever its peers
/// then wait for, so it is reported before a deadlock.
pub(super) fn outcome(
    outputs: Vec<Option<program::RankOutput>>,
    deadlock: Option<DeadlockReport>,
    out_of_time: bool,
) -> Result<Finished, Box<Failure>> {
    let mut finished = Vec::with_capacity(outputs.len());
    for (rank, out) in outputs.into_iter().enumerate() {
        match out {
            Some(Ok(Some(done))) => finished.push((rank, done)),
            Some(Ok(None)) | None => {} // skipped the collectives, or blocked
            Some(Err(CollectiveError::Fabric(error @ FabricError::Timeout { .. }))) => {
                return Err(Box::new(Failure::TransportTimeout {
                    rank,
                    error,
                    stalled: deadlock,
                }));
            }
            Some(Err(error)) => {
                return Err(Box::new(Failure::RankError {
                    rank,
                    error,
                    stalled: deadlock,
                }));
            }
        }
    }
    if out_of_time {
        return Err(Box::new(Failure::OutOfTime));
    }
    match deadlock {
        Some(report) if report.timeout.is_some() => Err(Box::new(Failure::WatchdogTimeout(report))),
        Some(report) => Err(Box::new(Failure::Deadlock(report))),
        None => Ok(finished),
    }
}

/// Elements in the defined outputs of the ranks that finished that differ
/// bit for bit from the exact reference (the inputs make every reduction
/// order give the same bits; the per-algorithm orders are the tests' job;
/// symbolic inputs are checked against `algorithm`'s own reference, the
/// exact tree it documents). A rank that skipped the collectives
/// holds no result: its whole defined output counts as wrong; so does
/// everything when ranks worked on different counts, since no correct
/// result exists then.
pub(super) fn count_wrong(
    spec: &CollectiveSpec,
    algorithm: &Algorithm,
    params: &Params,
    inputs: &[Payload],
    finished: &Finished,
) -> u64 {
    let n = inputs.len();
    let count = inputs[0].len();
    let defined = |r| defined_output(spec.kind, r, n, count, params.root);
    if inputs.iter().any(|p| p.len() != count) {
        return inputs.iter().map(|p| p.len() as u64).sum();
    }
    let exact = || collective::exact_reference(spec.kind, inputs, spec.op, params.root);
    let expected = if spec.dtype == DType::Sym {
        algorithm.reference(inputs, spec.op, params).or_else(exact)
    } else {
        exact()
    }
    .expect("the root was validated against the world size");
    let mut wrong = (0..n).map(|r| defined(r).len()).sum::<usize>();
    for (r, (_, buf)) in finished {
        let range = defined(*r);
        let right = range.len()
            - buf
                .extract(range.clone())
                .count_wrong(&expected[*r].extract(range));
        wrong -= right;
    }
    wrong as u64
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::path::Path;

    use algorithms::{DType, ReduceOp, Registry};

    use crate::scenario::Scenario;
    use crate::study::{Options, Row, run_scenario};
    use crate::tuning::AlgoFilter;

    /// A scenario of every reducing pair on 5 ranks, its element type
    /// switched to symbols (which no scenario file can ask for).
    fn symbolic(op: ReduceOp, inject: &str) -> Scenario {
        let mut text = "world_size = 5\nseed = 9\n[links]\nlatency_us = 1.0\n\
                        bandwidth_gb_per_s = 25.0\n"
            .to_string();
        // Symbols are checked against each algorithm's own tree; the NCCL
        // algorithms' trees depend on the channel plan and have none.
        for e in Registry::builtin()
            .iter()
            .filter(|e| e.collective().reduces() && !e.facts().runs_nccl_channels())
        {
            text += &format!(
                "[[collective]]\nkind = \"{}\"\nalgorithm = \"{}\"\nmin_bytes = 4\n\
                 max_bytes = 256\nstep_factor = 8\nchunk_bytes = 16\nranks_per_node = 2\n\
                 root = 3\nop = \"{op}\"\ndtype = \"float\"\niters = 1\nwarmup = 1\n",
                e.collective(),
                e.name()
            );
        }
        text += inject;
        let mut scenario = Scenario::parse(Path::new("symbolic.toml"), &text, &Registry::builtin())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        for spec in &mut scenario.collectives {
            spec.dtype = DType::Sym;
        }
        scenario
    }

    fn rows(scenario: &Scenario) -> Vec<Row> {
        run_scenario(scenario, &AlgoFilter::default(), Options::default(), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("{:?}", e.1))
    }

    #[test]
    fn symbolic_inputs_are_checked_against_each_algorithms_own_tree() {
        for op in [ReduceOp::Min, ReduceOp::Avg] {
            let rows = rows(&symbolic(op, ""));
            assert_eq!(rows.len(), 10 * 3, "10 reducing pairs, sizes 4, 32, 256");
            for row in &rows {
                assert_eq!(row.dtype, "sym");
                assert_eq!(row.wrong, Some(0), "{row:?}");
            }
        }
        let corrupt = "[[inject]]\nkind = \"corrupt_result\"\nrank = 3\n";
        let rows = rows(&symbolic(ReduceOp::Sum, corrupt));
        for row in &rows {
            // Rank 3 adds a leaf to its element 0: part of its output for
            // allreduce and for reduce (rank 3 is the root), not for
            // reduce-scatter (its block is elsewhere).
            let want = u64::from(row.collective != "reduce_scatter");
            assert_eq!(row.wrong, Some(want), "{row:?}");
        }
    }
}
