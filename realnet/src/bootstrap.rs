//! [`Bootstrap`]: the out-of-band exchange that connects a job's ranks.
//!
//! Before a fabric carries messages its ranks must learn each other's
//! addresses (TCP listening ports, shared-memory segment names, RDMA queue
//! pair numbers). A bootstrap is an allgather of small byte strings over a
//! side channel: the rendezvous server that rank 0 runs on a cluster, or
//! [`LocalBootstrap`] between threads of one process in tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use algorithms::Rank;

/// Why the start-up exchange failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bootstrap of rank {rank}: {reason}")]
pub struct BootstrapError {
    /// The rank that saw the failure.
    pub rank: Rank,
    /// What happened, naming the peer or address.
    pub reason: String,
}

/// An allgather of small byte strings among the ranks of a job.
pub trait Bootstrap {
    /// This rank.
    fn rank(&self) -> Rank;

    /// The number of ranks.
    fn world_size(&self) -> usize;

    /// Contributes `mine` and returns every rank's contribution, indexed by
    /// rank. Every rank must call it the same number of times.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError>;
}

/// One round's contributions (by rank) and how many ranks have read them.
type Round = (Vec<Option<Vec<u8>>>, usize);

/// Rounds of an in-process allgather: contributions per round.
struct Rounds {
    rounds: BTreeMap<u64, Round>,
}

/// A bootstrap between threads of one process (tests, and `sim bench`
/// running several ranks in one process).
pub struct LocalBootstrap {
    rank: Rank,
    world_size: usize,
    round: Mutex<u64>,
    shared: Arc<(Mutex<Rounds>, Condvar)>,
    timeout: Duration,
}

impl LocalBootstrap {
    /// One bootstrap per rank of a job of `world_size` threads.
    pub fn group(world_size: usize) -> Vec<LocalBootstrap> {
        let shared = Arc::new((
            Mutex::new(Rounds {
                rounds: BTreeMap::new(),
            }),
            Condvar::new(),
        ));
        (0..world_size)
            .map(|rank| LocalBootstrap {
                rank,
                world_size,
                round: Mutex::new(0),
                shared: shared.clone(),
                timeout: Duration::from_secs(60),
            })
            .collect()
    }
}

impl Bootstrap for LocalBootstrap {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let round = {
            let mut r = self.round.lock().unwrap_or_else(|e| e.into_inner());
            *r += 1;
            *r
        };
        let (lock, cvar) = &*self.shared;
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.world_size;
        state
            .rounds
            .entry(round)
            .or_insert_with(|| (vec![None; n], 0))
            .0[self.rank] = Some(mine.to_vec());
        cvar.notify_all();
        let deadline = Instant::now() + self.timeout;
        loop {
            let (slots, _) = &state.rounds[&round];
            if slots.iter().all(Option::is_some) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing: Vec<String> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.is_none())
                    .map(|(r, _)| r.to_string())
                    .collect();
                return Err(BootstrapError {
                    rank: self.rank,
                    reason: format!(
                        "ranks {} did not join within {:?}",
                        missing.join(", "),
                        self.timeout
                    ),
                });
            }
            state = cvar
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let entry = state.rounds.get_mut(&round).expect("round present");
        let all: Vec<Vec<u8>> = entry
            .0
            .iter()
            .map(|s| s.clone().unwrap_or_default())
            .collect();
        entry.1 += 1;
        if entry.1 == n {
            state.rounds.remove(&round);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_exchange_their_bytes_round_after_round() {
        let group = LocalBootstrap::group(4);
        let results: Vec<Vec<Vec<Vec<u8>>>> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .iter()
                .map(|b| {
                    s.spawn(move || {
                        (0..3u8)
                            .map(|round| b.allgather(&[b.rank() as u8, round]).unwrap())
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for per_rank in &results {
            for (round, all) in per_rank.iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..4u8).map(|r| vec![r, round as u8]).collect();
                assert_eq!(all, &want);
            }
        }
    }
}
