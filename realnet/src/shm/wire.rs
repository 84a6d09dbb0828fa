//! [`MessageHeader`]: a message's header in its slot (`super::slots`),
//! with the payload itself when it is small.
//!
//! ```text
//!  word 1  tag
//!  word 2  call sequence number
//!  word 3  call kind (bits 0-15) | dtype (16-23) | kind (24-31) | check (32-47) | small count (48-55)
//!  word 4  count                       | Small: the payload, up to 32 bytes
//!  word 5  address (Attach)            |        (words 4-7, little-endian)
//! ```
//!
//! Little-endian fields: the tag, the sender's [`CallId`] (sequence and
//! kind, the algorithm's wire identity), the element count and type, how the payload
//! travels ([`Kind`]) and, for [`Kind::Attach`], the address of the bytes in
//! the sender's memory. `check` is a constant that catches a slot written
//! by something else. Decoding validates every field, so a corrupt slot
//! is an error, never a panic or an unchecked allocation.

use algorithms::{DType, Shape, Tag};

use super::slots::SLOT_WORDS;
use crate::call::CallId;

/// Payload bytes a slot carries itself ([`Kind::Small`]).
pub(crate) const SLOT_PAYLOAD_BYTES: usize = 32;

/// The constant in every header's word 3, bits 32-47.
const CHECK: u16 = 0x5333; // "S3": headers in slots

/// How a message's payload travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The payload's bytes follow in the pair's byte ring.
    Inline,
    /// A phantom: the shape is all there is.
    Phantom,
    /// The receiver copies the bytes out of the sender's memory at `addr`
    /// (cross-memory attach) and counts the copy in the ring's `copied`.
    Attach,
    /// The payload is in the slot itself (at most [`SLOT_PAYLOAD_BYTES`]).
    Small,
}

/// One message's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MessageHeader {
    /// The message's tag.
    pub(crate) tag: Tag,
    /// The sender's call when it sent.
    pub(crate) call: CallId,
    /// Element type and count.
    pub(crate) shape: Shape,
    /// How the payload travels.
    pub(crate) kind: Kind,
    /// For [`Kind::Attach`], where the bytes are in the sender's memory.
    pub(crate) addr: u64,
}

/// Why a header could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BadHeader(pub(crate) String);

impl MessageHeader {
    /// The slot's words; `small` is the payload of a [`Kind::Small`]
    /// message (at most [`SLOT_PAYLOAD_BYTES`], the shape's bytes).
    pub(crate) fn encode(&self, small: &[u8]) -> [u64; SLOT_WORDS] {
        let dtype = DType::ALL
            .iter()
            .position(|d| *d == self.shape.dtype)
            .expect("every dtype but sym is in DType::ALL, and sends refuse sym")
            as u64;
        let kind = match self.kind {
            Kind::Inline => 0,
            Kind::Phantom => 1,
            Kind::Attach => 2,
            Kind::Small => 3,
        };
        let small_count = if self.kind == Kind::Small {
            assert!(
                small.len() <= SLOT_PAYLOAD_BYTES && self.shape.count <= SLOT_PAYLOAD_BYTES,
                "a small payload fits its slot"
            );
            self.shape.count as u64
        } else {
            0
        };
        let mut w = [0u64; SLOT_WORDS];
        w[0] = self.tag.0;
        w[1] = self.call.seq;
        w[2] = u64::from(self.call.kind)
            | dtype << 16
            | kind << 24
            | u64::from(CHECK) << 32
            | small_count << 48;
        if self.kind == Kind::Small {
            let mut bytes = [0u8; SLOT_PAYLOAD_BYTES];
            bytes[..small.len()].copy_from_slice(small);
            for (i, word) in bytes.chunks_exact(8).enumerate() {
                w[3 + i] = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            }
        } else {
            w[3] = self.shape.count as u64;
            w[4] = self.addr;
        }
        w
    }

    /// Decodes and validates a header; a payload may not exceed
    /// `max_bytes`.
    pub(crate) fn decode(w: &[u64; SLOT_WORDS], max_bytes: u64) -> Result<Self, BadHeader> {
        let check = (w[2] >> 32) as u16;
        if check != CHECK {
            return Err(BadHeader(format!(
                "message header check {check:#06x} is not {CHECK:#06x} (corrupt slot)"
            )));
        }
        let dtype_index = ((w[2] >> 16) & 0xff) as usize;
        let dtype = *DType::ALL
            .get(dtype_index)
            .ok_or_else(|| BadHeader(format!("unknown element type index {dtype_index}")))?;
        let kind = match (w[2] >> 24) & 0xff {
            0 => Kind::Inline,
            1 => Kind::Phantom,
            2 => Kind::Attach,
            3 => Kind::Small,
            k => return Err(BadHeader(format!("unknown payload kind {k}"))),
        };
        let count = if kind == Kind::Small {
            w[2] >> 48
        } else {
            w[3]
        };
        let bytes = count.checked_mul(dtype.size_bytes() as u64);
        let limit = if kind == Kind::Small {
            (SLOT_PAYLOAD_BYTES as u64).min(max_bytes)
        } else {
            max_bytes
        };
        let count = match (bytes, usize::try_from(count)) {
            (Some(bytes), Ok(count)) if kind == Kind::Phantom || bytes <= limit => count,
            _ => {
                return Err(BadHeader(format!(
                    "message of {count} x {dtype} exceeds the {limit}-byte limit"
                )));
            }
        };
        Ok(MessageHeader {
            tag: Tag(w[0]),
            call: CallId {
                seq: w[1],
                kind: w[2] as u16,
            },
            shape: Shape::new(dtype, count),
            kind,
            addr: if kind == Kind::Small { 0 } else { w[4] },
        })
    }

    /// The payload bytes of a [`Kind::Small`] message's words (the
    /// shape's bytes; decoded headers never exceed the slot).
    pub(crate) fn small_bytes(&self, w: &[u64; SLOT_WORDS]) -> [u8; SLOT_PAYLOAD_BYTES] {
        let mut bytes = [0u8; SLOT_PAYLOAD_BYTES];
        for (i, word) in bytes.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&w[3 + i].to_le_bytes());
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::Collective;
    use proptest::prelude::*;

    #[test]
    fn headers_round_trip_and_limits_hold() {
        let h = MessageHeader {
            tag: Tag(u64::MAX - 3),
            call: CallId::new(
                42,
                &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
            ),
            shape: Shape::new(DType::F64, 1000),
            kind: Kind::Attach,
            addr: 0xdead_beef,
        };
        assert_eq!(MessageHeader::decode(&h.encode(&[]), 8000), Ok(h));
        let err = MessageHeader::decode(&h.encode(&[]), 7999).unwrap_err();
        assert!(err.0.contains("exceeds the 7999-byte limit"), "{err:?}");
        let phantom = MessageHeader {
            kind: Kind::Phantom,
            ..h
        };
        assert_eq!(MessageHeader::decode(&phantom.encode(&[]), 0), Ok(phantom));
        let small = MessageHeader {
            kind: Kind::Small,
            shape: Shape::new(DType::F64, 4),
            addr: 0,
            ..h
        };
        let payload: Vec<u8> = (1..=32).collect();
        let w = small.encode(&payload);
        let back = MessageHeader::decode(&w, 8000).unwrap();
        assert_eq!(back, small);
        assert_eq!(back.small_bytes(&w)[..], payload[..]);
        // A small count beyond the slot is corrupt, whatever the limit.
        let mut big = w;
        big[2] = (big[2] & !(0xff << 48)) | 5 << 48;
        let err = MessageHeader::decode(&big, 8000).unwrap_err();
        assert!(err.0.contains("exceeds the 32-byte limit"), "{err:?}");
    }

    proptest! {
        #[test]
        fn random_words_never_panic_the_decoder(words in proptest::collection::vec(any::<u64>(), SLOT_WORDS), check in any::<bool>()) {
            let mut w: [u64; SLOT_WORDS] = words.try_into().unwrap();
            if check {
                // Past the check, to reach the other fields' validation.
                w[2] = (w[2] & !(0xffff << 32)) | u64::from(CHECK) << 32;
            }
            if let Ok(h) = MessageHeader::decode(&w, u64::MAX) {
                let _ = h.small_bytes(&w);
            }
        }
    }
}
