//! [`Inline`]: catalogue algorithms that a real fabric may run on its own
//! type, without the registry's layers.
//!
//! Through the registry every call boxes the algorithm's future
//! ([`Running`](crate::Running)) and runs it on an
//! [`AnyFabric`](crate::AnyFabric), whose operations are indirect calls
//! with their futures copied into inline boxes. For a call of a few bytes
//! those layers cost about as much as the messages themselves (see
//! README's "Real fabrics"). An algorithm marked `Inline` is also run by
//! [`Algorithm::run_inline`](crate::Algorithm::run_inline) as the module's
//! generic `run` instantiated for the caller's fabric: the same code, so
//! the same messages in the same order and the same reduction order, with
//! one future on the caller's stack and direct calls.
//!
//! Only the catalogue marks algorithms (a user's algorithm cannot claim
//! code it does not run), and only the tuner's choices for small buffers
//! and the rings that `sim validate` and README's figures measure are
//! marked: each one instantiates its module once more per fabric type.

use crate::allgather::ring as allgather_ring;
use crate::allreduce::{recursive_doubling, ring as allreduce_ring};
use crate::collective::Params;
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::Payload;

/// A catalogue algorithm that [`Algorithm::run_inline`](crate::Algorithm::run_inline)
/// runs monomorphised on the caller's fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Inline {
    /// Allreduce by recursive doubling
    /// ([`recursive_doubling`]), the tuner's choice for small buffers.
    AllreduceRecursiveDoubling,
    /// Allreduce on a ring ([`allreduce_ring`]): reduce-scatter then
    /// allgather, pipelined in chunks.
    AllreduceRing,
    /// Allgather on a ring ([`allgather_ring`]).
    AllgatherRing,
}

impl Inline {
    /// Runs the algorithm's module code on `fabric` itself (the caller
    /// has checked the arguments, as [`Algorithm::run`](crate::Algorithm::run)
    /// does).
    pub(crate) async fn run<F: Fabric>(
        self,
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        params: &Params,
    ) -> Result<(), CollectiveError> {
        match self {
            Inline::AllreduceRecursiveDoubling => {
                recursive_doubling::run(fabric, buf, op, params).await
            }
            Inline::AllreduceRing => allreduce_ring::run(fabric, buf, op, params).await,
            Inline::AllgatherRing => allgather_ring::run(fabric, buf, op, params).await,
        }
    }
}
