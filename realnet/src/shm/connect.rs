//! [`ShmFabric::connect`]: three bootstrap rounds that set up a job.
//!
//! 1. Rank 0 creates the segment and contributes its path (or why it could
//!    not); the others contribute nothing.
//! 2. Every rank maps the segment, takes its liveness lock, publishes its
//!    pid and probe word and marks itself running, then contributes "ok" or
//!    its error; after this round the file is unlinked.
//! 3. Every rank tries to read each peer's probe word with cross-memory
//!    attach and contributes which peers it can read, so each sender knows
//!    which receivers may copy out of its memory.
//!
//! Every rank takes part in every round it reaches, even after an error of
//! its own, so that one rank's failure is reported to all at once instead
//! of leaving the others waiting for the bootstrap's timeout.

use algorithms::FabricError;

use super::fabric::ShmFabric;
use super::segment::{RankState, Segment};
use super::{ShmOptions, cma};
use crate::bootstrap::{Bootstrap, BootstrapError};

/// The word rank `rank` of job `job_id` exposes for the attach probe.
fn probe_word(job_id: u64, rank: usize) -> u64 {
    job_id.rotate_left(17) ^ (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A round's contribution: 0 and a value, or 1 and an error message.
fn encode(r: &Result<Vec<u8>, String>) -> Vec<u8> {
    match r {
        Ok(v) => [&[0u8][..], v].concat(),
        Err(e) => [&[1u8][..], e.as_bytes()].concat(),
    }
}

/// The first failure among the ranks' contributions, naming the rank.
fn first_failure(all: &[Vec<u8>]) -> Option<String> {
    all.iter()
        .enumerate()
        .find_map(|(r, c)| match c.split_first() {
            Some((1, msg)) => Some(format!("rank {r}: {}", String::from_utf8_lossy(msg))),
            _ => None,
        })
}

impl ShmFabric {
    /// Connects this rank to the job's segment (see the [module docs](super)).
    pub fn connect(
        bootstrap: &dyn Bootstrap,
        options: &ShmOptions,
    ) -> Result<ShmFabric, FabricError> {
        let rank = bootstrap.rank();
        let world = bootstrap.world_size();
        let err = |reason: String| FabricError::Transport { rank, reason };
        let boot = |e: BootstrapError| err(format!("shared-memory connect: {e}"));
        let job = options.job.job_id;
        let ring = options.ring_bytes;
        let valid_ring = ring.is_power_of_two()
            && (ShmOptions::RING_BYTES_MIN..=ShmOptions::RING_BYTES_MAX).contains(&ring);

        // Round 1: rank 0 creates the segment.
        let mut created = None;
        let mine = if !valid_ring {
            Err(format!(
                "ring_bytes {ring} is not a power of two from {} to {}",
                ShmOptions::RING_BYTES_MIN,
                ShmOptions::RING_BYTES_MAX
            ))
        } else if rank == 0 {
            Segment::create(&options.dir, job, world, ring).map(|s| {
                let path = s.path().as_os_str().as_encoded_bytes().to_vec();
                created = Some(s);
                path
            })
        } else {
            Ok(Vec::new())
        };
        let all = bootstrap.allgather(&encode(&mine)).map_err(boot);
        let failed = match &all {
            Ok(all) => first_failure(all),
            Err(_) => None,
        };
        if all.is_err() || failed.is_some() {
            // Nobody else will map (and unlink) the file.
            if let Some(s) = &created {
                s.unlink();
            }
        }
        let all = all?;
        if let Some(f) = failed {
            return Err(err(format!("shared-memory segment not set up: {f}")));
        }
        let path = std::path::PathBuf::from(String::from_utf8_lossy(&all[0][1..]).into_owned());

        // Round 2: map, lock, publish identity, mark running.
        let probe = Box::new(probe_word(job, rank));
        if options.attach_min_bytes.is_some() {
            cma::allow_readers();
        }
        let mapped = match created {
            Some(s) => Ok(s),
            None => Segment::open(&path, job, world, ring),
        }
        .and_then(|s| {
            s.lock(rank)
                .map_err(|e| format!("cannot lock byte {rank} of {}: {e}", path.display()))?;
            let ctl = s.rank_control(rank);
            ctl.set_identity(std::process::id(), &*probe as *const u64 as u64);
            ctl.beat(crate::heartbeat::monotonic_ns());
            ctl.set_state(RankState::Running);
            s.map_rings_of(rank);
            Ok(s)
        });
        let status = mapped.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
        let all = bootstrap.allgather(&encode(&status)).map_err(boot);
        if let Ok(s) = &mapped {
            s.unlink();
        }
        let all = all?;
        if let Some(f) = first_failure(&all) {
            if let Ok(s) = &mapped {
                s.rank_control(rank).fail(&format!("connect failed: {f}"));
            }
            return Err(err(format!("shared-memory connect failed: {f}")));
        }
        let seg = mapped.map_err(&err)?;

        // Round 3: which peers can this rank read with cross-memory attach?
        let pids: Vec<u32> = (0..world).map(|r| seg.rank_control(r).pid()).collect();
        let readable: Vec<u8> = (0..world)
            .map(|peer| {
                let ctl = seg.rank_control(peer);
                let mut word = [0u8; 8];
                let ok = options.attach_min_bytes.is_some()
                    && peer != rank
                    && cma::read(ctl.pid(), ctl.probe_addr(), &mut word).is_ok()
                    && u64::from_ne_bytes(word) == probe_word(job, peer);
                u8::from(ok)
            })
            .collect();
        let all = bootstrap.allgather(&readable).map_err(boot)?;
        let attach_to = (0..world)
            .map(|dst| all[dst].get(rank).copied() == Some(1))
            .collect();
        ShmFabric::assemble(seg, rank, world, options, pids, attach_to, probe)
    }
}
