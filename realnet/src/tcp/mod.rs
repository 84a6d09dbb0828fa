//! [`TcpFabric`]: ranks on one or several hosts, one TCP connection per
//! pair of ranks, carrying [`frame`](crate::frame)s.
//!
//! ```text
//!  connect:  listen on the interface (first free port of the range)
//!            -> allgather "ip:port" through the Bootstrap
//!            -> dial every higher rank, accept every lower one, hellos
//!               checked both ways (handshake.rs; strays refused, logged)
//!  running:  send = one frame written by the rank's thread
//!            one reader thread per connection -> Mailbox::deliver
//!            one heartbeat thread: a heartbeat frame to every peer each
//!            interval, never blocking (see crate::heartbeat)
//!  finish:   bye to everyone, wait for everyone's bye, shut down writes
//! ```
//!
//! # Why sends are blocking writes
//! A send encodes its frame and writes it on the calling (executor)
//! thread, under the connection's lock. This cannot deadlock: on the other
//! end a reader thread drains every connection without ever waiting for
//! anything but its socket, so a write completes as fast as the network
//! carries it, even when two ranks write large messages to each other at
//! once (the classic deadlock of two blocking sends needs a receiver that
//! does not read). Receives are not held up by a long write either: they
//! arrive through the reader threads. Writer threads would add a copy or a
//! hand-off per message for nothing. A peer that stops reading altogether
//! (a frozen process) is caught by the write timeout, the job's timeout.
//!
//! # Small and large frames
//! A frame of up to [`SMALL_FRAME_BYTES`] is built in one buffer and
//! written with one system call (with `TCP_NODELAY` it leaves at once); a
//! larger one is written as its header, then the payload straight from the
//! caller's buffer in pieces of [`SEND_PIECE_BYTES`], without a copy, then
//! the trailer. A message larger than the frame cap is refused at the
//! sender with an error naming the option to raise.
//!
//! # Checksums in one pass
//! Neither end makes a pass over a payload just to checksum it: the
//! sender takes a data frame's CRC32C piece by piece just before writing
//! each piece (the write then copies it to the kernel from cache) and
//! sends the sum in the frame's trailer (see [`crate::frame`]); the
//! reader takes it piece by piece as the bytes arrive and compares it
//! with the trailer at the end, before anything of the frame is
//! delivered. A separate pass over a 64 MiB payload, which does not fit
//! in cache, cost about 15% of a 64 MiB allreduce's time on each side.
//!
//! # Recycled memory
//! A payload that was written, and a received one that
//! [`Fabric::recv_combine`](algorithms::Fabric::recv_combine) has combined into the caller's buffer, go back
//! to a `crate::pool::BufferPool` the rank shares with its reader
//! threads: readers receive into it and [`Fabric::send_copy`](algorithms::Fabric::send_copy) copies into
//! it, so a large collective does not fault in fresh pages per frame.
//!
//! # Failures
//! A peer whose connection ends without a bye, or breaks, fails the whole
//! rank with an error naming it (no collective can complete without a
//! rank) once the messages it sent before are consumed; a corrupted frame
//! fails the rank at once. A peer that hangs is caught by the
//! [`Mailbox`] timeout, and its silence (no frame, not even a heartbeat,
//! for half the timeout) names it whoever a rank was waiting for. The
//! reader threads live in `tcp/reader.rs`.
//!
//! # Heartbeats
//! The heartbeat thread takes a link only if nobody holds it (a link busy
//! with a send is heard from through that send) and writes with
//! `MSG_DONTWAIT`: a peer that does not read gets no heartbeat, and the
//! part of one its socket did not take is written before the link's next
//! frame. No heartbeat follows a bye.

mod address;
mod fabric;
mod farewell;
mod handshake;
mod link;
mod reader;
mod shared;

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use algorithms::{FabricError, Payload, Rank, Tag};

use crate::bootstrap::Bootstrap;
use crate::call::CallId;
use crate::endpoint::Endpoint;
use crate::frame::{Body, DEFAULT_FRAME_CAP, HEADER_LEN, Header, Kind, TRAILER_LEN};
use crate::heartbeat::{self, Beater};
use crate::job::JobOptions;
use crate::mailbox::Mailbox;
use crate::pool::BufferPool;

use handshake::{Hand, Refusals};
use link::{Link, beat_all};
use reader::Reader;
use shared::Shared;

/// Frames up to this size are written from one buffer in one system call.
pub const SMALL_FRAME_BYTES: usize = 64 * 1024;

/// A larger payload is checksummed and written in pieces of this size,
/// each checksummed just before it is written (so it is in cache when
/// the kernel copies it).
pub const SEND_PIECE_BYTES: usize = 256 * 1024;

/// How a rank sets up its TCP connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpOptions {
    /// The job id, token and timeout every rank shares.
    pub job: JobOptions,
    /// Where to listen and what to advertise: an IP address, or the name
    /// of a network interface (`eth0`, `ib0`). `None`: the loopback
    /// address, for ranks on one host.
    pub interface: Option<String>,
    /// The ports to try, first free one wins; `0..=0` lets the system pick.
    pub ports: RangeInclusive<u16>,
    /// The largest frame (header and payload) a rank sends or accepts.
    pub frame_cap: u64,
    /// How long connecting to every peer may take in all.
    pub connect_timeout: Duration,
    /// How long one connection's handshake may take.
    pub handshake_timeout: Duration,
    /// Socket send and receive buffer sizes to ask the kernel for.
    pub socket_buffer_bytes: usize,
}

impl Default for TcpOptions {
    /// Loopback, any port, a 1 GiB frame cap, 30 s to connect, 5 s per
    /// handshake, 4 MiB socket buffers.
    fn default() -> Self {
        TcpOptions {
            job: JobOptions::default(),
            interface: None,
            ports: 0..=0,
            frame_cap: DEFAULT_FRAME_CAP,
            connect_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(5),
            socket_buffer_bytes: 4 << 20,
        }
    }
}

/// One rank of a job whose ranks talk over TCP.
pub struct TcpFabric {
    rank: Rank,
    world_size: usize,
    job_id: u64,
    frame_cap: u64,
    timeout: Duration,
    shared: Arc<Shared>,
    /// Index by peer; `None` for this rank itself.
    links: Arc<Vec<Option<Mutex<Link>>>>,
    addrs: Vec<SocketAddr>,
    /// The heartbeat thread (see [`crate::heartbeat`]).
    beater: Option<Beater>,
    /// How long a peer must be silent to count as stopped.
    silence_threshold: Duration,
    readers: Mutex<Vec<JoinHandle<()>>>,
    call: Mutex<CallId>,
    start: Instant,
}

impl TcpFabric {
    /// Listens, exchanges addresses through `bootstrap`, connects to every
    /// other rank (handshakes checked both ways) and starts the readers.
    pub fn connect(
        bootstrap: &dyn Bootstrap,
        options: &TcpOptions,
    ) -> Result<TcpFabric, FabricError> {
        let rank = bootstrap.rank();
        let world_size = bootstrap.world_size();
        let fail = |reason: String| FabricError::Transport {
            rank,
            reason: format!("TCP setup: {reason}"),
        };
        let (Ok(rank32), Ok(world32)) = (u32::try_from(rank), u32::try_from(world_size)) else {
            return Err(fail(format!("{world_size} ranks are too many")));
        };
        if rank >= world_size {
            return Err(fail(format!(
                "rank {rank} is outside a job of {world_size} ranks"
            )));
        }
        if options.job.token.len() > crate::launch::TOKEN_BYTES_MAX {
            return Err(fail(format!(
                "the job token is {} bytes, more than the {} a hello carries",
                options.job.token.len(),
                crate::launch::TOKEN_BYTES_MAX
            )));
        }
        let ip = address::resolve(options.interface.as_deref()).map_err(fail)?;
        let listener = address::bind(ip, &options.ports).map_err(fail)?;
        let local = listener
            .local_addr()
            .map_err(|e| fail(format!("listener: {e}")))?;
        let all = bootstrap
            .allgather(local.to_string().as_bytes())
            .map_err(|e| fail(e.to_string()))?;
        let addrs = parse_addresses(&all).map_err(fail)?;
        let hand = Hand {
            rank: rank32,
            world_size: world32,
            job_id: options.job.job_id,
            token: options.job.token.as_bytes().into(),
            timeout: options.handshake_timeout,
        };
        let refusals = Arc::new(Refusals::default());
        let deadline = Instant::now() + options.connect_timeout;
        let stop = AtomicBool::new(false);
        let mut streams: Vec<Option<TcpStream>> = (0..world_size).map(|_| None).collect();
        thread::scope(|s| -> Result<(), String> {
            let acceptor = s.spawn(|| hand.accept_lower(&listener, deadline, &stop, &refusals));
            let mut dialled = Ok(());
            for peer in rank + 1..world_size {
                match hand.dial(peer as u32, addrs[peer], deadline, &stop) {
                    Ok(stream) => streams[peer] = Some(stream),
                    Err(e) => {
                        dialled = Err(e);
                        stop.store(true, Ordering::Relaxed);
                        break;
                    }
                }
            }
            let accepted = acceptor.join().expect("the acceptor does not panic");
            dialled?;
            for (peer, stream) in accepted?.into_iter().enumerate() {
                streams[peer] = Some(stream);
            }
            Ok(())
        })
        .map_err(fail)?;
        drop(listener);
        let shared = Arc::new(Shared {
            mailbox: Mailbox::new(rank, world_size, options.job.timeout),
            byes: Mutex::new(vec![false; world_size]),
            changed: Condvar::new(),
            closing: AtomicBool::new(false),
            any_dead: AtomicBool::new(false),
            dead: Mutex::new(None),
            refusals,
            epoch: Instant::now(),
            heard: (0..world_size).map(|_| AtomicU64::new(0)).collect(),
            pool: Mutex::new(BufferPool::default()),
        });
        let mut fabric = TcpFabric {
            rank,
            world_size,
            job_id: options.job.job_id,
            frame_cap: options.frame_cap,
            timeout: options.job.timeout,
            shared,
            links: Arc::new(Vec::new()),
            addrs,
            beater: None,
            silence_threshold: heartbeat::silence_threshold(options.job.timeout),
            readers: Mutex::new(Vec::new()),
            call: Mutex::new(CallId::NONE),
            start: Instant::now(),
        };
        let mut links = Vec::with_capacity(world_size);
        for (peer, stream) in streams.into_iter().enumerate() {
            links.push(match stream {
                Some(stream) => Some(Mutex::new(
                    fabric.start_peer(peer, stream, options).map_err(fail)?,
                )),
                None => None,
            });
        }
        fabric.links = Arc::new(links);
        let links = fabric.links.clone();
        let job_id = options.job.job_id;
        fabric.beater = Some(
            Beater::start(
                format!("realnet-tcp-{rank}-beat"),
                heartbeat::interval(options.job.timeout),
                move || beat_all(&links, job_id, rank32),
            )
            .map_err(|e| fail(format!("cannot start the heartbeat thread: {e}")))?,
        );
        Ok(fabric)
    }

    /// Tunes a connected stream, starts its reader and returns its sender.
    fn start_peer(
        &self,
        peer: Rank,
        stream: TcpStream,
        options: &TcpOptions,
    ) -> Result<Link, String> {
        let io = |e: std::io::Error| format!("connection to rank {peer}: {e}");
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(None).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        let sock = socket2::SockRef::from(&stream);
        // The kernel may clamp these (net.core.wmem_max); that is fine.
        let _ = sock.set_send_buffer_size(options.socket_buffer_bytes);
        let _ = sock.set_recv_buffer_size(options.socket_buffer_bytes);
        let reader = Reader {
            shared: self.shared.clone(),
            rank: self.rank as u32,
            peer,
            addr: self.addrs[peer],
            job_id: self.job_id,
            frame_cap: self.frame_cap,
        };
        let input = stream.try_clone().map_err(io)?;
        let handle = thread::Builder::new()
            .name(format!("realnet-tcp-{}<-{peer}", self.rank))
            .spawn(move || reader.run(input))
            .map_err(|e| format!("cannot start the reader of rank {peer}: {e}"))?;
        self.readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
        Ok(Link {
            stream,
            seq: 1,
            buf: Vec::with_capacity(SMALL_FRAME_BYTES),
            unsent: Vec::new(),
            closed: false,
        })
    }

    /// The connections this rank refused while connecting, one line each
    /// (also logged to stderr with a `realnet:` prefix); the first 64 only
    /// (see [`TcpFabric::refusal_count`]).
    pub fn refusals(&self) -> Vec<String> {
        self.shared.refusals.all()
    }

    /// How many connections this rank refused while connecting in all
    /// (connections that sent no hello at all are dropped unanswered and
    /// not counted here).
    pub fn refusal_count(&self) -> u64 {
        self.shared.refusals.count()
    }

    /// The address each rank listened on, by rank.
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.addrs
    }

    fn current_call(&self) -> CallId {
        *self.call.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, reason: String) -> FabricError {
        FabricError::Transport {
            rank: self.rank,
            reason,
        }
    }

    /// [`Fabric::send`](algorithms::Fabric::send)'s work: the frame written before this returns.
    fn send_now(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        crate::endpoint::refuse_symbols(self.rank, to, &payload)?;
        if let Some(e) = self.shared.mailbox.fatal() {
            return Err(e);
        }
        if to == self.rank {
            self.shared
                .mailbox
                .deliver(self.rank, tag, self.current_call(), payload);
            return Ok(());
        }
        if let Body::Payload(sent) = self.send_body(to, tag, Body::Payload(payload))? {
            self.shared.pool().give(sent);
        }
        Ok(())
    }

    /// Writes one frame to `to` and gives its body back; a failed write
    /// fails the peer.
    fn send_body(&self, to: Rank, tag: Tag, body: Body) -> Result<Body, FabricError> {
        let (kind, count) = body.kind_and_count();
        let bye = matches!(body, Body::Bye);
        self.write_frame(to, tag, kind, count, &body.bytes(), bye)?;
        Ok(body)
    }

    /// Writes one frame of `kind` and `count` carrying `payload` to `to`
    /// (straight from where `payload` lies, for a large one); a failed
    /// write fails the peer.
    fn write_frame(
        &self,
        to: Rank,
        tag: Tag,
        kind: Kind,
        count: u64,
        payload: &[u8],
        bye: bool,
    ) -> Result<(), FabricError> {
        let Some(Some(link)) = self.links.get(to) else {
            return Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: to,
                world_size: self.world_size,
            });
        };
        if let Some(e) = self.shared.mailbox.peer_failure(to) {
            return Err(e);
        }
        let mut link = link.lock().unwrap_or_else(|e| e.into_inner());
        let len = (HEADER_LEN + payload.len()) as u64;
        if len > self.frame_cap {
            return Err(self.error(format!(
                "a message of {len} bytes to rank {to} is over the frame cap of {} bytes \
                 (raise TcpOptions::frame_cap on every rank)",
                self.frame_cap
            )));
        }
        let header = Header {
            job_id: self.job_id,
            src: self.rank as u32,
            dst: to as u32,
            tag,
            seq: link.seq,
            call: self.current_call(),
            kind,
            count,
            // A data frame's checksum goes in its trailer, taken as the
            // payload is written.
            payload_crc: match kind {
                Kind::Data(_) => 0,
                _ => crc32c::crc32c(payload),
            },
        };
        let trailer = header.trailer_len() == TRAILER_LEN;
        let header = header.encode();
        let Link {
            stream,
            buf,
            unsent,
            ..
        } = &mut *link;
        // The rest of a heartbeat first: it took its number before this frame.
        let flushed = if unsent.is_empty() {
            Ok(())
        } else {
            stream.write_all(unsent).map(|()| unsent.clear())
        };
        let written = flushed.and_then(|()| {
            if payload.len() + HEADER_LEN <= SMALL_FRAME_BYTES {
                buf.clear();
                buf.extend_from_slice(&header);
                buf.extend_from_slice(payload);
                if trailer {
                    buf.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
                }
                stream.write_all(buf)
            } else {
                stream.write_all(&header)?;
                let mut crc = 0;
                for piece in payload.chunks(SEND_PIECE_BYTES) {
                    crc = crc32c::crc32c_append(crc, piece);
                    stream.write_all(piece)?;
                }
                if trailer {
                    stream.write_all(&crc.to_le_bytes())?;
                }
                Ok(())
            }
        });
        if let Err(e) = written {
            let addr = self.addrs[to];
            let err = if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                FabricError::Timeout {
                    rank: self.rank,
                    peer: to,
                    reason: format!(
                        "rank {to} stopped responding: it took no data for {:.1} s ({addr}; it is stopped, frozen or cut off)",
                        self.timeout.as_secs_f64()
                    ),
                }
            } else {
                // The peer closed its end. Its reader is about to record
                // why (the error it stopped on, or a close without a
                // goodbye); the first death it records names the cause,
                // which a broken pipe does not.
                let deadline = Instant::now() + Duration::from_millis(500);
                while self.shared.dead().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                self.shared.dead().unwrap_or_else(|| {
                    self.error(format!(
                        "sending to rank {to} ({addr}) failed: {e} (rank {to} died or closed its connection)"
                    ))
                })
            };
            // A partly written frame leaves the stream unusable.
            let _ = stream.shutdown(Shutdown::Both);
            self.shared.fail(to, err.clone());
            return Err(err);
        }
        link.seq += 1;
        link.closed |= bye;
        drop(link);
        Ok(())
    }

    /// Waits until every peer said bye, up to the timeout.
    fn wait_for_byes(&self) -> Result<(), FabricError> {
        let deadline = Instant::now() + self.timeout;
        let mut byes = self.shared.byes();
        loop {
            if let Some(e) = self.shared.mailbox.fatal().or_else(|| self.shared.dead()) {
                return Err(e);
            }
            let missing: Vec<Rank> = (0..self.world_size)
                .filter(|p| *p != self.rank && !byes[*p])
                .collect();
            let Some(first) = missing.first() else {
                return Ok(());
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(byes);
                return Err(self.peer_silence().timeout(self.rank, *first, || {
                    let list: Vec<String> = missing.iter().map(|r| r.to_string()).collect();
                    format!(
                        "rank(s) {} did not finish within {:.1} s of this rank",
                        list.join(", "),
                        self.timeout.as_secs_f64()
                    )
                }));
            }
            byes = self
                .shared
                .changed
                .wait_timeout(byes, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The listening addresses the ranks advertised, by rank.
fn parse_addresses(all: &[Vec<u8>]) -> Result<Vec<SocketAddr>, String> {
    all.iter()
        .enumerate()
        .map(|(r, bytes)| {
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| {
                    format!(
                        "rank {r} advertised {:?}, not an address",
                        String::from_utf8_lossy(bytes)
                    )
                })
        })
        .collect()
}
