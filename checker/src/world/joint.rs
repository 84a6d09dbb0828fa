//! Joint operations: sends and receives of one rank that complete as one
//! operation, waking the rank once when every part is done.
//!
//! An exchange ([`Fabric::exchange`](algorithms::Fabric::exchange), one
//! send and one receive, as `MPI_Sendrecv`) is one; so is each in-network
//! operation as the checker models it (a reduction's contribution sent to
//! every other member and theirs received, a multicast's sends to every
//! member, a reduction's receives at its root): the algorithm sees one
//! future, as it would of a switch, never the order of its parts. The
//! parts complete separately ([`Effect::halves`](super::Effect::halves)),
//! and two steps that complete different parts of one joint operation
//! commute (see [`explore`](crate::explore)).

use algorithms::{FabricError, Payload, Rank, Shape, Tag};

use super::{OpId, OpState, World};

/// A joint operation waiting for its parts.
#[derive(Debug)]
pub(super) struct PendingJoint {
    /// Its sends, in the order they were posted.
    pub(super) sends: Vec<OpId>,
    /// Its receives, in the order they were posted.
    pub(super) recvs: Vec<OpId>,
    /// The steps during which a part completed while others were pending
    /// (or the operation was posted): the step completing the last part
    /// causally follows them.
    done_at: Vec<usize>,
}

impl PendingJoint {
    fn parts(&self) -> impl Iterator<Item = OpId> + '_ {
        self.sends.iter().chain(&self.recvs).copied()
    }
}

/// A send of a joint operation: to whom, with which tag, what.
pub type JointSend = (Rank, Tag, Payload);

/// A receive of a joint operation: from whom, with which tag, which shape.
pub type JointRecv = (Rank, Tag, Shape);

fn pending(state: &OpState) -> bool {
    matches!(state, OpState::Pending(_))
}

impl World {
    /// Starts a joint operation of `rank`: `sends` and `recvs` posted in
    /// that order, completing as one operation (an
    /// [`OpState::JointDone`] once every part has: the first failed
    /// send's error, else the first failed receive's, else the received
    /// payloads in the order of `recvs`).
    pub fn post_joint(
        &mut self,
        rank: Rank,
        call: Option<usize>,
        sends: Vec<JointSend>,
        recvs: Vec<JointRecv>,
    ) -> OpId {
        let critical = self.effect.critical.len();
        self.observe_parts(true);
        let sends: Vec<OpId> = sends
            .into_iter()
            .map(|(to, tag, payload)| self.post_send(rank, call, to, tag, payload))
            .collect();
        let recvs: Vec<OpId> = recvs
            .into_iter()
            .map(|(from, tag, expect)| self.post_recv(rank, call, from, tag, expect))
            .collect();
        self.observe_parts(false);
        if recvs.iter().any(|&r| pending(&self.ops[r])) {
            // Whether a send takes a slot now or when one is freed is not
            // observable while a receive is pending: the rank wakes only
            // once every part is done, in the same state either way. So a
            // step freeing a slot of the pair commutes with this one (see
            // `Effect::critical`).
            self.effect.critical.truncate(critical);
        }
        let joint = self.new_op(rank, call, OpState::Pending(None));
        for &op in sends.iter().chain(&recvs) {
            self.half_of[op] = Some(joint);
        }
        self.joints.insert(
            joint,
            PendingJoint {
                sends,
                recvs,
                done_at: Vec::new(),
            },
        );
        // Parts complete at once (buffered sends, refused operations)
        // completed while the rank posted them.
        self.part_done(joint);
        joint
    }

    /// Whether completing `op` completes `joint` (every other part done).
    pub(super) fn completes_joint(&self, joint: OpId, op: OpId) -> bool {
        self.joints
            .get(&joint)
            .is_none_or(|x| x.parts().all(|p| p == op || !pending(&self.ops[p])))
    }

    /// A part of `joint` completed: the operation completes once every
    /// part has, and that step causally follows the ones that completed
    /// the others.
    pub(super) fn part_done(&mut self, joint: OpId) {
        let Some(x) = self.joints.get_mut(&joint) else {
            return;
        };
        if x.parts().any(|p| pending(&self.ops[p])) {
            x.done_at.extend(self.step);
            return;
        }
        let Some(x) = self.joints.remove(&joint) else {
            return;
        };
        self.extra_causes.extend(x.done_at);
        let mut error: Option<FabricError> = None;
        for &send in &x.sends {
            match std::mem::replace(&mut self.ops[send], OpState::Taken) {
                OpState::SendDone(Ok(())) => {}
                OpState::SendDone(Err(e)) => {
                    error.get_or_insert(e);
                }
                other => unreachable!("a joint operation's send completed as {other:?}"),
            }
        }
        let mut payloads = Vec::with_capacity(x.recvs.len());
        for &recv in &x.recvs {
            match std::mem::replace(&mut self.ops[recv], OpState::Taken) {
                OpState::RecvDone(Ok(p)) => payloads.push(p),
                OpState::RecvDone(Err(e)) => {
                    error.get_or_insert(e);
                }
                other => unreachable!("a joint operation's receive completed as {other:?}"),
            }
        }
        let result = match error {
            Some(e) => Err(e),
            None => Ok(payloads),
        };
        if let OpState::Pending(Some(waker)) =
            std::mem::replace(&mut self.ops[joint], OpState::JointDone(result))
        {
            waker.wake();
        }
        self.observe_done(joint);
    }
}
