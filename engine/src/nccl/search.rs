//! NCCL's channel search (`src/graph/search.cc` @ab2b89c4), simplified:
//! how many channels, at what bandwidth each, and each channel's order
//! through every node and NIC.
//!
//! A channel is a path through the GPUs of a node: a ring closing on
//! itself on one node, or, across nodes, a path that enters the node from
//! a NIC at a GPU next to it and leaves from a GPU that reaches the same
//! NIC (through its PCIe switch, else through an NVLink peer next to the
//! NIC: NCCL's PXN). Searching at a per-channel speed `s`, every channel
//! takes `s` from every link direction it crosses (GPU to GPU routes, GPU
//! to NIC routes, the NIC's network port both ways), and channels are
//! added while the links have room, at most `MAXCHANNELS / 2` (16 in
//! 2.21.5, 32 in 2.29.7).
//!
//! As in NCCL, speeds are tried from the largest the links allow
//! (`maxBw`, the best GPU-to-NIC or GPU-to-GPU path; `totalBw`, a GPU's
//! NVLink or PCIe total) down NCCL's speed arrays; a result whose
//! `channels x speed` reaches `totalBw` (or 16 channels) ends the search,
//! and lower speeds are tried only while above 0.49 of the best so far.
//! Within a node, hops must be NVLink-only first (NCCL's `typeIntra` NVL);
//! only when no ring exists at any speed are PCIe hops allowed. Then the
//! channels are duplicated (`ncclTopoDupChannels`): twice the channels at
//! half the speed, unless the speed is below 25 GB/s, or the GPU is newer
//! than Ampere with a speed below 50 and more than 4 channels.
//!
//! Simplifications (documented, not hidden): the search runs on the first
//! node and is copied to the others by local index (NCCL's ranks all
//! search and agree on the minimum); NCCL's timeout-bounded relaxation
//! steps (`sameChannels`, cross-NIC rings, raising `typeInter` step by
//! step) collapse into "PIX exit first, PXN otherwise"; the tree graph is
//! the ring graph (NCCL searches it separately at the same channel count),
//! and so are the PAT graph (NCCL's tree graph) and the CollNet chain
//! graph. The NVLS and CollNet direct graphs are in [`super::heads`].
//!
//! This file holds the search's result, its budget and node view, and the
//! choice of speed and the duplication; `ring.rs` finds rings within a
//! node (and the depth-first extension both searches use), `net.rs` the
//! channels across nodes through their NICs.

mod net;
mod ring;

use std::collections::HashMap;

use algorithms::Rank;
use topologies::{LinkId, LinkKind, Route, Router, Topology, VertexId};

use super::constants::Constants;
use super::machine::{Machine, PathType, route};
use net::search_net;
use ring::search_rings;

/// What the search found: NCCL's `ncclTopoGraph` for the ring (the tree
/// uses the same channels).
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Search channels, after duplication (NCCL's `graph->nChannels`).
    pub channels: usize,
    /// Bandwidth per channel within a node, GB/s (`bwIntra`).
    pub bw_intra: f64,
    /// Bandwidth per channel across nodes, GB/s (`bwInter`).
    pub bw_inter: f64,
    /// Whether every intra-node hop is NVLink (`typeIntra` NVL).
    pub intra_nvlink: bool,
    /// How channels reach their NIC (`typeInter`; PIX on one node).
    pub inter: PathType,
    /// `order[c][node]`: channel `c`'s ranks through the node, entry first.
    pub order: Vec<Vec<Vec<Rank>>>,
    /// `nic[c][node]`: the NIC channel `c` crosses the node through.
    pub nic: Vec<Vec<Option<VertexId>>>,
}

/// Link directions' spare bandwidth during a search, GB/s.
struct Budget<'t> {
    topology: &'t Topology,
    used: HashMap<LinkId, f64>,
}

impl Budget<'_> {
    fn left(&self, l: LinkId) -> f64 {
        self.topology.link(l).bandwidth_bytes_per_s / 1e9 - self.used.get(&l).unwrap_or(&0.0)
    }

    fn fits(&self, routes: &[&[LinkId]], s: f64) -> bool {
        let mut need: HashMap<LinkId, f64> = HashMap::new();
        for r in routes {
            for &l in r.iter() {
                *need.entry(l).or_default() += s;
            }
        }
        need.iter().all(|(&l, &n)| self.left(l) + 1e-9 >= n)
    }

    fn charge(&mut self, route: &[LinkId], s: f64) {
        for &l in route {
            *self.used.entry(l).or_default() += s;
        }
    }
}

/// The search's view of one node: routes between its GPUs and to its NICs.
struct NodeView<'a> {
    topology: &'a Topology,
    router: &'a mut Router,
    gpus: Vec<VertexId>,
    nics: Vec<VertexId>,
    hops: HashMap<(usize, usize), Option<Route>>,
}

impl NodeView<'_> {
    /// The route between local GPUs `a` and `b`, if any.
    fn hop(&mut self, a: usize, b: usize) -> Option<Route> {
        if let Some(r) = self.hops.get(&(a, b)) {
            return r.clone();
        }
        let r = route(self.router, self.gpus[a], self.gpus[b]);
        self.hops.insert((a, b), r.clone());
        r
    }

    /// Whether the hop `a -> b` is NVLink only.
    fn nvlink_hop(&mut self, a: usize, b: usize) -> bool {
        let topology = self.topology;
        self.hop(a, b).is_some_and(|r| {
            r.iter()
                .all(|&l| matches!(topology.link(l).kind, LinkKind::NvLink { .. }))
        })
    }
}

/// Runs the search over `machine` (see the module docs).
pub fn search(
    topology: &Topology,
    router: &mut Router,
    machine: &Machine,
    constants: &Constants,
) -> Graph {
    let first = &machine.nodes[0];
    let gpus: Vec<VertexId> = first.ranks.iter().map(|&r| machine.placement[r]).collect();
    let mut view = NodeView {
        topology,
        router,
        gpus,
        nics: first.nics.clone(),
        hops: HashMap::new(),
    };
    let multi_node = machine.node_count() > 1 && !view.nics.is_empty();
    // Speed arrays by architecture: before Hopper, Hopper, Blackwell
    // (`search.cc:1087-1095` @b91894bd; 2.21.5's Blackwell entries are
    // its Hopper arrays).
    let arch = match machine.compute_capability {
        c if c >= 100 => 2,
        c if c >= 90 => 1,
        _ => 0,
    };
    let speeds = constants.speeds[arch * 2 + usize::from(multi_node)];
    let local = if multi_node {
        search_net(&mut view, speeds, constants)
    } else {
        search_rings(&mut view, speeds, constants)
    };
    let mut local = local.unwrap_or_else(|| Local {
        // NCCL's fallback: one channel at 0.1 GB/s in PCI order.
        channels: vec![LocalChannel {
            order: (0..view.gpus.len()).collect(),
            nic: (!view.nics.is_empty()).then_some(0),
        }],
        speed: 0.1,
        intra_nvlink: false,
        inter: PathType::Sys,
    });
    // ncclTopoDupChannels (src/graph/search.cc:835-848 @ab2b89c4).
    let dup = local.speed >= 25.0
        && !(machine.compute_capability > 80 && local.speed < 50.0 && local.channels.len() > 4);
    let mut speed = local.speed;
    if dup {
        let copy = local.channels.clone();
        local.channels.extend(copy);
        local
            .channels
            .truncate(constants.max_search_channels.max(1));
        speed /= 2.0;
    }
    let order = local
        .channels
        .iter()
        .map(|ch| {
            machine
                .nodes
                .iter()
                .map(|node| {
                    if node.ranks.len() == view.gpus.len() {
                        ch.order.iter().map(|&i| node.ranks[i]).collect()
                    } else {
                        node.ranks.clone()
                    }
                })
                .collect()
        })
        .collect();
    let nic = local
        .channels
        .iter()
        .map(|ch| {
            machine
                .nodes
                .iter()
                .map(|node| {
                    ch.nic
                        .filter(|_| multi_node && !node.nics.is_empty())
                        .map(|j| node.nics[j % node.nics.len()])
                })
                .collect()
        })
        .collect();
    Graph {
        channels: local.channels.len(),
        bw_intra: speed,
        bw_inter: speed,
        // One GPU per node has no intra-node hop: NCCL's PATH_LOC, which
        // its tuning reads as the PCI row (`tuning.cc:153-155`).
        intra_nvlink: local.intra_nvlink && view.gpus.len() > 1 && machine.has_nvlink,
        inter: local.inter,
        order,
        nic,
    }
}

/// One channel on the first node, by local indices.
#[derive(Clone, Debug)]
struct LocalChannel {
    order: Vec<usize>,
    nic: Option<usize>,
}

/// The first node's channels at one speed.
#[derive(Clone, Debug)]
struct Local {
    channels: Vec<LocalChannel>,
    speed: f64,
    intra_nvlink: bool,
    inter: PathType,
}

/// Picks the best speed for `try_speed` NCCL's way (see the module docs).
fn best_speed(
    speeds: &[f64],
    max_bw: f64,
    total_bw: f64,
    limit: usize,
    mut try_speed: impl FnMut(f64) -> Option<Local>,
) -> Option<Local> {
    let start = speeds
        .iter()
        .position(|&s| s <= max_bw + 1e-9 && s <= total_bw + 1e-9)?;
    let mut best: Option<Local> = None;
    for &s in &speeds[start..] {
        if let Some(b) = &best
            && s / b.speed <= 0.49
        {
            break;
        }
        let Some(found) = try_speed(s) else {
            continue;
        };
        let score = found.channels.len() as f64 * s;
        let better = best
            .as_ref()
            .is_none_or(|b| score > b.channels.len() as f64 * b.speed + 1e-9);
        if better {
            best = Some(found);
        }
        let b = best.as_ref().expect("just set");
        if b.channels.len() >= limit || b.channels.len() as f64 * b.speed + 1e-9 >= total_bw {
            break;
        }
    }
    best
}

/// A GPU's `totalBw`: its NVLink total, or its PCIe link if larger.
fn total_bw(topology: &Topology, gpu: VertexId) -> f64 {
    let mut nvlink = 0.0;
    let mut pci: f64 = 0.0;
    for l in topology.out_links(gpu) {
        let link = topology.link(l);
        let gb = link.bandwidth_bytes_per_s / 1e9;
        match link.kind {
            LinkKind::NvLink { .. } => nvlink += gb,
            _ => pci = pci.max(gb),
        }
    }
    f64::max(nvlink, pci)
}

/// The bandwidth of a route: its slowest link, GB/s.
fn route_bw(topology: &Topology, route: &[LinkId]) -> f64 {
    route
        .iter()
        .map(|&l| topology.link(l).bandwidth_bytes_per_s / 1e9)
        .fold(f64::INFINITY, f64::min)
}
