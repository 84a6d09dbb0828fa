//! Landing a lent message straight in the receiver's buffer: a receive
//! that copies what arrives into a part of the caller's buffer
//! ([`Fabric::recv_combine`] or [`Fabric::exchange_in_place`] without a
//! reduction) posts that part, and the cross-memory copy of a matching
//! attached message goes there instead of into a message buffer of its
//! own that the receive would then copy again. A broadcast, an allgather
//! or an alltoall thus moves each received byte once, not twice.
//!
//! It is only a shortcut, taken when it gives exactly what the mailbox
//! would: the attached message is the next of the posted receive's key
//! (source, tag, call) and shape, no message waits in the mailbox (an
//! older one of that key could be among them) and no direct receive
//! waits (it could be for that key). Then the copy lands in place, the
//! message is the posting receive's alone (nothing goes to the mailbox,
//! whose waiters of that key are only woken: another receive of that key,
//! joined with the posting one, waits on for the next message) and the
//! receive completes ([`Posted::poll_receive`]). Otherwise the message
//! takes the usual way.
//! One part is posted at a time (a receive that finds another posted,
//! two receives joined, takes the usual way). The posted part is
//! forgotten when its receive completes or is dropped ([`Posted`]), so
//! nothing is written through it afterwards; progress, which does the
//! copy, only runs while the receive waits.
//!
//! [`Fabric::recv_combine`]: algorithms::Fabric::recv_combine
//! [`Fabric::exchange_in_place`]: algorithms::Fabric::exchange_in_place
#![allow(unsafe_code)]

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use super::cma;
use super::direct::Direct;
use super::fabric::ShmFabric;
use super::segment::RankState;
use super::wire::MessageHeader;
use crate::call::CallId;

/// A part of the caller's buffer a receive waits to be filled.
pub(super) struct Landing {
    src: Rank,
    tag: Tag,
    call: CallId,
    shape: Shape,
    /// The part's first byte's address (an integer, so the fabric stays
    /// `Send`) and its length in bytes.
    at: usize,
    len: usize,
    /// Whether a message landed there.
    landed: bool,
}

/// A posted part: forgets it when dropped (the receive completed or was
/// abandoned).
pub(super) struct Posted<'a> {
    fabric: &'a ShmFabric,
}

impl Posted<'_> {
    /// Whether a message landed in the posted part.
    fn landed(&self) -> bool {
        self.fabric
            .landing
            .borrow()
            .as_ref()
            .is_some_and(|l| l.landed)
    }

    /// Polls a receive that may have posted a part: `None` once a message
    /// landed there (it is this receive's: `receiving` is not polled
    /// again, so it cannot take the next message of the key), else the
    /// payload `receiving` yields.
    pub(super) fn poll_receive<F>(
        posted: Option<&Self>,
        receiving: &mut F,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Payload>, FabricError>>
    where
        F: Future<Output = Result<Payload, FabricError>> + Unpin,
    {
        if posted.is_some_and(Self::landed) {
            return Poll::Ready(Ok(None));
        }
        Pin::new(receiving).poll(cx).map(|r| r.map(Some))
    }
}

impl Drop for Posted<'_> {
    fn drop(&mut self) {
        // The only post there is: another is refused while this lives.
        self.fabric.landing.borrow_mut().take();
    }
}

impl ShmFabric {
    /// Posts `buf[range]` for the next message from `src` with `tag` of
    /// the current call, if it is real data worth a cross-memory copy (see
    /// the [module docs](self)); the [`Posted`] guard must live until the
    /// receive has completed.
    pub(super) fn post_landing(
        &self,
        src: Rank,
        tag: Tag,
        buf: &mut Payload,
        range: Range<usize>,
    ) -> Option<Posted<'_>> {
        let dtype = buf.shape().dtype;
        let elem = dtype.size_bytes();
        let min = self.options.attach_min_bytes?;
        if src >= self.world || src == self.rank || !self.attach_to[src] {
            return None;
        }
        let bytes = buf
            .as_bytes_mut()?
            .get_mut(range.start * elem..range.end * elem)?;
        let mut landing = self.landing.borrow_mut();
        if bytes.len() < min.max(1) || landing.is_some() {
            return None;
        }
        *landing = Some(Landing {
            src,
            tag,
            call: self.call.get(),
            shape: Shape::new(dtype, range.len()),
            at: bytes.as_mut_ptr() as usize,
            len: bytes.len(),
            landed: false,
        });
        drop(landing);
        Some(Posted { fabric: self })
    }

    /// Copies the attached message `h` from `src` into the posted part if
    /// it is the one the posted receive would take; returns whether it
    /// did.
    pub(super) fn land(&self, src: Rank, h: &MessageHeader) -> Result<bool, FabricError> {
        let mut landing = self.landing.borrow_mut();
        let Some(l) = landing.as_mut() else {
            return Ok(false);
        };
        let mine = !l.landed
            && l.src == src
            && l.tag == h.tag
            && l.call == h.call
            && l.shape == h.shape
            && l.len as u64 == h.shape.bytes()
            && !self.mailbox.holds_messages()
            && !self.mailbox.has_fatal()
            && matches!(self.direct.borrow().state, Direct::Idle);
        if !mine {
            return Ok(false);
        }
        // SAFETY: the part was borrowed from the caller's buffer by the
        // receive that posted it, which holds that borrow until it has
        // completed and drops its `Posted` guard (which clears `landing`)
        // first; progress, the only caller, runs on the rank's thread
        // while that receive waits, so nothing else touches those bytes.
        let dst = unsafe { std::slice::from_raw_parts_mut(l.at as *mut u8, l.len) };
        cma::read(self.pids[src], h.addr, dst).map_err(|e| {
            self.check_peers().err().unwrap_or_else(|| {
                self.error(format!(
                    "cannot copy {} bytes from rank {src} (pid {}): {e}; rank {src} died or its memory is gone",
                    l.len, self.pids[src]
                ))
            })
        })?;
        // A sender that failed may have freed what we just read.
        if self.seg.rank_control(src).state() == RankState::Failed {
            return Err(self.check_peers().err().unwrap_or_else(|| {
                self.error(format!(
                    "rank {src} failed while this rank copied its message"
                ))
            }));
        }
        l.landed = true;
        Ok(true)
    }
}
