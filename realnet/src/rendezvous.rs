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

/// How much of a hello `bytes` is (for the [`Gate`]): the magic, the
/// fixed fields, then the token its length announces.
fn hello_so_far(bytes: &[u8]) -> HelloSoFar {
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
struct Refusal {
    told: String,
    logged: String,
}

impl Refusal {
    /// A refusal to a rank that proved it belongs to the job: it may know why.
    fn told(reason: String) -> Refusal {
        Refusal {
            logged: reason.clone(),
            told: reason,
        }
    }
}

/// Checks a whole hello (as [`hello_so_far`] delimits it): the rank it
/// names, or why it is refused.
fn check_hello(h: &[u8], job: &JobOptions, world_size: usize) -> Result<Rank, Refusal> {
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
struct RefusalLog {
    prefix: String,
    count: u64,
}

/// Refusals logged one by one before the rest are only counted.
const LOGGED_REFUSALS_MAX: u64 = 16;

impl RefusalLog {
    /// A log whose lines begin with `prefix`.
    fn new(prefix: String) -> RefusalLog {
        RefusalLog { prefix, count: 0 }
    }

    /// Logs (or counts) one refusal.
    fn record(&mut self, line: &str) {
        self.count += 1;
        if self.count <= LOGGED_REFUSALS_MAX {
            eprintln!("{}: {line}", self.prefix);
        }
    }

    /// Logs what was only counted, and the connections the gate dropped.
    fn finish(&self, dropped: &Dropped) {
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
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The hello of `rank`.
fn hello(job: &JobOptions, rank: Rank, world_size: usize) -> Vec<u8> {
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
enum Introduction {
    /// The connection closed before any answer: dial again.
    Dropped(String),
    /// Refused, timed out, or not a rendezvous: give up, saying why.
    Failed(String),
}

/// Sends this rank's hello on `stream` and reads rank 0's answer.
fn introduce(
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

/// Connects to `address`, retrying while nobody listens yet.
fn connect_until(address: &str, deadline: Instant, timeout: Duration) -> Result<TcpStream, String> {
    let mut last = String::from("no attempt");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "cannot reach rank 0's rendezvous at {address} within {timeout:?}: {last}"
            ));
        }
        match address.to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    match TcpStream::connect_timeout(&a, left.min(Duration::from_secs(5))) {
                        Ok(s) => return Ok(s),
                        Err(e) => last = format!("{a}: {e}"),
                    }
                }
            }
            // Name resolution may fail while the cluster's DNS catches up.
            Err(e) => last = format!("cannot resolve {address}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50).min(left));
    }
}

/// Reads one rank's contribution to `round`.
fn read_contribution(
    stream: &mut TcpStream,
    round: u32,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let io = |e: io::Error| describe_io(&e);
    set_deadline(stream, deadline).map_err(io)?;
    let got = read_u32(stream).map_err(io)?;
    if got != round {
        return Err(format!("it sent round {got}"));
    }
    read_capped(stream, ALLGATHER_BYTES_MAX).map_err(io)
}

/// Sets the read timeout to what is left until `deadline`.
fn set_deadline(stream: &TcpStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))
}

fn read_u8(s: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u32(s: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads a `len:u32` then that many bytes, refusing a length over `max`
/// before allocating.
fn read_capped(s: &mut impl Read, max: usize) -> io::Result<Vec<u8>> {
    let len = read_u32(s)? as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a length of {len} bytes (more than {max})"),
        ));
    }
    let mut bytes = vec![0u8; len];
    s.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Reads a `len:u16` reason.
fn read_reason(s: &mut impl Read) -> io::Result<String> {
    let mut b = [0u8; 2];
    s.read_exact(&mut b)?;
    let len = u16::from_le_bytes(b) as usize;
    if len > REASON_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a reason of {len} bytes (more than {REASON_BYTES_MAX})"),
        ));
    }
    let mut bytes = vec![0u8; len];
    s.read_exact(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Appends a `len:u16` reason, cut to [`REASON_BYTES_MAX`].
fn put_reason(out: &mut Vec<u8>, reason: &str) {
    let mut end = reason.len().min(REASON_BYTES_MAX);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&reason.as_bytes()[..end]);
}

/// An I/O error as a person reads it.
fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::UnexpectedEof => "the connection closed".to_string(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(timeout_ms: u64) -> JobOptions {
        JobOptions {
            job_id: 42,
            token: "right".into(),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    /// Runs a job of `n` ranks: rank 0 serves on a fresh port, the others
    /// join; each rank does `rounds` allgathers of `[rank, round]`.
    fn run_job(n: usize, rounds: u8, job: &JobOptions) -> Vec<Result<Vec<Vec<Vec<u8>>>, String>> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mut listener = Some(listener);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|rank| {
                    let l = if rank == 0 { listener.take() } else { None };
                    let addr = addr.clone();
                    s.spawn(move || {
                        let boot = match l {
                            Some(l) => TcpRendezvous::serve(l, n, job),
                            None => TcpRendezvous::join(&addr, rank, n, job),
                        }
                        .map_err(|e| e.to_string())?;
                        (0..rounds)
                            .map(|round| {
                                boot.allgather(&[rank as u8, round])
                                    .map_err(|e| e.to_string())
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn ranks_exchange_bytes_through_rank_0() {
        for n in [1usize, 2, 5] {
            for (rank, result) in run_job(n, 3, &job(5000)).into_iter().enumerate() {
                let rounds = result.unwrap();
                for (round, all) in rounds.iter().enumerate() {
                    let want: Vec<Vec<u8>> = (0..n).map(|r| vec![r as u8, round as u8]).collect();
                    assert_eq!(all, &want, "rank {rank} round {round}");
                }
            }
        }
    }

    #[test]
    fn a_wrong_token_is_refused_while_the_real_job_completes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let good = job(5000);
        let bad_token = JobOptions {
            token: "wrong".into(),
            ..good.clone()
        };
        let bad_job = JobOptions {
            job_id: 41,
            ..good.clone()
        };
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                let b = TcpRendezvous::serve(listener, 3, &good).unwrap();
                b.allgather(b"zero").unwrap()
            });
            // The impostors come first, claiming the real ranks; they learn
            // nothing of the job (its id is 42).
            for impostor in [&bad_token, &bad_job] {
                let e = TcpRendezvous::join(&addr, 1, 3, impostor)
                    .err()
                    .unwrap()
                    .to_string();
                assert!(
                    e.ends_with("refused this rank: wrong job id or token"),
                    "{e}"
                );
                assert!(e.contains(&addr), "{e}");
                // The address may hold "42" (port 42679): look past it.
                assert!(!e.replace(&addr, "").contains("42"), "{e}");
            }
            // A rank of the job with another world size is told why.
            let e = TcpRendezvous::join(&addr, 2, 4, &good).err().unwrap();
            assert!(e.to_string().contains("has 3"), "{e}");
            // Bytes that begin no hello get no answer at all.
            let mut junk = TcpStream::connect(&addr).unwrap();
            junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut answer = Vec::new();
            let _ = junk.read_to_end(&mut answer);
            assert!(answer.is_empty(), "{answer:?}");
            // A connection that never says anything does not hold them up.
            let _silent = TcpStream::connect(&addr).unwrap();
            let ranks: Vec<_> = (1..3)
                .map(|r| {
                    let (addr, good) = (&addr, &good);
                    s.spawn(move || {
                        let b = TcpRendezvous::join(addr, r, 3, good).unwrap();
                        b.allgather(format!("r{r}").as_bytes()).unwrap()
                    })
                })
                .collect();
            let want = vec![b"zero".to_vec(), b"r1".to_vec(), b"r2".to_vec()];
            assert_eq!(server.join().unwrap(), want);
            for h in ranks {
                assert_eq!(h.join().unwrap(), want);
            }
        });
    }

    #[test]
    fn a_duplicate_rank_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let good = job(5000);
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                let b = TcpRendezvous::serve(listener, 3, &good).unwrap();
                b.allgather(b"0").unwrap()
            });
            let first = TcpRendezvous::join(&addr, 1, 3, &good).unwrap();
            let e = TcpRendezvous::join(&addr, 1, 3, &good).err().unwrap();
            assert!(e.to_string().contains("rank 1 already joined"), "{e}");
            let two = s.spawn(|| {
                let b = TcpRendezvous::join(&addr, 2, 3, &good).unwrap();
                b.allgather(b"2").unwrap()
            });
            assert_eq!(first.allgather(b"1").unwrap().len(), 3);
            assert_eq!(server.join().unwrap()[1], b"1");
            assert_eq!(two.join().unwrap()[2], b"2");
        });
    }

    #[test]
    fn a_missing_rank_times_out_naming_it_on_every_side() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let short = job(300);
        std::thread::scope(|s| {
            let server = s.spawn(|| TcpRendezvous::serve(listener, 3, &short).err().unwrap());
            let one = TcpRendezvous::join(&addr, 1, 3, &short).unwrap();
            let e = server.join().unwrap().to_string();
            assert!(e.contains("rank(s) 2 did not join"), "{e}");
            // Rank 0 is gone: rank 1's round fails instead of hanging.
            let e = one.allgather(b"1").unwrap_err().to_string();
            assert!(e.contains(&addr), "{e}");
        });
        // Nobody listening at all: the joiner gives up at its timeout.
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap().to_string();
        drop(free);
        let e = TcpRendezvous::join(&addr, 1, 2, &short).err().unwrap();
        assert!(e.to_string().contains("cannot reach rank 0"), "{e}");
    }

    #[test]
    fn a_rank_that_stops_mid_round_is_named_to_the_others() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let short = job(400);
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                let b = TcpRendezvous::serve(listener, 3, &short).unwrap();
                b.allgather(b"0").unwrap_err().to_string()
            });
            let one = s.spawn(|| {
                let b = TcpRendezvous::join(&addr, 1, 3, &short).unwrap();
                b.allgather(b"1").unwrap_err().to_string()
            });
            // Rank 2 joins, then never contributes.
            let two = TcpRendezvous::join(&addr, 2, 3, &short).unwrap();
            let e0 = server.join().unwrap();
            let e1 = one.join().unwrap();
            drop(two);
            assert!(e0.contains("rank 2"), "{e0}");
            assert!(
                e1.contains("rank 2") && e1.contains("ended the rendezvous"),
                "{e1}"
            );
        });
    }

    #[test]
    fn oversized_lengths_are_refused_before_allocating() {
        let mut wire: &[u8] = &u32::MAX.to_le_bytes();
        let e = read_capped(&mut wire, ALLGATHER_BYTES_MAX).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        let b = TcpRendezvous::connect(
            &RankEnv {
                rank: 0,
                world_size: 1,
                launcher: None,
                rendezvous: None,
                job: job(100),
                fabric: None,
            },
            &job(100),
        )
        .unwrap();
        let e = b.allgather(&vec![0; ALLGATHER_BYTES_MAX + 1]).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
        assert_eq!(b.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
    }
}
