//! [`CallId`]: which collective call a message belongs to.
//!
//! Every message a real fabric carries names the call it belongs to: the
//! call's sequence number in the job (the first collective is 1) and its
//! kind, the algorithm's 16-bit wire identity
//! ([`Algorithm::wire_id`], a hash of its collective and name). A receive
//! only matches messages of the receiver's current call, and a message of
//! the same sequence number but a different kind means the ranks called
//! different collectives: a clear error instead of a hang or a wrong
//! result. The ranks of a job agree on their algorithm registries before
//! anything runs (see `agree_on_registry` in [`crate::job`]), so a kind
//! always means the same algorithm on every rank, user algorithms included.

use std::fmt;

use algorithms::Algorithm;

/// One collective call: its sequence number and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId {
    /// 1 for the job's first collective, then 2, 3, ... (0: no call yet).
    pub seq: u64,
    /// The algorithm's wire identity ([`Algorithm::wire_id`]).
    pub kind: u16,
}

impl CallId {
    /// The state before the first call: messages of call 0 are refused.
    pub const NONE: CallId = CallId { seq: 0, kind: 0 };

    /// The call number `seq` of `algorithm`.
    pub fn new(seq: u64, algorithm: &Algorithm) -> CallId {
        CallId {
            seq,
            kind: algorithm.wire_id(),
        }
    }

    /// Whether two calls are of the same collective and algorithm.
    pub fn same_kind(self, other: CallId) -> bool {
        self.kind == other.kind
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match algorithms::algorithm::describe_wire_id(self.kind) {
            Some(what) => write!(f, "call #{} ({what})", self.seq),
            None => write!(
                f,
                "call #{} (an algorithm unknown here, wire id {:#06x})",
                self.seq, self.kind
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::{Collective, Registry};

    #[test]
    fn kinds_compare_and_name_their_algorithm() {
        let registry = Registry::builtin();
        let ring = registry.get(Collective::Allreduce, "ring").expect("ring");
        let chain = registry.get(Collective::Broadcast, "chain").expect("chain");
        let a = CallId::new(3, &ring);
        assert!(!a.same_kind(CallId::new(3, &chain)));
        assert!(a.same_kind(CallId::new(9, &ring)));
        assert_eq!(a.to_string(), "call #3 (allreduce, ring)");
        let stranger = CallId { seq: 2, kind: 0 };
        if registry.by_wire_id(0).is_none() {
            assert!(stranger.to_string().contains("unknown here"), "{stranger}");
        }
    }
}
