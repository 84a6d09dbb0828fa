//! The frame a verbs send carries in one slot: a fixed 48-byte header and
//! up to a slot's worth of message bytes.
//!
//! ```text
//!  0  magic u16 "VF"      2  kind u8     3  flags u8 (bit 0: first frame, bit 1: phantom)
//!  4  credits u32 (receive slots the sender hands back to the receiver)
//!  8  len u32 (message bytes in this frame, after the header)
//! 12  tag u64            20  call seq u64     28  call kind u16 (the algorithm's wire identity)
//! 30  dtype u8           31  zero             32  count u64       40  message bytes u64
//! 48  message bytes ...
//! ```
//!
//! Bytes 12..48 describe the message and are only meaningful in its first
//! frame; later frames of the same message leave them zero. All integers
//! are little-endian. Decoding never panics and never trusts a length it
//! has not checked against the frame or the message's shape.

use algorithms::{DType, Shape, Tag};

use crate::call::CallId;

/// Size of the header in front of every frame's bytes.
pub const HEADER_BYTES: usize = 48;

const MAGIC: u16 = u16::from_le_bytes(*b"VF");
const FLAG_FIRST: u8 = 1;
const FLAG_PHANTOM: u8 = 2;

/// What a frame is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Part (or all) of a message.
    Data,
    /// Only hands credits back (the receiver had nothing to send).
    Credit,
    /// The sender has sent everything and is finishing.
    Bye,
}

impl FrameKind {
    fn code(self) -> u8 {
        match self {
            FrameKind::Data => 1,
            FrameKind::Credit => 2,
            FrameKind::Bye => 3,
        }
    }

    fn from_code(code: u8) -> Option<FrameKind> {
        match code {
            1 => Some(FrameKind::Data),
            2 => Some(FrameKind::Credit),
            3 => Some(FrameKind::Bye),
            _ => None,
        }
    }
}

/// What the first frame of a message says about the whole message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageHead {
    /// The message's tag.
    pub tag: Tag,
    /// The sender's call when it sent the message.
    pub call: CallId,
    /// Type and element count.
    pub shape: Shape,
    /// A phantom carries its shape and no bytes.
    pub phantom: bool,
}

impl MessageHead {
    /// The number of bytes that follow in this and later frames.
    pub fn bytes(&self) -> u64 {
        if self.phantom { 0 } else { self.shape.bytes() }
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the frame is for.
    pub kind: FrameKind,
    /// Receive slots handed back to the frame's receiver.
    pub credits: u32,
    /// Message bytes in this frame.
    pub len: u32,
    /// The message's description, in its first frame only.
    pub head: Option<MessageHead>,
}

/// Why a frame could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than a header.
    #[error("frame of {0} bytes is shorter than its {HEADER_BYTES}-byte header")]
    Short(usize),
    /// The magic number is wrong: not one of our frames.
    #[error("bad magic {0:#06x}")]
    Magic(u16),
    /// An unknown frame kind.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// The header's length disagrees with the bytes received.
    #[error("header says {said} message bytes, frame holds {held}")]
    Length {
        /// The length in the header.
        said: u32,
        /// The bytes after the header.
        held: usize,
    },
    /// An unknown element type.
    #[error("unknown dtype code {0}")]
    DType(u8),
    /// The message's byte count disagrees with its shape.
    #[error("message of {count} elements of {dtype} claims {bytes} bytes")]
    Shape {
        /// Elements.
        count: u64,
        /// Element type.
        dtype: DType,
        /// The byte count in the header.
        bytes: u64,
    },
}

/// Writes the header for `kind` into `out[..HEADER_BYTES]`.
pub fn encode_header(
    out: &mut [u8],
    kind: FrameKind,
    credits: u32,
    len: u32,
    head: Option<&MessageHead>,
) {
    let out = &mut out[..HEADER_BYTES];
    out.fill(0);
    out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
    out[2] = kind.code();
    out[4..8].copy_from_slice(&credits.to_le_bytes());
    out[8..12].copy_from_slice(&len.to_le_bytes());
    if let Some(h) = head {
        out[3] = FLAG_FIRST | if h.phantom { FLAG_PHANTOM } else { 0 };
        out[12..20].copy_from_slice(&h.tag.0.to_le_bytes());
        out[20..28].copy_from_slice(&h.call.seq.to_le_bytes());
        out[28..30].copy_from_slice(&h.call.kind.to_le_bytes());
        out[30] = dtype_code(h.shape.dtype);
        out[32..40].copy_from_slice(&(h.shape.count as u64).to_le_bytes());
        out[40..48].copy_from_slice(&h.bytes().to_le_bytes());
    }
}

/// Decodes a received frame into its header and message bytes.
pub fn decode(frame: &[u8]) -> Result<(Header, &[u8]), FrameError> {
    if frame.len() < HEADER_BYTES {
        return Err(FrameError::Short(frame.len()));
    }
    let u16_at = |i: usize| u16::from_le_bytes([frame[i], frame[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(frame[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(frame[i..i + 8].try_into().expect("8 bytes"));
    let magic = u16_at(0);
    if magic != MAGIC {
        return Err(FrameError::Magic(magic));
    }
    let kind = FrameKind::from_code(frame[2]).ok_or(FrameError::Kind(frame[2]))?;
    let credits = u32_at(4);
    let len = u32_at(8);
    let body = &frame[HEADER_BYTES..];
    if len as usize != body.len() {
        return Err(FrameError::Length {
            said: len,
            held: body.len(),
        });
    }
    let flags = frame[3];
    let head = if flags & FLAG_FIRST != 0 {
        let dtype = dtype_from_code(frame[30]).ok_or(FrameError::DType(frame[30]))?;
        let count = u64_at(32);
        let bytes = u64_at(40);
        let phantom = flags & FLAG_PHANTOM != 0;
        let want = if phantom {
            Some(0)
        } else {
            count.checked_mul(dtype.size_bytes() as u64)
        };
        let count_usize = usize::try_from(count).ok();
        match (want, count_usize) {
            (Some(w), Some(c)) if w == bytes => Some(MessageHead {
                tag: Tag(u64_at(12)),
                call: CallId {
                    seq: u64_at(20),
                    kind: u16_at(28),
                },
                shape: Shape::new(dtype, c),
                phantom,
            }),
            _ => {
                return Err(FrameError::Shape {
                    count,
                    dtype,
                    bytes,
                });
            }
        }
    } else {
        None
    };
    Ok((
        Header {
            kind,
            credits,
            len,
            head,
        },
        body,
    ))
}

fn dtype_code(dtype: DType) -> u8 {
    DType::ALL
        .iter()
        .position(|d| *d == dtype)
        .and_then(|i| u8::try_from(i).ok())
        .expect("DType::ALL lists every dtype but sym, and sends refuse sym")
}

fn dtype_from_code(code: u8) -> Option<DType> {
    DType::ALL.get(usize::from(code)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::Collective;
    use proptest::prelude::*;

    fn frame(kind: FrameKind, credits: u32, head: Option<&MessageHead>, body: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_BYTES + body.len()];
        encode_header(&mut f, kind, credits, body.len() as u32, head);
        f[HEADER_BYTES..].copy_from_slice(body);
        f
    }

    #[test]
    fn a_first_frame_round_trips_with_its_message_head() {
        let head = MessageHead {
            tag: Tag(7 << 56 | 3),
            call: CallId::new(
                42,
                &algorithms::catalogue_algorithm(Collective::Allgather, "ring"),
            ),
            shape: Shape::new(DType::F64, 3),
            phantom: false,
        };
        let f = frame(FrameKind::Data, 5, Some(&head), &[1, 2, 3]);
        let (h, body) = decode(&f).unwrap();
        assert_eq!(h.kind, FrameKind::Data);
        assert_eq!(h.credits, 5);
        assert_eq!(h.head, Some(head));
        assert_eq!(h.head.unwrap().bytes(), 24);
        assert_eq!(body, &[1, 2, 3]);
    }

    #[test]
    fn bad_frames_are_refused_with_a_reason() {
        assert_eq!(decode(&[0; 10]), Err(FrameError::Short(10)));
        let mut f = frame(FrameKind::Credit, 1, None, &[]);
        f[0] = b'X';
        assert!(matches!(decode(&f), Err(FrameError::Magic(_))));
        let mut f = frame(FrameKind::Bye, 0, None, &[9]);
        f[8] = 2;
        assert_eq!(decode(&f), Err(FrameError::Length { said: 2, held: 1 }));
        let head = MessageHead {
            tag: Tag(1),
            call: CallId::NONE,
            shape: Shape::new(DType::I32, 4),
            phantom: false,
        };
        let mut f = frame(FrameKind::Data, 0, Some(&head), &[]);
        f[40] = 15; // 15 bytes for 4 x i32
        let e = decode(&f).unwrap_err();
        assert!(e.to_string().contains("claims 15 bytes"), "{e}");
    }

    fn arb_head() -> impl Strategy<Value = MessageHead> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u16>(),
            0..5usize,
            0..1usize << 40,
            any::<bool>(),
        )
            .prop_map(|(tag, seq, kind, d, count, phantom)| MessageHead {
                tag: Tag(tag),
                call: CallId { seq, kind },
                shape: Shape::new(DType::ALL[d], count),
                phantom,
            })
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(head in proptest::option::of(arb_head()), credits: u32,
                                 body in proptest::collection::vec(any::<u8>(), 0..64), kind in 0..3usize) {
            let kind = [FrameKind::Data, FrameKind::Credit, FrameKind::Bye][kind];
            let f = frame(kind, credits, head.as_ref(), &body);
            let (h, b) = decode(&f).unwrap();
            prop_assert_eq!(h, Header { kind, credits, len: body.len() as u32, head });
            prop_assert_eq!(b, &body[..]);
        }

        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode(&bytes);
        }
    }
}
