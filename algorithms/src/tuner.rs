//! The tuner: picks an algorithm and a chunk size for a call from the cost
//! model, as NCCL picks from its tuning tables.
//!
//! For each candidate algorithm and each candidate chunk size, the tuner
//! evaluates the algorithm's `cost_ps` and keeps the cheapest; ties go to
//! the earlier candidate (registry order), then to the larger chunk; an
//! algorithm without a cost formula is never chosen. Nothing here is a hard-coded threshold: crossovers
//! move with the latency, bandwidth and world size.
//!
//! Chunk sizes are tried from 16 KiB to 4 MiB, but only those that cut the
//! buffer into at most [`CHUNKS_MAX`] chunks (the largest candidate is
//! always tried): NCCL likewise grows its chunks with the message, and some
//! cost functions (the pipelined tree's) take time proportional to the
//! number of chunks.

use crate::algorithm::Algorithm;
use crate::collective::Params;
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

/// The most chunks a candidate chunk size may cut the buffer into.
pub const CHUNKS_MAX: u64 = 256;

/// The tuner's decision for one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The chunk size.
    pub chunk_bytes: u64,
    /// Its modelled time in picoseconds.
    pub cost_ps: u64,
}

/// The cheapest of `candidates` (algorithms of one collective, in the
/// order ties are broken) for `count` elements of `dtype` on `n` ranks;
/// `params` supplies the fields the tuner does not choose (slots, root,
/// ranks per node). `None` when no candidate has a cost that fits.
pub fn choose(
    candidates: &[Algorithm],
    model: &CostModel,
    n: usize,
    count: usize,
    dtype: DType,
    params: &Params,
) -> Option<Choice> {
    let bytes = count as u64 * dtype.size_bytes() as u64;
    let largest = CHUNK_CANDIDATES[CHUNK_CANDIDATES.len() - 1];
    let chunks: Vec<u64> = CHUNK_CANDIDATES
        .iter()
        .rev()
        .copied()
        .filter(|&c| c == largest || bytes.div_ceil(c) <= CHUNKS_MAX)
        .collect();
    let mut best: Option<Choice> = None;
    for algorithm in candidates {
        let tried: &[u64] = if algorithm.uses_chunks() {
            &chunks
        } else {
            &chunks[..1]
        };
        for &chunk_bytes in tried {
            let p = Params {
                chunk_bytes,
                ..*params
            };
            let Some(cost) = algorithm.cost_ps(model, n, count, dtype, &p) else {
                continue;
            };
            if best.as_ref().is_none_or(|b| cost < b.cost_ps) {
                best = Some(Choice {
                    algorithm: algorithm.clone(),
                    chunk_bytes,
                    cost_ps: cost,
                });
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Collective, Registry};

    /// One 200 Gb/s port per rank and 5 us per message, as in
    /// `scenarios/allreduce_algorithms.toml`.
    fn model() -> CostModel {
        CostModel {
            latency_ps: 5_000_000,
            bandwidth_bytes_per_s: 25e9,
            reduce_bytes_per_s: Some(1e12),
        }
    }

    fn log2_ceil(n: usize) -> u64 {
        u64::from(n.next_power_of_two().trailing_zeros())
    }

    /// The tuner's choice among the catalogue's algorithms of `c` named in
    /// `allowed` (all of them if empty).
    fn pick(c: Collective, allowed: &[&str], n: usize, count: usize) -> Choice {
        let p = Params::default();
        let registry = Registry::builtin();
        let candidates: Vec<Algorithm> = registry
            .of(c)
            .filter(|a| allowed.is_empty() || allowed.contains(&a.name()))
            .cloned()
            .collect();
        choose(&candidates, &model(), n, count, DType::F32, &p).expect("a choice")
    }

    #[test]
    fn small_allreduce_pays_logarithmically_many_latencies() {
        for n in [8, 64, 1000] {
            let choice = pick(Collective::Allreduce, &[], n, 2);
            // A latency-bound choice: a handful of message latencies per
            // doubling of N, where the ring pays 2(N-1) of them.
            let latencies = choice.cost_ps / model().latency_ps;
            assert!(latencies <= 2 * log2_ceil(n) + 2, "n={n}: {choice:?}");
            let ring = pick(Collective::Allreduce, &["ring"], n, 2);
            assert!(
                choice.cost_ps * 4 < ring.cost_ps,
                "n={n}: {choice:?} vs {ring:?}"
            );
        }
    }

    #[test]
    fn large_allreduce_moves_each_byte_a_bounded_number_of_times() {
        let count = 1 << 26; // 256 MiB of floats
        let bytes = 4 * count as u64;
        for n in [8, 64, 256] {
            let choice = pick(Collective::Allreduce, &[], n, count);
            // Bandwidth-bound: no worse than the ring's 2(N-1)/N · n/B plus
            // latencies, whereas recursive doubling sends all n bytes
            // log2(N) times.
            let ring = pick(Collective::Allreduce, &["ring"], n, count);
            assert!(
                choice.cost_ps <= ring.cost_ps,
                "n={n}: {choice:?} vs {ring:?}"
            );
            assert_ne!(choice.algorithm.name(), "recursive_doubling", "n={n}");
            let one_pass = model().wire_ps(bytes);
            assert!(choice.cost_ps < 3 * one_pass, "n={n}: {choice:?}");
        }
    }

    #[test]
    fn broadcast_switches_from_the_binomial_tree_to_the_chain() {
        for n in [8, 64] {
            assert_eq!(
                pick(Collective::Broadcast, &[], n, 1).algorithm.name(),
                "binomial",
                "n={n}"
            );
            assert_eq!(
                pick(Collective::Broadcast, &[], n, 1 << 28)
                    .algorithm
                    .name(),
                "chain",
                "n={n}"
            );
        }
    }

    #[test]
    fn only_pipelined_algorithms_depend_on_the_chunk_size() {
        for e in Registry::builtin().iter() {
            if e.uses_chunks() {
                continue;
            }
            for (n, count) in [(8, 1 << 20), (13, 12_345), (64, 1 << 16)] {
                let cost = |chunk_bytes| {
                    let p = Params {
                        chunk_bytes,
                        ..Params::default()
                    };
                    e.cost_ps(&model(), n, count, DType::F32, &p)
                };
                assert_eq!(cost(16 << 10), cost(4 << 20), "{e:?}");
            }
        }
    }

    #[test]
    fn the_choice_respects_restrictions_and_is_the_cheapest() {
        let only = pick(Collective::Allreduce, &["rabenseifner"], 64, 1000);
        assert_eq!(only.algorithm.name(), "rabenseifner");
        let free = pick(Collective::Allreduce, &[], 64, 1000);
        let priced = Registry::builtin();
        let priced = priced
            .of(Collective::Allreduce)
            .filter(|a| a.facts().formula().is_some());
        for a in priced {
            assert!(free.cost_ps <= pick(Collective::Allreduce, &[a.name()], 64, 1000).cost_ps);
        }
        // No candidate, no choice.
        let p = Params::default();
        assert_eq!(choose(&[], &model(), 8, 8, DType::F32, &p), None);
    }
}
