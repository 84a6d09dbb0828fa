//! [`CollectiveError`]: why a collective did not complete on this rank.

use crate::collective::Collective;
use crate::dtype::{DType, ReduceOp};
use crate::fabric::FabricError;
use crate::fabric::Rank;
use crate::payload::PayloadMismatch;

/// Why a collective failed on one rank.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    /// The fabric reported an error (a bad peer, a truncated message, a
    /// transport failure).
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The reduction operator does not apply to the element type.
    #[error("reduction `{op}` is not defined for dtype `{dtype}`")]
    UnsupportedOp {
        /// The operator asked for.
        op: ReduceOp,
        /// The buffer's element type.
        dtype: DType,
    },
    /// A received payload did not fit the local buffer.
    #[error(transparent)]
    Payload(#[from] PayloadMismatch),
    /// The root is not a rank of the world.
    #[error("root {root} is out of range for world size {world_size}")]
    InvalidRoot {
        /// The root asked for.
        root: Rank,
        /// The number of ranks.
        world_size: usize,
    },
    /// The element count does not suit the collective (alltoall needs a
    /// multiple of the world size).
    #[error("{collective} of {count} elements on {world_size} ranks: {why}")]
    InvalidCount {
        /// The collective.
        collective: Collective,
        /// The element count given.
        count: usize,
        /// The number of ranks.
        world_size: usize,
        /// What was expected.
        why: &'static str,
    },
}
