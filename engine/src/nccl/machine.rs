//! [`Machine`]: what NCCL's topology detection sees of a hardware graph:
//! nodes, each node's GPUs and NICs, how each GPU reaches each NIC, the GPU
//! architecture.
//!
//! - A **node** is a set of vertices joined by links that are not network
//!   links (NVLink, PCIe, SMP): NCCL's "host" (`src/init.cc:1114-1125`).
//!   Nodes are numbered by their lowest rank.
//! - A GPU reaches a NIC on a **path type** like NCCL's (`src/graph/topo.h:54-82`):
//!   through one PCIe switch (PIX), several (PXB), a CPU's root complex
//!   (PHB) or across sockets (SYS), read off the route's intermediate
//!   vertices.
//! - The **compute capability** follows the NVLink generation of the
//!   ranks' links (NVLink 2: V100, 7.0; 3: A100, 8.0; 4: H100, 9.0; 5:
//!   B200, 10.0, the datasheet pairing), unless the scenario names the GPU.

use std::collections::BTreeMap;

use algorithms::Rank;
use topologies::{LinkKind, Router, Topology, VertexId, VertexKind};

/// How a GPU reaches a NIC, best first (NCCL's path types, less NVLink ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathType {
    /// Through one PCIe switch.
    Pix,
    /// Through several PCIe switches, no CPU.
    Pxb,
    /// Through an NVLink peer GPU that is local to the NIC (NCCL's PXN).
    Pxn,
    /// Through a CPU's PCIe root complex.
    Phb,
    /// Across the CPU sockets.
    Sys,
}

impl PathType {
    /// NCCL's name: `PIX`, `PXB`, `PXN`, `PHB`, `SYS`.
    pub fn name(self) -> &'static str {
        match self {
            PathType::Pix => "PIX",
            PathType::Pxb => "PXB",
            PathType::Pxn => "PXN",
            PathType::Phb => "PHB",
            PathType::Sys => "SYS",
        }
    }
}

/// One node: its ranks (in rank order) and its NICs (in vertex order).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The ranks placed on it.
    pub ranks: Vec<Rank>,
    /// Its NICs.
    pub nics: Vec<VertexId>,
}

/// The machine as NCCL sees it.
#[derive(Clone, Debug)]
pub struct Machine {
    /// Every node.
    pub nodes: Vec<Node>,
    /// `node_of[rank]`.
    pub node_of: Vec<usize>,
    /// `placement[rank]`: the rank's vertex.
    pub placement: Vec<VertexId>,
    /// The GPUs' compute capability times ten (70, 80, 90, 100).
    pub compute_capability: u32,
    /// Whether the ranks' intra-node links include NVLink.
    pub has_nvlink: bool,
}

impl Machine {
    /// Reads the machine off `topology` with ranks on `placement`;
    /// `compute_capability` overrides the one the NVLink generation implies
    /// (which is 80 when there is no NVLink, NCCL's own fallback for an
    /// unknown GPU, `src/graph/topo.h:226-234`).
    pub fn detect(
        topology: &Topology,
        placement: &[VertexId],
        compute_capability: Option<u32>,
    ) -> Machine {
        let component = node_components(topology);
        let mut by_component: BTreeMap<usize, usize> = BTreeMap::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut node_of = Vec::with_capacity(placement.len());
        for (rank, &v) in placement.iter().enumerate() {
            let c = component[v.index()];
            let node = *by_component.entry(c).or_insert_with(|| {
                nodes.push(Node {
                    ranks: Vec::new(),
                    nics: Vec::new(),
                });
                nodes.len() - 1
            });
            nodes[node].ranks.push(rank);
            node_of.push(node);
        }
        for v in topology.vertex_ids() {
            if topology.vertex(v).kind == VertexKind::Nic
                && let Some(&node) = by_component.get(&component[v.index()])
            {
                nodes[node].nics.push(v);
            }
        }
        let generation = placement
            .iter()
            .flat_map(|&v| topology.out_links(v))
            .filter_map(|l| match topology.link(l).kind {
                LinkKind::NvLink { generation } => Some(generation),
                _ => None,
            })
            .max();
        let implied = match generation {
            Some(2) => 70,
            Some(3) => 80,
            Some(4) => 90,
            Some(_) => 100,
            None => 80,
        };
        Machine {
            nodes,
            node_of,
            placement: placement.to_vec(),
            compute_capability: compute_capability.unwrap_or(implied),
            has_nvlink: generation.is_some(),
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Ranks per node of the smallest node (NCCL's `nRanks / nNodes` is
    /// this when nodes are equal).
    pub fn ranks_per_node(&self) -> usize {
        self.nodes.iter().map(|n| n.ranks.len()).min().unwrap_or(1)
    }
}

/// The path type of `route` from a GPU to a NIC: read off the kinds of the
/// vertices it passes.
pub fn path_type(topology: &Topology, route: &[topologies::LinkId]) -> PathType {
    let mut switches = 0;
    let mut sockets = 0;
    let mut gpus = 0;
    for &l in &route[..route.len().saturating_sub(1)] {
        match topology.vertex(topology.ends(l).1).kind {
            VertexKind::PcieSwitch => switches += 1,
            VertexKind::Socket | VertexKind::Cpu => sockets += 1,
            VertexKind::Gpu | VertexKind::NvSwitch => gpus += 1,
            _ => {}
        }
    }
    match (sockets, gpus, switches) {
        (s, _, _) if s > 1 => PathType::Sys,
        (1, _, _) => PathType::Phb,
        (0, g, _) if g > 0 => PathType::Pxn,
        (0, 0, 0 | 1) => PathType::Pix,
        _ => PathType::Pxb,
    }
}

/// The route from `a` to `b`, or `None` if the router finds none.
pub fn route(router: &mut Router, a: VertexId, b: VertexId) -> Option<topologies::Route> {
    let flow = ((a.index() as u64) << 32) | b.index() as u64;
    router.route(a, b, flow).ok().filter(|r| !r.is_empty())
}

/// Each vertex's node component: vertices joined by non-network links
/// share one (union-find by index).
fn node_components(topology: &Topology) -> Vec<usize> {
    let n = topology.vertex_count();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for l in topology.link_ids() {
        if topology.link(l).kind.is_network() {
            continue;
        }
        let (a, b) = topology.ends(l);
        let (ra, rb) = (find(&mut parent, a.index()), find(&mut parent, b.index()));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    }
    (0..n).map(|v| find(&mut parent, v)).collect()
}
