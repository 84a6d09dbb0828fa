//! [`Topology`]: a directed multigraph of [`Vertex`]es joined by full-duplex
//! [`Link`]s, stored on petgraph.
//!
//! Each full-duplex link is two directed edges, one per direction, added
//! together: a direction is a [`LinkId`] (an egress port of its source
//! vertex) and [`Topology::reverse`] gives the other one. Ids are dense
//! (`0..link_count()`), so per-link state lives in `Vec`s indexed by
//! [`LinkId::index`], and iteration order is insertion order.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::TopologyError;
use crate::kind::Link;
use crate::vertex::Vertex;

/// A vertex of a [`Topology`].
pub type VertexId = NodeIndex<u32>;

/// One direction of a link of a [`Topology`]: the egress port of its
/// source vertex.
pub type LinkId = EdgeIndex<u32>;

/// The most one hop may cost: a link's latency, the serialization of one
/// MTU packet on it, or a vertex's forwarding latency, each at most 1 s.
/// A route's cost then stays below `u64::MAX` for any route of fewer than
/// six million hops (far more vertices than any topology here can hold),
/// so routing never mistakes a long path for no path.
pub const HOP_PS_MAX: u64 = 1_000_000_000_000;

/// A hardware graph: devices and the links between them.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    graph: DiGraph<Vertex, Link, u32>,
    /// `reverse[l]` is the other direction of link direction `l`.
    reverse: Vec<LinkId>,
    /// Vertex ids by name; only looked up, never iterated.
    names: HashMap<String, VertexId>,
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Topology {
        Topology::default()
    }

    /// Adds a vertex; names must be unique.
    pub fn add_vertex(&mut self, vertex: Vertex) -> Result<VertexId, TopologyError> {
        if self.find(&vertex.name).is_some() {
            return Err(TopologyError::DuplicateVertex(vertex.name));
        }
        if vertex.forward_latency_ps > HOP_PS_MAX {
            return Err(TopologyError::TooSlow(format!(
                "{}: forwarding latency {} ps is over {HOP_PS_MAX} ps (1 s)",
                vertex.name, vertex.forward_latency_ps
            )));
        }
        let name = vertex.name.clone();
        let id = self.graph.add_node(vertex);
        self.names.insert(name, id);
        Ok(id)
    }

    /// Adds a full-duplex link between `a` and `b` and returns its two
    /// directions, `a -> b` first. Parallel links are allowed; a link from
    /// a vertex to itself is not.
    pub fn add_link(
        &mut self,
        a: VertexId,
        b: VertexId,
        link: Link,
    ) -> Result<(LinkId, LinkId), TopologyError> {
        if a == b {
            return Err(TopologyError::SelfLink(self.graph[a].name.clone()));
        }
        if !(link.bandwidth_bytes_per_s.is_finite() && link.bandwidth_bytes_per_s > 0.0) {
            return Err(TopologyError::Bandwidth(link.bandwidth_bytes_per_s));
        }
        if link.mtu_bytes == 0 {
            return Err(TopologyError::Mtu);
        }
        let mtu_ps = link.serialization_ps(link.mtu_bytes);
        if link.latency_ps > HOP_PS_MAX || mtu_ps > HOP_PS_MAX {
            return Err(TopologyError::TooSlow(format!(
                "{} -> {}: latency {} ps and one-MTU serialization {mtu_ps} ps must each be at most {HOP_PS_MAX} ps (1 s)",
                self.graph[a].name, self.graph[b].name, link.latency_ps
            )));
        }
        if link.buffer_bytes < link.mtu_bytes {
            return Err(TopologyError::Buffer {
                buffer_bytes: link.buffer_bytes,
                mtu_bytes: link.mtu_bytes,
            });
        }
        let ab = self.graph.add_edge(a, b, link);
        let ba = self.graph.add_edge(b, a, link);
        self.reverse.push(ba);
        self.reverse.push(ab);
        Ok((ab, ba))
    }

    /// The vertex `id`.
    pub fn vertex(&self, id: VertexId) -> &Vertex {
        &self.graph[id]
    }

    /// The parameters of link direction `id`.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.graph[id]
    }

    /// The source and target vertices of link direction `id`.
    pub fn ends(&self, id: LinkId) -> (VertexId, VertexId) {
        self.graph
            .edge_endpoints(id)
            .expect("link ids come from this topology")
    }

    /// The other direction of link direction `id`.
    pub fn reverse(&self, id: LinkId) -> LinkId {
        self.reverse[id.index()]
    }

    /// `"src->dst"` with vertex names, for reports; when parallel links
    /// join the same two vertices, the link id follows (`"leaf0->spine0
    /// #78"`) so that each direction has a name of its own.
    pub fn link_name(&self, id: LinkId) -> String {
        let (a, b) = self.ends(id);
        let parallel = self
            .graph
            .edges(a)
            .filter(|e| e.target() == b)
            .nth(1)
            .is_some();
        if parallel {
            format!(
                "{}->{} #{}",
                self.graph[a].name,
                self.graph[b].name,
                id.index()
            )
        } else {
            format!("{}->{}", self.graph[a].name, self.graph[b].name)
        }
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.graph.node_count()
    }

    /// Number of full-duplex links (half the number of [`LinkId`]s).
    pub fn link_count(&self) -> usize {
        self.graph.edge_count() / 2
    }

    /// Number of link directions: every [`LinkId`] is below it.
    pub fn link_direction_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// Every vertex id, in insertion order.
    pub fn vertex_ids(&self) -> impl Iterator<Item = VertexId> + '_ {
        self.graph.node_indices()
    }

    /// Every link direction, in insertion order.
    pub fn link_ids(&self) -> impl Iterator<Item = LinkId> + '_ {
        self.graph.edge_indices()
    }

    /// The link directions leaving `v`, in insertion order (petgraph lists
    /// them newest first; this sorts them so that order never depends on
    /// how the graph stores them).
    pub fn out_links(&self, v: VertexId) -> Vec<LinkId> {
        let mut out: Vec<LinkId> = self.graph.edges(v).map(|e| e.id()).collect();
        out.sort_unstable();
        out
    }

    /// The vertices ranks can run on (GPUs and CPU endpoints), in insertion
    /// order: the default placement puts rank `i` on the `i`-th.
    pub fn endpoints(&self) -> Vec<VertexId> {
        self.graph
            .node_indices()
            .filter(|&v| self.graph[v].kind.is_endpoint())
            .collect()
    }

    /// Whether vertex `v` reduces data in the network (see
    /// [`crate::vertex`], *In-network reduction*): an NVSwitch whose
    /// links are all NVLink 4 or newer (NVLink SHARP), or a switch marked
    /// [`Vertex::sharp`](crate::Vertex::sharp).
    pub fn reduces_in_network(&self, v: VertexId) -> bool {
        let vertex = &self.graph[v];
        if vertex.sharp {
            return true;
        }
        if vertex.kind != crate::VertexKind::NvSwitch {
            return false;
        }
        let mut links = self.graph.edges(v).peekable();
        links.peek().is_some()
            && links.all(|e| {
                matches!(e.weight().kind, crate::LinkKind::NvLink { generation } if generation >= 4)
            })
    }

    /// Marks every leaf and spine switch as SHARP-capable (it reduces in
    /// the network); returns how many it marked.
    pub fn enable_sharp(&mut self) -> usize {
        let mut marked = 0;
        for v in self.graph.node_weights_mut() {
            if matches!(v.kind, crate::VertexKind::Leaf | crate::VertexKind::Spine) {
                v.sharp = true;
                marked += 1;
            }
        }
        marked
    }

    /// The vertex named `name`.
    pub fn find(&self, name: &str) -> Option<VertexId> {
        self.names.get(name).copied()
    }

    /// The underlying petgraph graph (read only).
    pub fn graph(&self) -> &DiGraph<Vertex, Link, u32> {
        &self.graph
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::LinkKind;
    use crate::vertex::VertexKind;

    #[test]
    fn nvswitches_of_nvlink4_and_sharp_switches_reduce_in_the_network() {
        let reducing = |t: &Topology| -> Vec<String> {
            t.vertex_ids()
                .filter(|&v| t.reduces_in_network(v))
                .map(|v| t.vertex(v).name.clone())
                .collect()
        };
        let h100 = crate::presets::dgx_h100().unwrap();
        assert_eq!(reducing(&h100), ["node0/nvswitch"]);
        // NVLink 3 (A100): no NVLink SHARP.
        assert!(reducing(&crate::presets::dgx_a100().unwrap()).is_empty());
        let mut fat = crate::presets::fat_tree(&crate::presets::FatTree {
            nodes: 2,
            style: crate::presets::NodeStyle::A100,
            ..crate::presets::FatTree::default()
        })
        .unwrap();
        assert!(reducing(&fat).is_empty());
        let switches = fat
            .vertex_ids()
            .filter(|&v| matches!(fat.vertex(v).kind, VertexKind::Leaf | VertexKind::Spine))
            .count();
        assert!(switches > 0);
        assert_eq!(fat.enable_sharp(), switches);
        assert_eq!(reducing(&fat).len(), switches);
    }

    #[test]
    fn links_are_two_directions_with_dense_ids() {
        let mut t = Topology::new();
        let g0 = t.add_vertex(Vertex::new("gpu0", VertexKind::Gpu)).unwrap();
        let sw = t
            .add_vertex(Vertex::new("sw", VertexKind::NvSwitch))
            .unwrap();
        let g1 = t.add_vertex(Vertex::new("gpu1", VertexKind::Gpu)).unwrap();
        let nv = LinkKind::parse("nvlink4").unwrap();
        let (a, b) = t.add_link(g0, sw, Link::bundle(nv, 18)).unwrap();
        let (c, _) = t.add_link(sw, g1, Link::bundle(nv, 18)).unwrap();
        assert_eq!((a.index(), b.index(), c.index()), (0, 1, 2));
        assert_eq!(t.reverse(a), b);
        assert_eq!(t.reverse(b), a);
        assert_eq!(t.ends(c), (sw, g1));
        assert_eq!(t.link_name(b), "sw->gpu0");
        assert_eq!(t.link_count(), 2);
        assert_eq!(t.endpoints(), vec![g0, g1]);
        assert_eq!(t.out_links(sw).len(), 2);
        assert!(matches!(
            t.add_vertex(Vertex::new("sw", VertexKind::Leaf)),
            Err(TopologyError::DuplicateVertex(_))
        ));
        assert!(t.add_link(sw, sw, Link::bundle(nv, 1)).is_err());
    }

    #[test]
    fn parallel_links_are_named_apart_by_id() {
        let mut t = Topology::new();
        let leaf = t
            .add_vertex(Vertex::new("leaf0", VertexKind::Leaf))
            .unwrap();
        let spine = t
            .add_vertex(Vertex::new("spine0", VertexKind::Spine))
            .unwrap();
        let gpu = t.add_vertex(Vertex::new("gpu0", VertexKind::Gpu)).unwrap();
        let ib = Link::bundle(LinkKind::parse("ib_ndr").unwrap(), 1);
        let (a, b) = t.add_link(leaf, spine, ib).unwrap();
        let (c, d) = t.add_link(leaf, spine, ib).unwrap();
        let (e, _) = t.add_link(gpu, leaf, ib).unwrap();
        assert_eq!(t.link_name(a), "leaf0->spine0 #0");
        assert_eq!(t.link_name(b), "spine0->leaf0 #1");
        assert_eq!(t.link_name(c), "leaf0->spine0 #2");
        assert_eq!(t.link_name(d), "spine0->leaf0 #3");
        assert_eq!(
            t.link_name(e),
            "gpu0->leaf0",
            "a single link keeps its plain name"
        );
    }

    #[test]
    fn hops_slower_than_a_second_are_rejected() {
        let mut t = Topology::new();
        let a = t.add_vertex(Vertex::new("a", VertexKind::Gpu)).unwrap();
        let b = t.add_vertex(Vertex::new("b", VertexKind::Gpu)).unwrap();
        let mut slow = Link::bundle(LinkKind::parse("ib_ndr").unwrap(), 1);
        slow.bandwidth_bytes_per_s = 1e-3;
        assert!(matches!(
            t.add_link(a, b, slow),
            Err(TopologyError::TooSlow(_))
        ));
        let late = Vertex::new("c", VertexKind::Leaf).with_forward_latency_ps(HOP_PS_MAX + 1);
        assert!(matches!(t.add_vertex(late), Err(TopologyError::TooSlow(_))));
    }
}
