//! Sendrecv as one send and one receive: rank `r` sends its whole buffer
//! to `r+1 (mod N)` and receives `r-1`'s into it.
//!
//! # Schedule
//! nccl-tests' `sendrecv_perf` (`src/sendrecv.cu` @f476f4a17af7) issues,
//! in one group, `ncclSend(count)` to `(r+1) mod N` and `ncclRecv(count)`
//! from `(r-1+N) mod N`. Here the buffer is copied out, sent, and the
//! receive joined with the send, so a back-end with rendezvous sends runs
//! it too; the received buffer replaces the local one (the in-place
//! convention: after the call rank `r` holds rank `r-1`'s input). One rank
//! or an empty buffer does nothing. Chunking (`chunk_bytes`) is not used.
//! Nothing is reduced. Every rank does the same relative to itself, so the
//! schedule is rotation symmetric.
//!
//! # Cost (ideal links)
//! One message of the whole `n` bytes per rank, all at once on distinct
//! links:
//!
//! ```text
//! T = α + n/B
//! ```
//!
//! exactly (the wire term rounded up to a picosecond). nccl-tests reports
//! busbw = algbw = `n / T` ([`Collective::busbw_factor`] is 1).

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::Payload;

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "α + n/B";

/// Modelled time of one call in picoseconds under ideal links (zero for
/// `N = 1` or an empty buffer).
pub fn cost_ps(model: &CostModel, n: usize, count: usize, dtype: DType, _params: &Params) -> u64 {
    if n <= 1 || count == 0 {
        return 0;
    }
    model.message_ps((count as u64).saturating_mul(dtype.size_bytes() as u64))
}

/// Every rank's buffer after the call: rank `r - 1`'s input.
pub fn reference(inputs: &[Payload], _op: ReduceOp, _params: &Params) -> Vec<Payload> {
    movement_reference(Collective::SendRecv, inputs, 0)
}

/// Sendrecv, in place: sends `buf` to rank `r+1` and replaces it with
/// what rank `r-1` sends. All ranks call it with buffers of the same
/// shape; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    if n == 1 || buf.is_empty() {
        return Ok(());
    }
    let r = fabric.rank();
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let shape = buf.shape();
    let outgoing = buf.clone();
    *buf = fabric
        .exchange(next, outgoing, prev, shape, params.tag)
        .await?;
    Ok(())
}

/// The direct sendrecv, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl CollectiveAlgorithm for Direct {
    fn name(&self) -> &str {
        "direct"
    }

    fn collective(&self) -> Collective {
        Collective::SendRecv
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        n as u64
    }
}
