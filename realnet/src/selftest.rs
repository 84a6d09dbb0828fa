//! [`run_catalogue`]: every collective and algorithm of the catalogue, run
//! on one rank's [`Endpoint`] and checked against the sequential reference.
//!
//! Each transport's tests call it on every rank (threads or processes) to
//! show that the algorithm code runs unchanged and correct on it.

use algorithms::collective::{self, CATALOGUE};
use algorithms::{Collective, Params, Payload, ReduceOp};

use crate::call::CallId;
use crate::endpoint::Endpoint;

/// The inputs every rank can compute for a check: rank `r`'s element `k`
/// is `r * 1000 + k` (small integers, exact in any order of summation).
pub fn input(rank: usize, count: usize) -> Payload {
    Payload::from_vec((0..count).map(|k| (rank * 1000 + k) as i32).collect())
}

/// Runs every catalogue entry for each element count in `counts` (rounded
/// up to a multiple of the world size), numbering calls from `first_seq`,
/// and checks this rank's defined output bit for bit. Returns the calls
/// run, or the first failure as a sentence naming the collective,
/// algorithm, count and rank.
pub fn run_catalogue<E: Endpoint>(
    fabric: &E,
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
        for entry in CATALOGUE {
            let what = format!(
                "{} {} of {count} x i32 on {n} ranks, rank {rank}",
                entry.collective, entry.algorithm
            );
            fabric
                .begin_call(CallId::new(seq, entry.collective, entry.algorithm))
                .map_err(|e| format!("{what}: {e}"))?;
            seq += 1;
            let mut buf = inputs[rank].clone();
            fabric
                .block_on(collective::run(
                    fabric,
                    entry.collective,
                    entry.algorithm,
                    &mut buf,
                    ReduceOp::Sum,
                    params,
                ))
                .map_err(|e| format!("{what}: {e}"))?;
            if entry.collective == Collective::Barrier {
                continue;
            }
            let want = collective::reference(
                entry.collective,
                entry.algorithm,
                &inputs,
                ReduceOp::Sum,
                params,
            )
            .ok_or_else(|| format!("{what}: no reference"))?;
            let range = collective::defined_output(entry.collective, rank, n, count, params.root);
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
