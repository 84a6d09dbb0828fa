//! Vertices of a topology: the devices links connect.
//!
//! Each [`VertexKind`] has a default forwarding latency, the time from a
//! packet's arrival to its departure on the next link when the output is
//! free ([`VertexKind::default_forward_latency_ps`]):
//!
//! | kind | latency | source |
//! |---|---|---|
//! | GPU, CPU endpoint | 0 | endpoints (ring and torus GPUs relay with no extra latency) |
//! | NIC | 300 ns | NVIDIA ConnectX-6 user manual: "sub-600ns latency" end to end, half charged to each of the two NICs a message crosses |
//! | NVSwitch | 130 ns (stand-in) | no public figure; the cut-through switch ASIC of the same vendor and era (Quantum, below) |
//! | PCIe switch | 115 ns (Gen5), 105 ns (Gen4) | Broadcom PEX89000 (Gen5) 115 ns; PEX88000 (Gen4) 105 ns cut-through between x16 ports (Broadcom, reported by the Linley Group, Sept. 2019) |
//! | socket / root complex | 115 ns (stand-in) | no public figure for root-port to root-port forwarding; a PCIe switch hop is used as the lower bound |
//! | leaf, spine (InfiniBand) | 130 ns | NVIDIA/Mellanox Quantum HDR switch (QM87xx) port-to-port latency; NVIDIA publishes none for Quantum-2 (NDR), third-party figures range from under 150 ns to about 330 ns |
//! | leaf, spine (Ethernet) | 300 ns | NVIDIA/Mellanox Spectrum-2: 300 ns (Linley Group, July 2017) |
//!
//! Leaf and spine vertices default to the InfiniBand figure; presets with
//! Ethernet switches set [`ETHERNET_SWITCH_LATENCY_PS`] per vertex.
//!
//! # In-network reduction
//! Some switches reduce the data crossing them
//! ([`Topology::reduces_in_network`](crate::Topology::reduces_in_network)):
//! an NVSwitch of the third generation or later (NVLink SHARP, the switch of
//! NVLink 4 and 5 GPUs: NCCL's NVLS needs an NVSwitch and compute capability
//! 9.0 or more, `src/graph/search.cc:1063` @b91894bd) and an InfiniBand
//! leaf or spine marked [`Vertex::sharp`] (SHARP aggregation, which a
//! scenario switches on with `sharp = true`). The model reduces at line
//! rate: the switch adds no time beyond its forwarding latency (NVIDIA
//! publishes no reduction rate or latency of its own for either; NCCL's
//! tuner models SHARP only through its per-algorithm `hwLat`).

/// What a vertex is. Ranks run on [`VertexKind::Gpu`] and
/// [`VertexKind::Cpu`] vertices; the others only carry traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VertexKind {
    /// A GPU: a rank endpoint.
    Gpu,
    /// A host CPU used as a rank endpoint (CPU collectives).
    Cpu,
    /// A network interface card.
    Nic,
    /// An NVSwitch (or the NVSwitch complex of a node).
    NvSwitch,
    /// A PCIe switch.
    PcieSwitch,
    /// A CPU socket with its PCIe root complex / host bridge.
    Socket,
    /// A leaf (top-of-rack) network switch.
    Leaf,
    /// A spine network switch.
    Spine,
}

impl VertexKind {
    /// The name used in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            VertexKind::Gpu => "gpu",
            VertexKind::Cpu => "cpu",
            VertexKind::Nic => "nic",
            VertexKind::NvSwitch => "nvswitch",
            VertexKind::PcieSwitch => "pcie_switch",
            VertexKind::Socket => "socket",
            VertexKind::Leaf => "leaf",
            VertexKind::Spine => "spine",
        }
    }

    /// Every kind, in a fixed order (for listings and error messages).
    pub const ALL: [VertexKind; 8] = [
        VertexKind::Gpu,
        VertexKind::Cpu,
        VertexKind::Nic,
        VertexKind::NvSwitch,
        VertexKind::PcieSwitch,
        VertexKind::Socket,
        VertexKind::Leaf,
        VertexKind::Spine,
    ];

    /// Parses a kind name as written by [`VertexKind::name`].
    pub fn parse(name: &str) -> Option<VertexKind> {
        VertexKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether ranks can be placed on vertices of this kind.
    pub fn is_endpoint(self) -> bool {
        matches!(self, VertexKind::Gpu | VertexKind::Cpu)
    }

    /// The forwarding latency a preset gives vertices of this kind, in ps;
    /// the module docs give the sources. Endpoints forward in zero time;
    /// leaves and spines get the InfiniBand switch figure.
    pub fn default_forward_latency_ps(self) -> u64 {
        match self {
            VertexKind::Gpu | VertexKind::Cpu => 0,
            VertexKind::Nic => NIC_LATENCY_PS,
            VertexKind::NvSwitch => NVSWITCH_LATENCY_PS,
            VertexKind::PcieSwitch => PCIE5_SWITCH_LATENCY_PS,
            VertexKind::Socket => SOCKET_LATENCY_PS,
            VertexKind::Leaf | VertexKind::Spine => IB_SWITCH_LATENCY_PS,
        }
    }

    /// Whether vertices of this kind forward traffic by default: switches,
    /// NICs and sockets do; GPUs and CPU endpoints do not (a preset whose
    /// GPUs relay traffic, such as the ring and torus, says so per vertex).
    pub fn forwards_by_default(self) -> bool {
        !self.is_endpoint()
    }
}

/// A ConnectX NIC crossing: half of ConnectX-6's sub-600 ns end-to-end
/// latency.
pub const NIC_LATENCY_PS: u64 = 300_000;
/// An InfiniBand switch hop (Quantum HDR, port to port).
pub const IB_SWITCH_LATENCY_PS: u64 = 130_000;
/// An Ethernet switch hop (Spectrum-2).
pub const ETHERNET_SWITCH_LATENCY_PS: u64 = 300_000;
/// An NVSwitch hop: no public figure, the Quantum ASIC's as a stand-in.
pub const NVSWITCH_LATENCY_PS: u64 = IB_SWITCH_LATENCY_PS;
/// A PCIe Gen5 switch hop (Broadcom PEX89000).
pub const PCIE5_SWITCH_LATENCY_PS: u64 = 115_000;
/// A PCIe Gen4 switch hop (Broadcom PEX88000, x16 to x16, cut-through).
pub const PCIE4_SWITCH_LATENCY_PS: u64 = 105_000;
/// A hop through a CPU socket's root complex: no public figure, a PCIe
/// switch hop as the lower bound.
pub const SOCKET_LATENCY_PS: u64 = PCIE5_SWITCH_LATENCY_PS;

/// One device in a topology.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertex {
    /// A unique, human-readable name (`node3/gpu5`, `spine1`), used in
    /// reports and error messages.
    pub name: String,
    /// What it is.
    pub kind: VertexKind,
    /// Whether traffic between two other vertices may pass through it.
    pub forwards: bool,
    /// Time from a packet's last byte arriving to it being ready to leave
    /// on the next link (switching / store-and-forward latency), in ps.
    pub forward_latency_ps: u64,
    /// An InfiniBand switch with SHARP: it reduces in the network (see the
    /// module docs; NVSwitches derive the capability from their links).
    pub sharp: bool,
}

impl Vertex {
    /// A vertex with its kind's default forwarding behaviour and no
    /// forwarding latency.
    pub fn new(name: impl Into<String>, kind: VertexKind) -> Vertex {
        Vertex {
            name: name.into(),
            kind,
            forwards: kind.forwards_by_default(),
            forward_latency_ps: 0,
            sharp: false,
        }
    }

    /// A vertex with its kind's default forwarding behaviour and its kind's
    /// [default forwarding latency](VertexKind::default_forward_latency_ps).
    pub fn with_default_latency(name: impl Into<String>, kind: VertexKind) -> Vertex {
        Vertex::new(name, kind).with_forward_latency_ps(kind.default_forward_latency_ps())
    }

    /// The same vertex with a forwarding latency.
    pub fn with_forward_latency_ps(mut self, ps: u64) -> Vertex {
        self.forward_latency_ps = ps;
        self
    }

    /// The same vertex, forwarding or not.
    pub fn with_forwarding(mut self, forwards: bool) -> Vertex {
        self.forwards = forwards;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_forward_in_zero_time_and_switches_do_not() {
        for kind in VertexKind::ALL {
            let latency = kind.default_forward_latency_ps();
            assert_eq!(latency == 0, kind.is_endpoint(), "{}", kind.name());
            // Every figure is tens to hundreds of nanoseconds.
            assert!(latency <= 1_000_000, "{}", kind.name());
            assert_eq!(VertexKind::parse(kind.name()), Some(kind));
        }
        let leaf = Vertex::with_default_latency("leaf0", VertexKind::Leaf);
        assert_eq!(leaf.forward_latency_ps, 130_000);
        assert!(leaf.forwards);
    }
}
