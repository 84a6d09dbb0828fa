//! Which NCCL channel each channel becomes when a rotation turns the
//! GPUs inside every node ([`nccl_channel_turn`]), for folds by such a
//! turn (see the module docs of [`crate::fold`]).

use algorithms::Rank;
use algorithms::nccl::TreeNode;
use topologies::{Rotation, Router, VertexId};

use super::RankAction;
use crate::nccl::NcclSystem;
use crate::network::{channel_route, flow_id};

/// The channel turn that goes with `rotation` on `system`'s plan:
/// `images[c]` is the one channel whose ring, tree and NICs are channel
/// `c`'s moved by one step of the rotation (the ring's ranks, every tree
/// node's parent and children in order, each node's NIC, and the GPU that
/// proxies each of those NICs). An error names the first channel with no
/// such image, or two channels with the same one.
pub fn nccl_channel_turn(system: &NcclSystem, rotation: &Rotation) -> Result<Vec<u16>, String> {
    let plan = &system.plan;
    let n = system.machine.placement.len();
    if rotation.ranks() != n {
        return Err(format!(
            "the rotation moves {} ranks; NCCL's plan has {n}",
            rotation.ranks()
        ));
    }
    let g = |r: Rank| rotation.rank_image(r);
    let nodes = system.machine.node_count();
    let moved_tree = |tree: &[TreeNode]| {
        let mut out = vec![TreeNode::default(); n];
        for (r, node) in tree.iter().enumerate().take(n) {
            out[g(r)] = TreeNode {
                parent: node.parent.map(g),
                children: node.children.iter().map(|&c| g(c)).collect(),
            };
        }
        out
    };
    let moved_nics = |c: usize| {
        (0..nodes)
            .map(|node| system.channel_nic(c, node).map(|v| rotation.vertex(v)))
            .collect::<Vec<_>>()
    };
    let nics = |c: usize| {
        (0..nodes)
            .map(|node| system.channel_nic(c, node))
            .collect::<Vec<_>>()
    };
    let channels = system.channels;
    let mut images = Vec::with_capacity(channels);
    let mut taken = vec![false; channels];
    for c in 0..channels {
        let ring: Vec<Rank> = plan.ring(c).iter().map(|&r| g(r)).collect();
        let tree = moved_tree(plan.tree(c));
        let nic = moved_nics(c);
        let image = (0..channels).find(|&d| {
            plan.ring(d) == ring.as_slice() && plan.tree(d) == tree.as_slice() && nics(d) == nic
        });
        let Some(d) = image else {
            return Err(format!(
                "NCCL's channel {c} moved by the rotation is none of the {channels} channels \
                 (its ring, tree or NICs do not turn with the GPUs)"
            ));
        };
        if std::mem::replace(&mut taken[d], true) {
            return Err(format!("two channels turn into channel {d}"));
        }
        images.push(u16::try_from(d).map_err(|_| format!("channel {d} is out of range"))?);
    }
    // The GPU that proxies a NIC (NCCL's PXN) must turn with it.
    for c in 0..channels {
        for node in 0..nodes {
            let Some(nic) = system.channel_nic(c, node) else {
                continue;
            };
            let proxy = system.proxy(nic).map(|v| rotation.vertex(v));
            if proxy != system.proxy(rotation.vertex(nic)) {
                return Err(format!(
                    "the GPU proxying channel {c}'s NIC on node {node} does not turn with it"
                ));
            }
        }
    }
    Ok(images)
}

/// Whether every channel of `system`'s plan crosses nodes the same way
/// on every node moved by `rotation` (a shift by whole nodes): channel
/// `c`'s NIC on a rank's node, moved by one step, is channel `c`'s NIC on
/// the moved rank's node, and the GPU that proxies it (NCCL's PXN) moves
/// with it. Then a message of channel `c` moved by the rotation is the
/// moved rank's message of the same channel, and a fold by the shift
/// keeps the channels as they are. An algorithm whose peers are a shift
/// of the ranks (PAT's `r ± 2^d`) folds so; rings and trees of the plan
/// are not checked (an algorithm that follows them does not fold by a
/// shift). An error names the first channel and node that do not move.
pub fn nccl_nics_shift(system: &NcclSystem, rotation: &Rotation) -> Result<(), String> {
    let n = system.machine.placement.len();
    if rotation.ranks() != n {
        return Err(format!(
            "the rotation moves {} ranks; NCCL's plan has {n}",
            rotation.ranks()
        ));
    }
    let node_of = &system.machine.node_of;
    let nodes = system.machine.node_count();
    // One rank per node is enough: the NICs are per node.
    let mut seen = vec![false; nodes];
    for r in 0..n {
        let node = node_of[r];
        if std::mem::replace(&mut seen[node], true) {
            continue;
        }
        let image_node = node_of[rotation.rank_image(r)];
        for c in 0..system.channels {
            let nic = system.channel_nic(c, node);
            let moved = nic.map(|v| rotation.vertex(v));
            if moved != system.channel_nic(c, image_node) {
                return Err(format!(
                    "channel {c}'s NIC on node {node}, moved by the rotation, is not its NIC on \
                     node {image_node}"
                ));
            }
            if let Some(nic) = nic
                && system.proxy(nic).map(|v| rotation.vertex(v))
                    != system.proxy(rotation.vertex(nic))
            {
                return Err(format!(
                    "the GPU proxying channel {c}'s NIC on node {node} does not move with it"
                ));
            }
        }
    }
    Ok(())
}

/// Whether `system`'s plan is carried onto itself, channel by channel, by
/// `rotation` (a shift by whole nodes), so that NCCL's rings fold by it:
/// every channel's NICs and their proxies move with the nodes
/// ([`nccl_nics_shift`]), and channel `c`'s ring with every rank moved
/// one step is channel `c`'s ring again, read from another start (a ring
/// is a cycle: position `i` sends to `i + 1`, the last to the first).
/// Then rank `r`'s part on channel `c` (its ring neighbours, and its
/// segments, which follow the ring positions) is rank `r + shift`'s,
/// moved. A moved ring that is another channel's would need the fold to
/// turn channel tags and routes with every step, which a shift does not
/// (folds that turn channels are the node turn's,
/// [`nccl_channel_turn`]), so it is refused naming both channels. Trees
/// are not checked: NCCL's tree does not fold by a shift.
pub fn nccl_rings_shift(system: &NcclSystem, rotation: &Rotation) -> Result<(), String> {
    nccl_nics_shift(system, rotation)?;
    let plan = &system.plan;
    for c in 0..system.channels {
        let ring = plan.ring(c);
        let moved: Vec<Rank> = ring.iter().map(|&r| rotation.rank_image(r)).collect();
        let is_cycle_of = |other: &[Rank]| {
            other.len() == moved.len()
                && other
                    .iter()
                    .position(|&r| Some(&r) == moved.first())
                    .is_some_and(|start| {
                        (0..moved.len()).all(|i| other[(start + i) % other.len()] == moved[i])
                    })
        };
        if is_cycle_of(ring) {
            continue;
        }
        let why = match (0..system.channels).find(|&d| is_cycle_of(plan.ring(d))) {
            Some(d) => format!(
                "channel {c}'s ring moved by the rotation is channel {d}'s ring, and a fold by a \
                 shift keeps every channel (it does not turn channel tags)"
            ),
            None => format!(
                "channel {c}'s ring moved by the rotation is no channel's ring (the nodes' GPU \
                 orders or the node order do not move with the shift)"
            ),
        };
        return Err(why);
    }
    Ok(())
}

/// Whether the routes of `system`'s channels from the representatives of
/// `action` cross only links `rotation` carries (a partial rotation, see
/// [`Rotation::permuting_partial`]; any other carries every link): for
/// every representative, every channel, and each of its tree neighbours
/// (parent, children) and ring neighbours, the channel's route as a
/// framed message takes it (through the channel's NICs, `router` on
/// `placement`). Every framed message of a run moved by the rotation is
/// a moved copy of one of these, so this is what the run's own guard
/// (which refuses a route across an uncarried link as it is built) would
/// meet first, found before the run. An error names the channel, the
/// ranks and the link.
pub fn nccl_routes_carried(
    system: &NcclSystem,
    rotation: &Rotation,
    action: &RankAction,
    router: &mut Router,
    placement: &[VertexId],
) -> Result<(), String> {
    if !rotation.is_partial() {
        return Ok(());
    }
    let n = placement.len();
    let plan = &system.plan;
    for o in 0..action.orbits() {
        let b = action.representative(o);
        for c in 0..system.channels {
            let node = &plan.tree(c)[b];
            let ring = plan.ring(c);
            let around = ring.iter().position(|&r| r == b).map(|i| {
                let len = ring.len();
                [ring[(i + 1) % len], ring[(i + len - 1) % len]]
            });
            let peers = node
                .parent
                .into_iter()
                .chain(node.children.iter().copied())
                .chain(around.into_iter().flatten())
                .filter(|&d| d != b && d < n);
            for d in peers {
                let channel =
                    u16::try_from(c).map_err(|_| format!("channel {c} is out of range"))?;
                let route = channel_route(
                    router,
                    Some(system),
                    placement,
                    (b, d),
                    channel,
                    flow_id(b, d, n),
                );
                if let Some(&l) = route.iter().find(|&&l| !rotation.carries(l)) {
                    return Err(format!(
                        "NCCL channel {c}'s route from rank {b} to rank {d} crosses {}, a link \
                         the turn does not carry (it stays in place), so no turned copy of it \
                         is a route",
                        router.topology().link_name(l)
                    ));
                }
            }
        }
    }
    Ok(())
}
