//! Channels across nodes: each enters a node from a NIC at a GPU next to
//! it and leaves from a GPU that reaches the same NIC (PIX or PXB first,
//! else PXN through an NVLink peer), with the NIC's network port charged
//! both ways (see the parent module).

use std::collections::HashMap;

use topologies::{LinkId, Route};

use super::ring::extend;
use super::{Budget, Local, LocalChannel, NodeView, best_speed, route_bw, total_bw};
use crate::nccl::constants::Constants;
use crate::nccl::machine::{PathType, path_type, route};

/// Several nodes: channels entering and leaving each node through a NIC.
pub(super) fn search_net(
    view: &mut NodeView,
    speeds: &[f64],
    constants: &Constants,
) -> Option<Local> {
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
