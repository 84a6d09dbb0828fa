//! [`run_catalogue`] and [`run_registry`]: every algorithm of a registry,
//! run on one rank's [`Endpoint`] and checked against its reference.
//!
//! Each transport's tests call it on every rank (threads or processes) to
//! show that the algorithm code runs unchanged and correct on it. An
//! algorithm that needs a switch that reduces in the network (NVLS,
//! CollNet) must be refused with [`NO_SWITCH_REASON`] instead.

use algorithms::collective::{defined_output, exact_reference};
use algorithms::in_network::NO_SWITCH_REASON;
use algorithms::{Collective, Params, Payload, ReduceOp, Registry};

use crate::call::CallId;
use crate::endpoint::Endpoint;

/// The inputs every rank can compute for a check: rank `r`'s element `k`
/// is `r * 1000 + k` (small integers, exact in any order of summation).
pub fn input(rank: usize, count: usize) -> Payload {
    Payload::from_vec((0..count).map(|k| (rank * 1000 + k) as i32).collect())
}

/// Call #1 on `fabric` with the ranks disagreeing on the collective: rank
/// 0 runs the ring allreduce, every other rank the chain broadcast, of 8
/// elements. Returns the call's error as text, or `None` if it did not
/// fail (every transport must fail it, naming the mismatch).
pub fn run_mismatched_collectives<E: Endpoint>(fabric: &E) -> Option<String> {
    let algorithm = if fabric.rank() == 0 {
        algorithms::catalogue_algorithm(Collective::Allreduce, "ring")
    } else {
        algorithms::catalogue_algorithm(Collective::Broadcast, "chain")
    };
    if let Err(e) = fabric.begin_call(CallId::new(1, &algorithm)) {
        return Some(e.to_string());
    }
    let mut buf = input(fabric.rank(), 8);
    let ran = fabric.block_on(algorithm.run(fabric, &mut buf, ReduceOp::Sum, &Params::default()));
    ran.err().map(|e| e.to_string())
}

/// [`run_registry`] on the catalogue ([`Registry::builtin`]).
pub fn run_catalogue<E: Endpoint>(
    fabric: &E,
    counts: &[usize],
    params: &Params,
    first_seq: u64,
) -> Result<u64, String> {
    run_registry(fabric, &Registry::builtin(), counts, params, first_seq)
}

/// Runs every algorithm of `registry` for each element count in `counts`
/// (rounded up to a multiple of the world size) as the benchmark runs it
/// ([`Algorithm::run_inline`](algorithms::Algorithm::run_inline): the
/// catalogue's inline algorithms on the endpoint's own type), numbering calls from
/// `first_seq`, and checks this rank's defined output bit for bit against
/// the algorithm's reference (or, without one, the exact result). Returns
/// the calls run, or the first failure as a sentence naming the
/// collective, algorithm, count and rank.
pub fn run_registry<E: Endpoint>(
    fabric: &E,
    registry: &Registry,
    counts: &[usize],
    params: &Params,
    first_seq: u64,
) -> Result<u64, String> {
    let n = fabric.world_size();
    let rank = fabric.rank();
    let mut seq = first_seq;
    for &wanted in counts {
        let count = wanted.div_ceil(n) * n;
        let inputs: Vec<Payload> = (0..n).map(|r| input(r, count)).collect();
        for algorithm in registry.iter() {
            let collective = algorithm.collective();
            let what =
                format!("{collective} {algorithm} of {count} x i32 on {n} ranks, rank {rank}");
            fabric
                .begin_call(CallId::new(seq, algorithm))
                .map_err(|e| format!("{what}: {e}"))?;
            seq += 1;
            let mut buf = inputs[rank].clone();
            let ran =
                fabric.block_on(algorithm.run_inline(fabric, &mut buf, ReduceOp::Sum, params));
            if algorithm.facts().reduces_in_network() {
                // No real transport has a switch that reduces: refused, at
                // once and cleanly, on every rank.
                match ran {
                    Err(e) if e.to_string().contains(NO_SWITCH_REASON) => continue,
                    Err(e) => return Err(format!("{what}: refused for another reason: {e}")),
                    Ok(()) => return Err(format!("{what}: ran without a reducing switch")),
                }
            }
            ran.map_err(|e| format!("{what}: {e}"))?;
            if collective == Collective::Barrier {
                continue;
            }
            let want = algorithm
                .reference(&inputs, ReduceOp::Sum, params)
                .or_else(|| exact_reference(collective, &inputs, ReduceOp::Sum, params.root))
                .ok_or_else(|| format!("{what}: no reference"))?;
            let range = defined_output(collective, rank, n, count, params.root);
            let wrong = buf
                .extract(range.clone())
                .count_wrong(&want[rank].extract(range));
            if wrong != 0 {
                return Err(format!("{what}: {wrong} wrong elements"));
            }
        }
    }
    Ok(seq - first_seq)
}
