//! Sending within TCP's congestion window ([`super::tcp`]): a flow whose
//! window is full leaves its first link's injection round (it is
//! *parked*) and comes back when an ACK, or a go-back that resends from
//! an earlier packet, opens it. Flows without a window (RDMA, or no
//! transport) are never parked: for them this is the plain round.
//!
//! A parked flow always has something that will wake it: the packets it
//! has in flight are acknowledged (ACK events), or lost, and then its
//! retransmission timer, armed while anything is unacknowledged, goes
//! back.

use algorithms::Time;

use super::{NONE, PacketNetwork};
use crate::event::EventQueue;
use crate::network::OutOfTime;

impl PacketNetwork {
    /// Whether `flow` may send the packet with sequence number `next`:
    /// always, unless its TCP window is full.
    fn window_allows(&self, flow: u32, next: u64) -> bool {
        self.flows[flow]
            .transport
            .as_ref()
            .and_then(|t| t.window)
            .is_none_or(|w| w.allows(next))
    }

    /// `flow`, which has a packet to cut (`head`) and is not in its first
    /// link's round, joins the round and that port may start, if its
    /// window allows; else it is parked until an ACK arrives.
    pub(super) fn enter_round(
        &mut self,
        flow: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        debug_assert_ne!(self.flows[flow].head, NONE, "a flow with work enters");
        let first = self.flows[flow].first_link as usize;
        if self.rejoin(flow, first, self.cut_psn(flow)) {
            self.try_start(first, now, queue)?;
        }
        Ok(())
    }

    /// `flow`, whose next packet to cut is `next`, joins the round of
    /// port `link` if its window allows, or is parked. Whether it joined.
    /// Starts nothing: the caller may be serving that port.
    pub(super) fn rejoin(&mut self, flow: u32, link: usize, next: u64) -> bool {
        let joins = self.window_allows(flow, next);
        self.flows[flow].parked = !joins;
        if joins {
            self.ports[link].flows.push_back(flow);
        }
        joins
    }

    /// A TCP ACK of one packet reaches `flow`'s sender: the window grows,
    /// and a parked flow whose window it opens rejoins its round.
    pub(super) fn ack_arrives(
        &mut self,
        flow: u32,
        serial: u32,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        if !self.flow_with_serial(flow, serial) {
            return Ok(());
        }
        let f = &mut self.flows[flow];
        let window = f
            .transport
            .as_mut()
            .and_then(|t| t.window.as_mut())
            .expect("ACKs are sent for TCP flows");
        window.on_ack();
        if f.parked {
            self.enter_round(flow, now, queue)?;
        }
        Ok(())
    }
}
