//! The TCP fabric's wire format: one [`Frame`] per message, a fixed
//! [`Header`], the payload, and for a data frame a checksum trailer.
//!
//! ```text
//!  offset  size  field
//!       0     4  magic "rNet"
//!       4     2  protocol version (little-endian, like every field)
//!       6     1  kind: 1 data, 2 phantom, 3 hello, 4 bye, 5 refuse, 6 heartbeat
//!       7     1  dtype (index in DType::ALL; 0xff for control frames)
//!       8     8  job id
//!      16     4  source rank
//!      20     4  destination rank
//!      24     8  tag
//!      32     8  per-pair sequence number (0 for the hello, then 1, 2, ...)
//!      40     8  sender's call: sequence number
//!      48     2  sender's call: kind (the algorithm's wire identity)
//!      50     2  reserved, zero
//!      52     4  CRC32C of the payload (control frames); zero for data
//!      56     8  count: elements (data, phantom) or bytes (hello, refuse)
//!      64     4  CRC32C of bytes 0..64 (covers the payload CRC too)
//!      68     n  payload: count x dtype bytes in the host's (little-endian)
//!                byte order, or the control frame's bytes
//!    68+n     4  data frames only: CRC32C of the payload (the trailer)
//! ```
//!
//! The header's own checksum is verified before any of its fields is
//! trusted, so a corrupted length is caught before it is used. The payload
//! checksum of a data frame comes in a trailer after the payload, so that
//! a sender takes it piece by piece just before writing each piece, while
//! the piece is in cache, instead of a separate pass over a payload of
//! many megabytes before the header can leave; the reader takes it the
//! same way as the pieces arrive and compares at the end. A control frame
//! (at most [`CONTROL_CAP`] bytes) keeps its payload checksum in the
//! header. Either way the checksums cover every byte of the frame, so a
//! single flipped bit anywhere (header, payload, trailer) is always
//! detected, and a frame cut short anywhere is incomplete: its length is
//! in the checked header. The frame cap counts the header and the payload
//! (not the fixed trailer).
//! A length is used only after it was checked against a frame cap: no
//! decoder here ever allocates from an unchecked length, and none panics on
//! any input. The encoding is canonical: a frame that decodes re-encodes
//! to exactly the bytes it came from. [`Header::decode`] and [`Header::check_body`] decode in two
//! steps (the TCP reader reads the payload straight into its buffer);
//! [`Decoder`] decodes incrementally from a byte stream.

use std::borrow::Cow;

use algorithms::{DType, Payload, Shape, Tag};

use crate::call::CallId;

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"rNet";
/// The protocol version this build speaks.
/// Version 2: the call's kind is the algorithm's 16-bit wire identity
/// (version 1 had a collective and an algorithm index). Version 3:
/// heartbeat frames (see [`crate::heartbeat`]). Version 4: a data
/// frame's payload checksum is in a trailer, not in its header.
pub const VERSION: u16 = 4;
/// Bytes in a frame header.
pub const HEADER_LEN: usize = 68;
/// Bytes in a data frame's trailer (the payload's CRC32C).
pub const TRAILER_LEN: usize = 4;
/// The default largest frame (header and payload) a decoder accepts:
/// a 1 GiB payload.
pub const DEFAULT_FRAME_CAP: u64 = (1 << 30) + HEADER_LEN as u64;
/// The largest payload of a control frame (hello, refuse), whatever the cap.
pub const CONTROL_CAP: u64 = 64 * 1024;

const NO_DTYPE: u8 = u8::MAX;

/// What a frame carries, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A message with real elements of this type.
    Data(DType),
    /// A message that is a shape only (a phantom payload).
    Phantom(DType),
    /// The handshake: world size and the job token.
    Hello,
    /// The sender is done and will send nothing more.
    Bye,
    /// The sender refuses the connection; the payload says why.
    Refuse,
    /// The sender is alive (see [`crate::heartbeat`]); no payload.
    Heartbeat,
}

impl Kind {
    fn code(self) -> (u8, u8) {
        match self {
            Kind::Data(d) => (1, dtype_code(d)),
            Kind::Phantom(d) => (2, dtype_code(d)),
            Kind::Hello => (3, NO_DTYPE),
            Kind::Bye => (4, NO_DTYPE),
            Kind::Refuse => (5, NO_DTYPE),
            Kind::Heartbeat => (6, NO_DTYPE),
        }
    }

    fn from_code(kind: u8, dtype: u8) -> Result<Kind, FrameError> {
        let typed = |make: fn(DType) -> Kind| {
            DType::ALL
                .get(usize::from(dtype))
                .map(|d| make(*d))
                .ok_or(FrameError::DType(dtype))
        };
        let control = |k: Kind| {
            if dtype == NO_DTYPE {
                Ok(k)
            } else {
                Err(FrameError::Malformed("a control frame with a dtype"))
            }
        };
        match kind {
            1 => typed(Kind::Data),
            2 => typed(Kind::Phantom),
            3 => control(Kind::Hello),
            4 => control(Kind::Bye),
            5 => control(Kind::Refuse),
            6 => control(Kind::Heartbeat),
            other => Err(FrameError::Kind(other)),
        }
    }
}

fn dtype_code(d: DType) -> u8 {
    let i = DType::ALL.iter().position(|x| *x == d);
    // DType::Sym is the one type not in DType::ALL, and sends refuse it
    // before any frame is made (endpoint::refuse_symbols).
    u8::try_from(i.expect("every dtype but sym is in DType::ALL, and sends refuse sym"))
        .expect("few dtypes")
}

/// Why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The stream does not start with [`MAGIC`]: not a realnet peer.
    #[error(
        "bad magic {found:02x?} (not a realnet frame: a stray connection or a corrupted stream)"
    )]
    BadMagic {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// The peer speaks another protocol version.
    #[error("protocol version {found}, but this build speaks version {VERSION}")]
    Version {
        /// The version in the header.
        found: u16,
    },
    /// The header's checksum does not match: it was corrupted.
    #[error(
        "header checksum mismatch (CRC32C {computed:#010x}, header says {stored:#010x}): the frame was corrupted"
    )]
    HeaderCrc {
        /// The checksum stored in the header.
        stored: u32,
        /// The checksum of the bytes received.
        computed: u32,
    },
    /// The payload's checksum does not match: it was corrupted.
    #[error(
        "payload checksum mismatch (CRC32C {computed:#010x}, the frame says {stored:#010x}): the frame was corrupted"
    )]
    PayloadCrc {
        /// The checksum the frame carries (trailer or header).
        stored: u32,
        /// The checksum of the bytes received.
        computed: u32,
    },
    /// An unknown frame kind.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// An unknown element type.
    #[error("unknown dtype code {0}")]
    DType(u8),
    /// The frame is longer than the receiver accepts.
    #[error("a frame of {len} bytes is over the cap of {cap} bytes (refused without reading it)")]
    OverCap {
        /// The frame's length as its header claims (`u64::MAX` on overflow).
        len: u64,
        /// The largest frame accepted.
        cap: u64,
    },
    /// A field that a valid sender never writes.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
}

/// A validated frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The job the sender belongs to.
    pub job_id: u64,
    /// The sending rank.
    pub src: u32,
    /// The receiving rank.
    pub dst: u32,
    /// The message's tag (0 for control frames).
    pub tag: Tag,
    /// The frame's number on its (source, destination) connection.
    pub seq: u64,
    /// The sender's collective call when it sent the frame.
    pub call: CallId,
    /// What the frame carries.
    pub kind: Kind,
    /// Elements (data, phantom) or bytes (hello, refuse); 0 for bye.
    pub count: u64,
    /// CRC32C of the payload for a control frame; zero for a data frame,
    /// whose checksum is in its trailer.
    pub payload_crc: u32,
}

impl Header {
    /// Bytes of payload that follow this header.
    pub fn payload_len(&self) -> u64 {
        match self.kind {
            // Checked not to overflow by `decode`; saturate for headers
            // built by hand.
            Kind::Data(d) => self.count.saturating_mul(d.size_bytes() as u64),
            Kind::Phantom(_) | Kind::Bye | Kind::Heartbeat => 0,
            Kind::Hello | Kind::Refuse => self.count,
        }
    }

    /// Bytes after the payload: [`TRAILER_LEN`] for a data frame, else 0.
    pub fn trailer_len(&self) -> usize {
        match self.kind {
            Kind::Data(_) => TRAILER_LEN,
            _ => 0,
        }
    }

    /// Bytes that follow this header: the payload and the trailer.
    pub fn body_len(&self) -> u64 {
        self.payload_len().saturating_add(self.trailer_len() as u64)
    }

    /// The header's bytes, with its checksum.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let (kind, dtype) = self.kind.code();
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6] = kind;
        b[7] = dtype;
        b[8..16].copy_from_slice(&self.job_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.src.to_le_bytes());
        b[20..24].copy_from_slice(&self.dst.to_le_bytes());
        b[24..32].copy_from_slice(&self.tag.0.to_le_bytes());
        b[32..40].copy_from_slice(&self.seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.call.seq.to_le_bytes());
        b[48..50].copy_from_slice(&self.call.kind.to_le_bytes());
        b[52..56].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[56..64].copy_from_slice(&self.count.to_le_bytes());
        let crc = crc32c::crc32c(&b[..64]);
        b[64..68].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and validates a header: magic, checksum, version, kind and
    /// dtype, and the frame's length against `cap` (bytes of header and
    /// payload) and [`CONTROL_CAP`].
    pub fn decode(b: &[u8; HEADER_LEN], cap: u64) -> Result<Header, FrameError> {
        let found: [u8; 4] = [b[0], b[1], b[2], b[3]];
        if found != MAGIC {
            return Err(FrameError::BadMagic { found });
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        let stored = u32_at(b, 64);
        let computed = crc32c::crc32c(&b[..64]);
        if stored != computed {
            // Another build may lay its header out differently: say so
            // rather than blame corruption.
            if version != VERSION {
                return Err(FrameError::Version { found: version });
            }
            return Err(FrameError::HeaderCrc { stored, computed });
        }
        if version != VERSION {
            return Err(FrameError::Version { found: version });
        }
        if b[50] != 0 || b[51] != 0 {
            return Err(FrameError::Malformed("reserved header bytes are not zero"));
        }
        let header = Header {
            kind: Kind::from_code(b[6], b[7])?,
            job_id: u64_at(b, 8),
            src: u32_at(b, 16),
            dst: u32_at(b, 20),
            tag: Tag(u64_at(b, 24)),
            seq: u64_at(b, 32),
            call: CallId {
                seq: u64_at(b, 40),
                kind: u16::from_le_bytes([b[48], b[49]]),
            },
            payload_crc: u32_at(b, 52),
            count: u64_at(b, 56),
        };
        if matches!(header.kind, Kind::Data(_)) && header.payload_crc != 0 {
            return Err(FrameError::Malformed(
                "a data frame with a payload checksum in its header",
            ));
        }
        header.check_lengths(cap)?;
        Ok(header)
    }

    fn check_lengths(&self, cap: u64) -> Result<(), FrameError> {
        let over = |len: u64, cap: u64| {
            if len > cap {
                Err(FrameError::OverCap { len, cap })
            } else {
                Ok(())
            }
        };
        if usize::try_from(self.count).is_err() {
            return Err(FrameError::Malformed(
                "element count beyond this host's memory",
            ));
        }
        match self.kind {
            Kind::Data(d) => {
                let len = self
                    .count
                    .checked_mul(d.size_bytes() as u64)
                    .and_then(|p| p.checked_add(HEADER_LEN as u64))
                    .unwrap_or(u64::MAX);
                over(len, cap)
            }
            // A phantom has no bytes, but its size in bytes must be a number.
            Kind::Phantom(d) => match self.count.checked_mul(d.size_bytes() as u64) {
                Some(_) => Ok(()),
                None => Err(FrameError::Malformed("phantom size overflows 64 bits")),
            },
            Kind::Hello | Kind::Refuse => {
                let cap = cap.saturating_sub(HEADER_LEN as u64).min(CONTROL_CAP);
                over(self.count, cap)
            }
            Kind::Bye if self.count != 0 => Err(FrameError::Malformed("a bye with a payload")),
            Kind::Heartbeat if self.count != 0 => {
                Err(FrameError::Malformed("a heartbeat with a payload"))
            }
            Kind::Bye | Kind::Heartbeat => Ok(()),
        }
    }

    /// Checks the bytes received after this header (the payload, then the
    /// trailer of a data frame) against its length and checksum; returns
    /// the payload.
    pub fn check_body<'a>(&self, body: &'a [u8]) -> Result<&'a [u8], FrameError> {
        let short = FrameError::Malformed("payload length differs from the header's");
        let at = body.len().checked_sub(self.trailer_len()).ok_or(short)?;
        let (payload, trailer) = body.split_at(at);
        let trailer = trailer.first_chunk::<TRAILER_LEN>().copied();
        self.check_payload_crc(payload.len(), crc32c::crc32c(payload), trailer)?;
        Ok(payload)
    }

    /// [`Header::check_body`] for a payload of `len` bytes whose checksum
    /// the reader `computed` piece by piece as the bytes arrived
    /// (`crc32c::crc32c_append`), while each piece was still in cache;
    /// `trailer` is the data frame's trailer read after it (`None` for a
    /// control frame, whose checksum is in the header).
    pub fn check_payload_crc(
        &self,
        len: usize,
        computed: u32,
        trailer: Option<[u8; TRAILER_LEN]>,
    ) -> Result<(), FrameError> {
        if len as u64 != self.payload_len() {
            return Err(FrameError::Malformed(
                "payload length differs from the header's",
            ));
        }
        let stored = match (self.trailer_len(), trailer) {
            (TRAILER_LEN, Some(t)) => u32::from_le_bytes(t),
            (0, None) => self.payload_crc,
            (TRAILER_LEN, None) => {
                return Err(FrameError::Malformed("a data frame without its trailer"));
            }
            _ => return Err(FrameError::Malformed("a trailer on a control frame")),
        };
        if computed != stored {
            return Err(FrameError::PayloadCrc { stored, computed });
        }
        Ok(())
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// What a frame carries, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// A message: real data (kind data) or a phantom's shape (kind phantom).
    Payload(Payload),
    /// The handshake: the sender's idea of the world size and its token.
    Hello {
        /// The number of ranks the sender believes the job has.
        world_size: u64,
        /// The job token the sender presents.
        token: Vec<u8>,
    },
    /// The sender is done.
    Bye,
    /// The sender refuses the connection, saying why.
    Refuse(String),
    /// The sender is alive.
    Heartbeat,
}

impl Body {
    /// The kind and count this body gets in its header.
    pub(crate) fn kind_and_count(&self) -> (Kind, u64) {
        match self {
            Body::Payload(p) => {
                let s = p.shape();
                let kind = if p.is_phantom() {
                    Kind::Phantom(s.dtype)
                } else {
                    Kind::Data(s.dtype)
                };
                (kind, s.count as u64)
            }
            Body::Hello { token, .. } => (Kind::Hello, 8 + token.len() as u64),
            Body::Bye => (Kind::Bye, 0),
            Body::Heartbeat => (Kind::Heartbeat, 0),
            Body::Refuse(why) => (Kind::Refuse, why.len() as u64),
        }
    }

    /// The payload bytes that follow the header.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Body::Payload(p) => Cow::Borrowed(p.as_bytes().unwrap_or(&[])),
            Body::Hello { world_size, token } => {
                let mut v = world_size.to_le_bytes().to_vec();
                v.extend_from_slice(token);
                Cow::Owned(v)
            }
            Body::Bye | Body::Heartbeat => Cow::Borrowed(&[]),
            Body::Refuse(why) => Cow::Borrowed(why.as_bytes()),
        }
    }

    /// Decodes the bytes that followed `header` (the payload, then a data
    /// frame's trailer), checking their length and checksum.
    pub fn decode(header: &Header, body: &[u8]) -> Result<Body, FrameError> {
        let payload = header.check_body(body)?;
        Ok(match header.kind {
            Kind::Data(d) => Body::Payload(
                Payload::from_bytes(d, payload).ok_or(FrameError::Malformed("partial element"))?,
            ),
            Kind::Phantom(d) => {
                let count = usize::try_from(header.count)
                    .map_err(|_| FrameError::Malformed("element count beyond this host"))?;
                Body::Payload(Payload::Phantom(Shape::new(d, count)))
            }
            Kind::Hello => {
                if payload.len() < 8 {
                    return Err(FrameError::Malformed("a hello without a world size"));
                }
                Body::Hello {
                    world_size: u64_at(payload, 0),
                    token: payload[8..].to_vec(),
                }
            }
            Kind::Bye => Body::Bye,
            Kind::Heartbeat => Body::Heartbeat,
            Kind::Refuse => Body::Refuse(
                String::from_utf8(payload.to_vec())
                    .map_err(|_| FrameError::Malformed("a refusal that is not UTF-8"))?,
            ),
        })
    }
}

/// A whole frame: addressing and the body.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// The job the sender belongs to.
    pub job_id: u64,
    /// The sending rank.
    pub src: u32,
    /// The receiving rank.
    pub dst: u32,
    /// The message's tag.
    pub tag: Tag,
    /// The frame's number on its connection.
    pub seq: u64,
    /// The sender's collective call.
    pub call: CallId,
    /// What the frame carries.
    pub body: Body,
}

impl Frame {
    /// The header of this frame (computes a control frame's payload
    /// checksum; a data frame's goes in its trailer).
    pub fn header(&self) -> Header {
        let (kind, count) = self.body.kind_and_count();
        let payload_crc = match kind {
            Kind::Data(_) => 0,
            _ => crc32c::crc32c(&self.body.bytes()),
        };
        Header {
            job_id: self.job_id,
            src: self.src,
            dst: self.dst,
            tag: self.tag,
            seq: self.seq,
            call: self.call,
            kind,
            count,
            payload_crc,
        }
    }

    /// Appends the frame's bytes (header, payload, trailer) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header = self.header();
        let payload = self.body.bytes();
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(&payload);
        if header.trailer_len() == TRAILER_LEN {
            out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        }
    }

    /// The frame made of a decoded header and its decoded body.
    pub fn from_parts(header: &Header, body: Body) -> Frame {
        Frame {
            job_id: header.job_id,
            src: header.src,
            dst: header.dst,
            tag: header.tag,
            seq: header.seq,
            call: header.call,
            body,
        }
    }
}

mod decoder;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, decode};
