//! In-network operations in the world: a member's contribution travels to
//! the group's switch (a leg), the switch reduces or multicasts, and the
//! result legs travel back to the members that wait for it.
//!
//! **Folded runs** (see [`crate::fold`]): only the representatives call,
//! and each call stands for its moved copies. A representative's
//! contribution to `(group, tag)`, turned back by the steps `s` that take
//! the call to its orbit's canonical one (the smallest tag, then the
//! smallest members, of the orbit's moved copies), is member `g^-s(rank)`
//! of the canonical gather; every member of that gather is one
//! representative's moved contribution, arriving when its copy would.
//! Once all are in, each result goes down to the representative that
//! stands for its receiver, as that representative's own call (its
//! moved copy's leg, on its own flow and on the orbit representatives of
//! the links). A multicast is already one per orbit (its source is a
//! representative); each copy down to a member goes to the member's
//! representative, its group and tag turned back as far. A call whose
//! moved copies are not all distinct (its group and tag kept by a step)
//! would stand for fewer members than the gather has: refused.

use algorithms::{Payload, Rank, Tag};

use super::{Message, World};
use crate::event::EventKind;
use crate::in_network::{Contribution, FoldedPart, Leg, Way, normalized};
use crate::network::{SendFailure, Sent};

/// A result leg waiting to go down from its switch at the end of the
/// instant (see [`World::flush_down_legs`]).
#[derive(Debug)]
pub(crate) struct PendingDown {
    /// The order among the instant's results: the receiver's place in
    /// its call counted from the call's source or root (0 for the root of
    /// a reduction to one member), the tag, multicast after reduction,
    /// the ticket, the receiver.
    key: (usize, Tag, bool, u64, Rank),
    member: Rank,
    leg: Leg,
    payload: Payload,
    extra_ps: u64,
    switch: topologies::VertexId,
}

impl World {
    /// Sends the results that left their switches at this instant, in
    /// the order of their keys (see [`PendingDown`]): a member's results
    /// share its flow from the switch and go one after another, and
    /// several made at one instant (every head's multicast of a loop at
    /// once) would otherwise go in the order their events fired, which
    /// follows rank numbers; this order is the receiver's own, the same
    /// for every rank turned and in a folded run.
    pub(crate) fn flush_down_legs(&mut self) {
        let mut pending = std::mem::take(&mut self.pending_down);
        pending.sort_by_key(|p| p.key);
        for p in pending {
            // A refusal is recorded and stops the run.
            let _ = self.send_leg(p.member, p.leg, p.payload, p.extra_ps, p.switch);
        }
    }

    /// Queues a result leg to `member` for the end of the instant;
    /// `place` is the receiver's place in its call (see [`PendingDown`]).
    fn queue_down(
        &mut self,
        member: Rank,
        place: usize,
        leg: Leg,
        payload: Payload,
        extra_ps: u64,
        switch: topologies::VertexId,
    ) {
        let key = (place, leg.tag, leg.multicast, leg.ticket, member);
        self.pending_down.push(PendingDown {
            key,
            member,
            leg,
            payload,
            extra_ps,
            switch,
        });
    }

    /// Starts `rank`'s in-network reduction of `payload` among `group`
    /// (checked by the caller: `rank` is `part`'s member), its result for
    /// every member or for `part.to` alone: its contribution leaves for the
    /// group's switch. Returns the call's ticket (a call that waits for no
    /// result is closed at once), or why no switch reduces for the group
    /// (in a folded run also why the call cannot stand for its copies).
    pub fn start_reduce_in_network(
        &mut self,
        rank: Rank,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        part: Contribution,
    ) -> Result<u64, String> {
        let Contribution { member, op, to } = part;
        let switch = self.switch_of(group)?;
        if self.config.fold.is_some()
            && let Err(why) = self.folded_canonical(group, tag)
        {
            // The run stops: no copy of this call can be accounted for.
            if self.refused.is_none() {
                self.refused = Some((rank, why.clone()));
            }
            return Err(why);
        }
        let ticket = if to.is_some_and(|root| root != rank) {
            self.in_network.take_ticket(rank, group, tag)
        } else {
            self.in_network.open_call(rank, group, tag)
        };
        let leg = Leg {
            group: group.into(),
            tag,
            ticket,
            multicast: false,
            way: Way::Up {
                member,
                op,
                switch,
                to,
            },
        };
        self.send_leg(rank, leg, payload, 0, switch)?;
        Ok(ticket)
    }

    /// Opens `rank`'s call of an in-network multicast among `group`
    /// (checked by the caller: `rank` is a member), or for the source
    /// (member 0) sends `payload` up to the group's switch (its call waits
    /// for nothing more). Returns the call's ticket, or why no switch
    /// serves the group.
    pub fn start_multicast_in_network(
        &mut self,
        rank: Rank,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<u64, String> {
        let switch = self.switch_of(group).map_err(|e| {
            e.replace(
                algorithms::in_network::NO_SWITCH_REASON,
                algorithms::in_network::NO_MULTICAST_REASON,
            )
        })?;
        if group.first() == Some(&rank) {
            let ticket = self.multicasts.take_ticket(rank, group, tag);
            let leg = Leg {
                group: group.into(),
                tag,
                ticket,
                multicast: true,
                way: Way::Cast { switch },
            };
            self.send_leg(rank, leg, payload, 0, switch)?;
            return Ok(ticket);
        }
        Ok(self.multicasts.open_call(rank, group, tag))
    }

    /// The switch that reduces for `group`, or why none does (looked up
    /// once per group).
    pub fn switch_of(&mut self, group: &[Rank]) -> Result<topologies::VertexId, String> {
        match self.in_network.cached_switch(group) {
            Some(known) => known.clone(),
            None => {
                let found = self.network.reducing_switch(group);
                self.in_network.cache_switch(group, found.clone());
                found
            }
        }
    }

    /// In a folded run, the canonical call of `(group, tag)`'s orbit:
    /// its members sorted, its tag, and the steps back from this call to
    /// it (the moved copies compared by tag, then members); refused when
    /// a step keeps the call (then one representative's call would stand
    /// for several members of one gather).
    fn folded_canonical(&mut self, group: &[Rank], tag: Tag) -> crate::in_network::Canonical {
        if let Some(known) = self.in_network.cached_canonical(group, tag) {
            return known.clone();
        }
        let action = self
            .config
            .fold
            .as_ref()
            .expect("asked in folded runs only");
        let copies: Vec<(Tag, Box<[Rank]>)> = (0..action.order())
            .map(|s| {
                let mut members: Vec<Rank> =
                    group.iter().map(|&m| action.apply_inverse(m, s)).collect();
                members.sort_unstable();
                (action.tag_back(tag, s), members.into())
            })
            .collect();
        let best = (0..copies.len())
            .min_by(|&a, &b| copies[a].cmp(&copies[b]))
            .unwrap_or(0);
        let found = if copies.iter().filter(|c| **c == copies[best]).count() > 1 {
            Err(format!(
                "a folded run cannot stand one representative's in-network call for its \
                 moved copies: the fold's turn keeps group {group:?} with tag {tag} (the \
                 algorithm's tags must turn with the ranks); run it unfolded (no symmetry = \
                 \"fold\")"
            ))
        } else {
            let (t, members) = copies[best].clone();
            Ok((members.into(), t, best))
        };
        self.in_network.cache_canonical(group, tag, found.clone());
        found
    }

    /// Puts a leg of an in-network reduction on its route: up from its
    /// member to `switch`, or down from `switch` to `member`. Refused
    /// when a folded leg would cross a link the rotation does not carry.
    fn send_leg(
        &mut self,
        member: Rank,
        leg: Leg,
        payload: Payload,
        extra_ps: u64,
        switch: topologies::VertexId,
    ) -> Result<(), String> {
        let bytes = payload.shape().bytes();
        let up = matches!(leg.way, Way::Up { .. } | Way::Cast { .. });
        let tag = leg.tag;
        let message = self.in_flight.insert(Message {
            src: member,
            dst: member,
            tag: leg.tag,
            payload,
            sent_at: self.now,
            extra_ps,
            handled: false,
            leg: Some(Box::new(leg)),
        });
        self.traffic.messages += 1;
        self.traffic.bytes += bytes;
        match self.network.send_leg(
            self.now,
            message,
            member,
            switch,
            up,
            tag,
            bytes,
            &mut self.queue,
        ) {
            Ok(Sent::ArrivesAt(at)) => self.queue.schedule(at, EventKind::Deliver { message }),
            Ok(Sent::InFlight) => {}
            Err(SendFailure::OutOfTime) => self.out_of_time = true,
            Err(SendFailure::Refused(why)) => {
                self.in_flight.remove(message);
                if self.refused.is_none() {
                    self.refused = Some((member, why.clone()));
                }
                return Err(why);
            }
        }
        Ok(())
    }

    /// A leg has arrived: a contribution at its switch (the last one of
    /// its ticket sends the result down to every member, each after the
    /// switch's forwarding latency), a multicast's payload at its switch
    /// (sent down to every member likewise), or a result at its member.
    pub(super) fn leg_arrived(&mut self, member: Rank, leg: Leg, payload: Payload) {
        if self.config.fold.is_some() && !matches!(leg.way, Way::Down { .. }) {
            self.folded_leg_arrived(member, leg, payload);
            return;
        }
        match leg.way {
            Way::Up { to, switch, .. } => {
                let Some(reduced) = self.in_network.contribution_arrived(&leg, payload) else {
                    return;
                };
                let latency = self.network.forward_latency_ps(reduced.switch);
                for (place, &m) in leg.group.iter().enumerate() {
                    if to.is_some_and(|r| r != m) {
                        continue;
                    }
                    let place = if to.is_some() { 0 } else { place };
                    let (payload, error) = match &reduced.result {
                        Ok(p) => (p.clone(), None),
                        Err(e) => (Payload::phantom(algorithms::DType::U8, 0), Some(e.clone())),
                    };
                    let down = Leg {
                        group: leg.group.clone(),
                        tag: leg.tag,
                        ticket: leg.ticket,
                        multicast: false,
                        way: Way::Down { error },
                    };
                    self.queue_down(m, place, down, payload, latency, switch);
                }
            }
            Way::Cast { switch } => {
                let latency = self.network.forward_latency_ps(switch);
                for (place, &m) in leg.group.iter().enumerate() {
                    let down = Leg {
                        group: leg.group.clone(),
                        tag: leg.tag,
                        ticket: leg.ticket,
                        multicast: true,
                        way: Way::Down { error: None },
                    };
                    self.queue_down(m, place, down, payload.clone(), latency, switch);
                }
            }
            Way::Down { ref error } => {
                let result = match error {
                    None => Ok(payload),
                    Some(e) => Err(e.clone()),
                };
                if !leg.multicast {
                    self.in_network.result_arrived(member, &leg, result);
                } else if leg.group.first() != Some(&member) {
                    // The source's own copy is traffic only.
                    self.multicasts.result_arrived(member, &leg, result);
                }
            }
        }
    }

    /// The group of a multicast among `group` moved back `k` steps by
    /// `action` (normalized) and that group's switch, if one serves it;
    /// worked out once per group and step.
    fn moved_cast(
        &mut self,
        action: &crate::fold::RankAction,
        group: &[Rank],
        k: usize,
    ) -> crate::in_network::MovedCast {
        if let Some(known) = self.multicasts.cached_moved_cast(group, k) {
            return known.clone();
        }
        let moved: Vec<Rank> = group.iter().map(|&x| action.apply_inverse(x, k)).collect();
        let copy = (normalized(&moved).into(), self.switch_of(&moved).ok());
        self.multicasts.cache_moved_cast(group, k, copy.clone());
        copy
    }

    /// [`World::leg_arrived`] of a folded run's contribution or multicast
    /// at its switch (see the module docs).
    fn folded_leg_arrived(&mut self, member: Rank, leg: Leg, payload: Payload) {
        let action = self.config.fold.clone().expect("asked in folded runs only");
        match leg.way {
            Way::Up { op, switch, to, .. } => {
                let Some(Ok((members, tag, s))) = self
                    .in_network
                    .cached_canonical(&leg.group, leg.tag)
                    .cloned()
                else {
                    return;
                };
                let moved = action.apply_inverse(member, s);
                let Ok(index) = members.binary_search(&moved) else {
                    return;
                };
                let part = FoldedPart {
                    rank: member,
                    group: leg.group,
                    tag: leg.tag,
                    to,
                    switch,
                    payload,
                };
                let Some(reduced) =
                    self.in_network
                        .folded_arrived((members, tag), leg.ticket, index, part, op)
                else {
                    return;
                };
                for p in reduced.parts {
                    if p.to.is_some_and(|r| r != p.rank) {
                        continue;
                    }
                    let place = match p.to {
                        Some(_) => 0,
                        None => p.group.iter().position(|&m| m == p.rank).unwrap_or(0),
                    };
                    let (payload, error) = match &reduced.result {
                        Ok(r) => (r.clone(), None),
                        Err(e) => (Payload::phantom(algorithms::DType::U8, 0), Some(e.clone())),
                    };
                    let latency = self.network.forward_latency_ps(p.switch);
                    let down = Leg {
                        group: p.group,
                        tag: p.tag,
                        ticket: leg.ticket,
                        multicast: false,
                        way: Way::Down { error },
                    };
                    self.queue_down(p.rank, place, down, payload, latency, p.switch);
                }
            }
            Way::Cast { switch } => {
                let latency = self.network.forward_latency_ps(switch);
                for (place, &m) in leg.group.iter().enumerate() {
                    // Member `m = g^k(b)`'s copy is `b`'s of the cast moved
                    // back `k` steps.
                    let (orbit, k) = action.position(m);
                    let b = action.representative(orbit);
                    let (group, from) = self.moved_cast(&action, &leg.group, k);
                    // The moved-back group's switch (the node's own
                    // NVSwitch stays where it is).
                    let from = from.unwrap_or(switch);
                    let down = Leg {
                        group,
                        tag: action.tag_back(leg.tag, k),
                        ticket: leg.ticket,
                        multicast: true,
                        way: Way::Down { error: None },
                    };
                    self.queue_down(b, place, down, payload.clone(), latency, from);
                }
            }
            Way::Down { .. } => unreachable!("results are handled by leg_arrived"),
        }
    }
}
