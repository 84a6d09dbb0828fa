//! Building the node's topology from a parsed matrix: NVLink bundles
//! (through one NVSwitch or GPU to GPU) and the PCIe tree of sockets,
//! host bridges and switches (see the [module docs](super)).

use super::{Cell, Matrix, NODE, NVLINKS_PER_GPU_MAX, NvsmiOptions, PHB, PIX};
use crate::graph::{Topology, VertexId};
use crate::kind::{Link, LinkKind};
use crate::vertex::{Vertex, VertexKind};

/// NVLink bundles: through one NVSwitch or GPU to GPU (module docs).
pub(super) fn add_nvlinks(
    m: &Matrix,
    vertex: &[VertexId],
    options: &NvsmiOptions,
    t: &mut Topology,
) -> Result<(), crate::TopologyError> {
    let gpus: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].is_gpu)
        .collect();
    let mut pairs = Vec::new();
    for (a, &i) in gpus.iter().enumerate() {
        for &j in &gpus[a + 1..] {
            pairs.push((i, j, m.cells[i][j].0));
        }
    }
    let uniform = match pairs.first() {
        Some(&(_, _, Cell::NvLink(k))) if pairs.iter().all(|p| p.2 == Cell::NvLink(k)) => Some(k),
        _ => None,
    };
    let peers = gpus.len().saturating_sub(1) as u32;
    if let Some(k) = uniform.filter(|&k| k.saturating_mul(peers) > NVLINKS_PER_GPU_MAX) {
        let switch = t.add_vertex(Vertex::new("nvswitch", VertexKind::NvSwitch))?;
        for &g in &gpus {
            t.add_link(vertex[g], switch, Link::bundle(options.nvlink, k))?;
        }
        return Ok(());
    }
    for (i, j, cell) in pairs {
        if let Cell::NvLink(k) = cell {
            t.add_link(vertex[i], vertex[j], Link::bundle(options.nvlink, k))?;
        }
    }
    Ok(())
}

/// One group of devices at most `level` apart, with a vertex.
struct Group {
    level: u8,
    members: Vec<usize>,
    vertex: VertexId,
}

/// Sockets, host bridges and PCIe switches from the nested groups, with
/// PCIe uplinks and pairwise SMP links between sockets (module docs).
pub(super) fn add_pcie_tree(
    level: &[Vec<u8>],
    vertex: &[VertexId],
    options: &NvsmiOptions,
    t: &mut Topology,
) -> Result<(), crate::TopologyError> {
    let n = level.len();
    let mut groups: Vec<Group> = Vec::new();
    let (mut sockets, mut bridges, mut switches) = (0, 0, 0);
    // Coarsest first, so that names number sockets, then bridges, then switches.
    for l in (PIX..=NODE).rev() {
        let mut assigned = vec![false; n];
        for i in 0..n {
            if assigned[i] {
                continue;
            }
            let members: Vec<usize> = (0..n).filter(|&j| level[i][j] <= l).collect();
            for &j in &members {
                assigned[j] = true;
            }
            let join = members
                .iter()
                .flat_map(|&a| members.iter().map(move |&b| level[a][b]))
                .max()
                .unwrap_or(0);
            let (name, kind) = if l == NODE {
                sockets += 1;
                (format!("socket{}", sockets - 1), VertexKind::Socket)
            } else if members.len() < 2 || join != l {
                continue;
            } else if l == PHB {
                bridges += 1;
                (
                    format!("host_bridge{}", bridges - 1),
                    VertexKind::PcieSwitch,
                )
            } else {
                switches += 1;
                (
                    format!("pcie_switch{}", switches - 1),
                    VertexKind::PcieSwitch,
                )
            };
            let vertex = t.add_vertex(Vertex::new(name, kind))?;
            groups.push(Group {
                level: l,
                members,
                vertex,
            });
        }
    }
    // The smallest group above a device or group: the lowest level holding it.
    let parent = |device: usize, above: u8| {
        groups
            .iter()
            .filter(|g| g.level > above && g.members.contains(&device))
            .min_by_key(|g| g.level)
            .map(|g| g.vertex)
            .expect("every device is in a socket group")
    };
    let pcie = Link::bundle(options.pcie, 1);
    let mut device_order: Vec<usize> = (0..n).collect();
    device_order.sort_by_key(|&i| vertex[i]);
    for i in device_order {
        t.add_link(vertex[i], parent(i, 0), pcie)?;
    }
    for g in groups.iter().filter(|g| g.level < NODE) {
        t.add_link(g.vertex, parent(g.members[0], g.level), pcie)?;
    }
    let socket_vertices: Vec<VertexId> = groups
        .iter()
        .filter(|g| g.level == NODE)
        .map(|g| g.vertex)
        .collect();
    for (a, &s) in socket_vertices.iter().enumerate() {
        for &u in &socket_vertices[a + 1..] {
            t.add_link(s, u, Link::bundle(LinkKind::Smp, 1))?;
        }
    }
    Ok(())
}
