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
mod tests;
