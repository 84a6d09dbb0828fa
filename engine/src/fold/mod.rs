//! Folded runs: simulate one representative of each orbit of a rotation.
//!
//! A ring allreduce on `N` ranks sends `2N(N-1)` messages; at 16 384
//! ranks that is 5.4·10^8, and no per-event speed makes it a matter of
//! seconds. But when the hardware, the routes and the collective all look
//! the same from rank `r` and from rank `r + shift` (a fat-tree rotated by
//! one node, a ring allreduce shifted by one node's ranks), every rank of
//! an orbit lives through the same timeline, shifted in space only. A
//! folded run simulates ranks `0..shift` only:
//!
//! - **Messages.** A message from representative `s` to rank `d = d0 +
//!   k·shift` (`d0 < shift`) is, rotated back `k` steps, the message rank
//!   `d0` receives from `s - k·shift`; that is how it is delivered
//!   (`World::receiver_view`).
//! - **Links.** A message crosses its real route (with symmetric routes,
//!   [`TopologyConfig::rotation`](crate::network::TopologyConfig::rotation)), but each link direction's traffic goes
//!   to its orbit's representative ([`Rotation::link_orbits`]): link `l`
//!   carries, in the full run, the rotated copies of the representatives'
//!   flows that cross any member of its orbit, which is exactly what the
//!   representative carries here when every orbit has one member per
//!   step. Ideal links are per pair, so the representative pairs already
//!   carry what every rotated pair carries.
//! - **Shared links (flow model).** A link whose orbit has fewer members
//!   than the rotation has steps (an oversubscribed fat-tree's uplink,
//!   which several nodes share) is crossed, in the full run, by
//!   `w = order / members` rotated copies of each representative flow
//!   that crosses its orbit, all at the same rate. The folded route lists
//!   its representative `w` times, so max-min filling counts the flow `w`
//!   times there and the counters add its bytes `w` times (what each
//!   member carries); the delivery latency still follows the route
//!   crossed once. Packets cannot be weighed: the packet model refuses
//!   such a rotation.
//!
//! It is exact (the same simulated times as the full run with the same
//! symmetric routes) when the collective is rotation-equivariant: each
//! rank's sends and receives are the representative's, shifted, with the
//! same sizes. A receive that gets a message of another size fails with
//! the usual shape error, which in a folded run means the collective is
//! not symmetric (uneven blocks, a root); a pattern that does not match
//! deadlocks. Faults and payload checks need every rank and are refused;
//! payloads are phantom (only sizes travel).
//!
//! **Ties and rounding.** That needs the full run itself to be symmetric,
//! and two tie-breaks of the engine are not rotation-invariant: events at
//! equal times fire in scheduling order, which follows rank order (rank
//! 0's sends before rank 8's), and max-min filling freezes links of equal
//! share by link id, subtracting rates in that order. (A third was: a
//! GPU's reductions posted at one picosecond were served in the order of
//! those events; NCCL channels' ones are now served in channel order,
//! see the world's `compute` module and PAT below.) Where flows of
//! different orbit copies meet on one port at the same picosecond (a
//! pairwise alltoall on the packet-level fat-tree), the full run's ranks
//! of one orbit already finish up to a few packets apart and the folded
//! run gives one such timeline; where a route crosses several links of
//! one orbit (an alltoall on a torus folded by rows), flow-model rates can
//! differ in their last bits, a few ps. Rings and the hierarchical
//! allreduce on the fat-tree match to the picosecond (see the tests in
//! `sim/tests/behaviour/fold.rs`, which also pin these limits).
//!
//! Symmetric routes are a modelling choice: ECMP then sends the rotated
//! copies of a flow over rotated paths (a perfectly spread hash), where
//! the unfolded default hashes each flow independently.
//!
//! **Uneven sizes.** A size whose elements do not split into equal
//! per-rank blocks cannot fold exactly: the first `count mod N` blocks
//! hold one element more, so the ranks of an orbit send messages of
//! different sizes and no rotation maps the run onto itself (a receive of
//! the wrong size would fail in the folded run). Validation refuses such a
//! size and names the nearest sizes that fold (multiples of `N` ranks
//! times the element size) and the unfolded run as the alternative.
//!
//! **Trees: which fold, and how.** The double binary tree (`tree`) is
//! not rank-shift symmetric, and NCCL's tree (`nccl_tree`) is symmetric
//! under a turn inside the nodes, not a shift:
//!
//! - `tree` is NCCL's `ncclGetBtree` over ranks in order: rank `i`'s
//!   partners depend on its lowest set bit, so no shift of the ranks maps
//!   the tree onto itself (only ranks in the same position of isomorphic
//!   subtrees behave alike, and only while their parents' timelines do).
//!   A folded run refuses it, naming what folds.
//! - `nccl_tree`: a channel enters each node at its own GPU and NIC, so a
//!   map that turns every node's GPUs *together with the channels* (and
//!   the rails) carries the run onto itself. The fold's rank map is a
//!   group action ([`RankAction`]): a shift, or any free permutation of
//!   the ranks (a turn inside every node), one representative per orbit
//!   simulated at its slot ([`fold_by`]). With a [`Rotation`] that
//!   permutes ranks ([`Rotation::permuting`]), an NCCL model whose plan
//!   turns with it ([`nccl_channel_turn`]: every channel's ring, tree,
//!   NICs and NIC proxies moved by the turn are another channel's) makes
//!   the action turn channels too: a message on channel `c` to rank
//!   `g^k(b)` is `b`'s on channel `t^-k(c)`, its tag turned back
//!   ([`RankAction::tag_back`]), and a framed route is the moved copy of
//!   its representative's (in a folded run: on the orbit
//!   representatives). `symmetry = "fold"` with `algorithm = "nccl_tree"`
//!   on a `fat_tree` folds this way, by a quarter of every node's GPUs
//!   (below; tests: `fold/nccl_tests.rs`, every rank's time and every
//!   link counter against the full run, flow and packet models, by the
//!   quarter and the half turn; `sim/tests/behaviour/fold_nccl.rs`,
//!   scenarios).
//!
//! **Which turn `nccl_tree` has.** Read off the plan `NcclSystem::build`
//! gives a fat-tree of DGX H100-style nodes (8 search channels, 16 at run
//! time, channels `0..8` on NCCL's first node-level tree and `8..16` on
//! the second), each channel's chain through a node is its entry GPU,
//! that GPU's PCIe-switch partner (the exit, next to the same NIC), then
//! the others in index order: `0 1 2 3 4 5 6 7`, `1 0 2 3 4 5 6 7`,
//! `2 3 4 5 6 7 0 1`, `3 2 4 5 6 7 0 1`, and so on. The GPU maps that
//! carry this set of chains onto itself are the turns by 2, 4 and 6 GPUs
//! (channel `c` to `c + 2` within its tree's block of 8, channel `c`'s NIC
//! to channel `c + 2`'s); no map takes channel 0 to an odd channel
//! (checked by hand for each: the image of channel 2's chain is no
//! chain). Of these only the turn by 4, which swaps the sockets, is a
//! symmetry of the whole node: the turn by 2 takes PCIe switch 0 (socket
//! 0) to switch 1 (socket 0) but switch 1 to switch 2 (socket 1), so no
//! image of the sockets fits ([`fat_tree_node_turn`](topologies::presets::fat_tree_node_turn)
//! refuses it naming the link). No route of the run crosses a socket
//! link, though: GPUs reach each other over NVLink, and their channel's
//! NIC through their own PCIe switch or a PXN proxy's. So the turn by 2
//! is a symmetry of every link the run crosses, and
//! [`fat_tree_partial_node_turn`](topologies::presets::fat_tree_partial_node_turn)
//! builds it as a partial rotation ([`Rotation::permuting_partial`]):
//! the sockets and their links stay in place, not carried
//! ([`Rotation::carries`]). `nccl_tree` folds by it, a quarter of every
//! node's GPUs simulated, channel `c` to `c + 2`, exactly (the same times
//! and link counters as the full run and as the half turn's fold).
//!
//! A route across an uncarried link has no moved copy, so it is refused
//! twice. Before the run, [`fold_by`] (and validation, which picks the
//! turn) builds every channel's route from each representative to its
//! tree and ring neighbours ([`nccl_routes_carried`]) and refuses naming
//! the channel, the ranks and the link. During any run with such a
//! rotation (folded, or `routes`), a route is refused as it is built
//! (`network::Routed::placed`): the run stops, the sender's call fails,
//! and `Execution::refused` names the ranks and the link (the study
//! reports it as that rank's error). On the presets neither fires; the
//! socket links' counters are zero in the full runs (tested). One GPU
//! per node would need channel chains that follow the node's own
//! symmetry (socket, then PCIe switch, then GPU: an odometer turn),
//! which is another search order and would change the unfolded plan.
//!
//! What the fold needs of a scenario, checked by validation (each refusal
//! says why and what to do): every collective an `nccl_tree` allreduce on
//! all ranks, phantom, no faults; a `fat_tree` with a turn by half a node
//! (even GPUs per node), folded by the quarter turn instead where there is
//! one (8 GPUs) and NCCL's channels turn with it and keep to the links it
//! carries (so on `h100`, `a100`, `hgx_h200`, `h20` and `hgx_b200` nodes;
//! `hgx_b300` nodes and two NICs per GPU turn by neither); at every size,
//! the channels NCCL runs the call on a set the turn maps onto itself (at
//! 512 KiB on 4 nodes NCCL runs 14 of 16, which neither turn does) and
//! the elements split into that many equal blocks (the nearest sizes that
//! do are named). `tuner = "nccl"` folds
//! by the node shift only (see below); `nccl_nvls_tree` folds by the
//! same turn with its heads (below). The turn carries `nccl_ring`'s channels too
//! (`nccl_channel_turn` checks the rings), but the ring folds by the
//! node shift instead (below), which simulates one node's GPUs, not a quarter
//! of every node's; the
//! 157 ns (0.1%) once seen between a turned `nccl_ring` and its full run
//! was, most likely, framed routes left unmoved (fixed with the PAT fold).
//!
//! **PAT folds by a shift of whole nodes** (`nccl_pat` allgather and
//! reduce-scatter): its
//! peers are `r ± 2^d` in rank order whatever the plan, and channel `k`
//! works on block `k` of every rank's block, so a shift of the ranks by
//! whole nodes maps the run onto itself with every channel kept, provided
//! each channel crosses every node through the same NIC (and PXN proxy)
//! moved ([`nccl_nics_shift`], checked by [`fold_by`] and validation).
//! The preset's own rotation (`fat_tree`: one node, or `nodes / k` nodes
//! with `k` leaves per rail) is the shift: one node's GPUs are simulated
//! for all. A framed message under a shift takes its sender's
//! representative's route on the same channel, moved (without NCCL's
//! plan, when NCCL's model cannot run PAT, as NCCL 2.21.5: the pair's
//! moved route), so folded and `symmetry = "routes"` runs agree. Tests
//! (`fold/nccl_pat_tests.rs`; `sim/tests/behaviour/fold_nccl.rs`): every
//! rank's finish and every link counter equal the full run's in the flow
//! and packet models, one and two leaves per rail; scenarios time as
//! their `routes` runs; `sim run --links-csv` the same to the byte at
//! 128 and 1024 GPUs (figures below). The reduce-scatter's reductions
//! tie: on 4 nodes, 8 of a GPU's 16 channels get their messages from the
//! next node at one picosecond (ranks 7, 15, 23, 31 at step 0), and the
//! world handles them in the event queue's order, which follows global
//! flow and rank numbers (three different orders on those four ranks).
//! A GPU serves its reductions one at a time; served in that order, ranks
//! one node apart finished up to 0.14% apart and no shift mapped even the
//! full run onto itself. Reductions posted at the same instant are served
//! in channel order instead, the same on every rank (the world's
//! `compute` module, with why that is no less like NCCL, whose channels
//! are separate thread blocks); the reduce-scatter then folds exactly,
//! tested as the allgather (flow model at two sizes, one and two leaves
//! per rail; packet model; scenarios against `routes`, 16 KiB chunks and
//! reductions at 200 GB/s, up to 4 MiB; NCCL 2.29.7's tuner picking PAT
//! on 16 single-GPU nodes). The flow-model tests fail without the
//! channel order. One limit is left: at 32 MiB with 16 KiB chunks on 8
//! nodes of two leaves per rail, the folded call ends 5 ps (of 1.73 ms)
//! before its `routes` run, with the old order as with the new, and
//! exactly with free reductions; not traced further (the engine test at
//! the same size and shift is exact).
//!
//! **The ring folds by the same shift** (`nccl_ring` allreduce,
//! allgather, reduce-scatter): NCCL's rings on the preset go through the
//! nodes in order, each node's GPUs in the channel's own order, so channel
//! `c`'s ring with every rank moved by a node is channel `c`'s ring read
//! from another start ([`nccl_rings_shift`], with the NIC check above,
//! used by [`fold_by`] for every shift with a plan, and by validation).
//! Rank `r`'s ring neighbours and segments (which follow ring positions)
//! are then `r + shift`'s moved. A moved ring that is another channel's
//! would need the shift to turn channel tags and routes, which it does
//! not: refused naming both channels. The segments must be equal: at
//! every size the channels NCCL runs the call on (fewer than 16 for some
//! sizes: a 4 MiB allgather on 4 nodes runs on 14) times the ranks must
//! divide the elements, else validation names the nearest sizes that fold.
//! Tests (`fold/nccl_ring_tests.rs`;
//! `sim/tests/behaviour/fold_nccl.rs`): every rank's finish and every link
//! counter equal the full run with symmetric routes, flow model on 4 and 8
//! nodes (one and two leaves per rail) at two sizes, packet model on 4
//! nodes, all three collectives; plans whose rings do not move are refused.
//! Measured (2026-12-03, release `sim`, `tools/bench_trees.sh --algorithms
//! nccl_ring --sizes 1G`, allreduce, flow model, one point at a time on
//! the shared 2 cores, load 4-5): 1024 GPUs folded 0.63 s and 39 MiB,
//! unfolded with the same routes (`routes`) 190.45 s and 591 MiB, both
//! 7 485.47 us simulated; 8192 GPUs folded 5.06 s and 124 MiB, 38 059.85
//! us simulated (unfolded not run: eight times the ranks of the 190 s
//! run, each with eight times the ring steps). At 128 GPUs and 1 GiB, `sim run
//! --links-csv` folded and `routes` give the same rows and the same link
//! CSV to the byte (0.18 s against 1.63 s).
//!
//! **`tuner = "nccl"` folds by the same shift where each choice does**:
//! for collectives that name no algorithm, validation builds NCCL's
//! model, runs its selection at every size and needs each choice to fold
//! by the shift (`nccl_ring`, with the segment check above, or
//! `nccl_pat`); a size where it picks another algorithm
//! (`nccl_tree` for a 16 MiB allreduce on 4 nodes) is refused naming the
//! size and the algorithm. A scenario folded by the node turn (some
//! collective names `nccl_tree`), or whose collectives all name their
//! algorithm, still refuses the tuner. Tested against `routes` runs
//! (`sim/tests/behaviour/fold_nccl.rs`: an allgather at 256 KiB and
//! 1 MiB, an allreduce at 64 MiB, on 4 nodes).

//! **NVLS-Tree folds by the node turn with its heads.** Channel `k`'s
//! head `h` (tag channel `k p + h`) reduces unit `h` of every loop in the
//! node's NVSwitch and carries it over the tree between the nodes' heads
//! `h`; the tree is over nodes, so a turn of every node's GPUs by `t`
//! maps head `h`'s role onto head `h + t`'s, provided the tags turn with
//! it ([`RankAction::with_tag_turn`],
//! [`algorithms::nccl::nvls_tree::head_turn`]) and every head gets the
//! same units (each channel's block a multiple of `p`). No shift of nodes
//! does (the double binary tree is no shift of itself). The quarter turn
//! is the largest the presets have (the one `nccl_tree` folds by; a turn
//! by one GPU moves the PCIe switches' GPU pairs apart). It needs no turn
//! of NCCL's channels (nothing is framed), so `h100`, `hgx_h200`,
//! `hgx_b200` and `hgx_b300` nodes all fold by it (tested).
//!
//! In-network calls in a folded run (the world's `in_network` module):
//! each representative's contribution, moved back to its orbit's
//! canonical call, stands for one member of that gather, which completes
//! when all its members' moved contributions are in; its result goes down
//! to the representative of its receiver as that representative's own
//! call, on its own flow; a multicast's copy to member `g^k(b)` goes to
//! `b`, its group and tag moved back. Legs cross the orbit
//! representatives of their links, so the NVLink and NVSwitch counters
//! come out as the full run's. A call a step of the fold keeps (its group
//! and tag both fixed) is refused, naming them, and stops the run.
//!
//! Two engine rules make the full run itself a turn of itself, as NCCL
//! is: a member's legs of different calls (tags) are flows of their own
//! (NCCL's scatter posts a slice to every head at once; FIFO in the
//! heads' order served head 0 first on every GPU), and the results a
//! switch sends at one instant go down at its end in the receiver's own
//! order (place in the call from its source or root, tag, ticket), not
//! in the order their events fired. Both changed unfolded NVLS-Tree
//! times (see the commit); NVLS and CollNet keep one tag per call.
//! Tested (`fold/nccl_nvls_tests.rs`, 2 and 3 nodes, quarter and half
//! turn; `sim/tests/behaviour/fold_nccl.rs`): every rank's finish and
//! every link counter equal the full run with the same (turned) routes,
//! flow model. The packet model's ports serve a GPU's flows to the heads
//! in the order they started, the heads' order on every GPU, which no
//! turn keeps: validation refuses it, naming the flow model. Unfolded
//! runs without `symmetry` hash each head's inter-node flows to one of
//! its PCIe switch's NICs, so they may differ from the folded run's
//! turned routes (2.5% on 2 nodes at 1 MiB).
//!
//! What folding and the trees cost to simulate, measured, and what
//! would make them cheaper: the private `speed` module.

mod action;
mod channels;
mod speed;

use std::sync::Arc;

use topologies::Rotation;

pub use action::RankAction;
pub use channels::{nccl_channel_turn, nccl_nics_shift, nccl_rings_shift, nccl_routes_carried};

use crate::network::{ModelLevel, NetworkConfig};
use crate::world::WorldConfig;

/// Why a run cannot be folded.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot fold the run: {0}")]
pub struct FoldError(pub String);

/// Makes `config` a folded run of ranks `0..shift`. On a topology, the
/// network config must carry a [`Rotation`] by `shift` of all
/// `world_size` ranks (its routes become symmetric); at packet level
/// every link must move with every step, at flow level a link with a
/// shorter orbit is weighed (see the module docs); ideal links need
/// nothing. Refused: a shift that
/// does not divide the world, rank faults and link faults. The link
/// counters and timeline come out as the full run's: each link direction
/// gets its orbit representative's.
pub fn fold(config: &mut WorldConfig, shift: usize) -> Result<(), FoldError> {
    let action = RankAction::shift(config.world_size, shift).map_err(FoldError)?;
    fold_by(config, action)
}

/// Makes `config` a folded run by `action` (see [`RankAction`]): one
/// representative per orbit simulated, at its slot. [`fold`] is this with
/// [`RankAction::shift`]. A permutation that is not a shift folds ideal
/// links (alike for every pair), or a topology whose rotation permutes
/// the ranks the same way ([`Rotation::permuting`], such as
/// [`fat_tree_node_turn`](topologies::presets::fat_tree_node_turn)); with
/// an NCCL model the channels must turn with it
/// ([`nccl_channel_turn`]), and the action then turns them too (with a
/// partial rotation, their routes from the representatives must keep to
/// the links it carries, [`nccl_routes_carried`]); under a
/// shift the channels stay, and each one's NICs and ring must move with
/// the nodes ([`nccl_rings_shift`]; exact for PAT, whose peers are a
/// shift, and for `nccl_ring`, which follows the rings).
/// Refused: an action on another number of ranks than the world's or
/// that is not the rotation's, a channel plan that does not turn (or
/// whose NICs do not shift, or whose routes cross a link the rotation
/// does not carry), NCCL launch skew (one process driving
/// several GPUs), rank faults, link faults, and what [`fold`] refuses on
/// a topology.
pub fn fold_by(config: &mut WorldConfig, action: RankAction) -> Result<(), FoldError> {
    let n = config.world_size;
    let refuse = |why: String| Err(FoldError(why));
    if action.ranks() != n {
        return refuse(format!(
            "the fold acts on {} ranks; the world has {n}",
            action.ranks()
        ));
    }
    if !config.faults.crashes.is_empty() || !config.faults.compute_slowdown.is_empty() {
        return refuse("rank faults (crashes, slow ranks) break the symmetry".into());
    }
    if let NetworkConfig::Topology(t) = &mut config.network {
        let Some(rotation) = t.rotation.clone() else {
            return refuse("the topology has no rotation to fold by".into());
        };
        match (action.as_shift(), rotation.rank_images()) {
            (Some(shift), None) => check_rotation(&rotation, n, shift)?,
            (None, Some(_)) => {
                if rotation.ranks() != n
                    || (0..n).any(|r| rotation.rank_image(r) != action.apply(r, 1))
                {
                    return refuse(
                        "the topology's rotation permutes the ranks otherwise than the fold".into(),
                    );
                }
            }
            (Some(_), Some(_)) => {
                return refuse(
                    "the topology's rotation permutes ranks, and this fold shifts them".into(),
                );
            }
            (None, None) => {
                return refuse(
                    "the topology's rotation shifts ranks, and this fold permutes them otherwise"
                        .into(),
                );
            }
        }
        if !t.changes.is_empty() {
            return refuse("link faults break the symmetry".into());
        }
        if t.level == ModelLevel::Packet {
            // Packets queue one by one: a link several copies of a flow
            // share cannot stand for them.
            let orbits = rotation
                .link_orbits(&t.topology)
                .map_err(|e| FoldError(format!("{e} (packet model)")))?;
            t.folded_links = Some(Arc::from(orbits));
        } else {
            let orbits = rotation.link_orbit_sizes(&t.topology);
            let order = rotation.order();
            // A link a partial rotation does not carry is its own orbit and
            // carries nothing (no moved route may cross it): weight 1.
            let weights: Vec<u32> = orbits
                .iter()
                .map(|&(l, members)| match rotation.carries(l) {
                    true => u32::try_from(order / members).unwrap_or(u32::MAX),
                    false => 1,
                })
                .collect();
            t.folded_links = Some(orbits.iter().map(|&(l, _)| l).collect());
            t.folded_weights = weights.iter().any(|&w| w > 1).then(|| Arc::from(weights));
        }
    }
    let mut action = action;
    if let (Some(nccl), NetworkConfig::Topology(t)) = (&config.nccl, &config.network)
        && let Some(rotation) = t.rotation.as_ref()
    {
        if nccl.config.launch.gpus_per_process > 1 {
            return refuse(
                "a process driving several GPUs starts them at different times, which no turn keeps"
                    .into(),
            );
        }
        if rotation.rank_images().is_some() && action.turns_tags() {
            // The algorithm turns its own tags (`nccl_nvls_tree`'s heads)
            // and sends nothing framed: NCCL's channels turn framed routes
            // only, so they are attached where they turn and not needed
            // otherwise. Its plain routes are checked as they are built.
            if let Ok(turn) = nccl_channel_turn(nccl, rotation) {
                action = action.with_channels(turn).map_err(FoldError)?;
            }
        } else if rotation.rank_images().is_some() {
            let turn = nccl_channel_turn(nccl, rotation).map_err(|e| {
                FoldError(format!("NCCL's channels do not turn with the GPUs: {e}"))
            })?;
            action = action.with_channels(turn).map_err(FoldError)?;
            // A partial turn: every channel's routes from the
            // representatives must keep to the links it carries.
            let mut router = t.router.lock().expect("a run never panics while routing");
            nccl_routes_carried(nccl, rotation, &action, &mut router, &t.placement)
                .map_err(FoldError)?;
        } else {
            // A shift keeps every channel: its NICs and its ring must move
            // with the nodes (the ring for `nccl_ring`, which follows it;
            // PAT's peers are a shift whatever the rings, but this has no
            // algorithm in hand, and the presets' rings do shift).
            nccl_rings_shift(nccl, rotation).map_err(|e| {
                FoldError(format!("NCCL's channels do not move with the shift: {e}"))
            })?;
        }
    }
    config.fold = Some(action);
    Ok(())
}

/// Checks that `rotation` rotates all `n` ranks by `shift`.
fn check_rotation(rotation: &Rotation, n: usize, shift: usize) -> Result<(), FoldError> {
    if rotation.ranks() != n || rotation.shift() != shift {
        return Err(FoldError(format!(
            "the topology's rotation moves {} ranks by {}; the fold needs {n} ranks by {shift}",
            rotation.ranks(),
            rotation.shift()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod nccl_tests;

#[cfg(test)]
mod nccl_pat_tests;

#[cfg(test)]
mod nccl_ring_tests;

#[cfg(test)]
mod nccl_nvls_tests;
