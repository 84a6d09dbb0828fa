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

use std::collections::HashMap;

use algorithms::Rank;
use topologies::{LinkId, LinkKind, Route, Router, Topology, VertexId};

use super::constants::Constants;
use super::machine::{Machine, PathType, path_type, route};

/// The most DFS steps one ring search may take (the ring of a node with
/// no NVLink ring at some speed fails fast in practice; this bounds odd
/// topologies the way NCCL's search timeout does).
const SEARCH_STEPS: usize = 200_000;

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

/// One node, no network: rings through all its GPUs.
fn search_rings(view: &mut NodeView, speeds: &[f64], constants: &Constants) -> Option<Local> {
    let n = view.gpus.len();
    let topology = view.topology;
    let total = view
        .gpus
        .iter()
        .map(|&g| total_bw(topology, g))
        .fold(0.0, f64::max);
    if n == 1 {
        return Some(Local {
            channels: vec![
                LocalChannel {
                    order: vec![0],
                    nic: None,
                };
                constants.max_search_channels
            ],
            speed: total.max(0.1),
            intra_nvlink: true,
            inter: PathType::Pix,
        });
    }
    for nvlink_only in [true, false] {
        let mut max_bw: f64 = 0.0;
        for a in 0..n {
            for b in 0..n {
                if a != b && (!nvlink_only || view.nvlink_hop(a, b)) {
                    let r = view.hop(a, b);
                    if let Some(r) = r {
                        max_bw = max_bw.max(route_bw(topology, &r));
                    }
                }
            }
        }
        if max_bw == 0.0 {
            continue;
        }
        let limit = constants.max_search_channels;
        let found = best_speed(speeds, max_bw, total, limit, |s| {
            let mut budget = Budget {
                topology,
                used: HashMap::new(),
            };
            let mut channels = Vec::new();
            while channels.len() < limit {
                let Some(order) = find_ring(view, &mut budget, s, nvlink_only) else {
                    break;
                };
                channels.push(LocalChannel { order, nic: None });
            }
            (!channels.is_empty()).then_some(Local {
                channels,
                speed: s,
                intra_nvlink: nvlink_only,
                inter: PathType::Pix,
            })
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A ring through every GPU of the node whose hops all fit `s` (charged
/// to `budget` when found), by depth-first search from GPU 0 trying the
/// next GPUs in index order.
fn find_ring(
    view: &mut NodeView,
    budget: &mut Budget,
    s: f64,
    nvlink_only: bool,
) -> Option<Vec<usize>> {
    let n = view.gpus.len();
    let mut path = vec![0];
    let mut steps = 0;
    if extend(
        view,
        budget,
        s,
        nvlink_only,
        &mut path,
        n,
        Some(0),
        &mut steps,
    ) {
        Some(path)
    } else {
        None
    }
}

/// Depth-first extension of `path` to all `n` GPUs, ending with a hop to
/// `close` (if any) that fits; charges the hops it keeps.
#[allow(clippy::too_many_arguments)]
fn extend(
    view: &mut NodeView,
    budget: &mut Budget,
    s: f64,
    nvlink_only: bool,
    path: &mut Vec<usize>,
    n: usize,
    close: Option<usize>,
    steps: &mut usize,
) -> bool {
    *steps += 1;
    if *steps > SEARCH_STEPS {
        return false;
    }
    let last = *path.last().expect("a path starts somewhere");
    if path.len() == n {
        let close = match close {
            None => return true,
            Some(c) if c != path[0] => return last == c,
            Some(c) => c,
        };
        if nvlink_only && !view.nvlink_hop(last, close) {
            return false;
        }
        let Some(r) = view.hop(last, close) else {
            return false;
        };
        if budget.fits(&[&r], s) {
            budget.charge(&r, s);
            return true;
        }
        return false;
    }
    let end = path_end(close, path, n);
    for k in 1..n {
        let next = (last + k) % n;
        if path.contains(&next) || (Some(next) == end && path.len() + 1 < n) {
            continue;
        }
        if nvlink_only && !view.nvlink_hop(last, next) {
            continue;
        }
        let Some(r) = view.hop(last, next) else {
            continue;
        };
        if !budget.fits(&[&r], s) {
            continue;
        }
        budget.charge(&r, s);
        path.push(next);
        if extend(view, budget, s, nvlink_only, path, n, close, steps) {
            return true;
        }
        path.pop();
        budget.charge(&r, -s);
    }
    false
}

/// The GPU a path must end on, when it is not a ring closing at its start
/// (a cross-node channel's exit GPU is fixed in advance).
fn path_end(close: Option<usize>, path: &[usize], _n: usize) -> Option<usize> {
    match close {
        Some(c) if c != path[0] => Some(c),
        _ => None,
    }
}

/// Several nodes: channels entering and leaving each node through a NIC.
fn search_net(view: &mut NodeView, speeds: &[f64], constants: &Constants) -> Option<Local> {
    let topology = view.topology;
    let n = view.gpus.len();
    let nics = view.nics.len();
    // Every GPU's path type to every NIC, and the NICs' network ports.
    let mut to_nic: Vec<Vec<Option<(Route, PathType)>>> = Vec::new();
    for g in 0..n {
        let mut row = Vec::new();
        for j in 0..nics {
            let r = route(view.router, view.gpus[g], view.nics[j]);
            row.push(r.map(|r| {
                let t = path_type(topology, &r);
                (r, t)
            }));
        }
        to_nic.push(row);
    }
    let mut from_nic: Vec<Vec<Option<Route>>> = Vec::new();
    for j in 0..nics {
        from_nic.push(
            (0..n)
                .map(|g| route(view.router, view.nics[j], view.gpus[g]))
                .collect(),
        );
    }
    let ports: Vec<Vec<LinkId>> = view
        .nics
        .iter()
        .map(|&v| {
            topology
                .out_links(v)
                .into_iter()
                .filter(|&l| topology.link(l).kind.is_network())
                .flat_map(|l| [l, topology.reverse(l)])
                .collect()
        })
        .collect();
    // Entry GPU of each NIC: the first GPU with the NIC at its best path
    // type not already entering another NIC.
    let best_type = |g: usize| {
        to_nic[g]
            .iter()
            .flatten()
            .map(|(_, t)| *t)
            .min()
            .unwrap_or(PathType::Sys)
    };
    let mut entry: Vec<Option<usize>> = vec![None; nics];
    let mut taken = vec![false; n];
    for (j, slot) in entry.iter_mut().enumerate() {
        let local = |g: usize| {
            to_nic[g][j]
                .as_ref()
                .is_some_and(|(_, t)| *t == best_type(g))
        };
        let pick = (0..n)
            .find(|&g| !taken[g] && local(g))
            .or_else(|| (0..n).find(|&g| local(g)))
            .or_else(|| (0..n).find(|&g| to_nic[g][j].is_some()));
        if let Some(g) = pick {
            taken[g] = true;
        }
        *slot = pick;
    }
    let max_bw = (0..n)
        .flat_map(|g| (0..nics).map(move |j| (g, j)))
        .filter_map(|(g, j)| {
            let (r, _) = to_nic[g][j].as_ref()?;
            let port = ports[j]
                .iter()
                .map(|&l| topology.link(l).bandwidth_bytes_per_s / 1e9)
                .fold(f64::INFINITY, f64::min);
            Some(route_bw(topology, r).min(port))
        })
        .fold(0.0, f64::max);
    let total = view
        .gpus
        .iter()
        .map(|&g| total_bw(topology, g))
        .fold(0.0, f64::max);
    let limit = constants.max_search_channels;
    best_speed(speeds, max_bw, total, limit, |s| {
        let mut budget = Budget {
            topology,
            used: HashMap::new(),
        };
        let mut channels = Vec::new();
        let mut worst = PathType::Pix;
        let mut nvlink = true;
        'channels: while channels.len() < limit {
            for k in 0..nics {
                let j = (channels.len() + k) % nics;
                if let Some(found) = net_channel(
                    view,
                    &mut budget,
                    s,
                    j,
                    entry[j],
                    &to_nic,
                    &from_nic,
                    &ports[j],
                ) {
                    worst = worst.max(found.1);
                    nvlink &= found.2;
                    channels.push(found.0);
                    continue 'channels;
                }
            }
            break;
        }
        (!channels.is_empty()).then_some(Local {
            channels,
            speed: s,
            intra_nvlink: nvlink,
            inter: worst,
        })
    })
}

/// One cross-node channel through NIC `j` at speed `s`: the order through
/// the node, how it reaches the NIC, whether its hops are NVLink.
#[allow(clippy::too_many_arguments)]
fn net_channel(
    view: &mut NodeView,
    budget: &mut Budget,
    s: f64,
    j: usize,
    entry: Option<usize>,
    to_nic: &[Vec<Option<(Route, PathType)>>],
    from_nic: &[Vec<Option<Route>>],
    port: &[LinkId],
) -> Option<(LocalChannel, PathType, bool)> {
    let n = view.gpus.len();
    let e = entry?;
    let into = from_nic[j][e].clone()?;
    // Exit candidates: another GPU reaching the NIC directly (PIX, PXB),
    // best first; else any GPU through the entry GPU over NVLink (PXN).
    let mut exits: Vec<(usize, PathType)> = (0..n)
        .filter(|&g| g != e || n == 1)
        .filter_map(|g| {
            let (_, t) = to_nic[g][j].as_ref()?;
            (*t <= PathType::Pxb).then_some((g, *t))
        })
        .collect();
    exits.sort_by_key(|&(g, t)| (t, (g + n - e) % n));
    if n > 1 {
        let pxn = (e + n - 1) % n;
        if view.nvlink_hop(pxn, e) {
            exits.push((pxn, PathType::Pxn));
        }
    }
    for (x, t) in exits {
        let out: Vec<LinkId> = match t {
            PathType::Pxn => {
                let hop = view.hop(x, e)?;
                let (r, _) = to_nic[e][j].as_ref()?;
                hop.iter().chain(r.iter()).copied().collect()
            }
            _ => to_nic[x][j].as_ref()?.0.to_vec(),
        };
        if !budget.fits(&[&into, &out, port], s) {
            continue;
        }
        budget.charge(&into, s);
        budget.charge(&out, s);
        budget.charge(port, s);
        let mut steps = 0;
        let mut nvlink_only = true;
        let mut path = vec![e];
        let mut found = n == 1 || extend(view, budget, s, true, &mut path, n, Some(x), &mut steps);
        if !found {
            nvlink_only = false;
            path = vec![e];
            steps = 0;
            found = extend(view, budget, s, false, &mut path, n, Some(x), &mut steps);
        }
        if found {
            let channel = LocalChannel {
                order: path,
                nic: Some(j),
            };
            return Some((channel, t, nvlink_only));
        }
        budget.charge(&into, -s);
        budget.charge(&out, -s);
        budget.charge(port, -s);
    }
    None
}
