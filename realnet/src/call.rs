//! [`CallId`]: which collective call a message belongs to.
//!
//! Every message a real fabric carries names the call it belongs to: the
//! call's sequence number in the job (the first collective is 1) and its
//! kind (collective and algorithm). A receive only matches messages of the
//! receiver's current call, and a message of the same sequence number but a
//! different kind means the ranks called different collectives: a clear
//! error instead of a hang or a wrong result.

use std::fmt;

use algorithms::{Algorithm, Collective};

/// One collective call: its sequence number and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId {
    /// 1 for the job's first collective, then 2, 3, ... (0: no call yet).
    pub seq: u64,
    /// The collective, as its index in [`Collective::ALL`].
    pub collective: u8,
    /// The algorithm, as its index in [`Algorithm::ALL`].
    pub algorithm: u8,
}

impl CallId {
    /// The state before the first call: messages of call 0 are refused.
    pub const NONE: CallId = CallId {
        seq: 0,
        collective: u8::MAX,
        algorithm: u8::MAX,
    };

    /// The call number `seq` of `collective` with `algorithm`.
    pub fn new(seq: u64, collective: Collective, algorithm: Algorithm) -> CallId {
        let index =
            |found: Option<usize>| found.and_then(|i| u8::try_from(i).ok()).unwrap_or(u8::MAX);
        CallId {
            seq,
            collective: index(Collective::ALL.iter().position(|c| *c == collective)),
            algorithm: index(Algorithm::ALL.iter().position(|a| *a == algorithm)),
        }
    }

    /// The collective, if the index names one.
    pub fn collective(self) -> Option<Collective> {
        Collective::ALL.get(usize::from(self.collective)).copied()
    }

    /// The algorithm, if the index names one.
    pub fn algorithm(self) -> Option<Algorithm> {
        Algorithm::ALL.get(usize::from(self.algorithm)).copied()
    }

    /// Whether two calls are of the same collective and algorithm.
    pub fn same_kind(self, other: CallId) -> bool {
        self.collective == other.collective && self.algorithm == other.algorithm
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.collective(), self.algorithm()) {
            (Some(c), Some(a)) => write!(f, "call #{} ({c}, {a})", self.seq),
            _ => write!(
                f,
                "call #{} (kind {}/{})",
                self.seq, self.collective, self.algorithm
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_round_trip_and_kinds_compare() {
        let a = CallId::new(3, Collective::Allreduce, Algorithm::Ring);
        assert_eq!(a.collective(), Some(Collective::Allreduce));
        assert_eq!(a.algorithm(), Some(Algorithm::Ring));
        let b = CallId::new(3, Collective::Broadcast, Algorithm::Ring);
        assert!(!a.same_kind(b));
        assert!(a.same_kind(CallId::new(9, Collective::Allreduce, Algorithm::Ring)));
        assert_eq!(a.to_string(), "call #3 (allreduce, ring)");
        assert_eq!(CallId::NONE.collective(), None);
    }
}
