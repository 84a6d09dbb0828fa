//! Lending a part of the caller's buffer to a peer (see [`Fabric::send_from`]
//! and [`Fabric::exchange_in_place`]): the attach header carries the
//! caller's own address, the peer copies the bytes with cross-memory
//! attach, and a [`Loan`] completes once the peer's `copied` count passes
//! the part (the same count that frees attached payloads).
//!
//! A buffer lent for the first time is first *registered*: its whole
//! 2 MiB pages are collapsed into transparent huge pages
//! ([`cma::collapse_huge_pages`]), the way an RDMA transport registers a
//! buffer once and caches the registration. Cross-memory attach pins the
//! source pages one by one, and out of a large buffer on 4 KiB pages that
//! pinning, not the memory, bounds the copy (a C microbenchmark on 32 MiB:
//! 4-5 GB/s from 4 KiB pages, 12-16 GB/s from huge pages). The allreduce
//! benchmark's buffers were already on huge pages, so its figures do not
//! show this; the fall of its busbw above a few MiB had another cause, the
//! chunks read ahead beyond the cache (`Endpoint::chunk_bytes_max`).
//!
//! [`Fabric::send_from`]: algorithms::Fabric::send_from
//! [`Fabric::exchange_in_place`]: algorithms::Fabric::exchange_in_place

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::{Fabric, FabricError, Payload, Rank, Shape, Tag};

use super::cma;
use super::fabric::{Pending, ShmFabric};
use super::wire::{Kind, MessageHeader};
use crate::heartbeat;

/// A part of the caller's buffer lent to peer `to` (its header is queued
/// for the ring): a future that completes once the peer has copied it
/// (`freed` reaches `ticket`), and fails if the rank fails or the peer
/// copies nothing for the job's timeout. Dropped before that (an error,
/// or the exchange abandoned), it fails the rank: the caller may reuse
/// that memory, and a peer must not deliver bytes read from it (it checks
/// for a failed sender after each copy).
pub(super) struct Loan<'a> {
    fabric: &'a ShmFabric,
    to: Rank,
    ticket: u64,
    /// When `freed` last moved (monotonic ns) and its value then.
    since: (u64, u64),
    done: bool,
}

impl Future for Loan<'_> {
    type Output = Result<(), FabricError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let fabric = this.fabric;
        let mut out = fabric.out.borrow_mut();
        let o = &mut out[this.to];
        if o.freed >= this.ticket {
            this.done = true;
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = fabric.mailbox.fatal() {
            return Poll::Ready(Err(e));
        }
        let now = heartbeat::monotonic_ns();
        let timeout = fabric.options.job.timeout;
        if o.freed != this.since.1 {
            this.since = (now, o.freed);
        } else if now.saturating_sub(this.since.0) > timeout.as_nanos() as u64 {
            let to = this.to;
            return Poll::Ready(Err(FabricError::Timeout {
                rank: fabric.rank,
                peer: to,
                reason: format!(
                    "rank {to} did not copy the part of the buffer lent to it within {:.1} s \
                     (it is stopped, frozen or waiting for something else)",
                    timeout.as_secs_f64()
                ),
            }));
        }
        o.lent_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if !self.done {
            let to = self.to;
            let e = self.fabric.mailbox.fatal().unwrap_or_else(|| {
                self.fabric.error(format!(
                    "an exchange ended before rank {to} copied the part of the buffer lent to it"
                ))
            });
            self.fabric.fail_with(e);
        }
    }
}

impl ShmFabric {
    /// Queues the header of a part of the caller's buffer that `to` copies
    /// straight out of this rank's memory (`addr`, `shape`); returns the
    /// ticket `freed` must reach once the peer has copied it.
    pub(super) fn enqueue_lent(
        &self,
        to: Rank,
        tag: Tag,
        shape: Shape,
        addr: u64,
    ) -> Result<u64, FabricError> {
        let header = MessageHeader {
            tag,
            call: self.call.get(),
            shape,
            kind: Kind::Attach,
            addr,
        }
        .encode(&[]);
        let mut out = self.out.borrow_mut();
        let o = &mut out[to];
        o.attached.push_back(None);
        let ticket = o.freed + o.attached.len() as u64;
        o.queue.push_back(Pending {
            header,
            header_sent: false,
            inline: None,
            offset: 0,
        });
        self.push(to, o)?;
        Ok(ticket)
    }

    /// Whether `bytes`, a part of the caller's buffer that
    /// [`crate::pool::lendable`] allows lending, may be lent to `to`: a
    /// peer reached by cross-memory attach, the part large enough for it.
    pub(super) fn can_lend(&self, to: Rank, bytes: Option<&[u8]>) -> bool {
        let Some(bytes) = bytes else {
            return false;
        };
        to < self.world
            && self.attach_to[to]
            && self
                .options
                .attach_min_bytes
                .is_some_and(|min| bytes.len() >= min.max(1))
    }

    /// Lends `buf[range]` to `to`: queues its header (the peer copies
    /// the bytes from this rank's memory) and returns the [`Loan`] to
    /// await before the caller may touch that part again.
    pub(super) fn lend(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        range: &Range<usize>,
    ) -> Result<Loan<'_>, FabricError> {
        if let Some(e) = self.mailbox.fatal() {
            return Err(e);
        }
        if let Some(bytes) = buf.as_bytes() {
            self.registered.borrow_mut().register(bytes);
        }
        let shape = Shape::new(buf.shape().dtype, range.len());
        let ticket = self
            .enqueue_lent(to, tag, shape, lent_address(buf, range))
            .inspect_err(|e| self.fail_with(e.clone()))?;
        Ok(Loan {
            fabric: self,
            to,
            ticket,
            since: (heartbeat::monotonic_ns(), self.out.borrow()[to].freed),
            done: false,
        })
    }

    /// The send half of [`Fabric::exchange_in_place`]: `buf[send]` lent
    /// to `to` where it can be (the loan to await), else copied and sent
    /// at once (an eager send completes when called, so sending first then
    /// receiving is the default's exchange).
    pub(super) fn lend_or_send(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        send: Range<usize>,
    ) -> Result<Option<Loan<'_>>, FabricError> {
        if self.can_lend(to, crate::pool::lendable(self.rank, to, buf, &send)) {
            return self.lend(to, tag, buf, &send).map(Some);
        }
        let part = self.send_copy(buf, send);
        self.send_now(to, tag, part)?;
        Ok(None)
    }

    /// Wakes the exchanges waiting for lent parts to be copied, so they
    /// notice a failure or their timeout.
    pub(super) fn wake_lenders(&self) {
        for o in self.out.borrow_mut().iter_mut() {
            if let Some(w) = o.lent_waker.take() {
                w.wake();
            }
        }
    }
}

/// The caller's buffers this rank has registered for lending (see the
/// [module docs](self)), most recent last: their start address and length.
/// A buffer freed and another allocated at the same place keeps the
/// entry: its copies are then only slower, never wrong.
#[derive(Debug, Default)]
pub(crate) struct Registered {
    buffers: Vec<(usize, usize)>,
}

/// The most registrations remembered (an allreduce lends one buffer per
/// call; a few cover code that alternates between buffers).
const REGISTERED_MAX: usize = 16;

impl Registered {
    /// Collapses `bytes` into huge pages unless it was registered already.
    pub(crate) fn register(&mut self, bytes: &[u8]) {
        let key = (bytes.as_ptr() as usize, bytes.len());
        if let Some(at) = self.buffers.iter().rposition(|b| *b == key) {
            let hit = self.buffers.remove(at);
            self.buffers.push(hit);
            return;
        }
        cma::collapse_huge_pages(bytes);
        if self.buffers.len() >= REGISTERED_MAX {
            self.buffers.remove(0);
        }
        self.buffers.push(key);
    }
}

/// The address of `buf[range]`'s first byte, for a peer to copy from.
pub(super) fn lent_address(buf: &Payload, range: &Range<usize>) -> u64 {
    let elem = buf.shape().dtype.size_bytes();
    buf.as_bytes()
        .map(|b| b[range.start * elem..].as_ptr() as u64)
        .expect("only real data is lent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_are_remembered_and_the_oldest_forgotten() {
        let buffers: Vec<Vec<u8>> = (0..=REGISTERED_MAX).map(|i| vec![i as u8; 64]).collect();
        let key = |b: &Vec<u8>| (b.as_ptr() as usize, b.len());
        let mut registered = Registered::default();
        registered.register(&buffers[0]);
        registered.register(&buffers[0][..32]);
        assert_eq!(
            registered.buffers,
            vec![key(&buffers[0]), (key(&buffers[0]).0, 32)]
        );
        // Registering again moves the buffer to the most recent end.
        registered.register(&buffers[0]);
        assert_eq!(registered.buffers.last(), Some(&key(&buffers[0])));
        assert_eq!(registered.buffers.len(), 2);
        for b in &buffers[1..] {
            registered.register(b);
        }
        assert_eq!(registered.buffers.len(), REGISTERED_MAX);
        assert!(!registered.buffers.contains(&(key(&buffers[0]).0, 32)));
        assert!(!registered.buffers.contains(&key(&buffers[0])));
        assert_eq!(
            registered.buffers.last(),
            Some(&key(&buffers[REGISTERED_MAX]))
        );
        // Contents are never touched.
        assert!(
            buffers
                .iter()
                .enumerate()
                .all(|(i, b)| b.iter().all(|x| *x == i as u8))
        );
    }
}
