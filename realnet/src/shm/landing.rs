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
//! waits (it could be for that key). Then progress *claims* the message
//! for the post (nothing goes to the mailbox, whose waiters of that key
//! are only woken: another receive of that key, joined with the posting
//! one, waits on for the next message) and stops pulling from that peer;
//! the posting receive, when next polled, copies the message into its
//! part of the buffer it borrows and completes ([`Posted::poll_receive`]),
//! and the peer's later messages follow. Otherwise the message takes the
//! usual way.
//!
//! The copy is made by the receive itself, through its own borrow of the
//! buffer, never by progress through an address kept aside: a receive
//! future that is forgotten (`mem::forget`, so its guard never runs)
//! leaves a post that at worst claims a message nobody copies, and that
//! peer's messages then wait for the job's timeout, but nothing is ever
//! written to memory the caller may have freed. A receive dropped after
//! its message was claimed hands the message back to the mailbox (copied
//! the usual way), as a dropped receive does. One part is posted at a
//! time (a receive that finds another posted, two receives joined, takes
//! the usual way).
//!
//! [`Fabric::recv_combine`]: algorithms::Fabric::recv_combine
//! [`Fabric::exchange_in_place`]: algorithms::Fabric::exchange_in_place

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use super::cma;
use super::direct::Direct;
use super::fabric::ShmFabric;
use super::wire::MessageHeader;
use crate::call::CallId;

/// A part of the caller's buffer a receive waits to be filled.
pub(super) struct Landing {
    src: Rank,
    tag: Tag,
    call: CallId,
    shape: Shape,
    /// The part's length in bytes.
    len: usize,
    /// The attached message claimed for the part, until the posting
    /// receive has copied it; pulls from `src` wait meanwhile.
    claimed: Option<MessageHeader>,
    /// Whether the claimed message was copied into the part.
    landed: bool,
}

/// A posted part: forgets it when dropped (the receive completed or was
/// abandoned), handing a claimed message it never copied back to the
/// mailbox.
pub(super) struct Posted<'a> {
    fabric: &'a ShmFabric,
}

impl Posted<'_> {
    /// Polls a receive that may have posted a part: `None` once a
    /// message was claimed for it (it is this receive's: `receiving` is
    /// not polled again, so it cannot take the next message of the key;
    /// the receive then copies it, [`ShmFabric::copy_claimed`], before it
    /// next yields), else the payload `receiving` yields.
    pub(super) fn poll_receive<F>(
        posted: Option<&Self>,
        receiving: &mut F,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Payload>, FabricError>>
    where
        F: Future<Output = Result<Payload, FabricError>> + Unpin,
    {
        if posted.is_some_and(|p| p.fabric.claimed_pending().is_some()) {
            return Poll::Ready(Ok(None));
        }
        Pin::new(receiving).poll(cx).map(|r| r.map(Some))
    }
}

impl Drop for Posted<'_> {
    fn drop(&mut self) {
        // The only post there is: another is refused while this lives.
        let Some(l) = self.fabric.landing.borrow_mut().take() else {
            return;
        };
        if let (Some(h), false) = (l.claimed, l.landed) {
            // Claimed, never copied: the message goes the usual way.
            match self.fabric.attach(l.src, &h) {
                Ok(payload) => {
                    self.fabric
                        .seg
                        .ring(l.src, self.fabric.rank)
                        .control()
                        .mark_copied();
                    self.fabric.arrive(l.src, h.tag, h.call, payload);
                }
                Err(e) => self.fabric.fail_with(e),
            }
        }
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
            len: bytes.len(),
            claimed: None,
            landed: false,
        });
        drop(landing);
        Some(Posted { fabric: self })
    }

    /// Claims the attached message `h` from `src` for the posted part if
    /// it is the one the posted receive would take; returns whether it
    /// did (the receive copies it, [`Posted::poll_receive`]).
    pub(super) fn claim(&self, src: Rank, h: &MessageHeader) -> bool {
        let mut landing = self.landing.borrow_mut();
        let Some(l) = landing.as_mut() else {
            return false;
        };
        let mine = l.claimed.is_none()
            && l.src == src
            && l.tag == h.tag
            && l.call == h.call
            && l.shape == h.shape
            && l.len as u64 == h.shape.bytes()
            && !self.mailbox.holds_messages()
            && !self.mailbox.has_fatal()
            && matches!(self.direct.borrow().state, Direct::Idle);
        if mine {
            l.claimed = Some(*h);
        }
        mine
    }

    /// Whether pulls from `src` wait: a message of its was claimed for
    /// the posted part and not yet copied there.
    pub(super) fn claimed_from(&self, src: Rank) -> bool {
        self.landing
            .borrow()
            .as_ref()
            .is_some_and(|l| l.src == src && l.claimed.is_some() && !l.landed)
    }

    /// The claimed message not yet copied, and its source.
    fn claimed_pending(&self) -> Option<(Rank, MessageHeader)> {
        let landing = self.landing.borrow();
        let l = landing.as_ref()?;
        l.claimed.filter(|_| !l.landed).map(|h| (l.src, h))
    }

    /// Copies the message claimed for the posted part into `buf[range]`
    /// (the posting receive's own borrow of that part), tells the peer,
    /// and marks it landed; an error fails the rank, as progress's do.
    pub(super) fn copy_claimed(
        &self,
        buf: &mut Payload,
        range: &Range<usize>,
    ) -> Result<(), FabricError> {
        let Some((src, h)) = self.claimed_pending() else {
            return Err(self.error("no message was claimed for the posted part".into()));
        };
        let elem = buf.shape().dtype.size_bytes();
        let len = h.shape.bytes() as usize;
        let dst = buf
            .as_bytes_mut()
            .and_then(|b| b.get_mut(range.start * elem..range.start * elem + len))
            .ok_or_else(|| self.error(format!("the part posted for rank {src}'s message is gone")));
        let copied =
            dst.and_then(|dst| self.copy_out_of(src, &h, |pid| cma::read(pid, h.addr, dst)));
        if let Err(e) = copied {
            // Nothing to hand back when the receive is dropped.
            self.landing.borrow_mut().take();
            self.fail_with(e.clone());
            return Err(e);
        }
        self.seg.ring(src, self.rank).control().mark_copied();
        if let Some(l) = self.landing.borrow_mut().as_mut() {
            l.landed = true;
        }
        Ok(())
    }
}
