//! Priority flow control of the packet model (see the module docs of
//! [`super`], *PFC*): ingress accounting at the receiver of a RoCE link,
//! PAUSE and RESUME frames that take the link's latency to reach its
//! sender.

use algorithms::Time;

use super::{PacketEvent, PacketNetwork};
use crate::event::EventQueue;
use crate::network::OutOfTime;

impl PacketNetwork {
    /// A packet of `bytes` arrives over PFC link `link`: admitted into
    /// the receiver's count for the link, or refused (`false`: dropped)
    /// when it would pass XOFF plus the headroom. Reaching XOFF sends a
    /// PAUSE (once, until a RESUME).
    pub(super) fn admit_ingress(
        &mut self,
        link: usize,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<bool, OutOfTime> {
        let pfc = &mut self.ports[link].pfc;
        let limit = pfc.xoff_bytes.saturating_add(pfc.headroom_bytes);
        if pfc.ingress_bytes > 0 && pfc.ingress_bytes.saturating_add(bytes) > limit {
            return Ok(false);
        }
        pfc.ingress_bytes += bytes;
        if pfc.ingress_bytes >= pfc.xoff_bytes && !pfc.pause_sent {
            pfc.pause_sent = true;
            self.usage[link].pause_frames += 1;
            let at = self.pfc_frame_arrival(link, now)?;
            self.schedule(at, PacketEvent::Pause { link: link as u32 }, queue)?;
        }
        Ok(true)
    }

    /// `bytes` that arrived over PFC link `link` have left the receiver;
    /// falling to XON after a PAUSE sends a RESUME.
    pub(super) fn release_ingress(
        &mut self,
        link: usize,
        bytes: u64,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let pfc = &mut self.ports[link].pfc;
        pfc.ingress_bytes -= bytes;
        if pfc.pause_sent && pfc.ingress_bytes <= pfc.xon_bytes {
            pfc.pause_sent = false;
            let at = self.pfc_frame_arrival(link, now)?;
            self.schedule(at, PacketEvent::Resume { link: link as u32 }, queue)?;
        }
        Ok(())
    }

    /// When a PFC frame for `link` sent now reaches the link's sender: a
    /// MAC control frame goes ahead of queued data, so it takes the
    /// link's latency.
    fn pfc_frame_arrival(&self, link: usize, now: Time) -> Result<Time, OutOfTime> {
        now.checked_plus_ps(self.ports[link].latency_ps)
            .ok_or(OutOfTime)
    }

    /// A PAUSE reaches the sender of `link`: it finishes the packet on
    /// its wire and starts no other until RESUME.
    pub(super) fn pause_arrives(&mut self, link: usize, now: Time) {
        let pfc = &mut self.ports[link].pfc;
        debug_assert!(!pfc.paused, "PAUSE and RESUME alternate");
        pfc.paused = true;
        pfc.paused_since = now;
    }

    /// A RESUME reaches the sender of `link`: it may send again.
    pub(super) fn resume_arrives(
        &mut self,
        link: usize,
        now: Time,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let pfc = &mut self.ports[link].pfc;
        debug_assert!(pfc.paused, "PAUSE and RESUME alternate");
        pfc.paused = false;
        let paused = now.as_ps() - pfc.paused_since.as_ps();
        let usage = &mut self.usage[link];
        usage.paused_ps = usage.paused_ps.saturating_add(paused);
        self.try_start(link, now, queue)
    }
}
