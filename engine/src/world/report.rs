//! What one run's world tells its report: the engine's counters, the
//! messages still undelivered, the links down or waiting in a cycle, the
//! link counters and timeline, and the trace.

use algorithms::Time;

use super::{EngineStats, World};
use crate::deadlock::StuckMessage;
use crate::links::LinkStats;
use crate::network::packet::Stall;
use crate::network::{LinkUsage, NetworkConfig};
use crate::trace::TraceLog;

impl World {
    /// Counters so far.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            events: self.events,
            links: LinkStats {
                links_used: self.network.links_used(),
                ..self.traffic
            },
        }
    }

    /// The cycle of link directions each waiting on the next (a credit
    /// or PFC deadlock), by name; empty if there is none.
    pub fn buffer_cycle(&self) -> Vec<(String, Stall)> {
        self.network.buffer_cycle()
    }

    /// The link directions that are down now (scheduled faults), by name.
    pub fn down_links(&self) -> Vec<String> {
        let NetworkConfig::Topology(t) = &self.config.network else {
            return Vec::new();
        };
        let mut factor = vec![1.0f64; t.topology.link_direction_count()];
        for c in t.changes.iter().filter(|c| c.time <= self.now) {
            factor[c.link.index()] = c.bandwidth_factor;
        }
        t.topology
            .link_ids()
            .filter(|l| factor[l.index()] == 0.0)
            .map(|l| t.topology.link_name(l))
            .collect()
    }

    /// The messages sent and not yet delivered, in slot order.
    pub fn undelivered(&self) -> Vec<StuckMessage> {
        self.in_flight
            .iter()
            .map(|m| StuckMessage {
                src: m.src,
                dst: m.dst,
                bytes: m.payload.shape().bytes(),
            })
            .collect()
    }

    /// Per-link-direction counters of a topology model, with pauses still
    /// in force counted up to `until`.
    pub fn link_usage(&self, until: Time) -> Option<Vec<LinkUsage>> {
        self.network.usage(until)
    }

    /// Takes the link traffic per time bin, if the network recorded it.
    pub fn take_timeline(&mut self) -> Option<crate::network::timeline::LinkTimeline> {
        self.network.take_timeline()
    }

    /// Takes the trace recorded so far, with the network's link samples.
    pub fn take_trace(&mut self) -> Option<TraceLog> {
        let mut trace = self.trace.take()?;
        trace.links = self.network.take_samples();
        if let NetworkConfig::Topology(t) = &self.config.network {
            let now = self.now;
            trace.link_changes = t
                .changes
                .iter()
                .filter(|c| c.time <= now)
                .copied()
                .collect();
        }
        if trace.links.len() > crate::network::LINK_SAMPLES_MAX {
            trace.links.truncate(crate::network::LINK_SAMPLES_MAX);
            trace.truncated = true;
        }
        Some(trace)
    }
}
