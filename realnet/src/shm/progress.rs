//! Progress of a shared-memory rank: moving queued messages into the
//! peers' slots and rings and arrived ones out of them (headers and small
//! payloads from the slots, inline payloads from the rings, attached
//! payloads from the sender's memory) into the
//! [`Mailbox`](crate::mailbox::Mailbox).

use algorithms::{FabricError, Payload, Rank, Tag};

use super::cma;
use super::fabric::{Outgoing, ShmFabric};
use super::ring::Cursor;
use super::segment::RankState;
use super::slots::SlotCursor;
use super::wire::{Kind, MessageHeader};
use crate::call::CallId;

/// What this rank is reading from one peer's ring.
pub(super) enum Rx {
    /// The next bytes are a message header.
    Header,
    /// A payload of `got` bytes out of its length has arrived.
    Body {
        tag: Tag,
        call: CallId,
        payload: Payload,
        got: usize,
    },
}

/// This rank's receiving side from one peer.
pub(super) struct Incoming {
    /// This rank's place in the peer's byte ring.
    pub(super) cur: Cursor,
    /// This rank's place in the peer's slots.
    pub(super) slots: SlotCursor,
    pub(super) rx: Rx,
}

impl ShmFabric {
    /// Moves queued messages for `dst` into its slots and ring; returns
    /// whether any moved.
    pub(super) fn push(&self, dst: Rank, o: &mut Outgoing) -> Result<bool, FabricError> {
        let ring = self.seg.ring(self.rank, dst);
        let slots = self.seg.slots(self.rank, dst);
        let corrupt = |c| self.corrupt(self.rank, dst, c);
        let mut moved = false;
        let mut wrote = false;
        while let Some(p) = o.queue.front_mut() {
            if !p.header_sent {
                if !slots
                    .writable(&mut o.slots)
                    .map_err(|c| self.corrupt_slots(self.rank, dst, c))?
                {
                    break;
                }
                slots.write(&mut o.slots, &p.header);
                p.header_sent = true;
                moved = true;
            }
            if let Some(bytes) = p.inline.as_ref().and_then(Payload::as_bytes) {
                let rest = &bytes[p.offset..];
                let n = ring
                    .writable(&mut o.cur, rest.len())
                    .map_err(corrupt)?
                    .min(rest.len());
                ring.write(&mut o.cur, &rest[..n]);
                p.offset += n;
                moved |= n > 0;
                wrote |= n > 0;
                if n < rest.len() {
                    break;
                }
            }
            if let Some(p) = o.queue.pop_front().and_then(|p| p.inline) {
                self.pool.borrow_mut().give(p);
            }
        }
        if wrote {
            ring.publish(&o.cur);
        }
        // Free the attached payloads the peer has finished copying.
        if !o.attached.is_empty() {
            let copied = ring.control().copied();
            while o.freed < copied
                && let Some(p) = o.attached.pop_front()
            {
                if let Some(p) = p {
                    self.pool.borrow_mut().give(p);
                }
                o.freed += 1;
                moved = true;
            }
            if moved && let Some(w) = o.lent_waker.take() {
                w.wake();
            }
        }
        Ok(moved)
    }

    /// Moves arrived messages from `src`'s slots and ring into payloads
    /// and delivers complete ones ([`ShmFabric::arrive`]), up to one a
    /// direct receive takes; returns whether any moved.
    pub(super) fn pull(&self, src: Rank, inc: &mut Incoming) -> Result<bool, FabricError> {
        // The ring only when a message's bytes are in it: an idle look
        // reads one slot's stamp.
        let ring = || self.seg.ring(src, self.rank);
        let slots = self.seg.slots(src, self.rank);
        let corrupt = |c| self.corrupt(src, self.rank, c);
        let mut moved = false;
        // Idle: the next slot's stamp says "not yet".
        if matches!(inc.rx, Rx::Header) && !slots.stirred(&inc.slots) {
            return Ok(false);
        }
        let mut read = false;
        loop {
            if self.claimed_from(src) {
                // The posting receive copies the claimed message first:
                // the peer's copied count stays in its messages' order.
                break;
            }
            if self.direct_got() {
                // A direct receive has its message: the next ones stay in
                // the slots until it has taken it (if queued in the
                // mailbox, the next call's receive could not be direct).
                break;
            }
            match &mut inc.rx {
                Rx::Header => {
                    let Some(words) = slots
                        .read(&mut inc.slots)
                        .map_err(|c| self.corrupt_slots(src, self.rank, c))?
                    else {
                        break;
                    };
                    // The words are copied out: the slot is free again.
                    slots.release(&inc.slots);
                    moved = true;
                    let h = MessageHeader::decode(&words, self.options.max_message_bytes)
                        .map_err(|e| self.error(format!("from rank {src}: {}", e.0)))?;
                    match h.kind {
                        Kind::Phantom => self.arrive(
                            src,
                            h.tag,
                            h.call,
                            Payload::phantom(h.shape.dtype, h.shape.count),
                        ),
                        Kind::Small => {
                            // Into a kept small payload of this shape
                            // (every byte is overwritten).
                            let spare = self.small_spare.borrow_mut().take(h.shape);
                            let mut payload = spare.unwrap_or_else(|| {
                                Payload::zeros(h.shape.dtype, h.shape.count, false)
                            });
                            if let Some(b) = payload.as_bytes_mut() {
                                let len = b.len();
                                b.copy_from_slice(&h.small_bytes(&words)[..len]);
                            }
                            self.arrive(src, h.tag, h.call, payload);
                        }
                        Kind::Attach if self.claim(src, &h) => {
                            // Claimed for the receive's posted part, which
                            // copies it when next polled; pulls from `src`
                            // wait until then (see `super::landing`).
                            self.mailbox_now().wake_waiters(src, h.tag, h.call);
                        }
                        Kind::Attach => {
                            let payload = self.attach(src, &h)?;
                            ring().control().mark_copied();
                            self.arrive(src, h.tag, h.call, payload);
                        }
                        Kind::Inline if h.shape.bytes() == 0 => {
                            let payload = Payload::zeros(h.shape.dtype, 0, false);
                            self.arrive(src, h.tag, h.call, payload);
                        }
                        Kind::Inline => {
                            let mut payload = self.pool.borrow_mut().scratch(h.shape);
                            if let Some(b) = payload.as_bytes_mut() {
                                cma::advise_huge_pages(b);
                            }
                            inc.rx = Rx::Body {
                                tag: h.tag,
                                call: h.call,
                                payload,
                                got: 0,
                            };
                        }
                    }
                }
                Rx::Body { payload, got, .. } => {
                    let bytes = payload.as_bytes_mut().expect("inline payloads hold data");
                    let rest = bytes.len() - *got;
                    let ring = ring();
                    let n = ring
                        .readable(&mut inc.cur, rest)
                        .map_err(corrupt)?
                        .min(rest);
                    if n == 0 {
                        break;
                    }
                    ring.read(&mut inc.cur, &mut bytes[*got..*got + n]);
                    *got += n;
                    moved = true;
                    read = true;
                    if n < rest {
                        self.mailbox_now().touch(src);
                        break;
                    }
                    let Rx::Body {
                        tag, call, payload, ..
                    } = std::mem::replace(&mut inc.rx, Rx::Header)
                    else {
                        unreachable!("matched Body above")
                    };
                    self.arrive(src, tag, call, payload);
                }
            }
        }
        if read {
            ring().release(&inc.cur);
        }
        Ok(moved)
    }

    /// Copies an attached payload out of `src`'s memory.
    pub(super) fn attach(&self, src: Rank, h: &MessageHeader) -> Result<Payload, FabricError> {
        let spare = self.pool.borrow_mut().take(h.shape);
        self.copy_out_of(src, h, |pid| cma::read_into(pid, h.addr, h.shape, spare))
    }

    /// Runs `copy`, the cross-memory copy of `h`'s attached bytes out of
    /// `src` (given its pid), and checks the sender did not fail
    /// meanwhile; an error says why, naming the rank.
    pub(super) fn copy_out_of<T>(
        &self,
        src: Rank,
        h: &MessageHeader,
        copy: impl FnOnce(u32) -> std::io::Result<T>,
    ) -> Result<T, FabricError> {
        let copied = copy(self.pids[src]).map_err(|e| {
            // The sender exited: say why, if it or another peer told.
            self.check_peers().err().unwrap_or_else(|| {
                self.error(format!(
                    "cannot copy {} bytes from rank {src} (pid {}): {e}; rank {src} died or its memory is gone",
                    h.shape.bytes(),
                    self.pids[src]
                ))
            })
        })?;
        // A sender that failed may have freed what we just read: do not
        // deliver bytes whose source was let go.
        if self.seg.rank_control(src).state() == RankState::Failed {
            // Say why it failed (often a rank that died before it), as the
            // probe of the peers does.
            return Err(self.check_peers().err().unwrap_or_else(|| {
                self.error(format!(
                    "rank {src} failed while this rank copied its message"
                ))
            }));
        }
        Ok(copied)
    }

    /// One pass over every peer: push, pull; errors fail the rank. Not
    /// inlined: an idle round ([`ShmFabric::quiet`]) then saves and
    /// restores no registers for it.
    #[inline(never)]
    pub(super) fn step(&self) -> Result<bool, FabricError> {
        let mut moved = false;
        let mut out = self.out.borrow_mut();
        let mut inc = self.inc.borrow_mut();
        for (peer, (i, o)) in inc.iter_mut().zip(out.iter_mut()).enumerate() {
            if peer == self.rank {
                continue;
            }
            moved |= self.pull(peer, i)?;
            if !o.is_flushed() {
                moved |= self.push(peer, o)?;
            }
        }
        Ok(moved)
    }

    /// Whether a pass would find nothing to do: every peer's next slot
    /// says "not yet", no message is half read from a ring, and nothing
    /// waits to be pushed or copied by a peer. The idle round of a rank
    /// whose peer has not answered yet: one stamp per peer, no call into
    /// [`ShmFabric::step`].
    #[inline]
    pub(super) fn quiet(&self) -> bool {
        let out = self.out.borrow();
        let inc = self.inc.borrow();
        inc.iter()
            .zip(out.iter())
            .enumerate()
            .all(|(peer, (i, o))| {
                peer == self.rank
                    || (matches!(i.rx, Rx::Header)
                        && o.is_flushed()
                        && !self.seg.slots(peer, self.rank).stirred(&i.slots))
            })
    }
}
