//! Rings within one node: the channel search when there is no network, and
//! the depth-first extension through a node's GPUs that the cross-node
//! search uses too (see the parent module for NCCL's procedure).

use std::collections::HashMap;

use super::{Budget, Local, LocalChannel, NodeView, best_speed, route_bw, total_bw};
use crate::nccl::constants::Constants;
use crate::nccl::machine::PathType;

/// The most DFS steps one ring search may take (the ring of a node with
/// no NVLink ring at some speed fails fast in practice; this bounds odd
/// topologies the way NCCL's search timeout does).
const SEARCH_STEPS: usize = 200_000;

/// One node, no network: rings through all its GPUs.
pub(super) fn search_rings(
    view: &mut NodeView,
    speeds: &[f64],
    constants: &Constants,
) -> Option<Local> {
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
pub(super) fn extend(
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
