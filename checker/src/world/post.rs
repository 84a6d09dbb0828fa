//! The operations a rank posts: sends (with their eager slots and clocks),
//! receives, exchanges, and the gates that hold a concurrent call until the
//! checker starts it.

use std::collections::VecDeque;

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use super::{
    Buffering, ChannelKey, Connection, Message, OpId, OpState, Post, PostedRecv, Resource, TIMINGS,
    Unit, World, pair_range,
};

impl World {
    /// Starts a send from `src`; returns its operation (complete at once
    /// when the message is buffered).
    ///
    /// Under `Eager(k)` the send takes one of the `k` slots of its
    /// [`Connection`]: the pair, and the channel of the call's joins it is
    /// posted from ([`Branch::channel`](super::Branch::channel); NCCL's channels, which
    /// [`join_branches`](algorithms::branches::join_branches) runs, each
    /// have their own connection with `NCCL_STEPS` buffers per peer:
    /// `struct ncclChannelPeer` in `src/include/device.h` and
    /// `ncclTransportP2pConnect` in `src/transport.cc`, NVIDIA/nccl commit
    /// 5067397c2676d5aed50042fc39e5c8ee96eb0027). A send outside every
    /// join (MPI's eager protocol, whose buffering is per pair whatever the
    /// tag) shares the pair's pool with the other sends outside joins. A
    /// send finding a slot free also waits while an older send of the same
    /// connection does (slots are handed out in send order).
    pub fn post_send(
        &mut self,
        src: Rank,
        call: Option<usize>,
        dst: Rank,
        tag: Tag,
        payload: Payload,
    ) -> OpId {
        if dst >= self.world_size {
            let e = FabricError::PeerOutOfRange {
                rank: src,
                peer: dst,
                world_size: self.world_size,
            };
            return self.new_op(src, call, OpState::SendDone(Err(e)));
        }
        if self.ranks[src].known_stopped.contains_key(&dst) {
            let e = self.stopped_error(src, dst);
            return self.new_op(src, call, OpState::SendDone(Err(e)));
        }
        let bytes = payload.shape().bytes();
        let sender = &mut self.ranks[src];
        sender.bytes_sent += bytes;
        sender.messages_sent += 1;
        let ready = sender.clock;
        let link = self.link_free.entry((src, dst)).or_default();
        let mut arrival = [0; 2];
        for (m, t) in TIMINGS.iter().enumerate() {
            let start = ready[m].max(link[m]);
            link[m] = start + t.ps_per_byte * bytes;
            arrival[m] = link[m] + t.latency_ps;
        }
        let connection = Connection {
            src,
            dst,
            channel: self.branch_now.channel(),
        };
        let used = self.slots_used.entry(connection).or_default();
        let waiting = self.channels.range(pair_range(src, dst)).any(|(_, q)| {
            q.iter()
                .any(|m| !m.buffered && m.channel == connection.channel)
        });
        let buffered = match self.buffering {
            Buffering::Unbounded => true,
            Buffering::Eager(k) => *used < k && !waiting,
        };
        let critical = match self.buffering {
            Buffering::Eager(k) => waiting || *used + 1 >= k,
            Buffering::Unbounded => false,
        };
        if critical {
            self.effect.critical.push(connection);
        }
        let key = ChannelKey {
            src,
            dst,
            tag: tag.0,
        };
        if buffered && self.buffering.is_bounded() {
            *used += 1;
        }
        if let Buffering::Eager(1..) = self.buffering {
            self.record_post(src, call, Resource::Slots(connection), critical);
        }
        self.record_post(src, call, Resource::Sends(key), false);
        let seq = self.pair_seq.entry((src, dst)).or_default();
        *seq += 1;
        let pair_seq = *seq;
        let op = if buffered {
            self.new_op(src, call, OpState::SendDone(Ok(())))
        } else {
            self.new_op(src, call, OpState::Pending(None))
        };
        self.channels.entry(key).or_default().push_back(Message {
            payload,
            buffered,
            send: (!buffered).then_some(op),
            pair_seq,
            channel: connection.channel,
            sent_at: self.step,
            buffered_at: if buffered { self.step } else { None },
            dropped_at: None,
            arrival,
            retries: 0,
        });
        op
    }

    /// Posts a receive at `dst` from `src`.
    pub fn post_recv(
        &mut self,
        dst: Rank,
        call: Option<usize>,
        src: Rank,
        tag: Tag,
        expect: Shape,
    ) -> OpId {
        if src >= self.world_size {
            let e = FabricError::PeerOutOfRange {
                rank: dst,
                peer: src,
                world_size: self.world_size,
            };
            return self.new_op(dst, call, OpState::RecvDone(Err(e)));
        }
        let key = ChannelKey {
            src,
            dst,
            tag: tag.0,
        };
        if self.ranks[dst].known_stopped.contains_key(&src) && !self.satisfiable(key, 1) {
            let e = self.stopped_error(dst, src);
            return self.new_op(dst, call, OpState::RecvDone(Err(e)));
        }
        self.record_post(dst, call, Resource::Receives(key), false);
        let op = self.new_op(dst, call, OpState::Pending(None));
        self.posted.entry(key).or_default().push_back(PostedRecv {
            op,
            expect,
            posted_at: self.step,
        });
        op
    }

    /// Starts an exchange of `rank`: a send to `to` and a receive from
    /// `from`, both with `tag`, completing as one joint operation (an
    /// [`OpState::JointDone`] once both halves have).
    #[allow(clippy::too_many_arguments)]
    pub fn post_exchange(
        &mut self,
        rank: Rank,
        call: Option<usize>,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> OpId {
        self.post_joint(
            rank,
            call,
            vec![(to, tag, payload)],
            vec![(from, tag, expect)],
        )
    }

    /// Makes `rank` wait until the checker lets it start call `call`.
    pub fn post_gate(&mut self, rank: Rank, call: usize) -> OpId {
        let op = self.new_op(rank, Some(call), OpState::Pending(None));
        self.gates.insert((rank, call), (op, self.step));
        op
    }

    /// Records a post of `rank`'s call (and branch) on state its calls and
    /// branches share (see [`effect`](crate::effect)), when they are
    /// independent units.
    fn record_post(&mut self, rank: Rank, call: Option<usize>, resource: Resource, critical: bool) {
        let part = self.part_now(rank, call);
        let unit = self.unit(rank, call, self.branch_now, part);
        if unit != Unit::rank(rank) {
            self.effect.posts.push(Post {
                unit,
                resource,
                critical,
            });
        }
    }

    /// Whether the channel holds a message for `extra` more receives beyond
    /// those posted (as many messages as receives).
    fn satisfiable(&self, key: ChannelKey, extra: usize) -> bool {
        let messages = self.channels.get(&key).map_or(0, VecDeque::len);
        let posted = self.posted.get(&key).map_or(0, VecDeque::len);
        messages >= posted + extra
    }

    /// When the oldest message of `key` arrives under timing model `model`.
    pub fn arrival(&self, key: ChannelKey, model: usize) -> Option<u64> {
        self.channels.get(&key)?.front().map(|m| m.arrival[model])
    }
}
