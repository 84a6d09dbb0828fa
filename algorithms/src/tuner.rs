//! The tuner: picks an algorithm and a chunk size for a call from the cost
//! model, as NCCL picks from its tuning tables.
//!
//! For each allowed algorithm of the collective and each candidate chunk
//! size, the tuner evaluates the algorithm's `cost_ps` and keeps the
//! cheapest; ties go to the earlier algorithm in catalogue order, then to
//! the larger chunk. Nothing here is a hard-coded threshold: crossovers
//! move with the latency, bandwidth and world size.

use crate::collective::{Algorithm, Collective, Params, cost_ps};
use crate::cost::CostModel;
use crate::dtype::DType;

/// Chunk sizes the tuner tries for pipelined algorithms: 16 KiB to 4 MiB.
pub const CHUNK_CANDIDATES: [u64; 9] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
];

/// The tuner's decision for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The chunk size.
    pub chunk_bytes: u64,
    /// Its modelled time in picoseconds.
    pub cost_ps: u64,
}

/// The cheapest of `allowed` algorithms (all of the collective's if empty)
/// for `count` elements of `dtype` on `n` ranks; `params` supplies the
/// fields the tuner does not choose (slots, root, ranks per node).
pub fn choose(
    collective: Collective,
    allowed: &[Algorithm],
    model: &CostModel,
    n: usize,
    count: usize,
    dtype: DType,
    params: &Params,
) -> Option<Choice> {
    let candidates: Vec<Algorithm> = collective
        .algorithms()
        .into_iter()
        .filter(|a| allowed.is_empty() || allowed.contains(a))
        .collect();
    let mut best: Option<Choice> = None;
    for algorithm in candidates {
        for &chunk_bytes in CHUNK_CANDIDATES.iter().rev() {
            let p = Params {
                chunk_bytes,
                ..*params
            };
            let Some(cost) = cost_ps(collective, algorithm, model, n, count, dtype, &p) else {
                continue;
            };
            if best.is_none_or(|b| cost < b.cost_ps) {
                best = Some(Choice {
                    algorithm,
                    chunk_bytes,
                    cost_ps: cost,
                });
            }
        }
    }
    best
}
