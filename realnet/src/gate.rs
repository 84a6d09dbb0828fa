//! [`Gate`]: admission at a listening socket that strangers can reach.
//!
//! Rank 0's rendezvous listener and every rank's TCP data listener wait
//! for a few expected peers while anyone on the network may connect. A
//! gate serves such a listener on the caller's thread, with no thread per
//! connection:
//!
//! ```text
//!  accept (at most ACCEPTS_PER_TURN a turn) -> non-blocking, into a table of at most `cap`
//!  poll(listener + table, until the nearest deadline)
//!  readable: read no more than the hello still needs (the protocol's parser says how much)
//!     complete hello -> handed to the caller, who checks it and answers
//!     bytes no hello starts with, end of stream, error -> dropped, no answer
//!  past its deadline without a whole hello -> dropped
//!  table full -> the oldest connection that sent nothing is dropped (else the oldest)
//! ```
//!
//! So a stranger costs one table entry (a socket, an address, a deadline
//! and at most one hello's bytes) for at most the per-connection
//! deadline, however many there are; nothing it sends is answered unless
//! it is a whole hello. Real peers write their hello as soon as they
//! connect, so their connections are the ones read first, and the idle
//! strangers are the ones evicted; a peer whose connection was dropped
//! anyway sees it closed without an answer and dials again (the dialers in
//! [`crate::rendezvous`] and `tcp/handshake.rs` do). Running out of file
//! descriptors while accepting evicts too, rather than failing the job.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// Connections accepted per turn before the waiting ones are read, so a
/// flood of new connections cannot starve the reading of hellos.
const ACCEPTS_PER_TURN: usize = 64;

/// The kernel's queue of connections not accepted yet, per listener
/// (capped by `net.core.somaxconn`): room for a burst of strangers, so a
/// real peer's connection is not dropped before the gate sees it (std's
/// listeners get 128).
const BACKLOG: i32 = 1024;

/// The longest a turn waits in `poll`, so a stop flag is seen promptly.
const TURN_MAX: Duration = Duration::from_millis(20);

/// A listener on `addr`, like [`TcpListener::bind`] (with
/// `SO_REUSEADDR`) but with a deeper backlog ([`BACKLOG`]).
pub(crate) fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// What a protocol's parser says of the bytes a connection sent so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HelloSoFar {
    /// The hello is at least this many bytes in all (more than arrived).
    Needs(usize),
    /// The bytes are exactly one whole hello.
    Complete,
    /// No hello starts with these bytes.
    Junk,
}

/// A connection that sent a whole hello, for the caller to check.
pub(crate) struct Arrival {
    /// The connection, still non-blocking.
    pub stream: TcpStream,
    /// Where it came from.
    pub addr: SocketAddr,
    /// The hello's bytes, exactly.
    pub hello: Vec<u8>,
}

/// Connections the gate dropped without handing them to the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// They sent bytes no hello starts with.
    pub junk: u64,
    /// They sent no whole hello by their deadline.
    pub silent: u64,
    /// They closed or broke before a whole hello.
    pub closed: u64,
    /// They were evicted to make room (the table was full, or the process
    /// ran out of file descriptors).
    pub evicted: u64,
}

impl Dropped {
    /// How many in all.
    pub fn total(&self) -> u64 {
        self.junk + self.silent + self.closed + self.evicted
    }

    /// One line for a log: "12 connections that sent no hello (...)".
    pub fn describe(&self) -> String {
        format!(
            "{} connection(s) dropped unanswered: {} sent no valid hello, {} silent past the deadline, {} closed early, {} evicted when full",
            self.total(),
            self.junk,
            self.silent,
            self.closed,
            self.evicted
        )
    }
}

/// A connection waiting for its hello.
struct Waiting {
    stream: TcpStream,
    addr: SocketAddr,
    /// The turn it was accepted in.
    turn: u64,
    deadline: Instant,
    bytes: Vec<u8>,
}

/// A listener's admission of connections (see the module documentation).
pub(crate) struct Gate<'a> {
    listener: &'a TcpListener,
    waiting: Vec<Waiting>,
    cap: usize,
    hello_wait: Duration,
    dropped: Dropped,
    /// Turns of [`Gate::next`]'s loop so far.
    turn: u64,
    /// Whole hellos not handed out yet, in arrival order.
    ready: VecDeque<Arrival>,
}

impl<'a> Gate<'a> {
    /// A gate on `listener` (made non-blocking) holding at most `cap`
    /// connections, each for at most `hello_wait`.
    pub fn new(
        listener: &'a TcpListener,
        cap: usize,
        hello_wait: Duration,
    ) -> std::io::Result<Gate<'a>> {
        listener.set_nonblocking(true)?;
        Ok(Gate {
            listener,
            waiting: Vec::with_capacity(cap.max(1)),
            cap: cap.max(1),
            hello_wait,
            dropped: Dropped::default(),
            turn: 0,
            ready: VecDeque::new(),
        })
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// Connections waiting for their hello now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Serves the listener until a connection has sent a whole hello (as
    /// `parse` judges it), `until` passes or `stop` is set (`Ok(None)`).
    /// Only an error of the listener itself is an error.
    pub fn next(
        &mut self,
        until: Instant,
        stop: &AtomicBool,
        parse: impl Fn(&[u8]) -> HelloSoFar,
    ) -> Result<Option<Arrival>, String> {
        if let Some(arrival) = self.ready.pop_front() {
            return Ok(Some(arrival));
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            self.turn += 1;
            let fd_short = self.accept_some()?;
            let now = Instant::now();
            self.drop_late(now);
            self.read_ready(&parse);
            if let Some(arrival) = self.ready.pop_front() {
                return Ok(Some(arrival));
            }
            if now >= until {
                return Ok(None);
            }
            let nearest = self
                .waiting
                .iter()
                .map(|w| w.deadline)
                .min()
                .unwrap_or(until)
                .min(until);
            let wait = nearest.saturating_duration_since(now).min(TURN_MAX);
            if fd_short && self.waiting.is_empty() {
                // Out of descriptors with nothing of ours to free: the
                // connection stays in the backlog; try again shortly.
                std::thread::sleep(wait);
                continue;
            }
            // Out of descriptors, the listener would wake the poll at once.
            self.poll(wait, !fd_short);
        }
    }

    /// Accepts what the backlog holds (at most [`ACCEPTS_PER_TURN`], and
    /// at most half the table, so every connection is read once before it
    /// can be evicted); returns whether the process ran out of file
    /// descriptors.
    fn accept_some(&mut self) -> Result<bool, String> {
        for _ in 0..ACCEPTS_PER_TURN.min(self.cap / 2).max(1) {
            match self.listener.accept() {
                Ok((stream, addr)) => {
                    if stream.set_nonblocking(true).is_err() {
                        self.dropped.closed += 1;
                        continue;
                    }
                    if self.waiting.len() >= self.cap && !self.evict() {
                        // Everything waiting arrived this turn (only with
                        // a table of one): no room for this one.
                        self.dropped.evicted += 1;
                        continue;
                    }
                    self.waiting.push(Waiting {
                        stream,
                        addr,
                        turn: self.turn,
                        deadline: Instant::now() + self.hello_wait,
                        bytes: Vec::new(),
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted
                            | ErrorKind::ConnectionAborted
                            | ErrorKind::ConnectionReset
                    ) => {}
                Err(e) if is_resource_shortage(&e) => {
                    // Free a descriptor for the next turn rather than fail
                    // the job: the strangers hold them.
                    self.evict();
                    return Ok(true);
                }
                Err(e) => return Err(format!("accepting connections: {e}")),
            }
        }
        Ok(false)
    }

    /// Drops one waiting connection that was already given a chance to be
    /// read: the oldest that sent nothing, else the oldest. Returns
    /// whether there was one.
    fn evict(&mut self) -> bool {
        let turn = self.turn;
        let read_before = |w: &Waiting| w.turn < turn;
        let victim = self
            .waiting
            .iter()
            .position(|w| read_before(w) && w.bytes.is_empty())
            .or_else(|| self.waiting.iter().position(read_before));
        match victim {
            Some(i) => {
                self.waiting.remove(i);
                self.dropped.evicted += 1;
                true
            }
            None => false,
        }
    }

    /// Drops the connections past their deadline.
    fn drop_late(&mut self, now: Instant) {
        let before = self.waiting.len();
        self.waiting.retain(|w| w.deadline > now);
        self.dropped.silent += (before - self.waiting.len()) as u64;
    }

    /// Reads what every waiting connection sent: whole hellos move to the
    /// ready queue, connections that failed are dropped.
    fn read_ready(&mut self, parse: &impl Fn(&[u8]) -> HelloSoFar) {
        let mut i = 0;
        while i < self.waiting.len() {
            match read_some(&mut self.waiting[i], parse) {
                Progress::Waiting => i += 1,
                Progress::Hello => {
                    let w = self.waiting.remove(i);
                    self.ready.push_back(Arrival {
                        stream: w.stream,
                        addr: w.addr,
                        hello: w.bytes,
                    });
                }
                Progress::Junk => {
                    self.waiting.remove(i);
                    self.dropped.junk += 1;
                }
                Progress::Closed => {
                    self.waiting.remove(i);
                    self.dropped.closed += 1;
                }
            }
        }
    }

    /// Waits up to `wait` for the listener (if `listen`) or a waiting
    /// connection to become readable.
    fn poll(&self, wait: Duration, listen: bool) {
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.waiting.len() + 1);
        if listen {
            fds.push(PollFd::new(self.listener, PollFlags::IN));
        }
        fds.extend(
            self.waiting
                .iter()
                .map(|w| PollFd::new(&w.stream, PollFlags::IN)),
        );
        let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        });
        // An error (EINTR) only ends this wait early: the next turn looks
        // at everything again.
        let _ = poll(&mut fds, Some(&timeout));
    }
}

/// What reading a waiting connection came to.
enum Progress {
    Waiting,
    Hello,
    Junk,
    Closed,
}

/// Reads what `w` sent, no more than its hello needs.
fn read_some(w: &mut Waiting, parse: &impl Fn(&[u8]) -> HelloSoFar) -> Progress {
    loop {
        let need = match parse(&w.bytes) {
            HelloSoFar::Complete => return Progress::Hello,
            HelloSoFar::Junk => return Progress::Junk,
            HelloSoFar::Needs(n) if n > w.bytes.len() => n - w.bytes.len(),
            // A parser that asks for no more bytes than it has is wrong;
            // treat the bytes as no hello rather than spin.
            HelloSoFar::Needs(_) => return Progress::Junk,
        };
        let have = w.bytes.len();
        w.bytes.resize(have + need, 0);
        match w.stream.read(&mut w.bytes[have..]) {
            Ok(0) => {
                w.bytes.truncate(have);
                return Progress::Closed;
            }
            Ok(n) => w.bytes.truncate(have + n),
            Err(e) => {
                w.bytes.truncate(have);
                return match e.kind() {
                    ErrorKind::WouldBlock => Progress::Waiting,
                    ErrorKind::Interrupted => continue,
                    _ => Progress::Closed,
                };
            }
        }
    }
}

/// Whether an accept failed for want of descriptors or memory.
fn is_resource_shortage(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A toy hello: "HI", a length byte, that many bytes.
    fn toy(bytes: &[u8]) -> HelloSoFar {
        if bytes.len() < 3 {
            return if b"HI".starts_with(&bytes[..bytes.len().min(2)]) {
                HelloSoFar::Needs(3)
            } else {
                HelloSoFar::Junk
            };
        }
        if &bytes[..2] != b"HI" {
            return HelloSoFar::Junk;
        }
        let total = 3 + usize::from(bytes[2]);
        if bytes.len() < total {
            HelloSoFar::Needs(total)
        } else {
            HelloSoFar::Complete
        }
    }

    #[test]
    fn hellos_pass_and_strangers_are_dropped_unanswered() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut gate = Gate::new(&listener, 8, Duration::from_millis(300)).unwrap();
        let stop = AtomicBool::new(false);
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let _idle = TcpStream::connect(addr).unwrap();
        let mut real = TcpStream::connect(addr).unwrap();
        // The hello in two pieces, and the bytes after it left unread.
        real.write_all(b"HI\x03a").unwrap();
        real.write_all(b"bcAFTER").unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        let got = gate
            .next(until, &stop, toy)
            .unwrap()
            .expect("the real hello");
        assert_eq!(got.hello, b"HI\x03abc");
        let mut after = [0u8; 5];
        got.stream.set_nonblocking(false).unwrap();
        (&got.stream).read_exact(&mut after).unwrap();
        assert_eq!(&after, b"AFTER");
        // Nothing else is a hello; the idle one is dropped at its deadline.
        let until = Instant::now() + Duration::from_millis(600);
        assert!(gate.next(until, &stop, toy).unwrap().is_none());
        let d = gate.dropped();
        assert_eq!((d.junk, d.silent), (1, 1), "{d:?}");
        assert_eq!(gate.waiting(), 0);
        // The stranger got no answer: its connection just closed.
        junk.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut answer = Vec::new();
        let _ = junk.read_to_end(&mut answer);
        assert!(answer.is_empty(), "{answer:?}");
    }

    #[test]
    fn a_full_table_evicts_the_idle_not_the_real_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut gate = Gate::new(&listener, 4, Duration::from_secs(10)).unwrap();
        let stop = AtomicBool::new(false);
        // A peer that has begun its hello, then a flood of idle strangers.
        let mut real = TcpStream::connect(addr).unwrap();
        real.write_all(b"HI").unwrap();
        let idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let soon = Instant::now() + Duration::from_millis(200);
        assert!(gate.next(soon, &stop, toy).unwrap().is_none());
        assert!(gate.waiting() <= 4);
        real.write_all(b"\x01z").unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        let got = gate
            .next(until, &stop, toy)
            .unwrap()
            .expect("the real hello");
        assert_eq!(got.hello, b"HI\x01z");
        assert!(gate.dropped().evicted >= 16, "{:?}", gate.dropped());
        drop(idle);
    }

    #[test]
    fn listeners_get_the_deeper_backlog_and_refuse_a_taken_port() {
        let l = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        // 300 connections wait in the backlog before anything accepts.
        let waiting: Vec<TcpStream> = (0..300)
            .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap())
            .collect();
        let e = listen(addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        drop(waiting);
    }

    #[test]
    fn a_stop_flag_ends_the_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut gate = Gate::new(&listener, 4, Duration::from_secs(1)).unwrap();
        let stop = AtomicBool::new(true);
        let until = Instant::now() + Duration::from_secs(60);
        let started = Instant::now();
        assert!(gate.next(until, &stop, toy).unwrap().is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
