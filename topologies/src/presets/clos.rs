//! Two-level Clos networks: a rail-optimised fat-tree of DGX nodes and an
//! Ethernet/RoCE leaf-spine cluster of CPU hosts.
//!
//! ```text
//!          spine0           spine1  ...       (uplinks dealt round-robin)
//!          |     \         /     |
//!        leaf0    leaf1   ...   leaf7         (fat-tree: leaf g serves rail g)
//!        /   \       \
//!  node0/nic0 node1/nic0  node0/nic1 ...      (NIC g of every node)
//! ```
//!
//! **Uplinks.** A leaf with `d` downlinks has `u = ceil(d / oversubscription)`
//! uplinks of the same link kind as its downlinks (`oversubscription = 1`
//! is non-blocking). Each leaf deals its uplinks round-robin over the
//! spines, starting at spine 0: uplink `i` goes to spine `i mod S`. A leaf
//! therefore has parallel links to a spine when `u > S` (8 uplinks over 4
//! spines is 2 per spine), every leaf reaches spine 0 (so any two leaves
//! share a spine and the network is connected), and when `u` is not a
//! multiple of `S` the low-numbered spines get one more link per leaf.
//! A spine that would get no link at all (more spines than the largest
//! leaf's uplinks) is rejected as a parameter error.
//!
//! Leaves and spines forward with the InfiniBand switch latency when the
//! links are InfiniBand and the Ethernet switch latency otherwise
//! ([`crate::vertex`] has the sources).
//!
//! **Rotations.** [`fat_tree_rotation`] and [`leaf_spine_rotation`] build
//! each preset's [`Rotation`](crate::Rotation): the symmetry that moves
//! every rank on by `shift` with the hardware it sits on, for symmetric
//! routes and folded runs.
//!
//! - Fat-tree, one leaf per rail (the default): one node. Node `n` goes to
//!   node `n + 1 mod N` with its insides and its NIC-to-leaf links; every
//!   node hangs off the same leaves, so the leaves stay. The uplinks and
//!   spines turn with it: uplink `i` of each leaf goes to uplink
//!   `(i + 1) mod u` and spine `s` to spine `s + 1 mod S`. Were the
//!   uplinks fixed, every rotated copy of a cross-rail flow (node `n`'s
//!   GPU `a` to node `m`'s GPU `b != a`, up leaf `a`, down leaf `b`) would
//!   be routed through the same uplink and spine, all `N` copies piled on
//!   one link, and that link would be left in place by every step, which
//!   a folded run cannot represent. Turning the uplinks spreads the copies
//!   over all `u` uplinks and so over all spines; with the default
//!   non-blocking tree (`u = N`) every link moves with every step, and the
//!   run folds onto one node. This is a symmetry only when `S` divides `u`
//!   (uplink `i + 1` must go to the spine after uplink `i`'s, also across
//!   the wrap from `u - 1` to 0) and `u` divides `N` (`N` steps bring every
//!   uplink back); otherwise it is an error. With `u < N`
//!   (oversubscription) the rotation exists, but each uplink comes back
//!   after `u` steps, so it does not fold.
//! - Fat-tree, `k > 1` leaves per rail: `N/k` nodes, one leaf's worth.
//!   Node `n` goes to `n + N/k`, leaf `rail·k + j` to `rail·k + (j+1) mod
//!   k` with its uplinks in order, and the spines stay: each step moves
//!   every leaf, so every link moves and the run folds onto `N/k` nodes.
//!   Needs `k` to divide `N`.
//! - Leaf-spine: one leaf's hosts, leaf `l` to leaf `l + 1` with its
//!   uplinks in order and the spines staying, as for `k > 1` (needs
//!   `hosts_per_leaf` to divide the hosts). A single leaf turns by one host
//!   and stays, with its uplinks: it folds only when it has no spines
//!   (spines under a single leaf carry no traffic between its hosts).

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::kind::{Link, LinkKind};
use crate::vertex::{ETHERNET_SWITCH_LATENCY_PS, IB_SWITCH_LATENCY_PS, Vertex, VertexKind};

use super::dgx::{DgxNode, NodeStyle, add_dgx_node};
use super::{check_size, parameter};

mod rotation;

pub(crate) use rotation::{HostLayout, RailLayout, host_rotation, rail_rotation};
pub use rotation::{
    fat_tree_node_turn, fat_tree_partial_node_turn, fat_tree_rotation, leaf_spine_rotation,
};

/// The parameters of [`fat_tree`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FatTree {
    /// DGX nodes (default 8).
    pub nodes: usize,
    /// GPUs per node, 1..=8 (default 8).
    pub gpus_per_node: usize,
    /// NICs next to each GPU, 1 or 2 (default 1); each NIC is a rail, so
    /// there are `gpus_per_node · nics_per_gpu` rails.
    pub nics_per_gpu: usize,
    /// Node generation (default H100).
    pub style: NodeStyle,
    /// Leaves: a positive multiple of the rails, at most `nodes` per rail;
    /// `None` (default) is one leaf per rail.
    pub leaves: Option<usize>,
    /// Spines; `None` (default) is `max(1, rails / 2)`, capped at
    /// the largest leaf's uplink count so that every spine gets a link, or
    /// none at all when there is a single leaf. Zero is only allowed with
    /// one leaf; more than the largest leaf's uplinks is rejected.
    pub spines: Option<usize>,
    /// Downlinks per uplink at each leaf, finite and at least 1 (default 1:
    /// non-blocking).
    pub oversubscription: f64,
    /// The NICs' and switches' link kind; `None` (default) is the style's
    /// NIC ([`NodeStyle::nic`]).
    pub nic: Option<LinkKind>,
}

impl Default for FatTree {
    fn default() -> FatTree {
        FatTree {
            nodes: 8,
            gpus_per_node: 8,
            nics_per_gpu: 1,
            style: NodeStyle::H100,
            leaves: None,
            spines: None,
            oversubscription: 1.0,
            nic: None,
        }
    }
}

/// The parameters of [`leaf_spine`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeafSpine {
    /// CPU hosts, one rank each (default 16).
    pub hosts: usize,
    /// Hosts per leaf (default 8); the last leaf takes the remainder.
    pub hosts_per_leaf: usize,
    /// Spines (default 2); zero is only allowed with one leaf.
    pub spines: usize,
    /// The NICs' and switches' link kind (default `roce200`).
    pub nic: LinkKind,
    /// Downlinks per uplink at each leaf, finite and at least 1 (default 1).
    pub oversubscription: f64,
}

impl Default for LeafSpine {
    fn default() -> LeafSpine {
        LeafSpine {
            hosts: 16,
            hosts_per_leaf: 8,
            spines: 2,
            nic: LinkKind::Roce { gbps: 200 },
            oversubscription: 1.0,
        }
    }
}

/// A rail-optimised two-level fat-tree of DGX nodes (see [`add_dgx_node`]
/// for a node's insides). NIC `g` of every node connects to a leaf of rail
/// `g` (with two NICs per GPU, GPU `g`'s NICs are rails `2g` and
/// `2g + 1`). With `R` rails and `k = leaves / R` leaves per rail, leaf
/// `g·k + j` (named `leaf<g·k + j>`) takes NIC `g` of nodes
/// `j·N/k .. (j+1)·N/k` (integer division), so nodes are split among a
/// rail's leaves in order. Uplinks follow the module docs.
///
/// With `N` nodes, `G` GPUs per node, `n` NICs per GPU (`R = G·n` rails),
/// `L` leaves, `S` spines and `d_l` the downlinks of leaf `l`:
///
/// - vertices: `N·(G + R + ceil(G/2) + 3) + L + S`;
/// - links: `N·(2G + R + ceil(G/2) + 1)` inside the nodes, `N·R` NIC-to-leaf,
///   and `Σ_l ceil(d_l / oversubscription)` leaf-to-spine (none when
///   `S = 0`); when `k` divides `N` the last term is
///   `L·ceil((N/k) / oversubscription)`.
///
/// Ranks (GPUs) are node-major: rank `n·G + g` is `node<n>/gpu<g>`.
/// [`fat_tree_rotation`] builds its rotation.
pub fn fat_tree(params: &FatTree) -> Result<Topology, TopologyError> {
    let shape = FatTreeShape::of(params)?;
    let mut t = Topology::new();
    let mut nics = Vec::with_capacity(params.nodes);
    for n in 0..params.nodes {
        nics.push(add_dgx_node(&mut t, &format!("node{n}"), &shape.node)?.nics);
    }
    add_rails(
        &mut t,
        &nics,
        &Rails {
            nic: shape.nic,
            per_rail: shape.per_rail,
            spines: shape.spines,
            oversubscription: params.oversubscription,
        },
    )?;
    Ok(t)
}

/// The rail network [`add_rails`] builds over the NICs of a set of nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rails {
    /// The NICs' and switches' link kind.
    pub nic: LinkKind,
    /// Leaves per rail (`k`).
    pub per_rail: usize,
    /// Spines.
    pub spines: usize,
    /// Downlinks per uplink at each leaf.
    pub oversubscription: f64,
}

/// Adds a rail-optimised two-level Clos over `nics` (`nics[n][r]`: node
/// `n`'s NIC of rail `r`, every node with the same rails): `R·k` leaves
/// `leaf<r·k + j>`, leaf `r·k + j` taking rail `r` of nodes
/// `j·N/k .. (j+1)·N/k`, then the spines `spine<s>` and the uplinks as the
/// module docs deal them.
pub(crate) fn add_rails(
    t: &mut Topology,
    nics: &[Vec<VertexId>],
    rails: &Rails,
) -> Result<(), TopologyError> {
    let (nodes, per_rail) = (nics.len(), rails.per_rail);
    let rail_count = nics.first().map_or(0, Vec::len);
    let switch = |name: String, kind: VertexKind| {
        Vertex::new(name, kind).with_forward_latency_ps(switch_latency_ps(rails.nic))
    };
    let mut leaf_ids = Vec::with_capacity(rail_count * per_rail);
    for l in 0..rail_count * per_rail {
        leaf_ids.push(t.add_vertex(switch(format!("leaf{l}"), VertexKind::Leaf))?);
    }
    let spine_ids = (0..rails.spines)
        .map(|s| t.add_vertex(switch(format!("spine{s}"), VertexKind::Spine)))
        .collect::<Result<Vec<_>, _>>()?;

    let nic_link = Link::bundle(rails.nic, 1);
    let mut downlinks = Vec::with_capacity(leaf_ids.len());
    for rail in 0..rail_count {
        for j in 0..per_rail {
            let leaf = leaf_ids[rail * per_rail + j];
            let members = j * nodes / per_rail..(j + 1) * nodes / per_rail;
            downlinks.push((leaf, members.len()));
            for node_nics in &nics[members] {
                t.add_link(node_nics[rail], leaf, nic_link)?;
            }
        }
    }
    add_uplinks(t, &downlinks, &spine_ids, nic_link, rails.oversubscription)
}

/// Checks a rail network's parameters for `preset` and derives
/// `(leaves, leaves per rail, spines)`: `leaves` (default one per rail)
/// must be a positive multiple of `rails` with at most `nodes` per rail;
/// `spines` defaults to `max(1, rails / 2)` capped at the uplinks of the
/// largest leaf, or none for a single leaf.
pub(crate) fn rail_shape(
    preset: &str,
    nodes: usize,
    rails: usize,
    leaves: Option<usize>,
    spines: Option<usize>,
    oversubscription: f64,
) -> Result<(usize, usize, usize), TopologyError> {
    let leaf_count = leaves.unwrap_or(rails);
    if leaf_count == 0 || !leaf_count.is_multiple_of(rails) {
        return Err(parameter(format!(
            "{preset}: leaves must be a positive multiple of the {rails} rails, \
             one or more leaves per rail; got {leaf_count}"
        )));
    }
    let per_rail = leaf_count / rails;
    if per_rail > nodes {
        return Err(parameter(format!(
            "{preset}: leaves gives {per_rail} leaves per rail but there are only {nodes} nodes"
        )));
    }
    let max_downlinks = nodes.div_ceil(per_rail);
    let default_spines = (rails / 2)
        .max(1)
        .min(uplink_count(max_downlinks, oversubscription));
    let spine_count = spines.unwrap_or(if leaf_count > 1 { default_spines } else { 0 });
    check_spines(
        preset,
        spine_count,
        leaf_count,
        max_downlinks,
        oversubscription,
    )?;
    Ok((leaf_count, per_rail, spine_count))
}

/// What [`fat_tree`] builds from its parameters, once they are checked.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FatTreeShape {
    /// Each node's insides.
    node: DgxNode,
    /// The NICs' and switches' link kind.
    nic: LinkKind,
    /// Leaves in all.
    leaves: usize,
    /// Leaves per rail (`k`).
    per_rail: usize,
    /// Spines.
    spines: usize,
}

impl FatTreeShape {
    /// Checks `params` as [`fat_tree`] documents and derives the shape;
    /// an error names the parameter out of range.
    fn of(params: &FatTree) -> Result<FatTreeShape, TopologyError> {
        let &FatTree {
            nodes,
            gpus_per_node,
            nics_per_gpu,
            style,
            leaves,
            spines,
            oversubscription,
            nic,
        } = params;
        let node = DgxNode {
            style,
            gpus: gpus_per_node,
            nics_per_gpu,
        };
        if nodes == 0 {
            return Err(parameter("fat_tree: nodes must be at least 1"));
        }
        if !(1..=8).contains(&gpus_per_node) {
            return Err(parameter(format!(
                "fat_tree: gpus_per_node must be 1..=8, got {gpus_per_node}"
            )));
        }
        if !(1..=2).contains(&nics_per_gpu) {
            return Err(parameter(format!(
                "fat_tree: nics_per_gpu must be 1 or 2, got {nics_per_gpu}"
            )));
        }
        check_oversubscription("fat_tree", oversubscription)?;
        let nic = nic.unwrap_or(style.nic());
        check_network_kind("fat_tree", nic)?;
        let (leaf_count, per_rail, spine_count) = rail_shape(
            "fat_tree",
            nodes,
            node.nic_count(),
            leaves,
            spines,
            oversubscription,
        )?;
        let vertices = nodes
            .checked_mul(node.vertex_count())
            .and_then(|v| v.checked_add(leaf_count)?.checked_add(spine_count));
        check_size("fat_tree", vertices)?;
        Ok(FatTreeShape {
            node,
            nic,
            leaves: leaf_count,
            per_rail,
            spines: spine_count,
        })
    }
}

/// An Ethernet (or RoCE, or InfiniBand) leaf-spine cluster of CPU hosts:
/// host `h` is a [`VertexKind::Cpu`] endpoint `host<h>` linked by PCIe
/// Gen4 x16 to its NIC `host<h>/nic`, which links to `leaf<h / hosts_per_leaf>`
/// with `nic`. Uplinks follow the module docs.
///
/// With `H` hosts, `L = ceil(H / hosts_per_leaf)` leaves, `S` spines and
/// `d_l` hosts on leaf `l`: `2H + L + S` vertices and
/// `2H + Σ_l ceil(d_l / oversubscription)` links (no uplinks when `S = 0`);
/// when `hosts_per_leaf` divides `H` the sum is
/// `L·ceil(hosts_per_leaf / oversubscription)`. [`leaf_spine_rotation`]
/// builds its rotation.
pub fn leaf_spine(params: &LeafSpine) -> Result<Topology, TopologyError> {
    let leaf_count = leaf_spine_leaves(params)?;
    let &LeafSpine {
        hosts,
        hosts_per_leaf,
        spines,
        nic,
        oversubscription,
    } = params;

    let mut t = Topology::new();
    let pcie = Link::bundle(
        LinkKind::Pcie {
            generation: 4,
            width: 16,
        },
        1,
    );
    let mut nics = Vec::with_capacity(hosts);
    for h in 0..hosts {
        let host = t.add_vertex(Vertex::with_default_latency(
            format!("host{h}"),
            VertexKind::Cpu,
        ))?;
        let card = t.add_vertex(Vertex::with_default_latency(
            format!("host{h}/nic"),
            VertexKind::Nic,
        ))?;
        t.add_link(host, card, pcie)?;
        nics.push(card);
    }
    debug_assert_eq!(leaf_count, hosts.div_ceil(hosts_per_leaf));
    add_leaves(&mut t, &nics, hosts_per_leaf, spines, nic, oversubscription)?;
    Ok(t)
}

/// Adds the leaf-spine network of [`leaf_spine`] over `nics` (one per
/// host): leaf `l` (`leaf<l>`) takes NICs `l·hosts_per_leaf ..`, then the
/// spines `spine<s>` and the uplinks as the module docs deal them.
pub(crate) fn add_leaves(
    t: &mut Topology,
    nics: &[VertexId],
    hosts_per_leaf: usize,
    spines: usize,
    nic: LinkKind,
    oversubscription: f64,
) -> Result<(), TopologyError> {
    let switch = |name: String, kind: VertexKind| {
        Vertex::new(name, kind).with_forward_latency_ps(switch_latency_ps(nic))
    };
    let nic_link = Link::bundle(nic, 1);
    let mut downlinks = Vec::with_capacity(nics.len().div_ceil(hosts_per_leaf));
    for (l, members) in nics.chunks(hosts_per_leaf).enumerate() {
        let leaf = t.add_vertex(switch(format!("leaf{l}"), VertexKind::Leaf))?;
        for &card in members {
            t.add_link(card, leaf, nic_link)?;
        }
        downlinks.push((leaf, members.len()));
    }
    let spine_ids = (0..spines)
        .map(|s| t.add_vertex(switch(format!("spine{s}"), VertexKind::Spine)))
        .collect::<Result<Vec<_>, _>>()?;
    add_uplinks(t, &downlinks, &spine_ids, nic_link, oversubscription)
}

/// Checks `params` as [`leaf_spine`] documents and returns the number of
/// leaves; an error names the parameter out of range.
fn leaf_spine_leaves(params: &LeafSpine) -> Result<usize, TopologyError> {
    let &LeafSpine {
        hosts,
        hosts_per_leaf,
        spines,
        nic,
        oversubscription,
    } = params;
    if hosts == 0 {
        return Err(parameter("leaf_spine: hosts must be at least 1"));
    }
    if hosts_per_leaf == 0 {
        return Err(parameter("leaf_spine: hosts_per_leaf must be at least 1"));
    }
    check_oversubscription("leaf_spine", oversubscription)?;
    check_network_kind("leaf_spine", nic)?;
    let leaf_count = hosts.div_ceil(hosts_per_leaf);
    check_spines(
        "leaf_spine",
        spines,
        leaf_count,
        hosts.min(hosts_per_leaf),
        oversubscription,
    )?;
    let vertices = hosts
        .checked_mul(2)
        .and_then(|v| v.checked_add(leaf_count)?.checked_add(spines));
    check_size("leaf_spine", vertices)?;
    Ok(leaf_count)
}

/// Uplinks of a leaf with `downlinks` downlinks: `ceil(downlinks / o)`.
pub(crate) fn uplink_count(downlinks: usize, oversubscription: f64) -> usize {
    (downlinks as f64 / oversubscription).ceil() as usize
}

/// Adds each leaf's uplinks, dealt round-robin over `spines` from spine 0
/// (none when there are no spines).
fn add_uplinks(
    t: &mut Topology,
    leaves: &[(VertexId, usize)],
    spines: &[VertexId],
    link: Link,
    oversubscription: f64,
) -> Result<(), TopologyError> {
    if spines.is_empty() {
        return Ok(());
    }
    for &(leaf, downlinks) in leaves {
        for i in 0..uplink_count(downlinks, oversubscription) {
            t.add_link(leaf, spines[i % spines.len()], link)?;
        }
    }
    Ok(())
}

/// The forwarding latency of a switch whose ports are of kind `nic`.
fn switch_latency_ps(nic: LinkKind) -> u64 {
    match nic {
        LinkKind::InfiniBand(_) => IB_SWITCH_LATENCY_PS,
        _ => ETHERNET_SWITCH_LATENCY_PS,
    }
}

/// Checks an oversubscription ratio is finite and at least 1.
pub(crate) fn check_oversubscription(preset: &str, o: f64) -> Result<(), TopologyError> {
    if o.is_finite() && o >= 1.0 {
        Ok(())
    } else {
        Err(parameter(format!(
            "{preset}: oversubscription must be a finite number >= 1 (1 = non-blocking), got {o}"
        )))
    }
}

/// Checks `nic` is a network link kind.
pub(crate) fn check_network_kind(preset: &str, nic: LinkKind) -> Result<(), TopologyError> {
    if nic.is_network() {
        Ok(())
    } else {
        Err(parameter(format!(
            "{preset}: nic must be a network link kind (ib_hdr, ib_ndr, ib_xdr, roce<gbps>, \
             ethernet<gbps>), got {nic}"
        )))
    }
}

/// Spines must exist when there are several leaves, and each must get a
/// link: at most as many as the largest leaf (`max_downlinks`) has uplinks.
pub(crate) fn check_spines(
    preset: &str,
    spines: usize,
    leaves: usize,
    max_downlinks: usize,
    oversubscription: f64,
) -> Result<(), TopologyError> {
    let max_uplinks = uplink_count(max_downlinks, oversubscription);
    if spines == 0 && leaves > 1 {
        Err(parameter(format!(
            "{preset}: spines = 0 is only allowed with a single leaf (the leaf joins every \
             host); with {leaves} leaves give at least 1 spine"
        )))
    } else if spines > max_uplinks {
        Err(parameter(format!(
            "{preset}: spines ({spines}) exceeds the most uplinks a leaf has \
             ({max_uplinks} = ceil({max_downlinks} / oversubscription {oversubscription})), \
             so some spines would have no link"
        )))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
