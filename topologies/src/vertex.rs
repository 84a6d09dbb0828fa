//! Vertices of a topology: the devices links connect.

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

    /// Whether vertices of this kind forward traffic by default: switches,
    /// NICs and sockets do; GPUs and CPU endpoints do not (a preset whose
    /// GPUs relay traffic, such as the ring and torus, says so per vertex).
    pub fn forwards_by_default(self) -> bool {
        !self.is_endpoint()
    }
}

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
        }
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
