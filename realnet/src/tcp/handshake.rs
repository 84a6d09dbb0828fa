//! Setting up the connections: each rank dials every higher rank and
//! accepts every lower one, and both ends of a connection check the
//! other's hello (magic and version, job id, job token, world size and
//! ranks) before it carries a message.
//!
//! A connection that fails the check (a stray client, another job, a wrong
//! token, a second connection claiming a rank already connected) gets a
//! refusal frame saying why, is closed, and is logged to stderr with a
//! `realnet:` prefix and in [`Refusals`]; the listener goes on waiting for
//! the real peer until the connect deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use algorithms::Tag;

use crate::call::CallId;
use crate::frame::{Body, CONTROL_CAP, Frame, FrameError, HEADER_LEN, Header, MAGIC};

/// Handshakes in progress at once on one listener; connections beyond
/// this are refused without reading them (a flood of strays cannot make a
/// rank spawn threads without limit).
const PENDING_HANDSHAKES_MAX: usize = 64;

/// The refused connections of one rank, in order.
#[derive(Default)]
pub(super) struct Refusals(Mutex<Vec<String>>);

impl Refusals {
    /// Logs a refusal to stderr and keeps it.
    fn record(&self, line: String) {
        eprintln!("realnet: {line}");
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    /// Every refusal so far.
    pub(super) fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
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

    /// Checks a peer's hello; returns the rank it claims.
    fn check(&self, frame: &Frame) -> Result<u32, String> {
        let Body::Hello { world_size, token } = &frame.body else {
            return Err("the first frame is not a hello".into());
        };
        if frame.job_id != self.job_id {
            return Err(format!(
                "job id {} (this job is {})",
                frame.job_id, self.job_id
            ));
        }
        if !same_token(token, &self.token) {
            return Err("wrong job token".into());
        }
        if *world_size != u64::from(self.world_size) {
            return Err(format!(
                "the peer believes the job has {world_size} ranks, this rank {}",
                self.world_size
            ));
        }
        if frame.dst != self.rank {
            return Err(format!(
                "hello addressed to rank {}, but this is rank {}",
                frame.dst, self.rank
            ));
        }
        if frame.src >= self.world_size || frame.src == self.rank {
            return Err(format!("hello from an impossible rank {}", frame.src));
        }
        Ok(frame.src)
    }

    /// Connects to `peer` at `addr`, retrying until `deadline`, and
    /// exchanges hellos.
    pub(super) fn dial(
        &self,
        peer: u32,
        addr: SocketAddr,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<TcpStream, String> {
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
        let io = |e: std::io::Error| format!("handshake with rank {peer} at {addr} failed: {e}");
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let mut bytes = Vec::new();
        self.hello(peer).encode(&mut bytes);
        stream.write_all(&bytes).map_err(io)?;
        let reply = read_control(&mut stream)
            .map_err(|e| format!("handshake with rank {peer} at {addr} failed: {e}"))?;
        if let Body::Refuse(why) = &reply.body {
            return Err(format!(
                "rank {peer} at {addr} refused this rank's connection: {why}"
            ));
        }
        match self.check(&reply) {
            Ok(src) if src == peer => Ok(stream),
            Ok(src) => Err(format!(
                "{addr} answered as rank {src}, but rank {peer} was expected there"
            )),
            Err(why) => Err(format!("rank {peer} at {addr} is not of this job: {why}")),
        }
    }

    /// Accepts the lower ranks' connections on `listener` until each has
    /// made one that passed the handshake; returns them by rank.
    pub(super) fn accept_lower(
        &self,
        listener: &TcpListener,
        deadline: Instant,
        stop: &AtomicBool,
        refusals: &Arc<Refusals>,
    ) -> Result<Vec<TcpStream>, String> {
        let want = self.rank as usize;
        let slots: Arc<Mutex<Vec<Option<TcpStream>>>> =
            Arc::new(Mutex::new((0..want).map(|_| None).collect()));
        let pending = Arc::new(AtomicUsize::new(0));
        let local = listener
            .local_addr()
            .map_err(|e| format!("listener: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("listener on {local}: {e}"))?;
        loop {
            {
                let mut s = slots.lock().unwrap_or_else(|e| e.into_inner());
                if s.iter().all(Option::is_some) {
                    return Ok(s
                        .iter_mut()
                        .map(|x| x.take().expect("all filled"))
                        .collect());
                }
                if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    let missing: Vec<String> = s
                        .iter()
                        .enumerate()
                        .filter(|(_, x)| x.is_none())
                        .map(|(r, _)| r.to_string())
                        .collect();
                    return Err(format!(
                        "rank(s) {} did not connect to {local} in time",
                        missing.join(", ")
                    ));
                }
            }
            match listener.accept() {
                Ok((stream, from)) => {
                    if pending.fetch_add(1, Ordering::AcqRel) >= PENDING_HANDSHAKES_MAX {
                        pending.fetch_sub(1, Ordering::AcqRel);
                        refusals.record(format!(
                            "rank {} refused a connection from {from}: too many handshakes at once",
                            self.rank
                        ));
                        continue;
                    }
                    let (hand, slots, pending, refusals) = (
                        self.clone(),
                        slots.clone(),
                        pending.clone(),
                        refusals.clone(),
                    );
                    thread::spawn(move || {
                        hand.answer(stream, from, &slots, &refusals);
                        pending.fetch_sub(1, Ordering::AcqRel);
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(2));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("accepting on {local}: {e}")),
            }
        }
    }

    /// Handles one accepted connection: checks its hello, claims its rank
    /// and answers, or refuses it.
    fn answer(
        &self,
        mut stream: TcpStream,
        from: SocketAddr,
        slots: &Mutex<Vec<Option<TcpStream>>>,
        refusals: &Refusals,
    ) {
        let setup = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(self.timeout)))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .and_then(|()| stream.set_nodelay(true));
        let claimed = setup
            .map_err(|e| e.to_string())
            .and_then(|()| read_control(&mut stream))
            .and_then(|hello| self.check(&hello))
            .and_then(|src| {
                if src > self.rank {
                    return Err(format!(
                        "rank {src} dialled, but higher ranks wait for lower ones to dial"
                    ));
                }
                let mut s = slots.lock().unwrap_or_else(|e| e.into_inner());
                let slot = &mut s[src as usize];
                if slot.is_some() {
                    return Err(format!("rank {src} is already connected"));
                }
                let mut bytes = Vec::new();
                self.hello(src).encode(&mut bytes);
                stream
                    .write_all(&bytes)
                    .map_err(|e| format!("answering rank {src}: {e}"))?;
                *slot = Some(stream.try_clone().map_err(|e| e.to_string())?);
                Ok(src)
            });
        if let Err(why) = claimed {
            // Recorded before the stranger hears of it, so that whoever
            // learns of the refusal finds it in the list.
            refusals.record(format!(
                "rank {} refused a connection from {from}: {why}",
                self.rank
            ));
            let mut bytes = Vec::new();
            self.control(u32::MAX, Body::Refuse(why)).encode(&mut bytes);
            // Best effort: the stranger may be gone already.
            let _ = stream.write_all(&bytes);
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Compares tokens without stopping at the first difference.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads one control-sized frame (at most [`CONTROL_CAP`] bytes of
/// payload), with the stream's timeouts.
fn read_control(stream: &mut TcpStream) -> Result<Frame, String> {
    let io = |e: std::io::Error| match e.kind() {
        ErrorKind::UnexpectedEof => "the peer closed the connection during the handshake".into(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            "no complete hello within the handshake timeout".into()
        }
        _ => e.to_string(),
    };
    let mut head = [0u8; HEADER_LEN];
    // The magic first: a stranger that sends a few bytes and waits is
    // told apart at once, not after the handshake timeout.
    stream.read_exact(&mut head[..MAGIC.len()]).map_err(io)?;
    if head[..MAGIC.len()] != MAGIC {
        let found = [head[0], head[1], head[2], head[3]];
        return Err(format!(
            "not a realnet hello: {}",
            FrameError::BadMagic { found }
        ));
    }
    stream.read_exact(&mut head[MAGIC.len()..]).map_err(io)?;
    let header = Header::decode(&head, HEADER_LEN as u64 + CONTROL_CAP)
        .map_err(|e| format!("not a realnet hello: {e}"))?;
    // At most CONTROL_CAP bytes, checked by the decode above.
    let mut payload = vec![0u8; header.payload_len() as usize];
    stream.read_exact(&mut payload).map_err(io)?;
    let body = Body::decode(&header, &payload).map_err(|e| format!("bad hello: {e}"))?;
    Ok(Frame::from_parts(&header, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hand(rank: u32) -> Hand {
        Hand {
            rank,
            world_size: 4,
            job_id: 1,
            token: b"t".as_slice().into(),
            timeout: Duration::from_secs(2),
        }
    }

    #[test]
    fn each_lower_rank_is_accepted_once_and_impostors_are_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let refusals = Arc::new(Refusals::default());
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_secs(10);
        let me = hand(2);
        thread::scope(|s| {
            let acceptor = s.spawn(|| me.accept_lower(&listener, deadline, &stop, &refusals));
            let zero = hand(0).dial(2, addr, deadline, &stop).unwrap();
            let again = hand(0).dial(2, addr, deadline, &stop).unwrap_err();
            assert!(
                again.ends_with("refused this rank's connection: rank 0 is already connected"),
                "{again}"
            );
            let higher = hand(3).dial(2, addr, deadline, &stop).unwrap_err();
            assert!(
                higher.contains("higher ranks wait for lower ones"),
                "{higher}"
            );
            let wrong = hand(1).dial(3, addr, deadline, &stop).unwrap_err();
            assert!(
                wrong.contains("hello addressed to rank 3, but this is rank 2"),
                "{wrong}"
            );
            let one = hand(1).dial(2, addr, deadline, &stop).unwrap();
            let got = acceptor.join().unwrap().unwrap();
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].peer_addr().unwrap(), zero.local_addr().unwrap());
            assert_eq!(got[1].peer_addr().unwrap(), one.local_addr().unwrap());
        });
        let logged = refusals.all();
        assert_eq!(logged.len(), 3, "{logged:?}");
        assert!(logged[0].starts_with("rank 2 refused a connection from 127.0.0.1:"));
    }

    #[test]
    fn ranks_that_never_dial_are_named_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let refusals = Arc::new(Refusals::default());
        let deadline = Instant::now() + Duration::from_millis(50);
        let e = hand(2)
            .accept_lower(&listener, deadline, &AtomicBool::new(false), &refusals)
            .unwrap_err();
        assert!(
            e.starts_with("rank(s) 0, 1 did not connect to 127.0.0.1:"),
            "{e}"
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abc", b"abd"));
        assert!(!same_token(b"abc", b"abcd"));
        assert!(same_token(b"", b""));
    }
}
