//! [`Placement`]: which vertex each rank of a job runs on.

use super::RouteError;
use crate::graph::{Topology, VertexId};

/// Which vertex each rank runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub(super) ranks: Vec<VertexId>,
}

impl Placement {
    /// Rank `i` on the `i`-th endpoint, for `world_size` ranks.
    pub fn in_order(topology: &Topology, world_size: usize) -> Result<Placement, RouteError> {
        let endpoints = topology.endpoints();
        if world_size == 0 {
            return Err(RouteError::Placement(
                "a placement needs at least one rank".into(),
            ));
        }
        if world_size > endpoints.len() {
            return Err(RouteError::Placement(format!(
                "{world_size} ranks do not fit: the topology has {} endpoints (GPUs and CPUs)",
                endpoints.len()
            )));
        }
        Ok(Placement {
            ranks: endpoints[..world_size].to_vec(),
        })
    }

    /// Rank `i` on endpoint number `map[i]` (an index into
    /// [`Topology::endpoints`]); each endpoint at most once.
    pub fn from_endpoints(topology: &Topology, map: &[usize]) -> Result<Placement, RouteError> {
        let endpoints = topology.endpoints();
        if map.is_empty() {
            return Err(RouteError::Placement(
                "a placement needs at least one rank".into(),
            ));
        }
        let mut used_by: Vec<Option<usize>> = vec![None; endpoints.len()];
        let mut ranks = Vec::with_capacity(map.len());
        for (rank, &e) in map.iter().enumerate() {
            let Some(&vertex) = endpoints.get(e) else {
                return Err(RouteError::Placement(format!(
                    "rank {rank}: endpoint {e} is out of range (the topology has {} endpoints)",
                    endpoints.len()
                )));
            };
            if let Some(other) = used_by[e] {
                return Err(RouteError::Placement(format!(
                    "rank {rank}: endpoint {e} ({}) is already used by rank {other}",
                    topology.vertex(vertex).name
                )));
            }
            used_by[e] = Some(rank);
            ranks.push(vertex);
        }
        Ok(Placement { ranks })
    }

    /// The vertex rank `rank` runs on.
    pub fn vertex(&self, rank: usize) -> VertexId {
        self.ranks[rank]
    }

    /// Every rank's vertex, indexed by rank.
    pub fn vertices(&self) -> &[VertexId] {
        &self.ranks
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
