//! [`CollectiveError`]: why a collective did not complete on this rank.

use crate::dtype::{DType, ReduceOp};
use crate::fabric::FabricError;
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
}
