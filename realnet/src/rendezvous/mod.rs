//! [`TcpRendezvous`]: the [`Bootstrap`] of a job whose ranks are processes,
//! on one host or several.
//!
//! Rank 0 listens at the rendezvous address (`MASTER_ADDR:MASTER_PORT`,
//! see [`crate::launch`]); every other rank connects to it, retrying until
//! the job's timeout while rank 0 starts, and introduces itself:
//!
//! ```text
//! hello  (rank r -> rank 0): "RNRV" version:u16 job_id:u64 rank:u32 world_size:u32 token_len:u16 token
//! answer (rank 0 -> rank r): "RNRV" status:u8 (0 accepted, 1 refused) len:u16 reason
//! ```
//!
//! Rank 0 serves its listener through a `Gate` (`gate.rs`): one
//! thread, a bounded table of connections waiting for their hello, each
//! with a deadline, so a flood of strangers costs a fixed amount and never
//! crowds out the real ranks (a rank whose connection was dropped
//! unanswered dials again). Bytes that begin no hello get no answer. A
//! hello with another version, job id or token is refused with "wrong job
//! id or token" (nothing a stranger did not know; rank 0 logs the details
//! to stderr, the first few one by one); one with the right job id and
//! token but another world size, or a rank that already joined, is told
//! why. Rank 0 keeps waiting for the real ranks. Once all have joined, each
//! [`Bootstrap::allgather`] is a round through rank 0:
//!
//! ```text
//! rank r -> rank 0: round:u32 len:u32 bytes                 (len <= ALLGATHER_BYTES_MAX)
//! rank 0 -> rank r: 0:u8 round:u32 n:u32 (len:u32 bytes) x n
//!               or: 1:u8 len:u16 reason                     (the round failed)
//! ```
//!
//! All integers are little-endian. Every wait has a deadline (the job's
//! timeout), every length read from the wire is checked against its cap
//! before anything is allocated, and every error names the ranks and
//! addresses involved.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use algorithms::Rank;

use crate::bootstrap::{Bootstrap, BootstrapError};
use crate::gate::{Arrival, Dropped, Gate, HelloSoFar};
use crate::job::JobOptions;
use crate::launch::{RankEnv, TOKEN_BYTES_MAX, WORLD_SIZE_MAX};

mod hello;
mod wire;

use hello::{Introduction, Refusal, RefusalLog, check_hello, hello_so_far, introduce};
use wire::{
    connect_until, describe_io, put_reason, read_capped, read_contribution, read_reason, read_u8,
    read_u32, set_deadline,
};

/// The first bytes of every hello and answer.
pub const MAGIC: [u8; 4] = *b"RNRV";

/// The version of this protocol; a hello of another version is refused.
pub const VERSION: u16 = 1;

/// The most bytes one rank may contribute to one allgather round.
pub const ALLGATHER_BYTES_MAX: usize = 64 * 1024;

/// How long rank 0 waits for a connection's hello (a connection that says
/// nothing is dropped after this, or the job's timeout if shorter).
const HELLO_WAIT_MAX: Duration = Duration::from_secs(10);

/// Connections rank 0 keeps waiting for their hello at once; beyond this
/// the oldest silent one is dropped (see [`Gate`]).
const WAITING_MAX: usize = 256;

/// The most bytes of a reason rank 0 sends back.
const REASON_BYTES_MAX: usize = 1024;

/// One side of a job's rendezvous.
pub struct TcpRendezvous {
    rank: Rank,
    world_size: usize,
    timeout: Duration,
    /// The rendezvous address, for messages.
    address: String,
    state: Mutex<State>,
}

/// The connections and the round counter.
struct State {
    round: u32,
    role: Role,
}

/// Rank 0 holds a connection to every other rank; the others one to rank 0.
enum Role {
    /// A job of one rank: nothing to connect.
    Alone,
    /// Rank 0: `peers[r]` is rank `r`'s connection (`None` for rank 0).
    Server { peers: Vec<Option<Peer>> },
    /// Any other rank.
    Client { stream: TcpStream },
}

/// A joined rank, as rank 0 sees it.
struct Peer {
    stream: TcpStream,
    addr: SocketAddr,
}

impl TcpRendezvous {
    /// Connects this rank to its job's rendezvous: rank 0 listens at
    /// `env.rendezvous`, the others join it. A job of one rank needs no
    /// address and opens no socket.
    pub fn connect(env: &RankEnv, job: &JobOptions) -> Result<TcpRendezvous, BootstrapError> {
        let fail = |reason: String| BootstrapError {
            rank: env.rank,
            reason,
        };
        if env.world_size == 1 {
            return Ok(TcpRendezvous {
                rank: 0,
                world_size: 1,
                timeout: job.timeout,
                address: String::new(),
                state: Mutex::new(State {
                    round: 0,
                    role: Role::Alone,
                }),
            });
        }
        let address = env
            .rendezvous
            .as_deref()
            .ok_or_else(|| fail("no rendezvous address (MASTER_ADDR, MASTER_PORT)".into()))?;
        if env.rank == 0 {
            let listener = bind(address).map_err(fail)?;
            TcpRendezvous::serve(listener, env.world_size, job)
        } else {
            TcpRendezvous::join(address, env.rank, env.world_size, job)
        }
    }

    /// Rank 0: waits on `listener` until every other rank of the job has
    /// joined (or the timeout passes).
    pub fn serve(
        listener: TcpListener,
        world_size: usize,
        job: &JobOptions,
    ) -> Result<TcpRendezvous, BootstrapError> {
        let address = listener
            .local_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string());
        let fail = |reason: String| BootstrapError { rank: 0, reason };
        if !(1..=WORLD_SIZE_MAX).contains(&world_size) {
            return Err(fail(format!("world size {world_size} out of range")));
        }
        let peers = accept_all(&listener, &address, world_size, job).map_err(fail)?;
        Ok(TcpRendezvous {
            rank: 0,
            world_size,
            timeout: job.timeout,
            address,
            state: Mutex::new(State {
                round: 0,
                role: Role::Server { peers },
            }),
        })
    }

    /// Rank `rank` (not 0): connects to rank 0 at `address`, retrying until
    /// the timeout, and introduces itself.
    pub fn join(
        address: &str,
        rank: Rank,
        world_size: usize,
        job: &JobOptions,
    ) -> Result<TcpRendezvous, BootstrapError> {
        let fail = |reason: String| BootstrapError { rank, reason };
        if rank == 0 || rank >= world_size {
            return Err(fail(format!(
                "rank {rank} cannot join a rendezvous of {world_size} ranks"
            )));
        }
        if job.token.len() > TOKEN_BYTES_MAX {
            return Err(fail(format!("the token exceeds {TOKEN_BYTES_MAX} bytes")));
        }
        let deadline = Instant::now() + job.timeout;
        // Rank 0 drops connections without an answer when strangers crowd
        // its listener (see `Gate`): such a close means "dial again".
        let stream = loop {
            let mut stream = connect_until(address, deadline, job.timeout).map_err(fail)?;
            match introduce(&mut stream, address, job, rank, world_size, deadline) {
                Ok(()) => break stream,
                Err(Introduction::Dropped(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(Introduction::Dropped(why)) => {
                    return Err(fail(format!(
                        "rank 0 at {address} kept closing this rank's connection without an answer ({why}) for {:?}",
                        job.timeout
                    )));
                }
                Err(Introduction::Failed(reason)) => return Err(fail(reason)),
            }
        };
        Ok(TcpRendezvous {
            rank,
            world_size,
            timeout: job.timeout,
            address: address.to_string(),
            state: Mutex::new(State {
                round: 0,
                role: Role::Client { stream },
            }),
        })
    }

    fn fail(&self, reason: String) -> BootstrapError {
        BootstrapError {
            rank: self.rank,
            reason,
        }
    }
}

impl Bootstrap for TcpRendezvous {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        if mine.len() > ALLGATHER_BYTES_MAX {
            return Err(self.fail(format!(
                "an allgather contribution of {} bytes exceeds {ALLGATHER_BYTES_MAX}",
                mine.len()
            )));
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.round += 1;
        let round = state.round;
        match &mut state.role {
            Role::Alone => Ok(vec![mine.to_vec()]),
            Role::Server { peers } => self.gather_as_server(peers, round, mine),
            Role::Client { stream } => self.gather_as_client(stream, round, mine),
        }
    }
}

impl TcpRendezvous {
    /// Rank 0's side of a round: collect every contribution, send them all
    /// back; on a failure tell every rank why.
    fn gather_as_server(
        &self,
        peers: &mut [Option<Peer>],
        round: u32,
        mine: &[u8],
    ) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let deadline = Instant::now() + self.timeout;
        let mut all = vec![mine.to_vec()];
        for (r, peer) in peers.iter_mut().enumerate().skip(1) {
            let peer = peer
                .as_mut()
                .expect("every rank joined before the first round");
            match read_contribution(&mut peer.stream, round, deadline) {
                Ok(bytes) => all.push(bytes),
                Err(e) => {
                    let reason = format!(
                        "rank {r} ({}) did not contribute to rendezvous round {round} within {:?}: {e}",
                        peer.addr, self.timeout
                    );
                    let mut notice = vec![1u8];
                    put_reason(&mut notice, &reason);
                    for other in peers.iter_mut().flatten() {
                        let _ = set_deadline(&other.stream, deadline);
                        let _ = other.stream.write_all(&notice);
                    }
                    return Err(self.fail(reason));
                }
            }
        }
        let mut answer = vec![0u8];
        answer.extend_from_slice(&round.to_le_bytes());
        answer.extend_from_slice(&(all.len() as u32).to_le_bytes());
        for bytes in &all {
            answer.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            answer.extend_from_slice(bytes);
        }
        for (r, peer) in peers.iter_mut().enumerate() {
            let Some(peer) = peer else { continue };
            let sent = peer
                .stream
                .set_write_timeout(Some(self.timeout))
                .and_then(|()| peer.stream.write_all(&answer));
            if let Err(e) = sent {
                return Err(self.fail(format!(
                    "cannot send rendezvous round {round} to rank {r} ({}): {}",
                    peer.addr,
                    describe_io(&e)
                )));
            }
        }
        Ok(all)
    }

    /// Another rank's side of a round.
    fn gather_as_client(
        &self,
        stream: &mut TcpStream,
        round: u32,
        mine: &[u8],
    ) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let at = &self.address;
        let io_fail = |e: io::Error| {
            self.fail(format!(
                "rendezvous round {round} with rank 0 at {at}: {}",
                describe_io(&e)
            ))
        };
        let mut frame = Vec::with_capacity(8 + mine.len());
        frame.extend_from_slice(&round.to_le_bytes());
        frame.extend_from_slice(&(mine.len() as u32).to_le_bytes());
        frame.extend_from_slice(mine);
        stream
            .set_write_timeout(Some(self.timeout))
            .and_then(|()| stream.write_all(&frame))
            .map_err(io_fail)?;
        // Rank 0 answers within its own timeout (or says why not), so
        // twice that is a dead or hung rank 0.
        set_deadline(stream, Instant::now() + 2 * self.timeout).map_err(io_fail)?;
        if read_u8(stream).map_err(io_fail)? != 0 {
            let reason = read_reason(stream).map_err(io_fail)?;
            return Err(self.fail(format!("rank 0 at {at} ended the rendezvous: {reason}")));
        }
        let got = read_u32(stream).map_err(io_fail)?;
        let n = read_u32(stream).map_err(io_fail)? as usize;
        if got != round || n != self.world_size {
            return Err(self.fail(format!(
                "rank 0 at {at} answered round {got} with {n} contributions; expected round {round} with {}",
                self.world_size
            )));
        }
        (0..n)
            .map(|_| read_capped(stream, ALLGATHER_BYTES_MAX).map_err(io_fail))
            .collect()
    }
}

/// Binds the rendezvous address; if it is not an address of this host
/// (a name resolving elsewhere, NAT), binds its port on every interface.
fn bind(address: &str) -> Result<TcpListener, String> {
    let addrs: Vec<SocketAddr> = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the rendezvous address {address}: {e}"))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match crate::gate::listen(*a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some((*a, e)),
        }
    }
    match last {
        Some((a, e)) if e.kind() == io::ErrorKind::AddrNotAvailable => {
            let any: SocketAddr = if a.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, a.port()).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, a.port()).into()
            };
            crate::gate::listen(any).map_err(|e| {
                format!(
                    "rank 0 cannot listen at {address} nor on port {} of every interface: {e}",
                    a.port()
                )
            })
        }
        Some((a, e)) => Err(format!("rank 0 cannot listen at {address} ({a}): {e}")),
        None => Err(format!(
            "the rendezvous address {address} resolves to nothing"
        )),
    }
}

/// Accepts connections until every rank `1..world_size` has joined.
/// Strangers go through the [`Gate`]: one thread, at most
/// [`WAITING_MAX`] connections waiting for a hello, each for at most
/// [`HELLO_WAIT_MAX`]; nothing but a whole hello is answered.
fn accept_all(
    listener: &TcpListener,
    address: &str,
    world_size: usize,
    job: &JobOptions,
) -> Result<Vec<Option<Peer>>, String> {
    let mut peers: Vec<Option<Peer>> = (0..world_size).map(|_| None).collect();
    let mut missing = world_size - 1;
    if missing == 0 {
        return Ok(peers);
    }
    let deadline = Instant::now() + job.timeout;
    let mut gate = Gate::new(listener, WAITING_MAX, job.timeout.min(HELLO_WAIT_MAX))
        .map_err(|e| format!("rank 0 at {address}: {e}"))?;
    let mut log = RefusalLog::new(format!("rendezvous: rank 0 at {address}"));
    let never = AtomicBool::new(false);
    while missing > 0 {
        let arrival = gate
            .next(deadline, &never, hello_so_far)
            .map_err(|e| format!("rank 0 at {address}: {e}"))?;
        let Some(Arrival {
            stream,
            addr,
            hello,
        }) = arrival
        else {
            let absent: Vec<String> = (1..world_size)
                .filter(|&r| peers[r].is_none())
                .map(|r| r.to_string())
                .collect();
            log.finish(&gate.dropped());
            return Err(format!(
                "rank(s) {} did not join the rendezvous at {address} within {:?}",
                absent.join(", "),
                job.timeout
            ));
        };
        let verdict = check_hello(&hello, job, world_size).and_then(|r| match &peers[r] {
            Some(p) => Err(Refusal::told(format!(
                "rank {r} already joined from {}",
                p.addr
            ))),
            None => Ok(r),
        });
        let mut answer = MAGIC.to_vec();
        match verdict {
            Ok(r) => {
                answer.push(0);
                put_reason(&mut answer, "");
                let sent = stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_write_timeout(Some(job.timeout.min(HELLO_WAIT_MAX))))
                    .and_then(|()| (&stream).write_all(&answer));
                if sent.is_ok() {
                    peers[r] = Some(Peer { stream, addr });
                    missing -= 1;
                }
            }
            Err(refusal) => {
                log.record(&format!(
                    "refused a connection from {addr}: {}",
                    refusal.logged
                ));
                answer.push(1);
                put_reason(&mut answer, &refusal.told);
                // Best effort and never blocking: the stranger may be gone.
                let _ = (&stream).write(&answer);
            }
        }
    }
    log.finish(&gate.dropped());
    Ok(peers)
}

#[cfg(test)]
mod tests;
