//! Decoding frames from bytes: one frame at the start of a buffer
//! ([`decode`]) and an incremental [`Decoder`] over a byte stream.

use super::{Body, Frame, FrameError, HEADER_LEN, Header, MAGIC};

/// Decodes the frame at the start of `bytes`: `Ok(None)` if more bytes
/// are needed, else the frame and the bytes it used.
pub fn decode(bytes: &[u8], cap: u64) -> Result<Option<(Frame, usize)>, FrameError> {
    // A stranger is told apart by its first four bytes, before a whole
    // header arrives.
    if let Some(found) = bytes.first_chunk::<4>()
        && *found != MAGIC
    {
        return Err(FrameError::BadMagic { found: *found });
    }
    let Some(head) = bytes.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let header = Header::decode(head, cap)?;
    // Checked against the cap (or zero for a phantom), so it fits in memory.
    let len = usize::try_from(header.body_len())
        .map_err(|_| FrameError::Malformed("payload beyond this host's memory"))?;
    let Some(rest) = bytes[HEADER_LEN..].get(..len) else {
        return Ok(None);
    };
    let body = Body::decode(&header, rest)?;
    Ok(Some((Frame::from_parts(&header, body), HEADER_LEN + len)))
}

/// An incremental decoder over a byte stream. It holds only the bytes
/// pushed into it, so a lying length cannot make it allocate; after an
/// error it keeps returning that error (a stream cannot resynchronise).
#[derive(Debug)]
pub struct Decoder {
    cap: u64,
    buf: Vec<u8>,
    failed: Option<FrameError>,
}

impl Decoder {
    /// A decoder that accepts frames of at most `cap` bytes.
    pub fn new(cap: u64) -> Decoder {
        Decoder {
            cap,
            buf: Vec::new(),
            failed: None,
        }
    }

    /// Appends bytes received from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next whole frame, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match decode(&self.buf, self.cap) {
            Ok(Some((frame, used))) => {
                self.buf.drain(..used);
                Ok(Some(frame))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.buf = Vec::new();
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Bytes received but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}
