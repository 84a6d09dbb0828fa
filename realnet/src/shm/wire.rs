//! [`MessageHeader`]: the fixed 40 bytes that precede every message in a ring.
//!
//! ```text
//!  0        8        16       24       32        34    35   36     40
//!  | tag    | seq    | count  | addr   | call kind |dtype|kind| check |
//! ```
//!
//! Little-endian fields: the tag, the sender's [`CallId`] (sequence and
//! kind, the algorithm's wire identity), the element count and type, how the payload
//! travels ([`Kind`]) and, for [`Kind::Attach`], the address of the bytes in
//! the sender's memory. `check` is a constant that catches a reader that
//! lost its place in the stream. Decoding validates every field, so a
//! corrupt ring is an error, never a panic or an unchecked allocation.

use algorithms::{DType, Shape, Tag};

use crate::call::CallId;

/// Bytes of a header in the ring.
pub(crate) const HEADER_BYTES: usize = 40;

/// The constant in every header's last four bytes.
const CHECK: u32 = 0x5348_4d32; // "SHM2": the call kind is a wire identity

/// How a message's payload travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The payload's bytes follow the header in the ring.
    Inline,
    /// A phantom: the shape is all there is.
    Phantom,
    /// The receiver copies the bytes out of the sender's memory at `addr`
    /// (cross-memory attach) and counts the copy in the ring's `copied`.
    Attach,
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
    /// The header's bytes.
    pub(crate) fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(&self.tag.0.to_le_bytes());
        b[8..16].copy_from_slice(&self.call.seq.to_le_bytes());
        b[16..24].copy_from_slice(&(self.shape.count as u64).to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        b[32..34].copy_from_slice(&self.call.kind.to_le_bytes());
        b[34] = DType::ALL
            .iter()
            .position(|d| *d == self.shape.dtype)
            .expect("every dtype but sym is in DType::ALL, and sends refuse sym")
            as u8;
        b[35] = match self.kind {
            Kind::Inline => 0,
            Kind::Phantom => 1,
            Kind::Attach => 2,
        };
        b[36..40].copy_from_slice(&CHECK.to_le_bytes());
        b
    }

    /// Decodes and validates a header; a payload may not exceed
    /// `max_bytes`.
    pub(crate) fn decode(b: &[u8; HEADER_BYTES], max_bytes: u64) -> Result<Self, BadHeader> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let check = u32::from_le_bytes(b[36..40].try_into().expect("4 bytes"));
        if check != CHECK {
            return Err(BadHeader(format!(
                "message header check {check:#010x} is not {CHECK:#010x} (corrupt ring)"
            )));
        }
        let dtype = *DType::ALL
            .get(usize::from(b[34]))
            .ok_or_else(|| BadHeader(format!("unknown element type index {}", b[34])))?;
        let kind = match b[35] {
            0 => Kind::Inline,
            1 => Kind::Phantom,
            2 => Kind::Attach,
            k => return Err(BadHeader(format!("unknown payload kind {k}"))),
        };
        let count = u64_at(16);
        let bytes = count.checked_mul(dtype.size_bytes() as u64);
        let count = match (bytes, usize::try_from(count)) {
            (Some(bytes), Ok(count)) if kind == Kind::Phantom || bytes <= max_bytes => count,
            _ => {
                return Err(BadHeader(format!(
                    "message of {count} x {dtype} exceeds the {max_bytes}-byte limit"
                )));
            }
        };
        Ok(MessageHeader {
            tag: Tag(u64_at(0)),
            call: CallId {
                seq: u64_at(8),
                kind: u16::from_le_bytes([b[32], b[33]]),
            },
            shape: Shape::new(dtype, count),
            kind,
            addr: u64_at(24),
        })
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
        assert_eq!(MessageHeader::decode(&h.encode(), 8000), Ok(h));
        let err = MessageHeader::decode(&h.encode(), 7999).unwrap_err();
        assert!(err.0.contains("exceeds the 7999-byte limit"), "{err:?}");
        let phantom = MessageHeader {
            kind: Kind::Phantom,
            ..h
        };
        assert_eq!(MessageHeader::decode(&phantom.encode(), 0), Ok(phantom));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), HEADER_BYTES)) {
            let b: [u8; HEADER_BYTES] = bytes.try_into().unwrap();
            let _ = MessageHeader::decode(&b, u64::MAX);
        }
    }
}
