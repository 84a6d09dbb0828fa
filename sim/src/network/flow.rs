//! The flow-level network model. (To be written: see the API below.)

use std::sync::Arc;

use algorithms::Time;
use topologies::Topology;

use super::{LinkSample, LinkUsage, OutOfTime, Transfer};
use crate::event::{EventQueue, MessageId};

/// An event of the flow-level model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// Placeholder.
    Placeholder(u32),
}

/// The flow-level model of one run.
#[derive(Debug)]
pub struct FlowNetwork {
    topology: Arc<Topology>,
}

impl FlowNetwork {
    /// A model of `topology`; with `sample_links` it records every change
    /// of a link's backlog for the trace.
    pub fn new(topology: Arc<Topology>, sample_links: bool) -> FlowNetwork {
        let _ = sample_links;
        FlowNetwork { topology }
    }

    /// Starts sending a message at `now`.
    pub fn start(
        &mut self,
        now: Time,
        transfer: Transfer,
        queue: &mut EventQueue,
    ) -> Result<(), OutOfTime> {
        let _ = (now, transfer, queue, &self.topology);
        todo!()
    }

    /// Applies one of this model's events at `now`, pushing the messages
    /// that have fully arrived onto `delivered`.
    pub fn handle(
        &mut self,
        now: Time,
        event: FlowEvent,
        queue: &mut EventQueue,
        delivered: &mut Vec<MessageId>,
    ) -> Result<(), OutOfTime> {
        let _ = (now, event, queue, delivered);
        todo!()
    }

    /// Counters per link direction, indexed by `LinkId::index`.
    pub fn usage(&self) -> &[LinkUsage] {
        todo!()
    }

    /// The backlog samples recorded so far (empty unless sampling).
    pub fn take_samples(&mut self) -> Vec<LinkSample> {
        todo!()
    }
}
