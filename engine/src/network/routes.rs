//! Routes and transfers of a topology model ([`Routed`]): a message's
//! route by placement and router, moved copies of an orbit
//! representative's in symmetric and folded runs, NCCL's framed routes
//! through a channel's NICs, and link counters unfolded for the full run.

use std::sync::Arc;

use algorithms::Rank;
use topologies::{LinkId, Rotation, Route, Router, Topology, VertexId};

use super::model::{Hop, Routed};
use super::{LinkUsage, Transfer, flow_id, leg_flow, path, timeline};
use crate::event::MessageId;
use crate::nccl::{HopClass, NcclSystem, machine};

impl<M> Routed<M> {
    /// Per-link counters as the full run would have them: in a folded
    /// run every link direction gets its orbit representative's (the
    /// traffic each member carries), otherwise `usage` itself.
    pub(super) fn unfold(&self, usage: Vec<LinkUsage>) -> Vec<LinkUsage> {
        match &self.folded_links {
            Some(canonical) => canonical.iter().map(|c| usage[c.index()]).collect(),
            None => usage,
        }
    }

    /// The link timeline as the full run would have it (see
    /// [`Routed::unfold`]).
    pub(super) fn unfold_timeline(
        &self,
        timeline: timeline::LinkTimeline,
    ) -> timeline::LinkTimeline {
        match &self.folded_links {
            Some(canonical) => timeline.unfold(canonical),
            None => timeline,
        }
    }

    /// The transfer of an in-network reduction's leg between `member`
    /// and `switch`; in a folded run on the orbit representatives of its
    /// links (the member is a representative there, see
    /// [`crate::fold`]). Refused, naming the link, when a folded leg
    /// would cross a link the rotation does not carry.
    ///
    /// Legs of one call (`tag`) go one after another; calls of different
    /// tags share the member's links (their own flows): NCCL's NVLS-Tree
    /// scatter posts a slice to every head at once
    /// (`ScatterGatherOp` in `src/device/prims_simple.h` @5067397c:
    /// `postPeer` after the loop over the peers).
    pub(super) fn leg_transfer(
        &mut self,
        message: MessageId,
        member: Rank,
        switch: VertexId,
        up: bool,
        tag: algorithms::Tag,
        bytes: u64,
    ) -> Result<Transfer, String> {
        let next = (1u64 << 63) + self.leg_flows.len() as u64;
        let flow = *self
            .leg_flows
            .entry((member, switch, up, tag))
            .or_insert(next);
        let (route, path) = match self.leg_routes.get(&(member, switch, up)) {
            Some(known) => known.clone(),
            None => {
                // Routes are a pure function of the pair (the router's
                // route of the pair's flow, placed), so building one once
                // changes nothing; a refusal is not kept and recurs.
                let at = self.placement[member];
                let (a, b) = if up { (at, switch) } else { (switch, at) };
                let base = self.route(a, b, leg_flow(member, switch, up, self.world_size));
                let built = match (&self.folded_links, &self.rotation) {
                    (Some(_), Some(rotation)) => self
                        .placed(rotation, &base, 0)
                        .map_err(|why| format!("the in-network leg of rank {member}: {why}"))?,
                    _ => (base, None),
                };
                self.leg_routes.insert((member, switch, up), built.clone());
                built
            }
        };
        Ok(Transfer {
            message,
            bytes,
            route,
            flow,
            path,
        })
    }

    /// The forwarding latency of vertex `v`, ps.
    pub(super) fn forward_latency_ps(&self, v: VertexId) -> u64 {
        let router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        router.topology().vertex(v).forward_latency_ps
    }

    /// See [`Network::reducing_switch`](super::Network::reducing_switch).
    pub(super) fn reducing_switch(&self, group: &[Rank]) -> Result<VertexId, String> {
        let mut router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        let topology = Arc::clone(router.topology());
        let mut best: Option<(usize, VertexId)> = None;
        for v in topology.vertex_ids() {
            if !topology.reduces_in_network(v) {
                continue;
            }
            let nvswitch = topology.vertex(v).kind == topologies::VertexKind::NvSwitch;
            let mut farthest = 0;
            let serves = group.iter().all(|&m| {
                let flow = leg_flow(m, v, true, self.world_size);
                match router.route(self.placement[m], v, flow) {
                    Ok(route) => {
                        farthest = farthest.max(route.len());
                        !nvswitch
                            || route.iter().all(|&l| {
                                matches!(topology.link(l).kind, topologies::LinkKind::NvLink { .. })
                            })
                    }
                    Err(_) => false,
                }
            });
            if serves && best.is_none_or(|(d, _)| farthest < d) {
                best = Some((farthest, v));
            }
        }
        best.map(|(_, v)| v).ok_or_else(|| {
            format!(
                "{}: no switch that reduces serves ranks {group:?} (an NVSwitch serves the \
                 GPUs it reaches over NVLink alone; InfiniBand switches reduce with \
                 sharp = true)",
                algorithms::in_network::NO_SWITCH_REASON
            )
        })
    }

    /// The router's route from `a` to `b` for `flow`.
    pub(super) fn route(&self, a: VertexId, b: VertexId, flow: u64) -> Route {
        self.router
            .lock()
            .expect("a run never panics while routing")
            .route(a, b, flow)
            .expect("every pair of placed ranks was checked to be connected")
    }

    /// The symmetric route from `src` to `dst`: the route of the pair
    /// rotated back to a source below the shift, moved forward again by
    /// the rotation, or in a folded run put on the orbit representatives;
    /// with weights, each representative listed as many times as its
    /// weight, and the route crossed once beside it (for the latency).
    /// Refused as [`Self::placed`] refuses.
    pub(super) fn moved_route(
        &self,
        rotation: &Rotation,
        src: Rank,
        dst: Rank,
    ) -> Result<(Route, Option<Route>), String> {
        if let Some(turn) = &self.turn {
            let (orbit, k) = turn.position(src);
            let (s0, d0) = (turn.representative(orbit), turn.apply_inverse(dst, k));
            let n = turn.ranks();
            let base = self.route(self.placement[s0], self.placement[d0], flow_id(s0, d0, n));
            return self.placed(rotation, &base, k);
        }
        // Ranks wrap around the rotation's ranks (the scenario's), which a
        // collective on fewer ranks still numbers the same way.
        let (n, shift) = (rotation.ranks(), rotation.shift());
        let k = src / shift;
        let (s0, d0) = (src - k * shift, (dst + n - k * shift) % n);
        let base = self.route(self.placement[s0], self.placement[d0], flow_id(s0, d0, n));
        self.placed(rotation, &base, k)
    }

    /// `base` moved `k` steps by `rotation`, or in a folded run put on
    /// the orbit representatives (with weights, each listed as many times
    /// as its weight, and the route crossed once beside it). Refused,
    /// naming the link, when `base` crosses a link a partial rotation
    /// does not carry (see [`Rotation::carries`]): such a route has no
    /// moved copy, so the run would not be the symmetric one.
    pub(super) fn placed(
        &self,
        rotation: &Rotation,
        base: &[LinkId],
        k: usize,
    ) -> Result<(Route, Option<Route>), String> {
        if let Some(&l) = base.iter().find(|&&l| !rotation.carries(l)) {
            let router = self
                .router
                .lock()
                .expect("a run never panics while routing");
            return Err(uncarried(router.topology(), l));
        }
        let Some(canonical) = &self.folded_links else {
            return Ok((
                base.iter().map(|&l| rotation.link_power(l, k)).collect(),
                None,
            ));
        };
        let once: Route = base.iter().map(|l| canonical[l.index()]).collect();
        match &self.folded_weights {
            Some(weights) => {
                let weighed = base
                    .iter()
                    .flat_map(|l| {
                        std::iter::repeat_n(canonical[l.index()], weights[l.index()] as usize)
                    })
                    .collect();
                Ok((weighed, Some(once)))
            }
            None => Ok((once, None)),
        }
    }

    /// The transfer for a message between two ranks, with a framed
    /// message's hop facts, or `None` for a message to oneself (it
    /// crosses no link). Refused, naming the ranks and the link, when its
    /// route would have to move across a link the rotation does not carry
    /// ([`Self::placed`]).
    pub(super) fn transfer(
        &mut self,
        message: MessageId,
        src: Rank,
        dst: Rank,
        bytes: u64,
        channel: Option<u16>,
    ) -> Result<Option<(Transfer, Option<Hop>)>, String> {
        let (a, b) = (self.placement[src], self.placement[dst]);
        if a == b {
            return Ok(None);
        }
        let refused = |why: String| {
            let on = channel.map_or_else(String::new, |c| format!(" on NCCL channel {c}"));
            format!("the message from rank {src} to rank {dst}{on}: {why}")
        };
        let flow = flow_id(src, dst, self.world_size);
        if let Some(channel) = channel {
            let n = self.world_size as u64;
            let framed = flow + (u64::from(channel) + 1) * n * n;
            let (route, hop, path) = match self.framed_routes.get(&framed) {
                Some(known) => known.clone(),
                None => {
                    let built = self
                        .turned_framed_route(src, dst, channel, flow)
                        .map_err(refused)?;
                    self.framed_routes.insert(framed, built.clone());
                    built
                }
            };
            let transfer = Transfer {
                path,
                message,
                bytes,
                route,
                flow: framed,
            };
            return Ok(Some((transfer, Some(hop))));
        }
        let (route, path) = match &self.rotation {
            None => (self.route(a, b, flow), None),
            Some(rotation) => match self.moved_routes.get(&flow) {
                Some(moved) => moved.clone(),
                None => {
                    let rotation = Arc::clone(rotation);
                    let moved = self.moved_route(&rotation, src, dst).map_err(refused)?;
                    self.moved_routes.insert(flow, moved.clone());
                    moved
                }
            },
        };
        Ok(Some((
            Transfer {
                path,
                message,
                bytes,
                route,
                flow,
            },
            None,
        )))
    }

    /// The framed route of [`Self::framed_route`], or, when the rotation
    /// turns NCCL's channels with the ranks (or is a shift they move
    /// with, channels kept), the route of the message turned back to its
    /// sender's orbit representative moved forward again (in a folded
    /// run: on the orbit representatives), so that every turned copy of a
    /// message takes the turned route; without NCCL's plan, the pair's
    /// moved route. With weights, the route crossed once comes beside it.
    /// Refused as [`Self::placed`] refuses.
    pub(super) fn turned_framed_route(
        &self,
        src: Rank,
        dst: Rank,
        channel: u16,
        flow: u64,
    ) -> Result<(Route, Hop, Option<Route>), String> {
        if self.nccl.is_none()
            && let Some(rotation) = &self.rotation
        {
            // Without NCCL's plan a framed message takes its pair's route,
            // moved by the rotation like any other message's.
            let rotation = Arc::clone(rotation);
            let (route, path) = self.moved_route(&rotation, src, dst)?;
            let hop = self.hop_of(path.as_deref().unwrap_or(&route));
            return Ok((route, hop, path));
        }
        if self.shifts_channels
            && let Some(rotation) = &self.rotation
        {
            // A shift keeps the channel: the sender's representative's
            // message on it, moved forward.
            let (n, shift) = (rotation.ranks(), rotation.shift());
            let k = src / shift;
            let (s0, d0) = (src - k * shift, (dst + n - k * shift) % n);
            let (base, hop) = self.framed_route(s0, d0, channel, flow_id(s0, d0, n));
            let (route, path) = self.placed(rotation, &base, k)?;
            return Ok((route, hop, path));
        }
        let (Some(turn), Some(rotation)) = (&self.turn, &self.rotation) else {
            let (route, hop) = self.framed_route(src, dst, channel, flow);
            return Ok((route, hop, None));
        };
        if !turn.turns_channels() {
            let (route, hop) = self.framed_route(src, dst, channel, flow);
            return Ok((route, hop, None));
        }
        let (orbit, k) = turn.position(src);
        let (s0, d0) = (turn.representative(orbit), turn.apply_inverse(dst, k));
        let c0 = turn.channel(usize::from(channel), turn.order() - k % turn.order());
        let c0 = u16::try_from(c0).expect("a channel turn keeps channels in range");
        let (base, hop) = self.framed_route(s0, d0, c0, flow_id(s0, d0, self.world_size));
        let (route, path) = self.placed(rotation, &base, k)?;
        Ok((route, hop, path))
    }

    /// The route of channel `channel` from `src` to `dst` and its hop
    /// facts: across nodes through the channel's NIC on each side (a GPU
    /// that does not reach its NIC through PCIe alone goes through the
    /// NIC's own GPU over NVLink first: NCCL's PXN); otherwise the
    /// router's route.
    pub(super) fn framed_route(
        &self,
        src: Rank,
        dst: Rank,
        channel: u16,
        flow: u64,
    ) -> (Route, Hop) {
        let route = {
            let mut router = self
                .router
                .lock()
                .expect("a run never panics while routing");
            channel_route(
                &mut router,
                self.nccl.as_deref(),
                &self.placement,
                (src, dst),
                channel,
                flow,
            )
        };
        let hop = self.hop_of(&route);
        (route, hop)
    }

    /// The hop facts of `route`.
    pub(super) fn hop_of(&self, route: &[LinkId]) -> Hop {
        let router = self
            .router
            .lock()
            .expect("a run never panics while routing");
        let topology = router.topology();
        let kinds = || route.iter().map(|&l| topology.link(l).kind);
        let class = if kinds().any(|k| k.is_network()) {
            HopClass::Net
        } else if kinds().all(|k| matches!(k, topologies::LinkKind::NvLink { .. })) {
            HopClass::NvLink
        } else {
            HopClass::Pci
        };
        Hop {
            class,
            idle_ps: path::idle_latency_ps(topology, route, 0),
        }
    }
}

/// The route of NCCL channel `channel` from rank `src` to rank `dst`
/// (`pair`) placed on `placement`: across nodes through the channel's NIC
/// on each side of `nccl`'s plan (a GPU that does not reach its NIC
/// through PCIe alone goes through the NIC's own GPU over NVLink first:
/// NCCL's PXN); otherwise the router's route of `flow`.
pub(crate) fn channel_route(
    router: &mut Router,
    nccl: Option<&NcclSystem>,
    placement: &[VertexId],
    (src, dst): (Rank, Rank),
    channel: u16,
    flow: u64,
) -> Route {
    let (a, b) = (placement[src], placement[dst]);
    let pinned = nccl.and_then(|nccl| {
        let (nic_a, nic_b) = nccl.nics(src, dst, channel)?;
        let topology = Arc::clone(router.topology());
        let mut out = machine::route(router, a, nic_a)?;
        let far = |r: &[LinkId]| {
            machine::path_type(&topology, r) > machine::PathType::Pxb
                || r.iter().any(|&l| topology.link(l).kind.is_network())
        };
        if far(&out)
            && let Some(proxy) = nccl.proxy(nic_a).filter(|&p| p != a)
        {
            let hop = machine::route(router, a, proxy)?;
            let rest = machine::route(router, proxy, nic_a)?;
            out = hop.iter().chain(rest.iter()).copied().collect();
        }
        let across = machine::route(router, nic_a, nic_b)?;
        let mut into = machine::route(router, nic_b, b)?;
        // A NIC never reaches a far GPU of its node back through the
        // network: through the PCIe switches, else over the NVLink of
        // the GPU next to it.
        let local = |r: &[LinkId]| {
            machine::path_type(&topology, r) <= machine::PathType::Pxb
                && !r.iter().any(|&l| topology.link(l).kind.is_network())
        };
        if !local(&into)
            && let Some(proxy) = nccl.proxy(nic_b).filter(|&p| p != b)
        {
            let first = machine::route(router, nic_b, proxy)?;
            let hop = machine::route(router, proxy, b)?;
            into = first.iter().chain(hop.iter()).copied().collect();
        }
        let whole: Route = out
            .iter()
            .chain(across.iter())
            .chain(into.iter())
            .copied()
            .collect();
        Some(whole)
    });
    pinned.unwrap_or_else(|| {
        router
            .route(a, b, flow)
            .expect("every pair of placed ranks was checked to be connected")
    })
}

/// Why a route across link `l`, which a partial rotation does not carry,
/// cannot be moved.
fn uncarried(topology: &Topology, l: LinkId) -> String {
    format!(
        "its route crosses {}, a link the topology's rotation does not carry (a partial turn \
         leaves it in place), so the route has no moved copy and the run is not symmetric; \
         drop symmetry to simulate every rank on its own route",
        topology.link_name(l)
    )
}
