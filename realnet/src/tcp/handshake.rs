//! Setting up the connections: each rank dials every higher rank and
//! accepts every lower one, and both ends of a connection check the
//! other's hello (magic and version, job id, job token, world size and
//! ranks) before it carries a message.
//!
//! The listener is served through a [`Gate`]: one thread, at most
//! [`WAITING_MAX`] connections waiting for their hello, each for at most
//! the handshake timeout, so a flood of strangers costs a fixed amount and
//! never crowds out the real peers (a dialer whose connection was dropped
//! unanswered dials again). Bytes that begin no hello are dropped without
//! an answer. A hello with another job id or token gets a refusal frame
//! saying only "wrong job id or token" (with job id 0: nothing a stranger
//! did not know); a hello of the job that cannot be accepted (another
//! world size, a rank already connected) is told why. Every refusal is
//! logged to stderr with a `realnet:` prefix (the first
//! [`LOGGED_REFUSALS_MAX`] one by one) and kept in [`Refusals`]; the
//! listener goes on waiting for the real peer until the connect deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use algorithms::Tag;

use crate::call::CallId;
use crate::frame::{Body, CONTROL_CAP, Frame, FrameError, HEADER_LEN, Header, Kind, MAGIC};
use crate::gate::{Arrival, Gate, HelloSoFar};
use crate::launch::TOKEN_BYTES_MAX;

/// Connections one listener keeps waiting for their hello at once;
/// beyond this the oldest silent one is dropped (see [`Gate`]).
const WAITING_MAX: usize = 256;

/// The longest hello payload: the world size and a token.
const HELLO_PAYLOAD_MAX: usize = 8 + TOKEN_BYTES_MAX;

/// Refusals kept and logged one by one; later ones are only counted.
pub(super) const LOGGED_REFUSALS_MAX: usize = 64;

/// What a connection without the job's id and token is told.
const STRANGER_REFUSAL: &str = "wrong job id or token";

/// The refused connections of one rank, in order (the first
/// [`LOGGED_REFUSALS_MAX`]), and how many there were in all.
#[derive(Default)]
pub(super) struct Refusals(Mutex<(Vec<String>, u64)>);

impl Refusals {
    /// Logs a refusal to stderr and keeps it, or only counts it once
    /// [`LOGGED_REFUSALS_MAX`] were kept.
    fn record(&self, line: String) {
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        r.1 += 1;
        if r.0.len() < LOGGED_REFUSALS_MAX {
            eprintln!("realnet: {line}");
            r.0.push(line);
        }
    }

    /// The refusals kept (the first [`LOGGED_REFUSALS_MAX`]).
    pub(super) fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).0.clone()
    }

    /// How many connections were refused in all.
    pub(super) fn count(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

/// Why a hello is refused: what the connection is told, and what this
/// rank logs.
struct Refusal {
    told: String,
    logged: String,
    /// Whether the peer proved it belongs to the job (its refusal frame
    /// may then carry the job id).
    of_the_job: bool,
}

impl Refusal {
    /// A refusal to a connection of the job: it may know why.
    fn of_the_job(reason: String) -> Refusal {
        Refusal {
            told: reason.clone(),
            logged: reason,
            of_the_job: true,
        }
    }
}

/// Why a dialled handshake did not give a connection.
enum Greeting {
    /// The connection closed before any answer: dial again.
    Dropped(String),
    /// Refused, timed out, or not the expected rank: give up, saying why.
    Failed(String),
}

/// What one rank checks and presents in a handshake.
#[derive(Clone)]
pub(super) struct Hand {
    /// This rank.
    pub rank: u32,
    /// The number of ranks.
    pub world_size: u32,
    /// The job id.
    pub job_id: u64,
    /// The job token.
    pub token: Arc<[u8]>,
    /// How long one handshake may take.
    pub timeout: Duration,
}

impl Hand {
    fn hello(&self, peer: u32) -> Frame {
        self.control(
            peer,
            Body::Hello {
                world_size: u64::from(self.world_size),
                token: self.token.to_vec(),
            },
        )
    }

    fn control(&self, peer: u32, body: Body) -> Frame {
        Frame {
            job_id: self.job_id,
            src: self.rank,
            dst: peer,
            tag: Tag(0),
            seq: 0,
            call: CallId::NONE,
            body,
        }
    }

    /// The refusal frame for `refusal`: a stranger's carries neither the
    /// job id nor this rank.
    fn refusal_frame(&self, peer: u32, refusal: &Refusal) -> Frame {
        let body = Body::Refuse(refusal.told.clone());
        if refusal.of_the_job {
            return self.control(peer, body);
        }
        Frame {
            job_id: 0,
            src: u32::MAX,
            dst: u32::MAX,
            tag: Tag(0),
            seq: 0,
            call: CallId::NONE,
            body,
        }
    }

    /// Checks a peer's hello; returns the rank it claims.
    fn check(&self, frame: &Frame) -> Result<u32, Refusal> {
        let Body::Hello { world_size, token } = &frame.body else {
            return Err(Refusal {
                told: STRANGER_REFUSAL.into(),
                logged: "the first frame is not a hello".into(),
                of_the_job: false,
            });
        };
        if frame.job_id != self.job_id || !same_token(token, &self.token) {
            let logged = if frame.job_id != self.job_id {
                format!("job id {} (this job is {})", frame.job_id, self.job_id)
            } else {
                "wrong job token".into()
            };
            return Err(Refusal {
                told: STRANGER_REFUSAL.into(),
                logged,
                of_the_job: false,
            });
        }
        if *world_size != u64::from(self.world_size) {
            return Err(Refusal::of_the_job(format!(
                "the peer believes the job has {world_size} ranks, this rank {}",
                self.world_size
            )));
        }
        if frame.dst != self.rank {
            return Err(Refusal::of_the_job(format!(
                "hello addressed to rank {}, but this is rank {}",
                frame.dst, self.rank
            )));
        }
        if frame.src >= self.world_size || frame.src == self.rank {
            return Err(Refusal::of_the_job(format!(
                "hello from an impossible rank {}",
                frame.src
            )));
        }
        Ok(frame.src)
    }

    /// Connects to `peer` at `addr`, retrying until `deadline` (also when
    /// the peer's listener drops the connection unanswered, as it does
    /// when strangers crowd it), and exchanges hellos.
    pub(super) fn dial(
        &self,
        peer: u32,
        addr: SocketAddr,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<TcpStream, String> {
        loop {
            let mut stream = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let attempt = if left.is_zero() {
                    Err(std::io::Error::new(ErrorKind::TimedOut, "connect deadline"))
                } else {
                    TcpStream::connect_timeout(&addr, left.min(self.timeout))
                };
                match attempt {
                    Ok(s) => break s,
                    Err(e) if left.is_zero() || stop.load(Ordering::Relaxed) => {
                        return Err(format!("could not connect to rank {peer} at {addr}: {e}"));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            };
            match self.greet(&mut stream, peer, addr) {
                Ok(()) => return Ok(stream),
                Err(Greeting::Dropped(_))
                    if Instant::now() < deadline && !stop.load(Ordering::Relaxed) =>
                {
                    thread::sleep(Duration::from_millis(20));
                }
                Err(Greeting::Dropped(why)) => {
                    return Err(format!(
                        "rank {peer} at {addr} kept closing this rank's connection without an answer ({why})"
                    ));
                }
                Err(Greeting::Failed(why)) => return Err(why),
            }
        }
    }

    /// Sends this rank's hello on a fresh connection to `peer` and checks
    /// the answer.
    fn greet(&self, stream: &mut TcpStream, peer: u32, addr: SocketAddr) -> Result<(), Greeting> {
        let io = |e: std::io::Error| {
            let why = format!("handshake with rank {peer} at {addr} failed: {e}");
            if is_dropped(&e) {
                Greeting::Dropped(why)
            } else {
                Greeting::Failed(why)
            }
        };
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let mut bytes = Vec::new();
        self.hello(peer).encode(&mut bytes);
        stream.write_all(&bytes).map_err(io)?;
        let reply = read_control(stream).map_err(|e| match e {
            ControlError::Closed(why) => Greeting::Dropped(why),
            ControlError::Other(why) => Greeting::Failed(format!(
                "handshake with rank {peer} at {addr} failed: {why}"
            )),
        })?;
        if let Body::Refuse(why) = &reply.body {
            return Err(Greeting::Failed(format!(
                "rank {peer} at {addr} refused this rank's connection: {why}"
            )));
        }
        match self.check(&reply) {
            Ok(src) if src == peer => Ok(()),
            Ok(src) => Err(Greeting::Failed(format!(
                "{addr} answered as rank {src}, but rank {peer} was expected there"
            ))),
            Err(why) => Err(Greeting::Failed(format!(
                "rank {peer} at {addr} is not of this job: {}",
                why.logged
            ))),
        }
    }

    /// Accepts the lower ranks' connections on `listener` until each has
    /// made one that passed the handshake; returns them by rank.
    pub(super) fn accept_lower(
        &self,
        listener: &TcpListener,
        deadline: Instant,
        stop: &AtomicBool,
        refusals: &Refusals,
    ) -> Result<Vec<TcpStream>, String> {
        let want = self.rank as usize;
        let mut slots: Vec<Option<TcpStream>> = (0..want).map(|_| None).collect();
        let local = listener
            .local_addr()
            .map_err(|e| format!("listener: {e}"))?;
        let mut gate = Gate::new(listener, WAITING_MAX, self.timeout)
            .map_err(|e| format!("listener on {local}: {e}"))?;
        while slots.iter().any(Option::is_none) {
            let arrival = gate
                .next(deadline, stop, hello_so_far)
                .map_err(|e| format!("listener on {local}: {e}"))?;
            let Some(arrival) = arrival else {
                let missing: Vec<String> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.is_none())
                    .map(|(r, _)| r.to_string())
                    .collect();
                return Err(format!(
                    "rank(s) {} did not connect to {local} in time",
                    missing.join(", ")
                ));
            };
            self.answer(arrival, &mut slots, refusals);
        }
        let dropped = gate.dropped();
        if dropped.total() > 0 {
            eprintln!(
                "realnet: rank {}'s listener {local}: {}",
                self.rank,
                dropped.describe()
            );
        }
        Ok(slots.into_iter().map(|x| x.expect("all filled")).collect())
    }

    /// Handles one connection that sent a whole hello: checks it, claims
    /// its rank and answers, or refuses it.
    fn answer(&self, arrival: Arrival, slots: &mut [Option<TcpStream>], refusals: &Refusals) {
        let Arrival {
            stream,
            addr: from,
            hello,
        } = arrival;
        let claimed = decode_hello(&hello)
            .map_err(|why| Refusal {
                told: STRANGER_REFUSAL.into(),
                logged: why,
                of_the_job: false,
            })
            .and_then(|frame| self.check(&frame))
            .and_then(|src| {
                if src > self.rank {
                    return Err(Refusal::of_the_job(format!(
                        "rank {src} dialled, but higher ranks wait for lower ones to dial"
                    )));
                }
                if slots[src as usize].is_some() {
                    return Err(Refusal::of_the_job(format!(
                        "rank {src} is already connected"
                    )));
                }
                Ok(src)
            });
        match claimed {
            Ok(src) => {
                let mut bytes = Vec::new();
                self.hello(src).encode(&mut bytes);
                let sent = stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_read_timeout(Some(self.timeout)))
                    .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
                    .and_then(|()| stream.set_nodelay(true))
                    .and_then(|()| (&stream).write_all(&bytes));
                match sent {
                    Ok(()) => slots[src as usize] = Some(stream),
                    // It dials again if it is still there.
                    Err(e) => refusals.record(format!(
                        "rank {} could not answer rank {src} at {from}: {e}",
                        self.rank
                    )),
                }
            }
            Err(refusal) => {
                // Recorded before the stranger hears of it, so that whoever
                // learns of the refusal finds it in the list.
                refusals.record(format!(
                    "rank {} refused a connection from {from}: {}",
                    self.rank, refusal.logged
                ));
                let mut bytes = Vec::new();
                self.refusal_frame(u32::MAX, &refusal).encode(&mut bytes);
                // Best effort and never blocking: the stranger may be gone.
                let _ = (&stream).write(&bytes);
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// How much of a hello frame `bytes` is (for the [`Gate`]): a header that
/// decodes as a hello's, then its payload (a world size and a token).
fn hello_so_far(bytes: &[u8]) -> HelloSoFar {
    let magic = &bytes[..bytes.len().min(MAGIC.len())];
    if magic != &MAGIC[..magic.len()] {
        return HelloSoFar::Junk;
    }
    let Some(head) = bytes.first_chunk::<HEADER_LEN>() else {
        return HelloSoFar::Needs(HEADER_LEN);
    };
    match Header::decode(head, (HEADER_LEN + HELLO_PAYLOAD_MAX) as u64) {
        Ok(h) if h.kind == Kind::Hello => {
            let total = HEADER_LEN + h.body_len() as usize;
            if bytes.len() < total {
                HelloSoFar::Needs(total)
            } else {
                HelloSoFar::Complete
            }
        }
        _ => HelloSoFar::Junk,
    }
}

/// Decodes a whole hello as [`hello_so_far`] delimited it.
fn decode_hello(bytes: &[u8]) -> Result<Frame, String> {
    let head = bytes
        .first_chunk::<HEADER_LEN>()
        .ok_or("a hello shorter than a header")?;
    let header = Header::decode(head, (HEADER_LEN + HELLO_PAYLOAD_MAX) as u64)
        .map_err(|e| format!("not a realnet hello: {e}"))?;
    let body =
        Body::decode(&header, &bytes[HEADER_LEN..]).map_err(|e| format!("bad hello: {e}"))?;
    Ok(Frame::from_parts(&header, body))
}

/// Compares tokens without stopping at the first difference.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether an I/O error means the other end closed the connection.
fn is_dropped(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
    )
}

/// Why no control frame was read.
enum ControlError {
    /// The connection closed (or was reset) before a whole frame.
    Closed(String),
    /// Anything else: a timeout, bytes that are not a frame.
    Other(String),
}

/// Reads one control-sized frame (at most [`CONTROL_CAP`] bytes of
/// payload), with the stream's timeouts.
fn read_control(stream: &mut TcpStream) -> Result<Frame, ControlError> {
    let io = |e: std::io::Error| {
        if is_dropped(&e) {
            ControlError::Closed("the peer closed the connection during the handshake".into())
        } else if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            ControlError::Other("no complete hello within the handshake timeout".into())
        } else {
            ControlError::Other(e.to_string())
        }
    };
    let mut head = [0u8; HEADER_LEN];
    // The magic first: a stranger that sends a few bytes and waits is
    // told apart at once, not after the handshake timeout.
    stream.read_exact(&mut head[..MAGIC.len()]).map_err(io)?;
    if head[..MAGIC.len()] != MAGIC {
        let found = [head[0], head[1], head[2], head[3]];
        return Err(ControlError::Other(format!(
            "not a realnet hello: {}",
            FrameError::BadMagic { found }
        )));
    }
    stream.read_exact(&mut head[MAGIC.len()..]).map_err(io)?;
    let header = Header::decode(&head, HEADER_LEN as u64 + CONTROL_CAP)
        .map_err(|e| ControlError::Other(format!("not a realnet hello: {e}")))?;
    // At most CONTROL_CAP bytes (and a data frame's trailer), checked by
    // the decode above.
    let mut payload = vec![0u8; header.body_len() as usize];
    stream.read_exact(&mut payload).map_err(io)?;
    let body = Body::decode(&header, &payload)
        .map_err(|e| ControlError::Other(format!("bad hello: {e}")))?;
    Ok(Frame::from_parts(&header, body))
}

#[cfg(test)]
mod tests;
