//! DGX A100 and DGX H100 nodes, HGX H200, H20, HGX B200 and HGX B300
//! boards in the same layout, and the node builder the fat-tree reuses.
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
//! The newer boards keep the DGX H100 layout (PCIe switches holding two
//! GPUs and their NICs, two sockets) with these parts; a tag says where
//! each fact was read (\[ML\]: an MLCommons inference-results system JSON,
//! submitter-provided; \[3P\]: a third-party page, not NVIDIA; \[S\]: NCCL's
//! source @ b91894bd; \[A\]: assumed, no source found):
//!
//! | style | GPU to NVSwitch | GPU and NIC PCIe | switch uplink | NIC |
//! |---|---|---|---|---|
//! | `hgx_h200` | 18 x NVLink 4 = 370.8 GB/s (NCCL SM90 20.6 per link \[S\]; "18x 4th Gen NVLink, 900GB/s" \[ML\] `inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json`) | Gen5 x16 ("PCIe Gen5 x16", same file) | Gen5 x16 | NDR 400 Gb/s ("10x 400Gbe Infiniband", same file) |
//! | `h20` | 18 x NVLink 4 = 370.8 GB/s ("NVLink 900 GB/s" \[3P\] willitrunai.com, unanswered.io; 18 links \[A\], as H100, SM90 in NCCL) | Gen5 x16 \[A\] | Gen5 x16 \[A\] | NDR 400 Gb/s \[A\], as HGX H100 |
//! | `hgx_b200` | 18 x NVLink 5 = 721.8 GB/s (NCCL `SM100_NVLINK_BW` 40.1, `topo.h:23` \[S\]; "18x 5th Gen NVLink, 14.4 TB/s aggregated" \[ML\] `inference_results_v6.0 closed/Nebius/systems/nebius_b200_n1.json`) | Gen5 x16 (same file) | Gen5 x16 | ConnectX-7 NDR 400 Gb/s (same file, 8 per node) |
//! | `hgx_b300` | 18 x NVLink 5 = 721.8 GB/s ("NVLink5 1.8 TB/s per GPU" \[3P\] acecloud.ai, fibermall.com) | Gen6 x16 = 96 GB/s (ConnectX-8 "PCIe Gen6", 48 lanes with a built-in PCIe switch \[3P\] Hot Chips 2025 coverage, cloudnews.tech; the GPU-NIC switch is modelled as the PCIe switch vertex \[A\]) | Gen5 x16 (ConnectX-8 "Gen5 x16 to the CPU" \[3P\] same) | ConnectX-8 XDR 800 Gb/s ("800 Gb/s per GPU" \[3P\] acecloud.ai) |
//!
//! Their PCIe switches forward with the Gen5 figure (no public figure for
//! a Gen6 switch; the Gen5 one stands in for `hgx_b300`), and their
//! sockets are joined as the DGX H100's (the DGX B200's Emerald Rapids
//! Xeons also have four UPI 2.0 links \[3P\]; NCCL rates them higher,
//! `ERP_QPI_BW` 40, `topo.h:29` \[S\], which the `smp` kind does not follow).
//!
//! **Two NICs per GPU.** [`DgxNode::nics_per_gpu`] = 2 puts two NICs next
//! to each GPU, both under its PCIe switch (as 2 x 200G or 2 x 400G per GPU
//! boards do); NIC `i` is next to GPU `i / 2`. The fat-tree gives each NIC
//! its own rail.
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

/// Which DGX or HGX board a node copies (the module docs give the
/// sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeStyle {
    /// DGX A100: NVLink 3, PCIe Gen4, ConnectX-6 HDR.
    A100,
    /// DGX H100: NVLink 4, PCIe Gen5, ConnectX-7 NDR.
    H100,
    /// HGX H200: NVLink 4, PCIe Gen5, NDR.
    H200,
    /// H20 (HGX H20): NVLink 4, PCIe Gen5, NDR (assumed as HGX H100).
    H20,
    /// HGX B200: NVLink 5, PCIe Gen5, ConnectX-7 NDR.
    B200,
    /// HGX B300: NVLink 5, ConnectX-8 XDR on PCIe Gen6.
    B300,
}

impl NodeStyle {
    /// Every style, in a fixed order.
    pub const ALL: [NodeStyle; 6] = [
        NodeStyle::A100,
        NodeStyle::H100,
        NodeStyle::H200,
        NodeStyle::H20,
        NodeStyle::B200,
        NodeStyle::B300,
    ];

    /// The scenario name: `a100`, `h100`, `hgx_h200`, `h20`, `hgx_b200`,
    /// `hgx_b300`.
    pub fn name(self) -> &'static str {
        match self {
            NodeStyle::A100 => "a100",
            NodeStyle::H100 => "h100",
            NodeStyle::H200 => "hgx_h200",
            NodeStyle::H20 => "h20",
            NodeStyle::B200 => "hgx_b200",
            NodeStyle::B300 => "hgx_b300",
        }
    }

    /// Parses a name as [`NodeStyle::name`] writes it.
    pub fn parse(name: &str) -> Option<NodeStyle> {
        NodeStyle::ALL.into_iter().find(|s| s.name() == name)
    }

    /// A GPU's bundled link to the NVSwitch complex.
    pub fn nvlink(self) -> Link {
        match self {
            NodeStyle::A100 => Link::bundle(LinkKind::NvLink { generation: 3 }, 12),
            NodeStyle::H100 | NodeStyle::H200 | NodeStyle::H20 => {
                Link::bundle(LinkKind::NvLink { generation: 4 }, 18)
            }
            NodeStyle::B200 | NodeStyle::B300 => {
                Link::bundle(LinkKind::NvLink { generation: 5 }, 18)
            }
        }
    }

    /// The x16 PCIe link of every GPU and NIC to its PCIe switch.
    pub fn pcie(self) -> LinkKind {
        let generation = match self {
            NodeStyle::A100 => 4,
            NodeStyle::H100 | NodeStyle::H200 | NodeStyle::H20 | NodeStyle::B200 => 5,
            NodeStyle::B300 => 6,
        };
        LinkKind::Pcie {
            generation,
            width: 16,
        }
    }

    /// The x16 PCIe link of every PCIe switch to its socket: the GPU and
    /// NIC link, except on `hgx_b300`, whose host link is Gen5.
    pub fn uplink(self) -> LinkKind {
        match self {
            NodeStyle::B300 => LinkKind::Pcie {
                generation: 5,
                width: 16,
            },
            other => other.pcie(),
        }
    }

    /// The network port of the node's NICs: HDR for A100, XDR for B300,
    /// NDR for the others.
    pub fn nic(self) -> LinkKind {
        match self {
            NodeStyle::A100 => LinkKind::InfiniBand(IbRate::Hdr),
            NodeStyle::B300 => LinkKind::InfiniBand(IbRate::Xdr),
            _ => LinkKind::InfiniBand(IbRate::Ndr),
        }
    }

    /// The forwarding latency of the node's PCIe switches.
    pub fn pcie_switch_latency_ps(self) -> u64 {
        match self {
            NodeStyle::A100 => PCIE4_SWITCH_LATENCY_PS,
            _ => PCIE5_SWITCH_LATENCY_PS,
        }
    }
}

/// The parameters of one DGX-style node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DgxNode {
    /// Generation (default H100).
    pub style: NodeStyle,
    /// GPUs, 1..=8 (default 8); the node has `ceil(gpus / 2)` PCIe
    /// switches.
    pub gpus: usize,
    /// NICs next to each GPU, 1 or 2 (default 1).
    pub nics_per_gpu: usize,
}

impl Default for DgxNode {
    fn default() -> DgxNode {
        DgxNode {
            style: NodeStyle::H100,
            gpus: 8,
            nics_per_gpu: 1,
        }
    }
}

impl DgxNode {
    /// Checks `gpus` is in 1..=8 and `nics_per_gpu` in 1..=2.
    pub(crate) fn check(&self) -> Result<(), TopologyError> {
        if !(1..=8).contains(&self.gpus) {
            return Err(parameter(format!(
                "gpus per node must be 1..=8, got {}",
                self.gpus
            )));
        }
        if !(1..=2).contains(&self.nics_per_gpu) {
            return Err(parameter(format!(
                "nics_per_gpu must be 1 or 2, got {}",
                self.nics_per_gpu
            )));
        }
        Ok(())
    }

    /// NICs of one node: `G·k`.
    pub fn nic_count(&self) -> usize {
        self.gpus * self.nics_per_gpu
    }

    /// Vertices of one node: `G + G·k + ceil(G/2) + 3`.
    pub(crate) fn vertex_count(&self) -> usize {
        self.gpus + self.nic_count() + self.gpus.div_ceil(2) + 3
    }

    /// Links of one node: `2G + G·k + ceil(G/2) + 1`.
    pub fn link_count(&self) -> usize {
        2 * self.gpus + self.nic_count() + self.gpus.div_ceil(2) + 1
    }
}

/// The vertices [`add_dgx_node`] added, for callers that attach more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DgxNodeIds {
    /// GPU `g` is `gpus[g]`.
    pub gpus: Vec<VertexId>,
    /// NIC `i` (next to GPU `i / nics_per_gpu`, under the same PCIe
    /// switch) is `nics[i]`.
    pub nics: Vec<VertexId>,
    /// The NVSwitch complex.
    pub nvswitch: VertexId,
    /// PCIe switch `p` holds GPUs `2p` and `2p + 1` and their NICs.
    pub pcie_switches: Vec<VertexId>,
    /// The two CPU sockets; PCIe switch `p` hangs off `sockets[p / 2]`.
    pub sockets: [VertexId; 2],
}

/// Adds one DGX-style node to `topology`, its vertices named
/// `<name>/gpu<g>`, `<name>/nic<i>`, `<name>/nvswitch`, `<name>/pcie<p>`
/// and `<name>/socket<s>`, the GPUs inserted first in order.
///
/// With `G = node.gpus` and `k = node.nics_per_gpu` it adds
/// `G + G·k + ceil(G/2) + 3` vertices (G GPUs, `G·k` NICs, one NVSwitch,
/// `ceil(G/2)` PCIe switches, 2 sockets) and `2G + G·k + ceil(G/2) + 1`
/// links (G NVLink bundles, G GPU and `G·k` NIC PCIe links, `ceil(G/2)`
/// switch uplinks, one SMP bundle); with `k = 1` that is
/// `2G + ceil(G/2) + 3` and `3G + ceil(G/2) + 1`.
pub fn add_dgx_node(
    topology: &mut Topology,
    name: &str,
    node: &DgxNode,
) -> Result<DgxNodeIds, TopologyError> {
    node.check()?;
    let style = node.style;
    let pcie = Link::bundle(style.pcie(), 1);
    let uplink = Link::bundle(style.uplink(), 1);
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
    let mut nics = Vec::with_capacity(node.nic_count());
    for i in 0..node.nic_count() {
        nics.push(topology.add_vertex(vertex(format!("nic{i}"), VertexKind::Nic))?);
    }
    let sockets = [
        topology.add_vertex(vertex("socket0".into(), VertexKind::Socket))?,
        topology.add_vertex(vertex("socket1".into(), VertexKind::Socket))?,
    ];

    for g in 0..node.gpus {
        topology.add_link(gpus[g], nvswitch, style.nvlink())?;
        topology.add_link(gpus[g], pcie_switches[g / 2], pcie)?;
    }
    for (i, &nic) in nics.iter().enumerate() {
        topology.add_link(nic, pcie_switches[i / node.nics_per_gpu / 2], pcie)?;
    }
    for (p, &switch) in pcie_switches.iter().enumerate() {
        topology.add_link(switch, sockets[p / 2], uplink)?;
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
/// the counts: `G + G·k + ceil(G/2) + 3` vertices and
/// `2G + G·k + ceil(G/2) + 1` links with `G = node.gpus` and
/// `k = node.nics_per_gpu` (23 and 29 for 8 GPUs and one NIC each, 31 and
/// 37 with two).
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
        ..DgxNode::default()
    })
}

/// A DGX H100: 8 GPUs, 23 vertices, 29 links.
pub fn dgx_h100() -> Result<Topology, TopologyError> {
    dgx_node(&DgxNode::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::check::{bandwidth, well_formed};

    #[test]
    fn counts_follow_the_formulas() {
        for style in NodeStyle::ALL {
            for k in 1..=2usize {
                for g in 1..=8usize {
                    let node = DgxNode {
                        style,
                        gpus: g,
                        nics_per_gpu: k,
                    };
                    let t = dgx_node(&node).unwrap();
                    let switches = g.div_ceil(2);
                    let what = format!("{style:?} {g} x {k}");
                    assert_eq!(t.vertex_count(), g + g * k + 1 + switches + 2, "{what}");
                    assert_eq!(t.link_count(), g + g + g * k + switches + 1, "{what}");
                    assert_eq!(t.vertex_count(), node.vertex_count(), "{what}");
                    assert_eq!(t.link_count(), node.link_count(), "{what}");
                    assert_eq!(t.endpoints().len(), g);
                    well_formed(&t);
                }
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
                gpus,
                ..DgxNode::default()
            })
            .unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains("gpus")),
                "{err}"
            );
        }
        for nics_per_gpu in [0, 3] {
            let err = dgx_node(&DgxNode {
                nics_per_gpu,
                ..DgxNode::default()
            })
            .unwrap_err();
            assert!(
                matches!(&err, TopologyError::Parameter(m) if m.contains("nics_per_gpu")),
                "{err}"
            );
        }
    }

    /// The newer boards' links, each as the module docs cite it.
    #[test]
    fn hgx_board_bandwidths() {
        let close = |a: f64, b: f64| (a - b).abs() < 1.0;
        let board = |style| {
            dgx_node(&DgxNode {
                style,
                ..DgxNode::default()
            })
            .unwrap()
        };
        for style in [NodeStyle::H200, NodeStyle::H20] {
            let t = board(style);
            assert_eq!(bandwidth(&t, "node0/gpu3", "node0/nvswitch"), 370.8e9);
            assert!(close(bandwidth(&t, "node0/nic3", "node0/pcie1"), 48e9));
            assert_eq!(style.nic().to_string(), "ib_ndr");
        }
        let b200 = board(NodeStyle::B200);
        // 18 NVLink 5 links at NCCL's 40.1 GB/s.
        assert!(close(
            bandwidth(&b200, "node0/gpu0", "node0/nvswitch"),
            721.8e9
        ));
        assert!(close(bandwidth(&b200, "node0/gpu0", "node0/pcie0"), 48e9));
        assert_eq!(NodeStyle::B200.nic().to_string(), "ib_ndr");
        let b300 = board(NodeStyle::B300);
        assert!(close(
            bandwidth(&b300, "node0/gpu7", "node0/nvswitch"),
            721.8e9
        ));
        // ConnectX-8 on Gen6 x16 (NCCL: 480 x 16 / 80 = 96 GB/s), Gen5
        // x16 to the host.
        assert!(close(bandwidth(&b300, "node0/gpu7", "node0/pcie3"), 96e9));
        assert!(close(bandwidth(&b300, "node0/nic7", "node0/pcie3"), 96e9));
        assert!(close(
            bandwidth(&b300, "node0/pcie3", "node0/socket1"),
            48e9
        ));
        assert_eq!(NodeStyle::B300.nic().to_string(), "ib_xdr");
        for style in NodeStyle::ALL {
            assert_eq!(NodeStyle::parse(style.name()), Some(style));
        }
    }

    #[test]
    fn two_nics_per_gpu_sit_under_the_gpus_switch() {
        let t = dgx_node(&DgxNode {
            nics_per_gpu: 2,
            ..DgxNode::default()
        })
        .unwrap();
        assert_eq!((t.vertex_count(), t.link_count()), (31, 37));
        for i in 0..16 {
            let switch = format!("node0/pcie{}", i / 4);
            assert!(close_to_48(bandwidth(
                &t,
                &format!("node0/nic{i}"),
                &switch
            )));
        }
        assert!(t.find("node0/nic16").is_none());
    }

    fn close_to_48(bw: f64) -> bool {
        (bw - 48e9).abs() < 1.0
    }
}
