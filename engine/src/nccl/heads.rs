//! NCCL's NVLS and CollNet direct graphs (`src/graph/search.cc` @b91894bd),
//! simplified: their channels are **heads**, GPUs that each own a share of
//! every call, and a bandwidth per head inside the node (`bwIntra`) and
//! across nodes (`bwInter`).
//!
//! - **NVLS** needs an NVSwitch in the node and compute capability 9.0 or
//!   more (`search.cc:1063`). On one node every GPU is a head, up to 32
//!   (`:1065,1070-1073`); a head's channel charges its speed on every
//!   GPU's NVSwitch links and twice on its own (`ncclTopoSearchTryNvls`,
//!   `:387-417`), so `k` heads need `(k + 1) x bwIntra` of each GPU's
//!   NVLink bundle. The speed is the first of the intra-node array that
//!   fits; a second pass then raises `bwInter` alone while it is below
//!   `2 x bwIntra` (`:1202-1205`), which nothing limits on one node, so
//!   it climbs to the array's top or past `2 x bwIntra`. Across nodes the
//!   heads are the GPUs local to the node's NICs, one per distinct GPU
//!   (`:695-713`); the speed comes from the inter-node array, bounded by
//!   the GPU-to-NIC path, and more heads rank before more bandwidth
//!   (`:424-428`); the second pass raises `bwInter` while the NIC paths
//!   carry it.
//! - **CollNet direct** has the same NIC-local heads, at most 8
//!   (`search.cc:1066`), at the inter-node array's best speed the NIC
//!   paths carry; the second pass's `bwIntra` raise for CollNet graphs
//!   (`:1206-1209`) is bounded here by a GPU's NVLink bundle shared by the
//!   node's GPUs (a simplification: NCCL's per-hop accounting of that
//!   graph is not modelled).
//!
//! Like the ring search, the graphs are found on the first node and
//! apply to every node by local index.

use topologies::{LinkKind, Router, Topology, VertexId, VertexKind};

use super::constants::Constants;
use super::machine::{Machine, PathType, path_type, route};

/// A graph whose channels are head GPUs: NVLS's or CollNet direct's.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadGraph {
    /// The heads, as indices into each node's ranks (in rank order); one
    /// search channel each.
    pub heads: Vec<usize>,
    /// Bandwidth per head within a node, GB/s (`bwIntra`).
    pub bw_intra: f64,
    /// Bandwidth per head across nodes, GB/s (`bwInter`).
    pub bw_inter: f64,
}

impl HeadGraph {
    /// Search channels: one per head (NCCL's `nChannels`).
    pub fn channels(&self) -> usize {
        self.heads.len()
    }
}

/// The speed array of `machine`'s architecture (within or across nodes).
fn speeds<'c>(constants: &'c Constants, machine: &Machine, across: bool) -> &'c [f64] {
    let arch = match machine.compute_capability {
        c if c >= 100 => 2,
        c if c >= 90 => 1,
        _ => 0,
    };
    constants.speeds[arch * 2 + usize::from(across)]
}

/// A GPU's NVLink bandwidth to NVSwitches, the smaller direction, GB/s
/// (0 without an NVSwitch).
fn nvswitch_bundle(topology: &Topology, gpu: VertexId) -> f64 {
    let mut out = 0.0;
    let mut back = 0.0;
    for l in topology.out_links(gpu) {
        let link = topology.link(l);
        let (_, to) = topology.ends(l);
        if matches!(link.kind, LinkKind::NvLink { .. })
            && topology.vertex(to).kind == VertexKind::NvSwitch
        {
            out += link.bandwidth_bytes_per_s / 1e9;
            back += topology.link(topology.reverse(l)).bandwidth_bytes_per_s / 1e9;
        }
    }
    f64::min(out, back)
}

/// The first node's GPUs.
fn first_node_gpus(machine: &Machine) -> Vec<VertexId> {
    machine.nodes[0]
        .ranks
        .iter()
        .map(|&r| machine.placement[r])
        .collect()
}

/// The smallest NVSwitch bundle of the first node's GPUs, if every one has
/// an NVSwitch.
fn node_bundle(topology: &Topology, gpus: &[VertexId]) -> Option<f64> {
    let bundle = gpus
        .iter()
        .map(|&g| nvswitch_bundle(topology, g))
        .fold(f64::INFINITY, f64::min);
    (bundle.is_finite() && bundle > 0.0).then_some(bundle)
}

/// The first node's NIC-local heads: for each NIC in order, the GPU
/// reaching it through PCIe switches only (PIX before PXB, never across
/// the network; NCCL's `net.localGpu`), a GPU not already a head first,
/// each GPU once, with that path's bandwidth (the slower of the route and
/// the NIC's network port), GB/s.
fn nic_heads(topology: &Topology, router: &mut Router, machine: &Machine) -> Vec<(usize, f64)> {
    let gpus = first_node_gpus(machine);
    let mut heads: Vec<(usize, f64)> = Vec::new();
    for &nic in &machine.nodes[0].nics {
        let port = topology
            .out_links(nic)
            .into_iter()
            .filter(|&l| topology.link(l).kind.is_network())
            .map(|l| topology.link(l).bandwidth_bytes_per_s / 1e9)
            .fold(f64::INFINITY, f64::min);
        let mut local: Vec<(PathType, bool, usize, f64)> = gpus
            .iter()
            .enumerate()
            .filter_map(|(i, &g)| {
                let r = route(router, g, nic)?;
                if r.iter().any(|&l| topology.link(l).kind.is_network()) {
                    return None;
                }
                let t = path_type(topology, &r);
                let bw = r
                    .iter()
                    .map(|&l| topology.link(l).bandwidth_bytes_per_s / 1e9)
                    .fold(port, f64::min);
                let taken = heads.iter().any(|&(h, _)| h == i);
                (t <= PathType::Pxb).then_some((t, taken, i, bw))
            })
            .collect();
        local.sort_by_key(|&(t, taken, i, _)| (taken, t, i));
        if let Some(&(_, false, i, bw)) = local.first() {
            heads.push((i, bw));
        }
    }
    heads
}

/// NCCL's NVLS graph on `machine`, or `None` when NVLS has no channels
/// there (no NVSwitch, compute capability below 9.0, fewer than 2 GPUs
/// per node, no NIC-local GPU across nodes, or no speed fits).
pub fn nvls_graph(
    topology: &Topology,
    router: &mut Router,
    machine: &Machine,
    constants: &Constants,
) -> Option<HeadGraph> {
    let newer = constants.newer?;
    let gpus = first_node_gpus(machine);
    if machine.compute_capability < 90 || gpus.len() < 2 {
        return None;
    }
    let bundle = node_bundle(topology, &gpus)?;
    let n = gpus.len();
    let max_heads = n.min(newer.nvls_max_heads);
    // NCCL's totalBw, scaled for non-ring patterns (search.cc:1099-1101).
    let total = bundle * n as f64 / (n - 1) as f64;
    if machine.node_count() == 1 {
        let speeds = speeds(constants, machine, false);
        let start = speeds
            .iter()
            .position(|&s| s <= bundle + 1e-9 && s * max_heads as f64 <= total + 1e-9)?;
        let i =
            (start..speeds.len()).find(|&i| (max_heads + 1) as f64 * speeds[i] <= bundle + 1e-9)?;
        let bw_intra = speeds[i];
        let mut j = i;
        while j > 0 && speeds[j] < 2.0 * bw_intra {
            j -= 1;
        }
        return Some(HeadGraph {
            heads: (0..max_heads).collect(),
            bw_intra,
            bw_inter: speeds[j],
        });
    }
    let candidates = nic_heads(topology, router, machine);
    let candidates = &candidates[..candidates.len().min(max_heads)];
    let max_bw = candidates.iter().map(|&(_, bw)| bw).fold(0.0, f64::max);
    let speeds = speeds(constants, machine, true);
    let start = speeds
        .iter()
        .position(|&s| s <= max_bw + 1e-9 && s <= total + 1e-9)?;
    let mut best: Option<(Vec<usize>, f64)> = None;
    for &s in &speeds[start..] {
        let fit = ((bundle / s + 1e-9).floor() as usize).saturating_sub(1);
        let heads: Vec<usize> = candidates
            .iter()
            .filter(|&&(_, bw)| bw + 1e-9 >= s)
            .map(|&(h, _)| h)
            .take(fit)
            .collect();
        if heads.is_empty() {
            continue;
        }
        let better = best.as_ref().is_none_or(|(b, bs)| {
            heads.len() > b.len()
                || (heads.len() == b.len() && heads.len() as f64 * s > b.len() as f64 * bs)
        });
        if better {
            best = Some((heads, s));
        }
        if best
            .as_ref()
            .is_some_and(|(b, _)| b.len() == candidates.len())
        {
            break;
        }
    }
    let (heads, bw_intra) = best?;
    let nic_bw = candidates
        .iter()
        .filter(|(h, _)| heads.contains(h))
        .map(|&(_, bw)| bw)
        .fold(f64::INFINITY, f64::min);
    let mut j = speeds
        .iter()
        .position(|&s| s <= bw_intra + 1e-9)
        .unwrap_or(0);
    while j > 0 && speeds[j] < 2.0 * bw_intra && speeds[j - 1] <= nic_bw + 1e-9 {
        j -= 1;
    }
    Some(HeadGraph {
        heads,
        bw_intra,
        bw_inter: speeds[j],
    })
}

/// NCCL's CollNet direct graph on a multi-node `machine` (see the module
/// docs), or `None` without an NVSwitch or NIC-local GPUs.
pub fn collnet_direct_graph(
    topology: &Topology,
    router: &mut Router,
    machine: &Machine,
    constants: &Constants,
) -> Option<HeadGraph> {
    let newer = constants.newer?;
    if machine.node_count() < 2 {
        return None;
    }
    let gpus = first_node_gpus(machine);
    let bundle = node_bundle(topology, &gpus)?;
    let candidates = nic_heads(topology, router, machine);
    let heads: Vec<usize> = candidates
        .iter()
        .map(|&(h, _)| h)
        .take(newer.collnet_max_local_ranks)
        .collect();
    let nic_bw = candidates
        .iter()
        .take(heads.len())
        .map(|&(_, bw)| bw)
        .fold(f64::INFINITY, f64::min);
    let speeds = speeds(constants, machine, true);
    let i = speeds.iter().position(|&s| s <= nic_bw + 1e-9)?;
    let bw_inter = speeds[i];
    let share = bundle / gpus.len() as f64;
    let mut j = i;
    while j > 0 && speeds[j] < 2.0 * bw_inter && speeds[j - 1] <= share + 1e-9 {
        j -= 1;
    }
    Some(HeadGraph {
        heads,
        bw_intra: speeds[j],
        bw_inter,
    })
}
