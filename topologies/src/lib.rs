//! Hardware descriptions: which ranks are connected by which links.
//!
//! This crate is data, with no simulation logic. For now it holds the one
//! topology the simulator's first link model needs: a full mesh in which
//! every ordered pair of ranks has its own full-duplex link with the same
//! [`LinkSpec`]. Switches, NVLink/PCIe/InfiniBand/RoCE link kinds, presets
//! and routing on petgraph come with the hardware-models work.
//!
//! # Map of the crate
//! - [`LinkSpec`]: the latency and bandwidth of one link direction.
//! - [`FullMesh`]: `N` ranks, one dedicated link per ordered pair.
//! - [`duration_ps`]: how long moving some bytes at some rate takes.

/// Why a topology or link description is invalid.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// A bandwidth that is zero, negative or not a number.
    #[error("bandwidth must be a positive number of bytes per second, got {0}")]
    Bandwidth(f64),
    /// A topology with no ranks.
    #[error("a topology needs at least one rank")]
    NoRanks,
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
        })
    }

    /// Time to put `bytes` on the wire, in picoseconds; see [`duration_ps`].
    pub fn serialization_ps(&self, bytes: u64) -> u64 {
        duration_ps(bytes, self.bandwidth_bytes_per_s)
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
