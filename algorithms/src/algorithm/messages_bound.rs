//! The message bounds the catalogue's algorithms share (see
//! [`CollectiveAlgorithm::messages_bound`](super::CollectiveAlgorithm::messages_bound)).

/// The pipelined ring allreduce's exact count, at least `2N(N-1)`:
/// rings, pairwise exchanges and anything built from them.
pub fn ring(n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
    let n64 = n as u64;
    crate::allreduce::ring::messages(count, n, elem_bytes, chunk_bytes)
        .max(2 * n64 * n64.saturating_sub(1))
}

/// `N` ranks each sending six messages per chunk of the whole buffer
/// (trees and chains, credits included).
pub fn per_chunk(n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
    let chunks = (count as u64 * elem_bytes as u64).div_ceil(chunk_bytes.max(1)) + 1;
    (n as u64).saturating_mul(6u64.saturating_mul(chunks))
}

/// `N` ranks each sending `2·⌈log2 N⌉ + 4` messages (log-step
/// algorithms, their non-power-of-two folds included).
pub fn log_steps(n: usize) -> u64 {
    let log = u64::from(n.next_power_of_two().trailing_zeros());
    (n as u64).saturating_mul(2 * log + 4)
}

/// `N` ranks each sending two messages (a root talking to everyone, a
/// binomial tree).
pub fn two_per_rank(n: usize) -> u64 {
    (n as u64).saturating_mul(2)
}
