//! Preset topologies: DGX A100/H100 and HGX H200/H20/B200/B300 nodes, a
//! PCIe box, a rail-optimised fat-tree of such nodes, GB200/GB300 NVL72
//! racks and clusters of them, an Ethernet/RoCE leaf-spine cluster, a
//! cluster of multi-socket CPU hosts with a rank per core, a ring and a
//! 2-D torus.
//!
//! Each preset is a function taking a parameter struct (with a `Default`)
//! and returning `Result<Topology, TopologyError>`; a parameter out of
//! range is a [`TopologyError::Parameter`] naming it. Each function's docs
//! give its exact vertex and link counts (full-duplex links, as
//! [`Topology::link_count`] counts them) as formulas of the parameters.
//!
//! Links take their parameters from [`LinkKind::defaults`] and vertices
//! their forwarding latency from
//! [`VertexKind::default_forward_latency_ps`](crate::VertexKind::default_forward_latency_ps),
//! where the sources are documented.
//!
//! Ranks are placed on [`Topology::endpoints`] in insertion order, so every
//! preset inserts its GPUs (or hosts) in their natural numbering: node 0's
//! GPUs 0..G-1, then node 1's, and so on. The default placement is
//! therefore node-major.
//!
//! Names are unique and readable: `node3/gpu5`, `node3/nic5`,
//! `node0/nvswitch`, `node0/pcie1`, `node0/socket0`, `leaf2`, `spine0`,
//! `host4`, `host4/nic`, `gpu7`.
//!
//! - [`dgx`]: [`dgx_a100`], [`dgx_h100`], [`dgx_node`] (any
//!   [`NodeStyle`], one or two NICs per GPU) and the node builder
//!   [`add_dgx_node`] the fat-tree reuses.
//! - [`nvl72`]: [`nvl72_rack`] and [`nvl72_cluster`], GB200/GB300 NVL72
//!   racks (72 GPUs in one NVLink domain) joined by a rail-optimised Clos.
//! - [`cpu_cluster`](mod@cpu_cluster): hosts of CPU sockets with a rank per
//!   core, sharing each socket's memory bandwidth, on a leaf-spine.
//! - [`pcie_box`](mod@pcie_box): GPUs under PCIe switches under CPU sockets.
//! - [`clos`]: [`fat_tree`] and [`leaf_spine`], two-level Clos networks,
//!   and their rotations [`fat_tree_rotation`] and [`leaf_spine_rotation`].
//! - [`direct`]: [`ring`] and [`torus2d`], GPUs linked to each other, and
//!   their rotations [`ring_rotation`] and [`torus2d_rotation`].
//!
//! **Rotations.** The presets with a symmetry that moves every rank on by
//! the same number of ranks build it as a checked [`Rotation`](crate::Rotation)
//! from their parameters, the topology and the placement (the fat-tree by
//! one node, or one leaf's nodes; the leaf-spine by one leaf's hosts; the
//! ring by one GPU; the torus by one row). A placement that does not rotate
//! with it, or parameters that have no such symmetry, are a
//! [`TopologyError::Symmetry`].

pub mod clos;
pub mod cpu_cluster;
pub mod dgx;
pub mod direct;
pub mod nvl72;
pub mod pcie_box;
mod symmetry;

pub use clos::{
    FatTree, LeafSpine, fat_tree, fat_tree_node_turn, fat_tree_partial_node_turn,
    fat_tree_rotation, leaf_spine, leaf_spine_rotation,
};
pub use cpu_cluster::{CpuCluster, CpuModel, cpu_cluster, cpu_cluster_rotation};
pub use dgx::{DgxNode, DgxNodeIds, NodeStyle, add_dgx_node, dgx_a100, dgx_h100, dgx_node};
pub use direct::{RingParams, Torus, ring, ring_rotation, torus2d, torus2d_rotation};
pub use nvl72::{Nvl72Cluster, RackStyle, nvl72_cluster, nvl72_cluster_rotation, nvl72_rack};
pub use pcie_box::{PcieBox, pcie_box};

use crate::TopologyError;
#[cfg(doc)]
use crate::{LinkKind, Topology};

/// The most vertices a preset builds: a bound against typing mistakes
/// (`nodes = 1000000`) that would otherwise allocate without limit.
pub const MAX_PRESET_VERTICES: usize = 1 << 16;

/// A [`TopologyError::Parameter`] with `message`.
fn parameter(message: impl Into<String>) -> TopologyError {
    TopologyError::Parameter(message.into())
}

/// Checks a vertex count computed with checked arithmetic (`None` means it
/// overflowed) against [`MAX_PRESET_VERTICES`].
fn check_size(preset: &str, vertices: Option<usize>) -> Result<(), TopologyError> {
    match vertices {
        Some(v) if v <= MAX_PRESET_VERTICES => Ok(()),
        _ => Err(parameter(format!(
            "{preset}: the parameters give more than {MAX_PRESET_VERTICES} vertices"
        ))),
    }
}

#[cfg(test)]
pub(crate) mod check {
    //! Structural checks every preset's tests share.

    use std::collections::BTreeSet;

    use petgraph::algo::connected_components;

    use crate::Topology;

    /// The underlying undirected graph is connected, no two vertices share
    /// a name, and every link direction has its reverse.
    pub(crate) fn well_formed(t: &Topology) {
        assert_eq!(connected_components(t.graph()), 1, "connected");
        let names: BTreeSet<&str> = t.vertex_ids().map(|v| t.vertex(v).name.as_str()).collect();
        assert_eq!(names.len(), t.vertex_count(), "unique names");
        for l in t.link_ids() {
            let (a, b) = t.ends(l);
            assert_eq!(t.ends(t.reverse(l)), (b, a));
        }
    }

    /// The bandwidth of the link between the vertices named `a` and `b`.
    pub(crate) fn bandwidth(t: &Topology, a: &str, b: &str) -> f64 {
        let (a, b) = (t.find(a).expect("a exists"), t.find(b).expect("b exists"));
        let l = t
            .out_links(a)
            .into_iter()
            .find(|&l| t.ends(l).1 == b)
            .expect("a and b are linked");
        t.link(l).bandwidth_bytes_per_s
    }

    /// The number of full-duplex links between the vertices named `a` and `b`.
    pub(crate) fn links_between(t: &Topology, a: &str, b: &str) -> usize {
        let (a, b) = (t.find(a).expect("a exists"), t.find(b).expect("b exists"));
        t.out_links(a)
            .into_iter()
            .filter(|&l| t.ends(l).1 == b)
            .count()
    }
}
