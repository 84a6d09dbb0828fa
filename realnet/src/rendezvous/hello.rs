//! The hello a rank sends rank 0 and how rank 0 checks it, answers and logs refusals.

use super::*;

/// How much of a hello `bytes` is (for the [`Gate`]): the magic, the
/// fixed fields, then the token its length announces.
pub(super) fn hello_so_far(bytes: &[u8]) -> HelloSoFar {
    const FIXED: usize = MAGIC.len() + 2 + 8 + 4 + 4 + 2;
    let magic = &bytes[..bytes.len().min(MAGIC.len())];
    if magic != &MAGIC[..magic.len()] {
        return HelloSoFar::Junk;
    }
    if bytes.len() < FIXED {
        return HelloSoFar::Needs(FIXED);
    }
    let token_len = u16::from_le_bytes([bytes[FIXED - 2], bytes[FIXED - 1]]) as usize;
    if token_len > TOKEN_BYTES_MAX {
        return HelloSoFar::Junk;
    }
    if bytes.len() < FIXED + token_len {
        HelloSoFar::Needs(FIXED + token_len)
    } else {
        HelloSoFar::Complete
    }
}

/// Why a hello is refused: what the connection is told, and what rank 0
/// logs. A connection without the job's id and token is told nothing it
/// did not know.
pub(super) struct Refusal {
    pub(super) told: String,
    pub(super) logged: String,
}

impl Refusal {
    /// A refusal to a rank that proved it belongs to the job: it may know why.
    pub(super) fn told(reason: String) -> Refusal {
        Refusal {
            logged: reason.clone(),
            told: reason,
        }
    }
}

/// Checks a whole hello (as [`hello_so_far`] delimits it): the rank it
/// names, or why it is refused.
pub(super) fn check_hello(h: &[u8], job: &JobOptions, world_size: usize) -> Result<Rank, Refusal> {
    let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
    let version = u16::from_le_bytes([h[4], h[5]]);
    let job_id = u64::from_le_bytes(h[6..14].try_into().expect("8 bytes"));
    let rank = u32_at(14) as usize;
    let world = u32_at(18) as usize;
    let token = &h[24..];
    if version != VERSION {
        return Err(Refusal::told(format!(
            "protocol version {version}, expected {VERSION}"
        )));
    }
    if job_id != job.job_id || !same_secret(token, job.token.as_bytes()) {
        let what = if job_id != job.job_id {
            format!("job {job_id}, but this is job {}", job.job_id)
        } else {
            "wrong job token".to_string()
        };
        return Err(Refusal {
            told: "wrong job id or token".to_string(),
            logged: format!("{what} (claiming rank {rank})"),
        });
    }
    if world != world_size {
        return Err(Refusal::told(format!(
            "rank {rank} believes the job has {world} ranks, but it has {world_size}"
        )));
    }
    if rank == 0 || rank >= world_size {
        return Err(Refusal::told(format!(
            "rank {rank} is not a rank 1..{world_size} may join as"
        )));
    }
    Ok(rank)
}

/// Refusals logged to stderr, the first [`LOGGED_REFUSALS_MAX`] in full and
/// then only counted, so a flood of strangers cannot flood the log.
pub(super) struct RefusalLog {
    prefix: String,
    count: u64,
}

/// Refusals logged one by one before the rest are only counted.
pub(super) const LOGGED_REFUSALS_MAX: u64 = 16;

impl RefusalLog {
    /// A log whose lines begin with `prefix`.
    pub(super) fn new(prefix: String) -> RefusalLog {
        RefusalLog { prefix, count: 0 }
    }

    /// Logs (or counts) one refusal.
    pub(super) fn record(&mut self, line: &str) {
        self.count += 1;
        if self.count <= LOGGED_REFUSALS_MAX {
            eprintln!("{}: {line}", self.prefix);
        }
    }

    /// Logs what was only counted, and the connections the gate dropped.
    pub(super) fn finish(&self, dropped: &Dropped) {
        if self.count > LOGGED_REFUSALS_MAX {
            eprintln!(
                "{}: {} more refusal(s) not logged one by one",
                self.prefix,
                self.count - LOGGED_REFUSALS_MAX
            );
        }
        if dropped.total() > 0 {
            eprintln!("{}: {}", self.prefix, dropped.describe());
        }
    }
}

/// Compares two secrets in time independent of where they differ.
pub(super) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The hello of `rank`.
pub(super) fn hello(job: &JobOptions, rank: Rank, world_size: usize) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&job.job_id.to_le_bytes());
    h.extend_from_slice(&(rank as u32).to_le_bytes());
    h.extend_from_slice(&(world_size as u32).to_le_bytes());
    h.extend_from_slice(&(job.token.len() as u16).to_le_bytes());
    h.extend_from_slice(job.token.as_bytes());
    h
}

/// Why a hello to rank 0 did not get this rank in.
pub(super) enum Introduction {
    /// The connection closed before any answer: dial again.
    Dropped(String),
    /// Refused, timed out, or not a rendezvous: give up, saying why.
    Failed(String),
}

/// Sends this rank's hello on `stream` and reads rank 0's answer.
pub(super) fn introduce(
    stream: &mut TcpStream,
    address: &str,
    job: &JobOptions,
    rank: Rank,
    world_size: usize,
    deadline: Instant,
) -> Result<(), Introduction> {
    let io_fail = |e: io::Error| {
        if matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
        ) {
            Introduction::Dropped(describe_io(&e))
        } else {
            Introduction::Failed(format!(
                "rendezvous with rank 0 at {address}: {}",
                describe_io(&e)
            ))
        }
    };
    stream.set_nodelay(true).map_err(io_fail)?;
    stream
        .write_all(&hello(job, rank, world_size))
        .map_err(io_fail)?;
    set_deadline(stream, deadline).map_err(io_fail)?;
    let mut magic = [0u8; 4];
    stream.read_exact(&mut magic).map_err(io_fail)?;
    if magic != MAGIC {
        return Err(Introduction::Failed(format!(
            "{address} is not a rendezvous server (it answered {magic:02x?})"
        )));
    }
    let status = read_u8(stream).map_err(io_fail)?;
    let reason = read_reason(stream).map_err(io_fail)?;
    if status != 0 {
        return Err(Introduction::Failed(format!(
            "rank 0 at {address} refused this rank: {reason}"
        )));
    }
    Ok(())
}
