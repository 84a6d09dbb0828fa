//! In-network operations in the world: a member's contribution travels to
//! the group's switch (a leg), the switch reduces or multicasts, and the
//! result legs travel back to the members that wait for it.

use algorithms::{Payload, Rank, Tag};

use super::{Message, World};
use crate::event::EventKind;
use crate::in_network::{Contribution, Leg, Way};
use crate::network::Sent;

impl World {
    /// Starts `rank`'s in-network reduction of `payload` among `group`
    /// (checked by the caller: `rank` is `part`'s member), its result for
    /// every member or for `part.to` alone: its contribution leaves for the
    /// group's switch. Returns the call's ticket (a call that waits for no
    /// result is closed at once), or why no switch reduces for the group.
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
        self.send_leg(rank, leg, payload, 0);
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
            self.send_leg(rank, leg, payload, 0);
            return Ok(ticket);
        }
        Ok(self.multicasts.open_call(rank, group, tag))
    }

    /// The switch that reduces for `group`, or why none does (looked up
    /// once per group).
    pub fn switch_of(&mut self, group: &[Rank]) -> Result<topologies::VertexId, String> {
        if self.config.fold.is_some() {
            return Err(format!(
                "{}: a folded run cannot reduce in the network; run it unfolded \
                 (no symmetry = \"fold\")",
                algorithms::in_network::NO_SWITCH_REASON
            ));
        }
        match self.in_network.cached_switch(group) {
            Some(known) => known.clone(),
            None => {
                let found = self.network.reducing_switch(group);
                self.in_network.cache_switch(group, found.clone());
                found
            }
        }
    }

    /// Puts a leg of an in-network reduction on its route: up from its
    /// member to its switch, or down from the switch to `member`.
    fn send_leg(&mut self, member: Rank, leg: Leg, payload: Payload, extra_ps: u64) {
        let bytes = payload.shape().bytes();
        let switch = match leg.way {
            Way::Up { switch, .. } | Way::Cast { switch } => switch,
            Way::Down { .. } => self
                .in_network
                .cached_switch(&leg.group)
                .and_then(|s| s.clone().ok())
                .expect("a result comes down from its group's switch"),
        };
        let up = matches!(leg.way, Way::Up { .. } | Way::Cast { .. });
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
            bytes,
            &mut self.queue,
        ) {
            Ok(Sent::ArrivesAt(at)) => self.queue.schedule(at, EventKind::Deliver { message }),
            Ok(Sent::InFlight) => {}
            Err(_) => self.out_of_time = true,
        }
    }

    /// A leg has arrived: a contribution at its switch (the last one of
    /// its ticket sends the result down to every member, each after the
    /// switch's forwarding latency), a multicast's payload at its switch
    /// (sent down to every member likewise), or a result at its member.
    pub(super) fn leg_arrived(&mut self, member: Rank, leg: Leg, payload: Payload) {
        match leg.way {
            Way::Up { to, .. } => {
                let Some(reduced) = self.in_network.contribution_arrived(&leg, payload) else {
                    return;
                };
                let latency = self.network.forward_latency_ps(reduced.switch);
                for &m in leg.group.iter().filter(|&&m| to.is_none_or(|r| r == m)) {
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
                    self.send_leg(m, down, payload, latency);
                }
            }
            Way::Cast { switch } => {
                let latency = self.network.forward_latency_ps(switch);
                for &m in &leg.group {
                    let down = Leg {
                        group: leg.group.clone(),
                        tag: leg.tag,
                        ticket: leg.ticket,
                        multicast: true,
                        way: Way::Down { error: None },
                    };
                    self.send_leg(m, down, payload.clone(), latency);
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
}
