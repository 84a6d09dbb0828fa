//! Taking a choice: a delivery (which may complete a send and free a
//! slot), a loss, a crash, a timeout, a notice; and a rank's end.

use std::collections::VecDeque;

use algorithms::{FabricError, Rank, Tag};

use super::{
    Causes, ChannelKey, Choice, Connection, Effect, OpId, OpState, RankStatus, TIMINGS, Unit,
    World, pair_range,
};

impl World {
    /// Applies an enabled choice as step `step`; returns the steps it
    /// causally follows.
    pub fn apply(&mut self, choice: Choice, step: usize) -> Causes {
        self.step = Some(step);
        self.effect = Effect::default();
        self.extra_causes.clear();
        let mut causes = Causes {
            after: self.pending_causes(choice),
            sent_at: None,
        };
        match choice {
            Choice::Start { rank, call } => {
                let (op, _) = self
                    .gates
                    .remove(&(rank, call))
                    .expect("a start is chosen only for a waiting call");
                self.complete(op, OpState::SendDone(Ok(())));
            }
            Choice::Deliver(key) => self.deliver(key, step, &mut causes),
            Choice::Drop(key) => self.drop_message(key, step),
            Choice::Crash(rank) => {
                self.used[1] += 1;
                self.stop(rank, RankStatus::Crashed(format!("rank {rank} crashed")));
            }
            Choice::Timeout(key) => {
                self.used[2] += 1;
                let recv = self.posted.get_mut(&key).and_then(VecDeque::pop_front);
                let recv = recv.expect("a timeout is chosen only for a posted receive");
                self.recv_popped.insert(key, step);
                let reason = format!("receive from rank {} tag {} timed out", key.src, key.tag);
                self.note_cause(key.dst, format!("rank {}: {reason}", key.dst));
                let e = FabricError::Timeout {
                    rank: key.dst,
                    peer: key.src,
                    reason,
                };
                self.complete(recv.op, OpState::RecvDone(Err(e)));
            }
            Choice::Notify { from, to } => {
                let (_, cause) = self
                    .notices
                    .remove(&(from, to))
                    .expect("a notice is chosen only when pending");
                self.learn_stopped(to, from, cause);
            }
        }
        for c in std::mem::take(&mut self.extra_causes) {
            if !causes.after.contains(&c) {
                causes.after.push(c);
            }
        }
        causes
    }

    fn deliver(&mut self, key: ChannelKey, step: usize, causes: &mut Causes) {
        let msg = self.channels.get_mut(&key).and_then(VecDeque::pop_front);
        let msg = msg.expect("a delivery is chosen only for a waiting message");
        let recv = self.posted.get_mut(&key).and_then(VecDeque::pop_front);
        let recv = recv.expect("a delivery is chosen only for a posted receive");
        self.message_popped.insert(key, step);
        self.recv_popped.insert(key, step);
        causes.sent_at = msg.sent_at;
        let receiver = &mut self.ranks[key.dst];
        receiver.received += 1;
        for m in 0..TIMINGS.len() {
            receiver.clock[m] = receiver.clock[m].max(msg.arrival[m]);
        }
        let got = msg.payload.shape();
        let result = if got == recv.expect {
            Ok(msg.payload)
        } else {
            Err(FabricError::ShapeMismatch {
                rank: key.dst,
                from: key.src,
                tag: Tag(key.tag),
                expected: recv.expect,
                got,
            })
        };
        self.complete(recv.op, OpState::RecvDone(result));
        if let Some(send) = msg.send {
            self.complete(send, OpState::SendDone(Ok(())));
        }
        if msg.buffered && self.buffering.is_bounded() {
            let connection = Connection {
                src: key.src,
                dst: key.dst,
                channel: msg.channel,
            };
            self.effect.frees = Some(connection);
            self.free_slot(connection);
        }
    }

    /// Frees a slot of the connection and hands it to the oldest send
    /// waiting on it, if any.
    fn free_slot(&mut self, connection: Connection) {
        let used = self.slots_used.entry(connection).or_default();
        *used = used.saturating_sub(1);
        let oldest = self
            .channels
            .range_mut(pair_range(connection.src, connection.dst))
            .flat_map(|(_, q)| q.iter_mut())
            .filter(|m| !m.buffered && m.channel == connection.channel)
            .min_by_key(|m| m.pair_seq);
        if let Some(m) = oldest {
            m.buffered = true;
            m.buffered_at = self.step;
            let send = m.send.take();
            *self.slots_used.entry(connection).or_default() += 1;
            if let Some(op) = send {
                self.complete(op, OpState::SendDone(Ok(())));
            }
        }
    }

    fn drop_message(&mut self, key: ChannelKey, step: usize) {
        self.used[0] += 1;
        self.effect.touch(Unit::rank(key.src));
        self.effect.touch(Unit::rank(key.dst));
        let queue = self.channels.get_mut(&key).expect("a drop names a channel");
        let head = queue
            .front_mut()
            .expect("a drop is chosen only for a message");
        if self.faults.retransmit {
            // The transport resends it: the loss only delays the message,
            // unless it exhausts the retry budget.
            head.retries += 1;
            head.dropped_at = Some(step);
            if head.retries > self.faults.retry_count {
                queue.pop_front();
                self.message_popped.insert(key, step);
                let cause = format!(
                    "rank {}: retry budget ({}) exhausted on {key}",
                    key.src, self.faults.retry_count
                );
                if self.is_running(key.src) {
                    self.stop(key.src, RankStatus::Crashed(cause));
                } else {
                    // The sender has already returned (or stopped): it
                    // stays as it was, but the receiver learns that the
                    // message will never come.
                    self.notices.insert((key.src, key.dst), (self.step, cause));
                }
            }
        } else {
            // Lost for good; its slot is never returned (credits travel
            // with the receiver's consumption, which never comes).
            queue.pop_front();
            self.message_popped.insert(key, step);
        }
    }

    /// Stops `rank` (crash, or an imposed transport failure): its receives
    /// and unsent messages go, and every running peer will be told.
    pub fn stop(&mut self, rank: Rank, status: RankStatus) {
        self.effect.touch(Unit::rank(rank));
        if let RankStatus::Crashed(cause) = &status {
            let cause = cause.clone();
            self.note_cause(rank, cause);
        }
        self.ranks[rank].status = status;
        self.ranks[rank].stopped_at = Some(self.step);
        self.posted.retain(|k, _| k.dst != rank);
        self.gates.retain(|g, _| g.0 != rank);
        for (k, q) in self.channels.iter_mut() {
            if k.src == rank {
                q.retain(|m| m.buffered);
            }
        }
        let cause = match &self.ranks[rank].status {
            RankStatus::Crashed(c) | RankStatus::Finished(Some(c)) => c.clone(),
            _ => format!("rank {rank} stopped"),
        };
        for peer in 0..self.world_size {
            if peer == rank {
                continue;
            }
            if self.is_running(peer) {
                self.notices
                    .insert((rank, peer), (self.step, cause.clone()));
            } else {
                self.effect.unsent_notices.push((rank, peer));
            }
        }
    }

    /// Records that `rank`'s program returned (with the cause of its
    /// error, if it failed); a failed rank's peers will be told.
    pub fn finish(&mut self, rank: Rank, error: Option<String>) {
        if self.calls_independent || self.branches_independent {
            // The program ends when its last call does: a change to the
            // whole rank, after every call's end (as an exchange completes
            // after both halves).
            self.effect.touch(Unit::rank(rank));
            let ends = self.calls_done.range((rank, 0)..=(rank, usize::MAX));
            let ends: Vec<usize> = ends.filter_map(|(_, &at)| at).collect();
            self.extra_causes.extend(ends);
        }
        let failed = error.is_some();
        if let Some(e) = &error {
            let cause = self.ranks[rank].cause.clone().unwrap_or_else(|| e.clone());
            self.ranks[rank].cause = Some(cause);
        }
        let cause = self.ranks[rank].cause.clone();
        if failed {
            self.stop(rank, RankStatus::Finished(cause));
        } else {
            self.ranks[rank].status = RankStatus::Finished(None);
            self.ranks[rank].stopped_at = Some(self.step);
            self.posted.retain(|k, _| k.dst != rank);
        }
    }

    fn learn_stopped(&mut self, rank: Rank, peer: Rank, cause: String) {
        self.effect.touch(Unit::rank(rank));
        self.note_cause(rank, cause.clone());
        self.ranks[rank].known_stopped.insert(peer, cause);
        // Receives from the peer beyond the messages it left fail.
        let keys: Vec<ChannelKey> = self
            .posted
            .keys()
            .filter(|k| k.dst == rank && k.src == peer)
            .copied()
            .collect();
        for key in keys {
            let messages = self.channels.get(&key).map_or(0, VecDeque::len);
            let posted = self.posted.get_mut(&key).expect("key listed");
            let failing: Vec<OpId> = posted
                .drain(messages.min(posted.len())..)
                .map(|p| p.op)
                .collect();
            for op in failing {
                let e = self.stopped_error(rank, peer);
                self.complete(op, OpState::RecvDone(Err(e)));
            }
        }
        // Sends to the peer that wait for it fail.
        let pending: Vec<OpId> = self
            .channels
            .range_mut(pair_range(rank, peer))
            .flat_map(|(_, q)| q.iter_mut())
            .filter_map(|m| m.send.take())
            .collect();
        for (_, q) in self.channels.range_mut(pair_range(rank, peer)) {
            q.retain(|m| m.buffered);
        }
        for op in pending {
            let e = self.stopped_error(rank, peer);
            self.complete(op, OpState::SendDone(Err(e)));
        }
    }
}
