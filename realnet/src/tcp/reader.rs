//! The reader thread of one connection: decodes the peer's frames and
//! hands each message to the [`Mailbox`](crate::Mailbox).
//!
//! A reader never waits for anything but its socket (delivering is a
//! non-blocking insert), so a peer's writes always drain. Every frame (and
//! every megabyte of a large one) counts as hearing from the peer, for
//! the heartbeats (see [`crate::heartbeat`]). What it reports:
//! - the end of the stream without a bye, or a socket error: the peer
//!   died, named (the rank fails once it has consumed what the peer sent
//!   before: a collective cannot finish without it);
//! - a frame that fails its checks (checksum, cap, job, ranks, sequence):
//!   corruption or a protocol error from that peer; the rank fails and the
//!   connection is shut so the peer notices too. Nothing of such a frame
//!   is delivered, so a corrupted frame never becomes a wrong result.

use std::io::{BufReader, ErrorKind, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use algorithms::{FabricError, Payload, Rank, Shape};

use crate::frame::{Body, FrameError, HEADER_LEN, Header, Kind, TRAILER_LEN};

use super::Shared;

/// Bytes the reader buffers from its socket (several small frames per
/// system call).
const BUFFER_BYTES: usize = 256 * 1024;

/// A large payload is read in pieces of this size, each one restarting the
/// timeout of receives waiting on the peer.
const TOUCH_BYTES: usize = 1 << 20;

/// Why a reader stopped.
enum Stop {
    /// The peer said bye, then closed: a clean end.
    Done,
    /// The stream ended between frames without a bye.
    Closed,
    /// The stream ended inside a frame.
    Truncated,
    /// A socket error.
    Io(std::io::Error),
    /// A frame failed its checks.
    Corrupt(FrameError),
    /// A well-formed frame that this connection must not carry.
    Protocol(String),
    /// The peer stopped on an error and said why before closing.
    Aborted(String),
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Stop {
        if e.kind() == ErrorKind::UnexpectedEof {
            Stop::Truncated
        } else {
            Stop::Io(e)
        }
    }
}

impl From<FrameError> for Stop {
    fn from(e: FrameError) -> Stop {
        Stop::Corrupt(e)
    }
}

/// One connection's reader.
pub(super) struct Reader {
    pub shared: Arc<Shared>,
    pub rank: u32,
    pub peer: Rank,
    pub addr: SocketAddr,
    pub job_id: u64,
    pub frame_cap: u64,
}

impl Reader {
    /// Reads frames until the peer closes or fails; reports a failure to
    /// the mailbox unless the fabric itself is closing.
    pub(super) fn run(self, stream: TcpStream) {
        let mut input = BufReader::with_capacity(BUFFER_BYTES, stream);
        let stop = self.read_all(&mut input);
        if matches!(stop, Stop::Done) || self.shared.closing.load(Ordering::Acquire) {
            return;
        }
        let (peer, addr) = (self.peer, self.addr);
        let died = matches!(
            stop,
            Stop::Closed | Stop::Truncated | Stop::Io(_) | Stop::Aborted(_)
        );
        let reason = match stop {
            Stop::Done => unreachable!("handled above"),
            Stop::Closed => format!(
                "rank {peer} ({addr}) closed its connection without saying goodbye: \
                 it exited early or died"
            ),
            Stop::Truncated => format!(
                "rank {peer} ({addr}) closed its connection in the middle of a frame: it died"
            ),
            Stop::Io(e) => format!(
                "the connection to rank {peer} ({addr}) failed: {e} (rank {peer} died or the network broke)"
            ),
            Stop::Corrupt(e @ FrameError::OverCap { .. }) => {
                format!("refused a frame from rank {peer} ({addr}): {e}")
            }
            Stop::Corrupt(e) => format!("corrupt frame from rank {peer} ({addr}): {e}"),
            Stop::Protocol(what) => format!("protocol error from rank {peer} ({addr}): {what}"),
            Stop::Aborted(why) => format!("rank {peer} ({addr}) stopped on an error: {why}"),
        };
        // Whatever is left on this stream cannot be trusted; let the peer
        // see the connection end.
        let _ = input.get_ref().shutdown(Shutdown::Both);
        let err = FabricError::Transport {
            rank: self.rank as Rank,
            reason,
        };
        if died {
            self.shared.died(peer, err);
        } else {
            self.shared.fail(peer, err);
        }
    }

    fn read_all(&self, input: &mut impl Read) -> Stop {
        let mut next_seq = 1u64;
        let mut said_bye = false;
        loop {
            let mut head = [0u8; HEADER_LEN];
            match read_header(input, &mut head) {
                Ok(true) => {}
                Ok(false) if said_bye => return Stop::Done,
                Ok(false) => return Stop::Closed,
                Err(e) => return e.into(),
            }
            self.shared.heard(self.peer);
            let header = match Header::decode(&head, self.frame_cap) {
                Ok(h) => h,
                Err(e) => return e.into(),
            };
            if let Err(what) = self.check(&header, next_seq, said_bye) {
                return Stop::Protocol(what);
            }
            next_seq += 1;
            match self.body(input, &header) {
                Ok(true) => said_bye = true,
                Ok(false) => {}
                Err(stop) => return stop,
            }
        }
    }

    fn check(&self, h: &Header, next_seq: u64, said_bye: bool) -> Result<(), String> {
        if h.job_id != self.job_id {
            return Err(format!(
                "a frame of job {} (this job is {})",
                h.job_id, self.job_id
            ));
        }
        if h.src as Rank != self.peer || h.dst != self.rank {
            return Err(format!(
                "a frame from rank {} to rank {} on the connection between ranks {} and {}",
                h.src, h.dst, self.peer, self.rank
            ));
        }
        if h.seq != next_seq {
            return Err(format!(
                "frame number {} where {next_seq} was next (lost or repeated frames)",
                h.seq
            ));
        }
        if said_bye {
            return Err("a frame after its bye".into());
        }
        Ok(())
    }

    /// Reads and delivers the body of `header`'s frame; returns whether it
    /// was a bye.
    fn body(&self, input: &mut impl Read, header: &Header) -> Result<bool, Stop> {
        let mailbox = &self.shared.mailbox;
        match header.kind {
            Kind::Data(dtype) => {
                // The count was checked against the frame cap by
                // `Header::decode`. A recycled buffer when the pool has
                // one; else zeroed vectors from calloc, whose pages are
                // only committed as the bytes arrive.
                let count = usize::try_from(header.count).expect("checked by Header::decode");
                let mut payload = self.shared.pool().scratch(Shape::new(dtype, count));
                let bytes = payload.as_bytes_mut().expect("real data has bytes");
                let big = bytes.len() > TOUCH_BYTES;
                // The checksum is taken piece by piece as the bytes arrive,
                // while each piece is in cache, not in a second pass over a
                // payload that may have left it; the sender's comes after
                // the payload, in the trailer.
                let mut crc = 0;
                for piece in bytes.chunks_mut(TOUCH_BYTES) {
                    input.read_exact(piece)?;
                    crc = crc32c::crc32c_append(crc, piece);
                    if big {
                        mailbox.touch(self.peer);
                        self.shared.heard(self.peer);
                    }
                }
                let mut trailer = [0u8; TRAILER_LEN];
                input.read_exact(&mut trailer)?;
                header.check_payload_crc(bytes.len(), crc, Some(trailer))?;
                mailbox.deliver(self.peer, header.tag, header.call, payload);
                Ok(false)
            }
            Kind::Phantom(dtype) => {
                let count = usize::try_from(header.count).expect("checked by Header::decode");
                header.check_body(&[])?;
                mailbox.deliver(
                    self.peer,
                    header.tag,
                    header.call,
                    Payload::phantom(dtype, count),
                );
                Ok(false)
            }
            Kind::Bye => {
                header.check_body(&[])?;
                self.shared.said_bye(self.peer);
                Ok(true)
            }
            // Heard already (every frame counts).
            Kind::Heartbeat => {
                header.check_body(&[])?;
                Ok(false)
            }
            Kind::Refuse => {
                // After the handshake a refusal is the peer stopping on an
                // error (see `TcpFabric`'s `Drop`): its reason names the cause.
                // Control frames are capped at CONTROL_CAP by Header::decode.
                let len = usize::try_from(header.payload_len()).expect("checked by Header::decode");
                let mut body = vec![0u8; len];
                input.read_exact(&mut body)?;
                let reason = match Body::decode(header, &body)? {
                    Body::Refuse(reason) => reason,
                    _ => String::from("(no reason)"),
                };
                Err(Stop::Aborted(reason))
            }
            Kind::Hello => Err(Stop::Protocol(format!(
                "a {:?} frame after the handshake",
                header.kind
            ))),
        }
    }
}

/// Fills `head`; `Ok(false)` if the stream ended before its first byte.
fn read_header(input: &mut impl Read, head: &mut [u8; HEADER_LEN]) -> std::io::Result<bool> {
    let mut filled = 0;
    while filled < HEADER_LEN {
        match input.read(&mut head[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
