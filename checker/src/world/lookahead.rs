//! What the explorer asks of a state before it takes a choice: which
//! choices are enabled, which instance of each would be taken, what each
//! would change ([`Effect`]) and which steps it causally follows.

use super::{Branch, ChannelKey, Choice, Connection, Effect, Part, Unit, World, pair_range};

impl World {
    /// Every choice enabled now, in a fixed order: starts first, so that
    /// the default schedule issues every rank's calls in scenario order.
    pub fn enabled(&self) -> Vec<Choice> {
        let mut out = Vec::new();
        for &(rank, call) in self.gates.keys() {
            if self.is_running(rank) {
                out.push(Choice::Start { rank, call });
            }
        }
        for (key, queue) in &self.channels {
            let Some(head) = queue.front() else { continue };
            let receivable = self.posted.get(key).is_some_and(|p| !p.is_empty());
            if receivable && self.is_running(key.dst) {
                out.push(Choice::Deliver(*key));
            }
            if self.used[0] < self.faults.drops && head.buffered && self.is_running(key.dst) {
                out.push(Choice::Drop(*key));
            }
        }
        for &(from, to) in self.notices.keys() {
            if self.is_running(to) {
                out.push(Choice::Notify { from, to });
            }
        }
        if self.used[2] < self.faults.timeouts {
            for (key, p) in &self.posted {
                if !p.is_empty() && self.is_running(key.dst) {
                    out.push(Choice::Timeout(*key));
                }
            }
        }
        if self.used[1] < self.faults.crashes {
            for r in 0..self.world_size {
                if self.is_running(r) {
                    out.push(Choice::Crash(r));
                }
            }
        }
        out
    }

    /// Which instance of `choice`, enabled now, would be taken: the
    /// message and receive a delivery matches, the message (and its loss
    /// count) a drop loses, the receive a timeout fails. A choice names a
    /// channel, so the same choice at another state may act on other
    /// messages; the explorer compares instances before it reorders one.
    pub fn instance(&self, choice: Choice) -> (u64, u64) {
        let head = |k: &ChannelKey| self.channels.get(k).and_then(|q| q.front());
        let posted = |k: &ChannelKey| {
            self.posted
                .get(k)
                .and_then(|p| p.front())
                .map_or(u64::MAX, |p| p.op as u64)
        };
        match choice {
            Choice::Deliver(k) => (head(&k).map_or(u64::MAX, |m| m.pair_seq), posted(&k)),
            Choice::Drop(k) => head(&k).map_or((u64::MAX, 0), |m| (m.pair_seq, m.retries as u64)),
            Choice::Timeout(k) => (posted(&k), 0),
            Choice::Start { .. } | Choice::Crash(_) | Choice::Notify { .. } => (0, 0),
        }
    }

    /// What `choice`, enabled now, would change, as far as can be known
    /// before taking it (the sends of the ranks it wakes are not known).
    pub fn predict(&self, choice: Choice) -> Effect {
        let mut e = Effect::default();
        match choice {
            Choice::Deliver(k) => {
                match self.posted.get(&k).and_then(|p| p.front()) {
                    Some(recv) => self.touch_op(&mut e, recv.op),
                    None => e.touch(Unit::rank(k.dst)),
                }
                let head = self.channels.get(&k).and_then(|q| q.front());
                let bounded = self.buffering.is_bounded();
                if let Some(m) = head {
                    // The send it completes: its own, or the oldest one
                    // waiting for the slot it frees.
                    let oldest_waiting = self
                        .channels
                        .range(pair_range(k.src, k.dst))
                        .flat_map(|(_, q)| q.iter())
                        .filter(|w| !w.buffered && w.channel == m.channel)
                        .min_by_key(|w| w.pair_seq);
                    let completes = match (m.send, oldest_waiting) {
                        (Some(op), _) => Some(Some(op)),
                        (None, Some(w)) if m.buffered && bounded => Some(w.send),
                        _ => None,
                    };
                    match completes {
                        Some(Some(op)) => self.touch_op(&mut e, op),
                        Some(None) => e.touch(Unit::rank(k.src)),
                        None => {}
                    }
                    if m.buffered && bounded {
                        e.frees = Some(Connection {
                            src: k.src,
                            dst: k.dst,
                            channel: m.channel,
                        });
                    }
                }
            }
            Choice::Drop(k) => {
                e.touch(Unit::rank(k.dst));
                e.touch(Unit::rank(k.src));
            }
            Choice::Crash(r) => e.touch(Unit::rank(r)),
            Choice::Timeout(k) => match self.posted.get(&k).and_then(|p| p.front()) {
                Some(recv) => self.touch_op(&mut e, recv.op),
                None => e.touch(Unit::rank(k.dst)),
            },
            Choice::Notify { to, .. } => e.touch(Unit::rank(to)),
            Choice::Start { rank, call } => {
                e.touch(self.unit(rank, Some(call), Branch::ROOT, Part::Whole))
            }
        }
        e
    }

    /// The steps a choice enabled now would causally follow (see
    /// [`Causes`](super::Causes)), without applying it: the steps that sent its message,
    /// posted its receive, took the older message or receive of the channel
    /// out of the way, gave its message a slot (a loss strikes a message in
    /// flight), lost it before (a retransmission), stopped the rank a
    /// notice reports, or posted the call a start lets go.
    pub fn pending_causes(&self, choice: Choice) -> Vec<usize> {
        let head = |k: &ChannelKey| self.channels.get(k).and_then(|q| q.front());
        let posted = |k: &ChannelKey| {
            self.posted
                .get(k)
                .and_then(|p| p.front())
                .and_then(|p| p.posted_at)
        };
        let message_popped = |k: &ChannelKey| self.message_popped.get(k).copied();
        let recv_popped = |k: &ChannelKey| self.recv_popped.get(k).copied();
        let mut out = Vec::new();
        match choice {
            Choice::Deliver(k) => {
                out.extend(head(&k).and_then(|m| m.sent_at));
                out.extend(message_popped(&k));
                out.extend(posted(&k));
                out.extend(recv_popped(&k));
            }
            Choice::Drop(k) => {
                if let Some(m) = head(&k) {
                    out.extend(m.sent_at);
                    out.extend(m.buffered_at);
                    out.extend(m.dropped_at);
                }
                out.extend(message_popped(&k));
            }
            Choice::Timeout(k) => {
                out.extend(posted(&k));
                out.extend(recv_popped(&k));
            }
            Choice::Notify { from, to } => {
                out.extend(self.notices.get(&(from, to)).and_then(|n| n.0));
            }
            Choice::Start { rank, call } => {
                out.extend(self.gates.get(&(rank, call)).and_then(|g| g.1));
            }
            Choice::Crash(_) => {}
        }
        out
    }
}
