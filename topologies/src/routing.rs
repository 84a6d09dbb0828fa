//! Rank placement and routing.
//!
//! (To be written by the routing work: see the API below.)

use std::sync::Arc;

use crate::graph::{LinkId, Topology, VertexId};

/// Which vertex each rank runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    ranks: Vec<VertexId>,
}

/// The link directions a flow crosses, source first.
pub type Route = Arc<[LinkId]>;

/// Why ranks cannot be placed or routed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// Two ranks with no path between them.
    #[error("ranks {a} ({a_name}) and {b} ({b_name}) are not connected")]
    Unconnected {
        /// One rank.
        a: usize,
        /// Its vertex name.
        a_name: String,
        /// The other rank.
        b: usize,
        /// Its vertex name.
        b_name: String,
    },
    /// A placement that does not fit the topology.
    #[error("{0}")]
    Placement(String),
}

impl Placement {
    /// Rank `i` on the `i`-th endpoint, for `world_size` ranks.
    pub fn in_order(topology: &Topology, world_size: usize) -> Result<Placement, RouteError> {
        let _ = (topology, world_size);
        todo!()
    }

    /// Rank `i` on endpoint number `map[i]` (an index into
    /// [`Topology::endpoints`]); each endpoint at most once.
    pub fn from_endpoints(topology: &Topology, map: &[usize]) -> Result<Placement, RouteError> {
        let _ = (topology, map);
        todo!()
    }

    /// The vertex rank `rank` runs on.
    pub fn vertex(&self, rank: usize) -> VertexId {
        self.ranks[rank]
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Whether no rank is placed.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
}

/// Computes and caches routes.
#[derive(Debug)]
pub struct Router {
    topology: Arc<Topology>,
    seed: u64,
}

impl Router {
    /// A router over `topology`; `seed` salts the ECMP hash.
    pub fn new(topology: Arc<Topology>, seed: u64) -> Router {
        Router { topology, seed }
    }

    /// The route of flow `flow` from `src` to `dst`.
    pub fn route(&mut self, src: VertexId, dst: VertexId, flow: u64) -> Result<Route, RouteError> {
        let _ = (&self.topology, self.seed, src, dst, flow);
        todo!()
    }

    /// Checks every pair of placed ranks is connected.
    pub fn check_connected(&mut self, placement: &Placement) -> Result<(), RouteError> {
        let _ = placement;
        todo!()
    }
}
