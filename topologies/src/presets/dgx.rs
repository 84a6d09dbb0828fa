//! DGX A100 and DGX H100 nodes, and the node builder the fat-tree reuses.
//!
//! ```text
//!            socket0 ======= smp x4 ======= socket1
//!            /     \                        /     \
//!        pcie0     pcie1                pcie2     pcie3      (x16 links)
//!        / | \ \    ...                  ...       ...
//!    gpu0 gpu1 nic0 nic1
//!      \    \
//!       nvswitch  (every GPU: one bundled NVLink link)
//! ```
//!
//! **The NVSwitch chips are one vertex.** A DGX A100 has six NVSwitch
//! chips and a DGX H100 four, and each GPU spreads its NVLinks over all of
//! them. A GPU's traffic is sprayed over all of its NVLinks, so the node
//! behaves as one non-blocking switch with a bundled link per GPU;
//! modelling the chips separately would let per-flow ECMP pin a flow to
//! one chip's share of the links, which the hardware does not do.
//!
//! Per node (sources in [`crate::kind`] and [`crate::vertex`]):
//!
//! | | DGX A100 | DGX H100 |
//! |---|---|---|
//! | GPU to NVSwitch | 12 x NVLink 3 = 240 GB/s per direction at NCCL's 20 GB/s per link (300 signalling) | 18 x NVLink 4 = 370.8 GB/s per direction at NCCL's 20.6 GB/s per link (450 signalling) |
//! | NIC (one per GPU) | ConnectX-6, InfiniBand HDR 200 Gb/s | ConnectX-7, InfiniBand NDR 400 Gb/s |
//! | PCIe switches | 4 x Gen4 (Broadcom PEX88000 class, 105 ns) | 4 x Gen5 (PEX89000 class, 115 ns) |
//! | per PCIe switch | 2 GPUs, 2 NICs, 1 uplink to a socket, all x16 | same |
//! | CPUs | 2 x AMD EPYC 7742, joined by xGMI | 2 x Intel Xeon Platinum 8480C, joined by UPI 2.0 |
//!
//! The sockets are joined by one bundle of [`SMP_LINKS`] `smp` links
//! (four UPI links per Xeon 8480C; the EPYC pair also supports four xGMI
//! links, and the DGX A100 guide does not say how many are wired).
//! In a single-node preset the NICs have no network link: they exist for
//! [`fat_tree`](super::fat_tree) to attach.

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::kind::{IbRate, Link, LinkKind};
use crate::vertex::{PCIE4_SWITCH_LATENCY_PS, PCIE5_SWITCH_LATENCY_PS, Vertex, VertexKind};

use super::{check_size, parameter};

/// Inter-socket links per node, bundled into one `smp` link.
pub const SMP_LINKS: u32 = 4;

/// Which DGX generation a node copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeStyle {
    /// DGX A100: NVLink 3, PCIe Gen4, ConnectX-6 HDR.
    A100,
    /// DGX H100: NVLink 4, PCIe Gen5, ConnectX-7 NDR.
    H100,
}

impl NodeStyle {
    /// A GPU's bundled link to the NVSwitch complex.
    pub fn nvlink(self) -> Link {
        match self {
            NodeStyle::A100 => Link::bundle(LinkKind::NvLink { generation: 3 }, 12),
            NodeStyle::H100 => Link::bundle(LinkKind::NvLink { generation: 4 }, 18),
        }
    }

    /// The x16 PCIe link of every GPU, NIC and PCIe switch uplink.
    pub fn pcie(self) -> LinkKind {
        let generation = match self {
            NodeStyle::A100 => 4,
            NodeStyle::H100 => 5,
        };
        LinkKind::Pcie {
            generation,
            width: 16,
        }
    }

    /// The network port of the node's NICs: HDR for A100, NDR for H100.
    pub fn nic(self) -> LinkKind {
        match self {
            NodeStyle::A100 => LinkKind::InfiniBand(IbRate::Hdr),
            NodeStyle::H100 => LinkKind::InfiniBand(IbRate::Ndr),
        }
    }

    /// The forwarding latency of the node's PCIe switches.
    pub fn pcie_switch_latency_ps(self) -> u64 {
        match self {
            NodeStyle::A100 => PCIE4_SWITCH_LATENCY_PS,
            NodeStyle::H100 => PCIE5_SWITCH_LATENCY_PS,
        }
    }
}

/// The parameters of one DGX-style node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DgxNode {
    /// Generation (default H100).
    pub style: NodeStyle,
    /// GPUs, 1..=8 (default 8); the node has as many NICs and
    /// `ceil(gpus / 2)` PCIe switches.
    pub gpus: usize,
}

impl Default for DgxNode {
    fn default() -> DgxNode {
        DgxNode {
            style: NodeStyle::H100,
            gpus: 8,
        }
    }
}

impl DgxNode {
    /// Checks `gpus` is in 1..=8.
    fn check(&self) -> Result<(), TopologyError> {
        if !(1..=8).contains(&self.gpus) {
            return Err(parameter(format!(
                "gpus per node must be 1..=8, got {}",
                self.gpus
            )));
        }
        Ok(())
    }

    /// Vertices of one node: `2G + ceil(G/2) + 3`.
    pub(crate) fn vertex_count(&self) -> usize {
        2 * self.gpus + self.gpus.div_ceil(2) + 3
    }
}

/// The vertices [`add_dgx_node`] added, for callers that attach more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DgxNodeIds {
    /// GPU `g` is `gpus[g]`.
    pub gpus: Vec<VertexId>,
    /// NIC `g` (next to GPU `g`, under the same PCIe switch) is `nics[g]`.
    pub nics: Vec<VertexId>,
    /// The NVSwitch complex.
    pub nvswitch: VertexId,
    /// PCIe switch `p` holds GPUs and NICs `2p` and `2p + 1`.
    pub pcie_switches: Vec<VertexId>,
    /// The two CPU sockets; PCIe switch `p` hangs off `sockets[p / 2]`.
    pub sockets: [VertexId; 2],
}

/// Adds one DGX-style node to `topology`, its vertices named
/// `<name>/gpu<g>`, `<name>/nic<g>`, `<name>/nvswitch`, `<name>/pcie<p>`
/// and `<name>/socket<s>`, the GPUs inserted first in order.
///
/// With `G = node.gpus` it adds `2G + ceil(G/2) + 3` vertices (G GPUs,
/// G NICs, one NVSwitch, `ceil(G/2)` PCIe switches, 2 sockets) and
/// `3G + ceil(G/2) + 1` links (G NVLink bundles, G GPU and G NIC PCIe
/// links, `ceil(G/2)` switch uplinks, one SMP bundle).
pub fn add_dgx_node(
    topology: &mut Topology,
    name: &str,
    node: &DgxNode,
) -> Result<DgxNodeIds, TopologyError> {
    node.check()?;
    let style = node.style;
    let pcie = Link::bundle(style.pcie(), 1);
    let vertex = |suffix: String, kind: VertexKind| {
        Vertex::with_default_latency(format!("{name}/{suffix}"), kind)
    };

    let mut gpus = Vec::with_capacity(node.gpus);
    for g in 0..node.gpus {
        gpus.push(topology.add_vertex(vertex(format!("gpu{g}"), VertexKind::Gpu))?);
    }
    let nvswitch = topology.add_vertex(vertex("nvswitch".into(), VertexKind::NvSwitch))?;
    let mut pcie_switches = Vec::with_capacity(node.gpus.div_ceil(2));
    for p in 0..node.gpus.div_ceil(2) {
        let v = vertex(format!("pcie{p}"), VertexKind::PcieSwitch)
            .with_forward_latency_ps(style.pcie_switch_latency_ps());
        pcie_switches.push(topology.add_vertex(v)?);
    }
    let mut nics = Vec::with_capacity(node.gpus);
    for g in 0..node.gpus {
        nics.push(topology.add_vertex(vertex(format!("nic{g}"), VertexKind::Nic))?);
    }
    let sockets = [
        topology.add_vertex(vertex("socket0".into(), VertexKind::Socket))?,
        topology.add_vertex(vertex("socket1".into(), VertexKind::Socket))?,
    ];

    for g in 0..node.gpus {
        topology.add_link(gpus[g], nvswitch, style.nvlink())?;
        topology.add_link(gpus[g], pcie_switches[g / 2], pcie)?;
        topology.add_link(nics[g], pcie_switches[g / 2], pcie)?;
    }
    for (p, &switch) in pcie_switches.iter().enumerate() {
        topology.add_link(switch, sockets[p / 2], pcie)?;
    }
    topology.add_link(
        sockets[0],
        sockets[1],
        Link::bundle(LinkKind::Smp, SMP_LINKS),
    )?;
    Ok(DgxNodeIds {
        gpus,
        nics,
        nvswitch,
        pcie_switches,
        sockets,
    })
}

/// One DGX-style node named `node0` on its own; see [`add_dgx_node`] for
/// the counts: `2G + ceil(G/2) + 3` vertices and `3G + ceil(G/2) + 1` links
/// with `G = node.gpus`.
pub fn dgx_node(node: &DgxNode) -> Result<Topology, TopologyError> {
    node.check()?;
    check_size("dgx_node", Some(node.vertex_count()))?;
    let mut topology = Topology::new();
    add_dgx_node(&mut topology, "node0", node)?;
    Ok(topology)
}

/// A DGX A100: 8 GPUs, 23 vertices, 29 links.
pub fn dgx_a100() -> Result<Topology, TopologyError> {
    dgx_node(&DgxNode {
        style: NodeStyle::A100,
        gpus: 8,
    })
}

/// A DGX H100: 8 GPUs, 23 vertices, 29 links.
pub fn dgx_h100() -> Result<Topology, TopologyError> {
    dgx_node(&DgxNode {
        style: NodeStyle::H100,
        gpus: 8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, well_formed};

    #[test]
    fn counts_follow_the_formulas() {
        for style in [NodeStyle::A100, NodeStyle::H100] {
            for g in 1..=8usize {
                let t = dgx_node(&DgxNode { style, gpus: g }).unwrap();
                let switches = g.div_ceil(2);
                assert_eq!(t.vertex_count(), g + g + 1 + switches + 2, "{style:?} {g}");
                assert_eq!(t.link_count(), g + g + g + switches + 1, "{style:?} {g}");
                assert_eq!(t.endpoints().len(), g);
                well_formed(&t);
            }
        }
        let h = dgx_h100().unwrap();
        assert_eq!((h.vertex_count(), h.link_count()), (23, 29));
    }

    #[test]
    fn h100_and_a100_bandwidths() {
        let h = dgx_h100().unwrap();
        // 18 NVLink 4 links at NCCL's 20.6 GB/s.
        assert_eq!(bandwidth(&h, "node0/gpu5", "node0/nvswitch"), 370.8e9);
        // PCIe Gen5 x16 at NCCL's 3 GB/s per lane.
        let gen5 = 48e9;
        assert!((bandwidth(&h, "node0/gpu5", "node0/pcie2") - gen5).abs() < 1.0);
        assert!((bandwidth(&h, "node0/nic5", "node0/pcie2") - gen5).abs() < 1.0);
        assert!((bandwidth(&h, "node0/pcie2", "node0/socket1") - gen5).abs() < 1.0);
        assert_eq!(bandwidth(&h, "node0/socket0", "node0/socket1"), 4.0 * 32e9);
        let a = dgx_a100().unwrap();
        // 12 NVLink 3 links at NCCL's 20 GB/s; PCIe Gen4 x16 at 24 GB/s.
        assert_eq!(bandwidth(&a, "node0/gpu0", "node0/nvswitch"), 240e9);
        let gen4 = 24e9;
        assert!((bandwidth(&a, "node0/gpu0", "node0/pcie0") - gen4).abs() < 1.0);
        let sw = a.find("node0/pcie3").unwrap();
        assert_eq!(a.vertex(sw).forward_latency_ps, PCIE4_SWITCH_LATENCY_PS);
    }

    #[test]
    fn gpus_come_first_in_order_and_nics_are_unattached() {
        let t = dgx_h100().unwrap();
        let names: Vec<&str> = t
            .endpoints()
            .into_iter()
            .map(|v| t.vertex(v).name.as_str())
            .collect();
        let expected: Vec<String> = (0..8).map(|g| format!("node0/gpu{g}")).collect();
        assert_eq!(names, expected);
        for g in 0..8 {
            let nic = t.find(&format!("node0/nic{g}")).unwrap();
            assert_eq!(t.out_links(nic).len(), 1, "only the PCIe link");
            assert!(!t.vertex(t.find(&format!("node0/gpu{g}")).unwrap()).forwards);
        }
    }

    #[test]
    fn gpu_counts_out_of_range_are_rejected() {
        for gpus in [0, 9] {
            let err = dgx_node(&DgxNode {
                style: NodeStyle::H100,
                gpus,
            })
            .unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains("gpus")),
                "{err}"
            );
        }
    }
}
