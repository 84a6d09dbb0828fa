//! The rotations of the Clos presets: [`fat_tree_rotation`] and
//! [`leaf_spine_rotation`] (the layouts and the reasons are in the
//! [`clos`](super) module docs).

use crate::TopologyError;
use crate::graph::{Topology, VertexId};
use crate::presets::symmetry::{
    Uplinks, indexed, partial_permuting_rotation, permuting_rotation, rotation, symmetry,
    vertex_map,
};
use crate::rotation::Rotation;
use crate::vertex::VertexKind;

use super::{FatTree, FatTreeShape, LeafSpine, leaf_spine_leaves, uplink_count};

/// The error for a vertex name the preset does not build with the
/// parameters given.
fn foreign(preset: &str, name: &str, shape: &str) -> TopologyError {
    symmetry(format!(
        "{preset}: the topology has {name}, which {shape} does not build; \
         was it built from these parameters?"
    ))
}

/// The rotation of a [`fat_tree`](super::fat_tree) built from `params`,
/// with ranks on `placement` (rank `r` on `placement[r]`; usually
/// `topology.endpoints()[..ranks]`, node-major), as the
/// [`clos`](super) module docs describe:
///
/// - one leaf per rail (`leaves` = `gpus_per_node`, the default): shift by
///   one node (`shift = gpus_per_node` ranks). Node `n` goes to node
///   `n + 1 mod nodes` with everything inside it and its NIC-to-leaf
///   links, leaves stay, uplink `i` of each leaf goes to its uplink
///   `(i + 1) mod u` and spine `s` to spine `s + 1 mod S`. An error when
///   there are spines and the `S` spines do not divide the `u` uplinks of
///   a leaf, or `u` does not divide `nodes`.
/// - `k > 1` leaves per rail: shift by `nodes / k` nodes
///   (`(nodes / k)·gpus_per_node` ranks). Node `n` goes to
///   `n + nodes/k mod nodes`, leaf `rail·k + j` to `rail·k + (j+1) mod k`
///   with its uplinks in order, spines stay. An error when `k` does not
///   divide `nodes` (unequal leaves).
///
/// A parameter out of range is the [`TopologyError::Parameter`]
/// [`fat_tree`](super::fat_tree) gives. The maps are checked by
/// [`Rotation::new`], whose [`TopologyError::Symmetry`] is returned for a
/// placement that does not rotate with them (fewer ranks than GPUs, ranks
/// out of node-major order) or a topology not built from `params`.
pub fn fat_tree_rotation(
    params: &FatTree,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let shape = FatTreeShape::of(params)?;
    rail_rotation(
        &RailLayout {
            preset: "fat_tree_rotation",
            prefix: "node",
            nodes: params.nodes,
            ranks_per_node: params.gpus_per_node,
            leaves: shape.leaves,
            per_rail: shape.per_rail,
            spines: shape.spines,
            oversubscription: params.oversubscription,
        },
        topology,
        placement,
    )
}

/// The turn of every node of a [`fat_tree`](super::fat_tree) built from
/// `params` by `gpus` GPUs together: rank `(n, i)` (node-major, all GPUs
/// placed, as `topology.endpoints()` gives them) goes to `(n, i + gpus)`
/// with its NICs, PCIe switch `p` to `p + gpus / 2`, each socket where
/// its first PCIe switch goes, rail `r`'s leaves to rail
/// `r + gpus·k`'s (`k` NICs per GPU) with their uplinks in order, the
/// nodes, NVSwitches and spines in place. It is a symmetry only where the
/// sockets follow: on 8-GPU nodes, the turn by 4 GPUs (the sockets swap);
/// by 2 it moves PCIe switch 1 to socket 1 while switch 0 stays on socket
/// 0, which [`Rotation::new`]'s checks refuse naming the link
/// ([`fat_tree_partial_node_turn`] carries all but the socket links).
/// NCCL's channels turn with it (see the engine's `fold` module docs): a
/// folded run by this rotation simulates `gpus`' orbit representatives
/// per node.
/// An error when `gpus` is 0, odd (PCIe switches hold two GPUs), does not
/// divide the GPUs per node, or the placement is not every GPU in order.
pub fn fat_tree_node_turn(
    params: &FatTree,
    topology: &Topology,
    placement: &[VertexId],
    gpus: usize,
) -> Result<Rotation, TopologyError> {
    let turn = node_turn_maps(
        "fat_tree_node_turn",
        params,
        topology,
        placement,
        gpus,
        true,
    )?;
    permuting_rotation(
        topology,
        placement,
        turn.rank_images,
        turn.vertices,
        Uplinks::Keep,
    )
}

/// The turn of every node's GPUs of [`fat_tree_node_turn`] with the
/// sockets left in place and the links that touch a socket (each PCIe
/// switch's uplink, the inter-socket `smp` bundle) not carried: a
/// partial rotation ([`Rotation::permuting_partial`]), a symmetry of the
/// NVLink, GPU-to-NIC PCIe and rail links only. On 8-GPU nodes it turns
/// by 2 GPUs too (4 steps: a quarter node), which
/// [`fat_tree_node_turn`] refuses; a run moved by it must cross no
/// socket link ([`Rotation::carries`]). The same errors as
/// [`fat_tree_node_turn`] for `gpus` and the placement.
pub fn fat_tree_partial_node_turn(
    params: &FatTree,
    topology: &Topology,
    placement: &[VertexId],
    gpus: usize,
) -> Result<Rotation, TopologyError> {
    let turn = node_turn_maps(
        "fat_tree_partial_node_turn",
        params,
        topology,
        placement,
        gpus,
        false,
    )?;
    let touches_socket = |v: VertexId| topology.vertex(v).kind == VertexKind::Socket;
    partial_permuting_rotation(
        topology,
        placement,
        turn.rank_images,
        turn.vertices,
        Uplinks::Keep,
        |l| {
            let (a, b) = topology.ends(l);
            !touches_socket(a) && !touches_socket(b)
        },
    )
}

/// Where a node turn takes the ranks and the vertices.
struct TurnMaps {
    /// `rank_images[r]`: where rank `r` goes.
    rank_images: Vec<usize>,
    /// `vertices[v]`: where vertex `v` goes.
    vertices: Vec<VertexId>,
}

/// The maps of [`fat_tree_node_turn`] (`sockets_follow`: each socket goes
/// where its first PCIe switch goes) or of [`fat_tree_partial_node_turn`]
/// (sockets stay), `preset` naming the caller in errors.
fn node_turn_maps(
    preset: &str,
    params: &FatTree,
    topology: &Topology,
    placement: &[VertexId],
    gpus: usize,
    sockets_follow: bool,
) -> Result<TurnMaps, TopologyError> {
    let shape = FatTreeShape::of(params)?;
    let (nodes, per_node) = (params.nodes, params.gpus_per_node);
    if gpus == 0 || !gpus.is_multiple_of(2) || !per_node.is_multiple_of(gpus) || gpus == per_node {
        return Err(symmetry(format!(
            "{preset}: a turn by {gpus} GPUs of {per_node}-GPU nodes; it must be even \
             (PCIe switches hold two GPUs), below {per_node} and divide it"
        )));
    }
    if placement.len() != nodes * per_node {
        return Err(symmetry(format!(
            "{preset}: {} ranks placed; a node turn needs all {} GPUs, node by node",
            placement.len(),
            nodes * per_node
        )));
    }
    let nics_per_gpu = params.nics_per_gpu;
    let switches = per_node.div_ceil(2);
    // Switch `p` hangs from socket `p / 2`: a socket goes where its first
    // switch goes (a socket without switches stays); the checks of
    // `Rotation::new` refuse a turn the other switches do not follow.
    let socket_image = |socket: usize| {
        let p = 2 * socket;
        if sockets_follow && p < switches {
            (p + gpus / 2) % switches / 2
        } else {
            socket
        }
    };
    let k = shape.per_rail;
    let rails = per_node * nics_per_gpu;
    let what = format!("a fat-tree of {nodes} {per_node}-GPU nodes");
    let vertices = vertex_map(topology, |name| {
        let turned = |prefix: &str, index: usize, count: usize, step: usize| {
            Ok(format!("{prefix}{}", (index + step) % count))
        };
        if let Some((n, rest)) = indexed(name, "node")
            && n < nodes
            && let Some(local) = rest.strip_prefix('/')
        {
            let inner: Result<String, TopologyError> = if let Some((g, "")) = indexed(local, "gpu")
            {
                turned("gpu", g, per_node, gpus)
            } else if let Some((i, "")) = indexed(local, "nic") {
                turned("nic", i, rails, gpus * nics_per_gpu)
            } else if let Some((p, "")) = indexed(local, "pcie") {
                turned("pcie", p, switches, gpus / 2)
            } else if let Some((s, "")) = indexed(local, "socket") {
                Ok(format!("socket{}", socket_image(s)))
            } else if local == "nvswitch" {
                Ok(local.to_string())
            } else {
                Err(foreign(preset, name, &what))
            };
            Ok(format!("node{n}/{}", inner?))
        } else if let Some((l, "")) = indexed(name, "leaf")
            && l < shape.leaves
        {
            let (rail, j) = (l / k, l % k);
            Ok(format!(
                "leaf{}",
                (rail + gpus * nics_per_gpu) % rails * k + j
            ))
        } else if let Some((s, "")) = indexed(name, "spine")
            && s < shape.spines
        {
            Ok(name.to_string())
        } else {
            Err(foreign(preset, name, &what))
        }
    })?;
    let rank_images = (0..placement.len())
        .map(|r| r / per_node * per_node + (r % per_node + gpus) % per_node)
        .collect();
    Ok(TurnMaps {
        rank_images,
        vertices,
    })
}

/// A rail-optimised Clos of alike nodes, as [`add_rails`](super::add_rails)
/// builds it, for [`rail_rotation`].
pub(crate) struct RailLayout {
    /// The rotation's name, for errors.
    pub preset: &'static str,
    /// The node names' prefix (`node`, `rack`).
    pub prefix: &'static str,
    /// Nodes.
    pub nodes: usize,
    /// Ranks on each node.
    pub ranks_per_node: usize,
    /// Leaves in all.
    pub leaves: usize,
    /// Leaves per rail (`k`).
    pub per_rail: usize,
    /// Spines.
    pub spines: usize,
    /// Downlinks per uplink at each leaf.
    pub oversubscription: f64,
}

/// The rotation of a rail network of alike nodes named
/// `<prefix><n>/...`, as [`fat_tree_rotation`] documents it.
pub(crate) fn rail_rotation(
    layout: &RailLayout,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let &RailLayout {
        preset,
        prefix,
        nodes,
        ranks_per_node,
        leaves,
        per_rail: k,
        spines,
        oversubscription,
    } = layout;
    let step = if k == 1 {
        let u = uplink_count(nodes, oversubscription);
        if spines > 0 && !u.is_multiple_of(spines) {
            return Err(symmetry(format!(
                "{preset}: each leaf's {u} uplinks are not a multiple of the {spines} \
                 spines, so moving every uplink on by one does not move the spines on by one{}",
                spine_fold_hint(prefix, nodes, spines, oversubscription)
            )));
        }
        if spines > 0 && !nodes.is_multiple_of(u) {
            return Err(symmetry(format!(
                "{preset}: each leaf's {u} uplinks do not divide the {nodes} {prefix}s, \
                 so a whole turn of the {prefix}s does not bring the uplinks back{}",
                spine_fold_hint(prefix, nodes, spines, oversubscription)
            )));
        }
        1
    } else {
        if !nodes.is_multiple_of(k) {
            // A count that splits evenly, with each leaf still holding an
            // uplink for every spine (else the layout is refused).
            let turns =
                |n: usize| n.is_multiple_of(k) && spines <= uplink_count(n / k, oversubscription);
            return Err(symmetry(format!(
                "{preset}: the {k} leaves per rail do not split the {nodes} {prefix}s \
                 evenly, so the leaves are not alike{}",
                nearest_hint(prefix, nodes, turns, None)
            )));
        }
        nodes / k
    };
    let what = format!("a rail network of {nodes} nodes, {leaves} leaves and {spines} spines");
    let vertices = vertex_map(topology, |name| {
        if let Some((n, rest)) = indexed(name, prefix)
            && n < nodes
            && rest.starts_with('/')
        {
            Ok(format!("{prefix}{}{rest}", (n + step) % nodes))
        } else if let Some((l, "")) = indexed(name, "leaf")
            && l < leaves
        {
            Ok(format!("leaf{}", l / k * k + (l % k + 1) % k))
        } else if let Some((s, "")) = indexed(name, "spine")
            && s < spines
        {
            let image = if k == 1 { (s + 1) % spines } else { s };
            Ok(format!("spine{image}"))
        } else {
            Err(foreign(preset, name, &what))
        }
    })?;
    let uplinks = if k == 1 { Uplinks::Next } else { Uplinks::Keep };
    rotation(
        topology,
        placement,
        step * ranks_per_node,
        vertices,
        uplinks,
    )
}

/// What to do instead when a single-leaf-per-rail network with spines
/// does not turn: the nearest node (or rack) counts that do with the same
/// spines, a spine count that does with the same nodes, or simulating
/// every rank. Starts with `"; "`.
fn spine_fold_hint(prefix: &str, nodes: usize, spines: usize, oversubscription: f64) -> String {
    let turns = |n: usize| {
        let u = uplink_count(n, oversubscription);
        u >= spines && u.is_multiple_of(spines) && n.is_multiple_of(u)
    };
    let u = uplink_count(nodes, oversubscription);
    let fewer_spines = (1..spines)
        .rev()
        .find(|&d| u.is_multiple_of(d) && nodes.is_multiple_of(u))
        .map(|d| format!("spines = {d}"));
    nearest_hint(prefix, nodes, turns, fewer_spines)
}

/// `"; <prefix>s = A or B, or <also> would turn; or drop `symmetry` ..."`:
/// the nearest counts below and above `count` for which `turns` holds
/// (searched up to four times `count`), then `also`, then the unfolded way
/// out.
fn nearest_hint(
    prefix: &str,
    count: usize,
    turns: impl Fn(usize) -> bool,
    also: Option<String>,
) -> String {
    let below = (1..count).rev().find(|&n| turns(n));
    let above = (count + 1..=4 * count + 4).find(|&n| turns(n));
    let counts = match (below, above) {
        (Some(b), Some(a)) => Some(format!("{prefix}s = {b} or {a}")),
        (Some(n), None) | (None, Some(n)) => Some(format!("{prefix}s = {n}")),
        (None, None) => None,
    };
    let options: Vec<String> = counts.into_iter().chain(also).collect();
    let unfolded = "drop `symmetry` to simulate every rank (hashed routes)";
    if options.is_empty() {
        format!("; {unfolded}")
    } else {
        format!("; {} would turn; or {unfolded}", options.join(", or "))
    }
}

/// The rotation of a [`leaf_spine`](super::leaf_spine) built from
/// `params`, with ranks on `placement` (usually `topology.endpoints()`):
///
/// - one leaf (`hosts <= hosts_per_leaf`): shift by one host (one rank),
///   host `h` (and its NIC) to host `h + 1 mod hosts`; the leaf, the
///   spines and the uplinks stay, so with spines the uplinks are fixed and
///   [`Rotation::link_orbits`] refuses to fold.
/// - several leaves: shift by one leaf (`hosts_per_leaf` ranks), host `h`
///   to `h + hosts_per_leaf mod hosts`, leaf `l` to `l + 1 mod L` with its
///   uplinks in order, spines stay. An error when `hosts_per_leaf` does
///   not divide `hosts` (the last leaf would be smaller).
///
/// A parameter out of range is the [`TopologyError::Parameter`]
/// [`leaf_spine`](super::leaf_spine) gives; maps that [`Rotation::new`]
/// refuses (a placement that does not rotate with them, a topology not
/// built from `params`) are its [`TopologyError::Symmetry`].
pub fn leaf_spine_rotation(
    params: &LeafSpine,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let leaves = leaf_spine_leaves(params)?;
    let &LeafSpine {
        hosts,
        hosts_per_leaf,
        spines,
        ..
    } = params;
    host_rotation(
        &HostLayout {
            preset: "leaf_spine_rotation",
            hosts,
            hosts_per_leaf,
            ranks_per_host: 1,
            leaves,
            spines,
        },
        topology,
        placement,
    )
}

/// Hosts named `host<h>` (with anything under `host<h>/`) on the leaf-spine
/// [`add_leaves`](super::add_leaves) builds, for [`host_rotation`].
pub(crate) struct HostLayout {
    /// The rotation's name, for errors.
    pub preset: &'static str,
    /// Hosts.
    pub hosts: usize,
    /// Hosts per leaf.
    pub hosts_per_leaf: usize,
    /// Ranks on each host.
    pub ranks_per_host: usize,
    /// Leaves.
    pub leaves: usize,
    /// Spines.
    pub spines: usize,
}

/// The rotation of hosts on a leaf-spine, as [`leaf_spine_rotation`]
/// documents it (a host's ranks and vertices move with it).
pub(crate) fn host_rotation(
    layout: &HostLayout,
    topology: &Topology,
    placement: &[VertexId],
) -> Result<Rotation, TopologyError> {
    let &HostLayout {
        preset,
        hosts,
        hosts_per_leaf,
        ranks_per_host,
        leaves,
        spines,
    } = layout;
    let step = if leaves == 1 {
        1
    } else if hosts.is_multiple_of(hosts_per_leaf) {
        hosts_per_leaf
    } else {
        return Err(symmetry(format!(
            "{preset}: {hosts_per_leaf} hosts per leaf do not divide the {hosts} \
             hosts, so the last leaf is not like the others"
        )));
    };
    let what = format!("a leaf-spine of {hosts} hosts, {leaves} leaves and {spines} spines");
    let vertices = vertex_map(topology, |name| {
        if let Some((h, rest)) = indexed(name, "host")
            && h < hosts
            && (rest.is_empty() || rest.starts_with('/'))
        {
            Ok(format!("host{}{rest}", (h + step) % hosts))
        } else if let Some((l, "")) = indexed(name, "leaf")
            && l < leaves
        {
            Ok(format!("leaf{}", (l + 1) % leaves))
        } else if let Some((s, "")) = indexed(name, "spine")
            && s < spines
        {
            Ok(name.to_string())
        } else {
            Err(foreign(preset, name, &what))
        }
    })?;
    rotation(
        topology,
        placement,
        step * ranks_per_host,
        vertices,
        Uplinks::Keep,
    )
}
