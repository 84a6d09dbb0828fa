//! Hardware descriptions: which devices are connected by which links, and
//! which way traffic between two ranks goes.
//!
//! This crate is data, with no simulation logic: the simulator's link
//! models read a [`Topology`] and its [`Route`]s.
//!
//! # Map of the crate
//! - [`vertex`]: devices, [`Vertex`] and [`VertexKind`] (GPU, CPU, NIC,
//!   NVSwitch, PCIe switch, socket, leaf, spine).
//! - [`kind`]: link technologies, [`LinkKind`] (NVLink, PCIe, InfiniBand,
//!   RoCE, Ethernet, SMP), and the default [`Link`] parameters with their
//!   sources.
//! - [`graph`]: the hardware graph, [`Topology`], on petgraph: vertices and
//!   link directions ([`LinkId`]).
//! - [`presets`]: DGX A100/H100 nodes, a PCIe box, a rail-optimised
//!   fat-tree, a leaf-spine cluster, a ring and a 2-D torus.
//! - [`nvsmi`]: importer for the matrix `nvidia-smi topo -m` prints.
//! - [`rotation`]: [`Rotation`], a symmetry of a topology and its ranks
//!   (symmetric routes, folded runs).
//! - [`routing`]: rank placement, shortest-path or up*/down* routes
//!   ([`Routing`]) with deterministic ECMP, cached per flow.
//! - [`LinkSpec`] and [`FullMesh`]: the ideal model's one-link-per-pair mesh.

pub mod graph;
pub mod kind;
pub mod nvsmi;
pub mod presets;
pub mod rotation;
pub mod routing;
pub mod size_bandwidth;
pub mod vertex;

pub use graph::{LinkId, Topology, VertexId};
pub use kind::{IbRate, Link, LinkKind};
pub use rotation::Rotation;
pub use routing::{Placement, Route, Router, Routing};
pub use size_bandwidth::SizeBandwidth;
pub use vertex::{Vertex, VertexKind};

/// Why a topology or link description is invalid.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// A bandwidth that is zero, negative or not a number.
    #[error("bandwidth must be a positive number of bytes per second, got {0}")]
    Bandwidth(f64),
    /// A link with a zero MTU.
    #[error("a link's MTU must be at least one byte")]
    Mtu,
    /// An egress buffer that cannot hold one packet.
    #[error("a link's buffer ({buffer_bytes} B) must hold at least one MTU packet ({mtu_bytes} B)")]
    Buffer {
        /// The buffer.
        buffer_bytes: u64,
        /// The MTU.
        mtu_bytes: u64,
    },
    /// A latency or serialization time beyond [`graph::HOP_PS_MAX`].
    #[error("{0}")]
    TooSlow(String),
    /// A topology with no ranks.
    #[error("a topology needs at least one rank")]
    NoRanks,
    /// Two vertices with one name.
    #[error("two vertices are named {0:?}")]
    DuplicateVertex(String),
    /// A link from a vertex to itself.
    #[error("a link from {0:?} to itself")]
    SelfLink(String),
    /// A preset parameter out of range.
    #[error("{0}")]
    Parameter(String),
    /// A map that is not a symmetry of the topology and its ranks (see
    /// [`Rotation`]).
    #[error("{0}")]
    Symmetry(String),
}

/// The parameters of one direction of a link: a message of `b` bytes
/// occupies the link for `b / bandwidth` and arrives `latency` after its
/// last byte left.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Propagation plus fixed per-message latency, in picoseconds
    /// (the alpha of the alpha-beta model).
    pub latency_ps: u64,
    /// Bandwidth per direction in bytes per second (1/beta).
    pub bandwidth_bytes_per_s: f64,
    /// Ideal links only: the sending rank's software overhead per message
    /// in picoseconds, paid one message after another on the sender
    /// before the message reaches the wire (LogP's `o`; 0 by default).
    pub overhead_ps: u64,
    /// Ideal links only: the receiving rank's software time per message
    /// in picoseconds, paid one message after another on the receiver in
    /// the order the messages arrive, before a receive can take the
    /// message (the host's wake-up and bookkeeping per step of a
    /// collective; 0 by default).
    pub receive_overhead_ps: u64,
    /// Ideal links only: each rank's total sending rate, shared by all
    /// its links (the memory bus or interface the concurrent flows of a
    /// rank share), in bytes per second; `None`: every pair's link is
    /// independent.
    pub injection_bytes_per_s: Option<f64>,
    /// Ideal links only: the ranks in racks of consecutive ranks joined by
    /// one shared link per direction between each two racks (a rate-limited
    /// uplink); `None`: every pair's link is independent.
    pub racks: Option<RackLink>,
    /// Ideal links only: one rate shared by every message between the
    /// ranks, in bytes per second (the CPUs and memory of the one machine
    /// the ranks run on, when their copies, not their links, are what
    /// limits many flows at once); `None`: nothing shared by all ranks.
    pub shared_bytes_per_s: Option<f64>,
    /// Ideal links only, with `shared_bytes_per_s`: how many consecutive
    /// ranks make one machine with its own shared rate (ranks `0..n`,
    /// `n..2n`, ...; a message takes its sender's machine's share), so that
    /// a world larger than the calibrated machine is made of copies of
    /// it; `None`: all ranks are one machine.
    pub shared_machine_ranks: Option<usize>,
    /// Ideal links only: a pair bandwidth that depends on the message
    /// size, used instead of `bandwidth_bytes_per_s` for the time a
    /// message holds its link; `None`: one bandwidth for every size.
    pub size_bandwidth: Option<SizeBandwidth>,
}

/// Racks of `ranks_per_rack` consecutive ranks (rank `r` in rack
/// `r / ranks_per_rack`); every message between two racks also crosses
/// the one link of its direction between them, which carries
/// `bandwidth_bytes_per_s` and adds `latency_ps`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RackLink {
    /// Ranks of one rack (at least 1).
    pub ranks_per_rack: u32,
    /// The shared link's rate per direction, bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// Latency the shared link adds to a message crossing it, ps.
    pub latency_ps: u64,
}

impl RackLink {
    /// The rack of `rank`.
    pub fn rack_of(&self, rank: usize) -> u32 {
        (rank / self.ranks_per_rack.max(1) as usize) as u32
    }
}

impl LinkSpec {
    /// A link spec, checking that the bandwidth is positive and finite.
    pub fn new(latency_ps: u64, bandwidth_bytes_per_s: f64) -> Result<LinkSpec, TopologyError> {
        if !(bandwidth_bytes_per_s.is_finite() && bandwidth_bytes_per_s > 0.0) {
            return Err(TopologyError::Bandwidth(bandwidth_bytes_per_s));
        }
        Ok(LinkSpec {
            latency_ps,
            bandwidth_bytes_per_s,
            overhead_ps: 0,
            receive_overhead_ps: 0,
            injection_bytes_per_s: None,
            racks: None,
            shared_bytes_per_s: None,
            shared_machine_ranks: None,
            size_bandwidth: None,
        })
    }

    /// The same link with a per-message sender overhead of `overhead_ps`.
    pub fn with_overhead_ps(self, overhead_ps: u64) -> LinkSpec {
        LinkSpec {
            overhead_ps,
            ..self
        }
    }

    /// The same link with a per-message receiver overhead of
    /// `receive_overhead_ps`.
    pub fn with_receive_overhead_ps(self, receive_overhead_ps: u64) -> LinkSpec {
        LinkSpec {
            receive_overhead_ps,
            ..self
        }
    }

    /// The same link with each rank's sends sharing
    /// `bytes_per_s`, checked positive and finite.
    pub fn with_injection(self, bytes_per_s: f64) -> Result<LinkSpec, TopologyError> {
        if !(bytes_per_s.is_finite() && bytes_per_s > 0.0) {
            return Err(TopologyError::Bandwidth(bytes_per_s));
        }
        Ok(LinkSpec {
            injection_bytes_per_s: Some(bytes_per_s),
            ..self
        })
    }

    /// The same link with ranks in racks joined by `racks`' shared
    /// links, checked (a positive, finite rate; at least one rank a rack).
    pub fn with_racks(self, racks: RackLink) -> Result<LinkSpec, TopologyError> {
        let rate = racks.bandwidth_bytes_per_s;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(TopologyError::Bandwidth(rate));
        }
        if racks.ranks_per_rack == 0 {
            return Err(TopologyError::NoRanks);
        }
        Ok(LinkSpec {
            racks: Some(racks),
            ..self
        })
    }

    /// The same link with every message sharing `bytes_per_s` (see
    /// [`LinkSpec::shared_bytes_per_s`]), checked positive and finite.
    pub fn with_shared(self, bytes_per_s: f64) -> Result<LinkSpec, TopologyError> {
        if !(bytes_per_s.is_finite() && bytes_per_s > 0.0) {
            return Err(TopologyError::Bandwidth(bytes_per_s));
        }
        Ok(LinkSpec {
            shared_bytes_per_s: Some(bytes_per_s),
            ..self
        })
    }

    /// The same link with its shared rate (if any) shared by each `ranks`
    /// consecutive ranks (see [`LinkSpec::shared_machine_ranks`]); at
    /// least 1.
    pub fn with_shared_machine_ranks(self, ranks: usize) -> LinkSpec {
        LinkSpec {
            shared_machine_ranks: Some(ranks.max(1)),
            ..self
        }
    }

    /// The same link with a bandwidth that depends on the message size.
    pub fn with_size_bandwidth(self, curve: SizeBandwidth) -> LinkSpec {
        LinkSpec {
            size_bandwidth: Some(curve),
            ..self
        }
    }

    /// Time to put `bytes` on the wire, in picoseconds (at the size's
    /// rate where the bandwidth depends on the size); see [`duration_ps`].
    pub fn serialization_ps(&self, bytes: u64) -> u64 {
        match &self.size_bandwidth {
            Some(curve) => duration_ps(bytes, curve.rate(bytes)),
            None => duration_ps(bytes, self.bandwidth_bytes_per_s),
        }
    }
}

pub use algorithms::cost::duration_ps;

/// `world_size` ranks where each ordered pair `(a, b)`, `a != b`, has its
/// own link `a -> b` with the same [`LinkSpec`]. A rank sending to itself
/// uses no link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FullMesh {
    /// Number of ranks.
    pub world_size: usize,
    /// Every link's parameters.
    pub link: LinkSpec,
}

impl FullMesh {
    /// A full mesh of `world_size` ranks (at least one).
    pub fn new(world_size: usize, link: LinkSpec) -> Result<FullMesh, TopologyError> {
        if world_size == 0 {
            return Err(TopologyError::NoRanks);
        }
        Ok(FullMesh { world_size, link })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_rounds_up_exactly() {
        let l = LinkSpec::new(0, 25e9).unwrap(); // 25 GB/s: 40 ps per byte
        assert_eq!(l.serialization_ps(1), 40);
        assert_eq!(l.serialization_ps(1 << 20), 40 << 20);
        let odd = LinkSpec::new(0, 3e12).unwrap();
        assert_eq!(odd.serialization_ps(1), 1); // a third of a ps rounds up
        assert_eq!(odd.serialization_ps(0), 0);
    }

    #[test]
    fn bad_parameters_are_rejected() {
        assert!(LinkSpec::new(0, 0.0).is_err());
        assert!(LinkSpec::new(0, -1.0).is_err());
        assert!(LinkSpec::new(0, f64::NAN).is_err());
        assert!(FullMesh::new(0, LinkSpec::new(0, 1.0).unwrap()).is_err());
    }
}
