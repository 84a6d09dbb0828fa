//! [`JobOptions`]: what every rank of a job shares before connecting, and
//! the checks that its ranks were started alike ([`agree_on_command`],
//! [`agree_on_registry`]).

use std::time::Duration;

use algorithms::{Rank, Registry};

use crate::bootstrap::Bootstrap;

/// Settings shared by every transport of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobOptions {
    /// Identifies the job: connections and segments of another job (a
    /// stale process, a second job on the same hosts) are refused.
    pub job_id: u64,
    /// A secret every rank of the job knows; a connection that does not
    /// present it is refused.
    pub token: String,
    /// How long a rank waits for a peer that shows no progress before it
    /// reports that peer as dead or hung. The heartbeats follow from it
    /// (see [`crate::heartbeat`]): a beat every tenth of it (5 ms to 1 s),
    /// and a peer silent for half of it is taken to have stopped.
    pub timeout: Duration,
}

impl Default for JobOptions {
    /// Job 0, an empty token, a 30 s timeout.
    fn default() -> Self {
        JobOptions {
            job_id: 0,
            token: String::new(),
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why the ranks of a job cannot run together: they were started
/// differently.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Disagreement {
    /// The side channel failed (a peer died during start-up).
    #[error(transparent)]
    Bootstrap(#[from] crate::bootstrap::BootstrapError),
    /// Two ranks run different commands.
    #[error(
        "rank {rank} runs `{theirs}` but rank {me} runs `{mine}`: every rank must run the same command"
    )]
    Command {
        /// The rank that differs.
        rank: Rank,
        /// What it runs.
        theirs: String,
        /// This rank.
        me: Rank,
        /// What this rank runs.
        mine: String,
    },
    /// Two ranks know different algorithms: a message of one would be
    /// misread by the other.
    #[error(
        "rank {rank} and rank {me} disagree on the algorithm registry: {what}; every rank must run the same program with the same algorithms registered"
    )]
    Registry {
        /// The rank that differs.
        rank: Rank,
        /// This rank.
        me: Rank,
        /// Which algorithm only one of them has.
        what: String,
    },
    /// This rank's registry listing does not fit one bootstrap message.
    #[error(
        "the algorithm registry's listing is {bytes} bytes, more than one start-up message holds ({max})"
    )]
    RegistryTooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
}

/// Checks through `bootstrap` that every rank runs the same `command`
/// (the command line without per-rank options): a rank benchmarking other
/// sizes than its peers would otherwise hang or mismatch. Every rank calls
/// it; each learns of the first rank that differs from it.
pub fn agree_on_command(bootstrap: &dyn Bootstrap, command: &str) -> Result<(), Disagreement> {
    let bytes = command.as_bytes();
    let cut = &bytes[..bytes.len().min(crate::rendezvous::ALLGATHER_BYTES_MAX)];
    let all = bootstrap.allgather(cut)?;
    match all.iter().position(|theirs| theirs.as_slice() != cut) {
        Some(rank) => Err(Disagreement::Command {
            rank,
            theirs: String::from_utf8_lossy(&all[rank]).into_owned(),
            me: bootstrap.rank(),
            mine: command.to_string(),
        }),
        None => Ok(()),
    }
}

/// Checks through `bootstrap` that every rank has the same algorithms
/// registered (by collective and name), so that a message's algorithm
/// ([`crate::CallId`]) means the same on every rank; the error names an
/// algorithm that only one side has.
pub fn agree_on_registry(
    bootstrap: &dyn Bootstrap,
    registry: &Registry,
) -> Result<(), Disagreement> {
    let mine = registry.listing();
    let text = mine.join("\n");
    let max = crate::rendezvous::ALLGATHER_BYTES_MAX;
    if text.len() > max {
        return Err(Disagreement::RegistryTooLarge {
            bytes: text.len(),
            max,
        });
    }
    let all = bootstrap.allgather(text.as_bytes())?;
    let me = bootstrap.rank();
    for (rank, theirs) in all.iter().enumerate() {
        let theirs = String::from_utf8_lossy(theirs);
        let theirs: Vec<&str> = theirs.split('\n').filter(|l| !l.is_empty()).collect();
        let only_mine = mine.iter().find(|a| !theirs.contains(&a.as_str()));
        let only_theirs = theirs.iter().find(|a| !mine.iter().any(|m| m == *a));
        let what = match (only_mine, only_theirs) {
            (Some(a), _) => format!("rank {me} has {a}, rank {rank} does not"),
            (None, Some(a)) => format!("rank {rank} has {a}, rank {me} does not"),
            (None, None) => continue,
        };
        return Err(Disagreement::Registry { rank, me, what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalBootstrap;
    use algorithms::{Algorithm, Collective};

    /// Runs `check` on every rank of a 3-thread job; each rank's result.
    fn on_three_ranks<T: Send>(check: impl Fn(&LocalBootstrap) -> T + Sync) -> Vec<T> {
        let group = LocalBootstrap::group(3);
        std::thread::scope(|s| {
            let handles: Vec<_> = group.iter().map(|b| s.spawn(|| check(b))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn ranks_with_different_commands_are_stopped() {
        let errors = on_three_ranks(|b| {
            let cmd = if b.rank() == 2 {
                "bench -e 1M"
            } else {
                "bench"
            };
            agree_on_command(b, cmd)
        });
        let e = errors[0].clone().unwrap_err().to_string();
        assert!(e.contains("rank 2 runs `bench -e 1M`"), "{e}");
        let e = errors[2].clone().unwrap_err().to_string();
        assert!(e.contains("rank 0 runs `bench`"), "{e}");
    }

    #[test]
    fn ranks_with_different_registries_are_stopped_naming_the_algorithm() {
        let results = on_three_ranks(|b| {
            let mut registry = Registry::builtin();
            if b.rank() != 1 {
                let extra =
                    Algorithm::from_fn("extra_ring", Collective::Allreduce, |_, _, _, _| {
                        Box::pin(async { Ok(()) })
                    });
                registry.insert(extra).expect("a new name");
            }
            agree_on_registry(b, &registry)
        });
        let e = results[0].clone().unwrap_err().to_string();
        assert!(
            e.contains("rank 0 has allreduce extra_ring, rank 1 does not"),
            "{e}"
        );
        let e = results[1].clone().unwrap_err().to_string();
        assert!(
            e.contains("rank 0 has allreduce extra_ring, rank 1 does not"),
            "{e}"
        );
        let same = on_three_ranks(|b| agree_on_registry(b, &Registry::builtin()));
        assert!(same.iter().all(Result::is_ok));
    }
}
