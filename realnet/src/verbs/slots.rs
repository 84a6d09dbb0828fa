//! Slot bookkeeping as pure arithmetic: where each slot lives in the one
//! registered memory region, how work-request ids name a slot, and the
//! credit counts that keep a sender from overrunning the receiver's slots.
//!
//! # Credits
//! Each side of a connection posts `slots + CONTROL_SLOTS` receive work
//! requests. A data frame needs one *credit*; a sender starts with `slots`
//! credits. The receiver copies a data frame out of its slot, re-posts the
//! slot at once and owes the sender one credit. Owed credits travel back in
//! the header of the next frame the receiver sends to the sender (piggyback)
//! or, when the receiver has nothing to send and owes at least
//! [`Credits::threshold`] (half the slots, rounded up), in a credit frame.
//!
//! Credit frames and the one Bye frame need no credit: they land in the
//! `CONTROL_SLOTS` extra receive slots. That is enough because every credit
//! frame carries at least `threshold` credits, each for a distinct data
//! frame the peer sent, and the peer never has more than `slots` data frames
//! unreturned: so at most `slots / threshold <= 2` credit frames are on
//! their way at once, plus one Bye. The queue pairs also retry
//! "receiver not ready" without limit (`rnr_retry = 7`), so even a bug here
//! would cost latency, not data.

use std::ops::Range;

use crate::verbs::frame::HEADER_BYTES;

/// Extra receive slots per connection for credit frames (2) and the Bye (1).
pub const CONTROL_SLOTS: u32 = 3;

/// Credits of one direction of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credits {
    slots: u32,
    /// Data frames this side may still send.
    available: u32,
    /// Data frames this side consumed whose slots it has not handed back.
    owed: u32,
}

impl Credits {
    /// The credits of a fresh connection with `slots` data slots each way.
    pub fn new(slots: u32) -> Credits {
        assert!(slots > 0, "a connection needs at least one slot");
        Credits {
            slots,
            available: slots,
            owed: 0,
        }
    }

    /// Owed credits at which a credit frame is worth sending.
    pub fn threshold(&self) -> u32 {
        self.slots.div_ceil(2)
    }

    /// Data frames this side may still send.
    pub fn available(&self) -> u32 {
        self.available
    }

    /// Credits owed to the peer.
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// Takes one credit for a data frame; false when none is left.
    pub fn take(&mut self) -> bool {
        if self.available == 0 {
            return false;
        }
        self.available -= 1;
        true
    }

    /// The credits to put in an outgoing frame's header (all owed ones).
    pub fn hand_back(&mut self) -> u32 {
        std::mem::take(&mut self.owed)
    }

    /// Whether a credit frame is due (nothing else will carry them soon).
    pub fn credit_frame_due(&self) -> bool {
        self.owed >= self.threshold()
    }

    /// Notes a received frame: `returned` credits from its header, and
    /// whether it was a data frame (whose slot is now owed back).
    pub fn on_frame(&mut self, returned: u32, data: bool) -> Result<(), String> {
        let available = self.available.saturating_add(returned);
        if available > self.slots {
            return Err(format!(
                "the peer returned {returned} credits, {} more than this side lent",
                available - self.slots
            ));
        }
        self.available = available;
        if data {
            self.owed += 1;
            if self.owed > self.slots {
                return Err(format!(
                    "the peer sent more than {} data frames without credits",
                    self.slots
                ));
            }
        }
        Ok(())
    }
}

/// Which send slot a posted send uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendSlot {
    /// A data slot of `slot_bytes`, `0..slots`.
    Data(u32),
    /// A header-sized control slot, `0..CONTROL_SLOTS`.
    Control(u32),
}

/// What a completed work request was, decoded from its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkId {
    /// A receive into slot `slot` of the connection to `peer`.
    Recv {
        /// The peer rank.
        peer: usize,
        /// The receive slot.
        slot: u32,
    },
    /// A send from a slot of the connection to `peer`.
    Send {
        /// The peer rank.
        peer: usize,
        /// The send slot.
        slot: SendSlot,
    },
}

impl WorkId {
    /// The 64-bit work-request id: peer in the top 32 bits, then a kind
    /// byte, then the slot in the low 24 bits.
    pub fn encode(self) -> u64 {
        let (peer, kind, slot) = match self {
            WorkId::Recv { peer, slot } => (peer, 0u64, slot),
            WorkId::Send {
                peer,
                slot: SendSlot::Data(s),
            } => (peer, 1, s),
            WorkId::Send {
                peer,
                slot: SendSlot::Control(s),
            } => (peer, 2, s),
        };
        assert!(
            slot < 1 << 24 && (peer as u64) < 1 << 32,
            "slot and rank fit their fields"
        );
        (peer as u64) << 32 | kind << 24 | u64::from(slot)
    }

    /// The work request an id names, if it is one of ours.
    pub fn decode(id: u64) -> Option<WorkId> {
        let peer = usize::try_from(id >> 32).ok()?;
        let slot = (id & 0xff_ffff) as u32;
        match (id >> 24) & 0xff {
            0 => Some(WorkId::Recv { peer, slot }),
            1 => Some(WorkId::Send {
                peer,
                slot: SendSlot::Data(slot),
            }),
            2 => Some(WorkId::Send {
                peer,
                slot: SendSlot::Control(slot),
            }),
            _ => None,
        }
    }

    /// The peer rank the work request belongs to.
    pub fn peer(self) -> usize {
        match self {
            WorkId::Recv { peer, .. } | WorkId::Send { peer, .. } => peer,
        }
    }
}

/// Where every slot lives in the registered region. Per peer, in order:
/// `slots + CONTROL_SLOTS` receive slots of `slot_bytes`, then the send
/// area: `slots` data slots of `slot_bytes` and `CONTROL_SLOTS` control
/// slots of one header each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLayout {
    /// Bytes of one data slot, header included.
    pub slot_bytes: usize,
    /// Data slots per direction of a connection.
    pub slots: u32,
    /// Connections (the world size less one).
    pub peers: usize,
}

impl SlotLayout {
    /// Receive slots posted per connection.
    pub fn recv_slots(&self) -> u32 {
        self.slots + CONTROL_SLOTS
    }

    /// Message bytes one data frame carries.
    pub fn payload_bytes(&self) -> usize {
        self.slot_bytes - HEADER_BYTES
    }

    fn recv_bytes(&self) -> usize {
        self.recv_slots() as usize * self.slot_bytes
    }

    /// Bytes of one connection's send area.
    pub fn send_area_bytes(&self) -> usize {
        self.slots as usize * self.slot_bytes + CONTROL_SLOTS as usize * HEADER_BYTES
    }

    fn per_peer_bytes(&self) -> usize {
        self.recv_bytes() + self.send_area_bytes()
    }

    /// Bytes of the whole region (`None` if it overflows).
    pub fn total_bytes(&self) -> Option<usize> {
        let recv = (self.recv_slots() as usize).checked_mul(self.slot_bytes)?;
        let send = (self.slots as usize)
            .checked_mul(self.slot_bytes)?
            .checked_add(CONTROL_SLOTS as usize * HEADER_BYTES)?;
        recv.checked_add(send)?.checked_mul(self.peers)
    }

    /// The region's bytes of receive slot `slot` of connection `index`.
    pub fn recv_range(&self, index: usize, slot: u32) -> Range<usize> {
        assert!(index < self.peers && slot < self.recv_slots());
        let start = index * self.per_peer_bytes() + slot as usize * self.slot_bytes;
        start..start + self.slot_bytes
    }

    /// The region's bytes of connection `index`'s send area.
    pub fn send_area(&self, index: usize) -> Range<usize> {
        assert!(index < self.peers);
        let start = index * self.per_peer_bytes() + self.recv_bytes();
        start..start + self.send_area_bytes()
    }

    /// Where `slot` starts within a send area, and how many bytes it holds.
    pub fn send_slot(&self, slot: SendSlot) -> (usize, usize) {
        match slot {
            SendSlot::Data(s) => {
                assert!(s < self.slots);
                (s as usize * self.slot_bytes, self.slot_bytes)
            }
            SendSlot::Control(c) => {
                assert!(c < CONTROL_SLOTS);
                (
                    self.slots as usize * self.slot_bytes + c as usize * HEADER_BYTES,
                    HEADER_BYTES,
                )
            }
        }
    }
}

/// The connection index of `peer` as seen from `me`: ranks in order with
/// `me` left out.
pub fn peer_index(me: usize, peer: usize) -> usize {
    assert_ne!(me, peer, "no connection to oneself");
    if peer < me { peer } else { peer - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn credits_run_out_and_come_back() {
        let mut c = Credits::new(8);
        assert_eq!(c.threshold(), 4);
        for _ in 0..8 {
            assert!(c.take());
        }
        assert!(!c.take(), "no ninth frame without credits");
        c.on_frame(3, false).unwrap();
        assert_eq!(c.available(), 3);
        for _ in 0..3 {
            c.on_frame(0, true).unwrap();
        }
        assert!(!c.credit_frame_due());
        c.on_frame(0, true).unwrap();
        assert!(c.credit_frame_due());
        assert_eq!(c.hand_back(), 4);
        assert_eq!(c.owed(), 0);
        let e = c.on_frame(6, false).unwrap_err();
        assert!(e.contains("1 more than this side lent"), "{e}");
    }

    #[test]
    fn one_slot_connections_return_every_credit_at_once() {
        let c = Credits::new(1);
        assert_eq!(c.threshold(), 1);
        assert_eq!(Credits::new(3).threshold(), 2);
    }

    #[test]
    fn slots_tile_the_region_without_overlap() {
        let l = SlotLayout {
            slot_bytes: 256,
            slots: 4,
            peers: 3,
        };
        let total = l.total_bytes().unwrap();
        let mut covered = vec![0u8; total];
        for p in 0..3 {
            for s in 0..l.recv_slots() {
                covered[l.recv_range(p, s)].iter_mut().for_each(|b| *b += 1);
            }
            let area = l.send_area(p);
            let slots = (0..4)
                .map(SendSlot::Data)
                .chain((0..CONTROL_SLOTS).map(SendSlot::Control));
            for slot in slots {
                let (off, len) = l.send_slot(slot);
                assert!(off + len <= area.len());
                covered[area.start + off..area.start + off + len]
                    .iter_mut()
                    .for_each(|b| *b += 1);
            }
        }
        assert!(
            covered.iter().all(|&b| b == 1),
            "every byte in exactly one slot"
        );
        assert_eq!(l.payload_bytes(), 256 - HEADER_BYTES);
    }

    #[test]
    fn peer_indices_skip_oneself() {
        assert_eq!(peer_index(2, 0), 0);
        assert_eq!(peer_index(2, 1), 1);
        assert_eq!(peer_index(2, 3), 2);
        assert_eq!(peer_index(0, 1), 0);
    }

    proptest! {
        #[test]
        fn work_ids_round_trip(peer in 0usize..1 << 20, slot in 0u32..1 << 24, kind in 0..3u8) {
            let w = match kind {
                0 => WorkId::Recv { peer, slot },
                1 => WorkId::Send { peer, slot: SendSlot::Data(slot) },
                _ => WorkId::Send { peer, slot: SendSlot::Control(slot) },
            };
            prop_assert_eq!(WorkId::decode(w.encode()), Some(w));
            prop_assert_eq!(w.peer(), peer);
        }
    }
}
