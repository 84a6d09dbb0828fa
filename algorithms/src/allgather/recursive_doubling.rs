//! Allgather, recursive doubling algorithm. (Placeholder: being written.)

use crate::collective::Params;
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::Payload;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "(not yet written)";

/// Runs the algorithm in place on `buf`.
pub async fn run<F: Fabric>(
    _fabric: &F,
    _buf: &mut Payload,
    _op: ReduceOp,
    _params: &Params,
) -> Result<(), CollectiveError> {
    Err(CollectiveError::NotImplemented)
}

/// Modelled time of one call in picoseconds under ideal links.
pub fn cost_ps(
    _model: &CostModel,
    _n: usize,
    _count: usize,
    _dtype: DType,
    _params: &Params,
) -> u64 {
    u64::MAX
}

/// Every rank's buffer after the call.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    inputs.to_vec()
}
