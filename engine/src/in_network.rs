//! In-network reduction in the simulator: the switch side and the member
//! side of [`Fabric::reduce_in_network`](algorithms::Fabric::reduce_in_network).
//!
//! A call of rank `m` in group `G` with tag `t` is the member's `k`-th call
//! of `(G, t)` (its *ticket*). Its contribution crosses the route from `m`
//! to the group's reducing switch (an *up leg*, a message of the network
//! model on a flow of its own per member and switch, so a member's legs go
//! one after another). The switch gathers the `k`-th contributions of every
//! member; when the last one has arrived it combines them in member order
//! ([`reduce_in_member_order`]) at once (line rate: no time beyond the
//! switch's forwarding latency, which each result waits before leaving)
//! and sends the result down the route from the switch to each member (a
//! *down leg*, one per member: the multicast). The member's call completes
//! when its result has arrived.
//!
//! The reducing switch of a group ([`crate::network::Network::reducing_switch`]):
//! among the vertices that reduce
//! ([`Topology::reduces_in_network`](topologies::Topology::reduces_in_network)),
//! those every member reaches (an NVSwitch only over NVLink alone), the one
//! whose farthest member is fewest links away (the lowest common switch:
//! the node's NVSwitch, the shared leaf, else a spine), the first in vertex
//! order among equals.
//!
//! A multicast ([`Fabric::multicast_in_network`](algorithms::Fabric::multicast_in_network))
//! is the same without the gather: the source's payload goes up its
//! route to the group's switch (a *cast leg*) and, after the switch's
//! forwarding latency, down to every member, the source included (its
//! copy is link traffic only: the source's call completed when it handed
//! the payload over). A member's result may arrive before the member
//! calls; it waits in the member's call of that ticket.
//!
//! Everything here is looked up by key, never iterated, so no output
//! depends on hash order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Waker;

use algorithms::in_network::reduce_in_member_order;
use algorithms::{Payload, Rank, ReduceOp, Tag};
use rustc_hash::FxHashMap as HashMap;
use topologies::VertexId;

use groups::Groups;
pub(crate) use groups::normalized;

/// One leg of an in-network reduction, carried by a world message.
#[derive(Debug)]
pub(crate) struct Leg {
    /// The group, in member order (shared by the call's legs).
    pub group: Arc<[Rank]>,
    /// The call's tag.
    pub tag: Tag,
    /// The member's ticket: its call number for `(group, tag)`.
    pub ticket: u64,
    /// A multicast's leg, not a reduction's.
    pub multicast: bool,
    /// Which way, and what it needs.
    pub way: Way,
}

/// The direction of a [`Leg`].
#[derive(Debug)]
pub(crate) enum Way {
    /// A contribution on its way to the switch.
    Up {
        /// The member's index in the group.
        member: usize,
        /// The operator.
        op: ReduceOp,
        /// The reducing switch.
        switch: VertexId,
        /// The one member the result goes to, if not every member.
        to: Option<Rank>,
    },
    /// A multicast's payload on its way up from its source.
    Cast {
        /// The switch that multicasts.
        switch: VertexId,
    },
    /// The result (the message's payload) on its way back to a member, or
    /// why the contributions could not be combined (their shapes differ).
    Down {
        /// Set when there is no result.
        error: Option<String>,
    },
}

/// A member's part in a reduction: its index in the group, the operator,
/// and the one member the result goes to, if not every member.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Contribution {
    /// The member's index in the group.
    pub member: usize,
    /// The operator.
    pub op: ReduceOp,
    /// The root of a reduction to one member.
    pub to: Option<Rank>,
}

/// What a completed gather hands back: the result for every member.
pub(crate) struct Reduced {
    /// The combined payload, or why the contributions do not combine.
    pub result: Result<Payload, String>,
    /// The switch that reduced.
    pub switch: VertexId,
}

/// The contributions gathered for one ticket: a payload each, or in a
/// folded run a representative's [`FoldedPart`].
#[derive(Debug)]
struct Gather<P> {
    parts: Vec<Option<P>>,
    arrived: usize,
    op: ReduceOp,
}

/// A switch's gathers of one `(group, tag)`, by ticket from `base` (kept
/// once drained, so tickets keep counting).
#[derive(Debug)]
struct Gathers<P> {
    base: u64,
    open: VecDeque<Option<Gather<P>>>,
}

impl<P> Default for Gathers<P> {
    fn default() -> Self {
        Gathers {
            base: 0,
            open: VecDeque::new(),
        }
    }
}

impl<P> Gathers<P> {
    /// Puts `part` as member `index` (of `members`) of ticket `ticket`'s
    /// gather; returns the gather once every member's part is in.
    fn arrive(
        &mut self,
        ticket: u64,
        index: usize,
        members: usize,
        part: P,
        op: ReduceOp,
    ) -> Option<Gather<P>> {
        let at = usize::try_from(ticket.checked_sub(self.base)?).ok()?;
        while self.open.len() <= at {
            self.open.push_back(Some(Gather {
                parts: (0..members).map(|_| None).collect(),
                arrived: 0,
                op,
            }));
        }
        let gather = self.open[at].as_mut()?;
        if gather.parts[index].replace(part).is_none() {
            gather.arrived += 1;
        }
        if gather.arrived < members {
            return None;
        }
        let gather = self.open[at].take()?;
        while self.open.front().is_some_and(Option::is_none) {
            self.open.pop_front();
            self.base += 1;
        }
        Some(gather)
    }
}

/// The contributions combined in member order, or why they do not
/// combine (shapes differ), naming the call.
fn combine<'a>(
    parts: impl Iterator<Item = &'a Payload> + Clone,
    op: ReduceOp,
    group: &[Rank],
    tag: Tag,
) -> Result<Payload, String> {
    reduce_in_member_order(parts.clone(), op).ok_or_else(|| {
        let shapes: Vec<String> = parts.map(|p| p.shape().to_string()).collect();
        format!(
            "the in-network reduction of group {group:?} tag {tag} got contributions of \
             different shapes ({})",
            shapes.join(", ")
        )
    })
}

/// One member's calls of one `(group, tag)`, by ticket from `base`
/// (kept once drained, so tickets keep counting); `opened` is the next
/// call's ticket (results of later tickets may already be waiting).
#[derive(Debug, Default)]
struct Calls {
    base: u64,
    opened: u64,
    open: VecDeque<Call>,
}

impl Calls {
    /// The call of `ticket`, made (empty) if it is not there yet; `None`
    /// for a ticket already closed.
    fn slot(&mut self, ticket: u64) -> Option<&mut Call> {
        let index = usize::try_from(ticket.checked_sub(self.base)?).ok()?;
        while self.open.len() <= index {
            self.open.push_back(Call::default());
        }
        self.open.get_mut(index)
    }
}

/// A member's call waiting for its result.
#[derive(Debug, Default)]
struct Call {
    result: Option<Result<Payload, String>>,
    waker: Option<Waker>,
    done: bool,
}

/// A representative's contribution in a folded run, standing for one
/// member of its orbit's gather (see [`InNetwork::folded_arrived`]): the
/// call as the representative made it, where its result goes back.
#[derive(Debug)]
pub(crate) struct FoldedPart {
    /// The representative that contributed.
    pub rank: Rank,
    /// Its call's group, as it made it.
    pub group: Arc<[Rank]>,
    /// Its call's tag.
    pub tag: Tag,
    /// Its call's root, if the result goes to one member.
    pub to: Option<Rank>,
    /// The switch of its group.
    pub switch: VertexId,
    /// The contribution.
    pub payload: Payload,
}

/// A completed folded gather: the result and the representatives'
/// parts, in the canonical group's member order.
pub(crate) struct FoldedReduced {
    /// The combined payload, or why the contributions do not combine.
    pub result: Result<Payload, String>,
    /// Every member's part.
    pub parts: Vec<FoldedPart>,
}

/// The in-network reductions of one run.
///
/// Groups are interned ([`Groups`]): the maps below are keyed by small
/// numbers, so that a leg or a poll hashes its group once, in a lookup
/// that allocates nothing (a key of the group itself cost an allocation,
/// and in a folded run a sort, per lookup).
#[derive(Debug, Default)]
pub(crate) struct InNetwork {
    /// The switch of each group asked for (or why none serves it).
    switches: HashMap<Box<[Rank]>, Result<VertexId, String>>,
    /// The groups seen, numbered.
    groups: Groups,
    /// At the switches: contributions by `(group key, tag)`.
    gathers: HashMap<(u32, Tag), Gathers<Payload>>,
    /// At the members: calls by `(rank, group key, tag)`.
    calls: HashMap<(Rank, u32, Tag), Calls>,
    /// A folded run's gathers, by the key of the canonical members
    /// (sorted) and the canonical tag.
    folded: HashMap<(u32, Tag), Gathers<FoldedPart>>,
    /// A folded run's canonical calls: for a `(group as given, tag)`, the
    /// canonical `(members sorted, tag)` of its orbit and the steps back
    /// to it, or why there is none.
    canonical: HashMap<(u32, Tag), Canonical>,
    /// A folded run's multicasts: for a `(group as given, steps)`, the
    /// group of the copy down to a member that many steps round (see
    /// [`MovedCast`]); bounded by the groups times the fold's order, not
    /// by the calls (their tags are moved back as they come).
    moved_casts: HashMap<(u32, usize), MovedCast>,
}

/// A folded multicast's copy for the member `k` steps round from its
/// representative: the group moved back `k` steps (normalized), and the
/// moved-back group's switch, if one serves it.
pub(crate) type MovedCast = (Arc<[Rank]>, Option<VertexId>);

/// A folded run's canonical call of a `(group, tag)`: its orbit's
/// canonical members (sorted) and tag, and the steps back to it; or why
/// there is none.
pub(crate) type Canonical = Result<(Arc<[Rank]>, Tag, usize), String>;

impl InNetwork {
    /// The in-network calls of a folded run (see [`normalized`]).
    pub fn folded() -> InNetwork {
        InNetwork {
            groups: Groups::new(true),
            ..InNetwork::default()
        }
    }

    /// The cached canonical call of `(group, tag)` in a folded run.
    pub fn cached_canonical(&self, group: &[Rank], tag: Tag) -> Option<&Canonical> {
        let (listed, _) = self.groups.get(group)?;
        self.canonical.get(&(listed, tag))
    }

    /// The cached group of a multicast among `group` moved back `k`
    /// steps, in a folded run.
    pub fn cached_moved_cast(&self, group: &[Rank], k: usize) -> Option<&MovedCast> {
        let (listed, _) = self.groups.get(group)?;
        self.moved_casts.get(&(listed, k))
    }

    /// Remembers the group of a multicast among `group` moved back `k`
    /// steps.
    pub fn cache_moved_cast(&mut self, group: &[Rank], k: usize, copy: MovedCast) {
        let (listed, _) = self.groups.number(group);
        self.moved_casts.insert((listed, k), copy);
    }

    /// Remembers the canonical call of `(group, tag)`.
    pub fn cache_canonical(&mut self, group: &[Rank], tag: Tag, canonical: Canonical) {
        let (listed, _) = self.groups.number(group);
        self.canonical.insert((listed, tag), canonical);
    }

    /// A representative's contribution has reached its switch in a folded
    /// run, standing for member `index` of the canonical call `canonical`
    /// (`members` of them); returns the gather once every member's part
    /// of this ticket is in.
    pub fn folded_arrived(
        &mut self,
        canonical: (Arc<[Rank]>, Tag),
        ticket: u64,
        index: usize,
        part: FoldedPart,
        op: ReduceOp,
    ) -> Option<FoldedReduced> {
        let members = canonical.0.len();
        // The canonical members are sorted, so their key is themselves.
        let key = (self.groups.key(&canonical.0), canonical.1);
        let gather = self
            .folded
            .entry(key)
            .or_default()
            .arrive(ticket, index, members, part, op)?;
        let parts: Vec<FoldedPart> = gather.parts.into_iter().flatten().collect();
        let result = combine(
            parts.iter().map(|p| &p.payload),
            gather.op,
            &parts[0].group,
            parts[0].tag,
        );
        Some(FoldedReduced { result, parts })
    }

    /// The cached switch of `group`, if it was looked up.
    pub fn cached_switch(&self, group: &[Rank]) -> Option<&Result<VertexId, String>> {
        self.switches.get(group)
    }

    /// Remembers the switch of `group`.
    pub fn cache_switch(&mut self, group: &[Rank], switch: Result<VertexId, String>) {
        self.switches.insert(group.into(), switch);
    }

    /// Opens a call of `rank` and returns its ticket.
    pub fn open_call(&mut self, rank: Rank, group: &[Rank], tag: Tag) -> u64 {
        let key = (rank, self.groups.key(group), tag);
        let calls = self.calls.entry(key).or_default();
        let ticket = calls.opened;
        calls.opened += 1;
        calls.slot(ticket);
        ticket
    }

    /// Takes the next ticket of `rank`'s calls of `(group, tag)` for a call
    /// that waits for nothing (a multicast's source, a member that is not
    /// the root of a reduction to one member).
    pub fn take_ticket(&mut self, rank: Rank, group: &[Rank], tag: Tag) -> u64 {
        let key = (rank, self.groups.key(group), tag);
        let calls = self.calls.entry(key).or_default();
        let ticket = calls.opened;
        calls.opened += 1;
        if let Some(call) = calls.slot(ticket) {
            call.done = true;
        }
        while calls.open.front().is_some_and(|c| c.done) {
            calls.open.pop_front();
            calls.base += 1;
        }
        ticket
    }

    /// The result of `rank`'s call `ticket`, if it has arrived (then the
    /// call is closed); otherwise `waker` is kept to be woken by it.
    pub fn poll_call(
        &mut self,
        rank: Rank,
        group: &[Rank],
        tag: Tag,
        ticket: u64,
        waker: &Waker,
    ) -> Option<Result<Payload, String>> {
        let key = (rank, self.groups.key(group), tag);
        let calls = self.calls.get_mut(&key)?;
        let call = calls.open.get_mut((ticket - calls.base) as usize)?;
        let Some(result) = call.result.take() else {
            if !call.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                call.waker = Some(waker.clone());
            }
            return None;
        };
        call.done = true;
        while calls.open.front().is_some_and(|c| c.done) {
            calls.open.pop_front();
            calls.base += 1;
        }
        Some(result)
    }

    /// A result has reached `rank`: its call wakes (or, not made yet,
    /// finds it waiting).
    pub fn result_arrived(&mut self, rank: Rank, leg: &Leg, result: Result<Payload, String>) {
        let key = (rank, self.groups.key(&leg.group), leg.tag);
        let calls = self.calls.entry(key).or_default();
        let Some(call) = calls.slot(leg.ticket) else {
            return;
        };
        call.result = Some(result);
        if let Some(w) = call.waker.take() {
            w.wake();
        }
    }

    /// A contribution has reached its switch; returns the result once
    /// every member's contribution of this ticket is in.
    pub fn contribution_arrived(&mut self, leg: &Leg, payload: Payload) -> Option<Reduced> {
        let Way::Up {
            member, op, switch, ..
        } = leg.way
        else {
            return None;
        };
        let gather = self
            .gathers
            .entry((self.groups.key(&leg.group), leg.tag))
            .or_default()
            .arrive(leg.ticket, member, leg.group.len(), payload, op)?;
        let result = combine(
            gather.parts.iter().flatten(),
            gather.op,
            &leg.group,
            leg.tag,
        );
        Some(Reduced { result, switch })
    }
}

mod groups;
#[cfg(test)]
mod nvls_tree_tests;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use algorithms::nccl::{collnet, nvls};
    use algorithms::{
        Algorithm, DType, Fabric, FabricError, Params, Payload, ReduceOp, Registry, Tag,
    };
    use topologies::{LinkSpec, Topology, presets};

    use crate::network::{ModelLevel, NetworkConfig, TopologyConfig};
    use crate::world::WorldConfig;

    /// A world of `n` ranks on the topology's first `n` endpoints.
    pub(super) fn world(topology: Topology, n: usize, level: ModelLevel) -> WorldConfig {
        let topology = Arc::new(topology);
        let placement: Arc<[topologies::VertexId]> = topology.endpoints()[..n].into();
        WorldConfig::new(
            n,
            NetworkConfig::Topology(TopologyConfig::new(topology, placement, level, 1)),
        )
    }

    /// Inputs whose sums depend on the order: rank `r`'s element `i` is
    /// `(r + 1) * 1e7 + i / 7` with alternating signs.
    pub(super) fn inputs(n: usize, count: usize) -> Vec<Payload> {
        (0..n)
            .map(|r| {
                let sign = if r % 2 == 0 { 1.0 } else { -1.0 };
                Payload::from_vec(
                    (0..count)
                        .map(|i| sign * ((r + 1) as f32 * 1.0e7 + i as f32 / 7.0))
                        .collect::<Vec<f32>>(),
                )
            })
            .collect()
    }

    /// Runs `algorithm` on every rank of `config` on `inputs`; each rank's
    /// output, and when every rank finished.
    pub(super) fn run(
        config: WorldConfig,
        algorithm: &Algorithm,
        inputs: &[Payload],
        params: &Params,
    ) -> (Vec<Payload>, u64) {
        let exec = crate::run(config, |f| {
            let mut buf = inputs[f.rank()].clone();
            let algorithm = algorithm.clone();
            let params = *params;
            async move {
                algorithm
                    .run(&f, &mut buf, ReduceOp::Sum, &params)
                    .await
                    .map(|()| buf)
                    .map_err(|e| e.to_string())
            }
        });
        let outputs = exec
            .outputs
            .into_iter()
            .map(|o| o.expect("every rank finished").expect("no rank failed"))
            .collect();
        (outputs, exec.end_time.as_ps())
    }

    pub(super) fn algorithm(name: &str) -> Algorithm {
        Registry::builtin()
            .get(algorithms::Collective::Allreduce, name)
            .expect("in the catalogue")
            .clone()
    }

    #[test]
    fn nvls_on_a_dgx_h100_is_bit_exact_and_takes_the_closed_form_time() {
        // 8 GPUs, each one NVLink 4 bundle (18 x 20.6 GB/s) to the
        // NVSwitch; 4 chunks of 128 KiB.
        let topology = presets::dgx_h100().unwrap();
        let gpu = topology.find("node0/gpu0").unwrap();
        let up = topology.out_links(gpu)[0];
        let link = *topology.link(up);
        let switch = topology.find("node0/nvswitch").unwrap();
        let forward = topology.vertex(switch).forward_latency_ps;
        let (chunks, chunk_bytes) = (4u64, 128 * 1024u64);
        let count = (chunks * chunk_bytes / 4) as usize;
        let inputs = inputs(8, count);
        let expected = nvls::reference(&inputs, ReduceOp::Sum, &Params::default());
        for level in [ModelLevel::Flow, ModelLevel::Packet] {
            let (outputs, end) = run(
                world(topology.clone(), 8, level),
                &algorithm("nccl_nvls"),
                &inputs,
                &Params::default(),
            );
            for (r, out) in outputs.iter().enumerate() {
                assert_eq!(out.count_wrong(&expected[r]), 0, "rank {r} ({level:?})");
            }
            if level == ModelLevel::Flow {
                // Up back to back, each chunk reduced when the last copy is
                // in, down behind the one before:
                // (k + 1) c / B + 2 latency + the switch's forwarding.
                let c = topologies::duration_ps(chunk_bytes, link.bandwidth_bytes_per_s);
                let want = (chunks + 1) * c + 2 * link.latency_ps + forward;
                assert_eq!(end, want);
                // busbw = 2 (N-1)/N S / T exceeds the GPU's link rate.
                let bytes = (chunks * chunk_bytes) as f64;
                let busbw = 2.0 * 7.0 / 8.0 * bytes / (end as f64 * 1e-12);
                assert!(busbw > link.bandwidth_bytes_per_s, "{busbw}");
            }
        }
    }

    #[test]
    fn collnet_over_a_sharp_fat_tree_reduces_in_its_order_and_refuses_without_sharp() {
        let fat = |sharp: bool| {
            let mut t = presets::fat_tree(&presets::FatTree {
                nodes: 2,
                gpus_per_node: 4,
                ..presets::FatTree::default()
            })
            .unwrap();
            if sharp {
                t.enable_sharp();
            }
            t
        };
        // Nodes of 4, so the chain's order (4, 3, 2, 1 up) and the heads'
        // (1, 2, 3, 4) give different float sums.
        let params = Params {
            ranks_per_node: 4,
            chunk_bytes: 1024,
            ..Params::default()
        };
        let inputs = inputs(8, 1000);
        for (name, shape) in [
            ("nccl_collnet_direct", collnet::CollNetShape::Direct),
            ("nccl_collnet_chain", collnet::CollNetShape::Chain),
        ] {
            let expected = collnet::reference(&inputs, ReduceOp::Sum, &params, shape);
            let (outputs, _) = run(
                world(fat(true), 8, ModelLevel::Flow),
                &algorithm(name),
                &inputs,
                &params,
            );
            for (r, out) in outputs.iter().enumerate() {
                assert_eq!(out.count_wrong(&expected[r]), 0, "{name} rank {r}");
            }
            // Without SHARP: refused, naming the ranks.
            let exec = crate::run(world(fat(false), 8, ModelLevel::Flow), |f| {
                let mut buf = inputs[f.rank()].clone();
                let a = algorithm(name);
                async move { a.run(&f, &mut buf, ReduceOp::Sum, &params).await.err() }
            });
            let error = exec.outputs[0]
                .clone()
                .flatten()
                .expect("rank 0 is refused");
            let text = error.to_string();
            assert!(
                text.contains("no switch that reduces serves ranks [0, 4]"),
                "{text}"
            );
        }
    }

    #[test]
    fn nvls_on_ideal_links_takes_the_closed_form_time() {
        // 1 us, 10 GB/s per link; 3 chunks of 128 KiB on 4 ranks.
        let spec = LinkSpec::new(1_000_000, 1e10).unwrap();
        let (chunks, chunk_bytes) = (3u64, 128 * 1024u64);
        let inputs = inputs(4, (chunks * chunk_bytes / 4) as usize);
        let (outputs, end) = run(
            WorldConfig::new(4, NetworkConfig::Ideal(spec)),
            &algorithm("nccl_nvls"),
            &inputs,
            &Params::default(),
        );
        let expected = nvls::reference(&inputs, ReduceOp::Sum, &Params::default());
        assert!(
            outputs
                .iter()
                .zip(&expected)
                .all(|(o, e)| o.count_wrong(e) == 0)
        );
        let c = spec.serialization_ps(chunk_bytes);
        assert_eq!(end, (chunks + 1) * c + 2 * spec.latency_ps);
    }

    #[test]
    fn an_nvlink3_switch_refuses_clearly() {
        let a100 = world(presets::dgx_a100().unwrap(), 2, ModelLevel::Flow);
        let exec = crate::run(a100, |f| async move {
            f.reduce_in_network(
                &[0, 1],
                Tag(0),
                Payload::phantom(DType::F32, 4),
                ReduceOp::Sum,
            )
            .await
        });
        match &exec.outputs[1] {
            Some(Err(FabricError::NoInNetworkReduction { rank: 1, reason })) => {
                assert!(reason.starts_with(algorithms::in_network::NO_SWITCH_REASON));
                assert!(reason.contains("ranks [0, 1]"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
