//! Dissemination barrier (Hensgen, Finkel and Manber, 1988).
//!
//! # Schedule
//! `R = ⌈log2 N⌉` rounds. In round `k` rank `r` sends a zero-byte message to
//! `r + 2^k (mod N)` and waits for the one from `r - 2^k (mod N)`, sending
//! and receiving concurrently. By induction, after round `k` rank `r` has
//! (transitively) heard from the `2^(k+1) - 1` ranks before it, so after
//! `R` rounds it has heard from all `N - 1` others: no rank returns before
//! every rank has entered. Works for any `N`, not only powers of two.
//!
//! Every message carries the call's tag: the partners `r - 2^k` of the
//! different rounds are distinct ranks (as `2^k < N`), so a receive can
//! only match the message of its own round, and back-to-back barriers with
//! the same tag stay apart because a link delivers in order.
//!
//! # Cost (ideal links)
//! Every rank runs the same schedule, so all enter round `k` together; a
//! zero-byte message occupies no wire time and arrives `α` after it is
//! sent, so each round takes exactly `α`:
//!
//! ```text
//! T = ⌈log2 N⌉ · α
//! ```

use crate::algorithm::{CollectiveAlgorithm, RotationSymmetry, messages_bound, module_items};
use crate::collective::{Collective, Params, movement_reference};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::payload::{Payload, Shape};

/// The cost formula, for the catalogue listing.
pub const FORMULA: &str = "⌈log2 N⌉·α";

/// Dissemination barrier: returns on each rank only once every rank has
/// entered. The buffer is ignored and left unchanged. All ranks must call
/// it with the same parameters. Works for any world size (1 returns at
/// once).
pub async fn run<F: Fabric>(
    fabric: &F,
    _buf: &mut Payload,
    _op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    for k in 0..rounds(n) {
        round(fabric, 1 << k, params).await?;
    }
    Ok(())
}

/// One round: a zero-byte token to the rank `distance` ahead, joined with
/// waiting for the token from the rank `distance` behind.
async fn round<F: Fabric>(
    fabric: &F,
    distance: usize,
    params: &Params,
) -> Result<(), CollectiveError> {
    let n = fabric.world_size();
    let r = fabric.rank();
    let token = Shape::new(DType::U8, 0);
    fabric
        .exchange(
            (r + distance) % n,
            Payload::phantom(DType::U8, 0),
            (r + n - distance) % n,
            token,
            params.tag,
        )
        .await?;
    Ok(())
}

/// `⌈log2 N⌉`, the number of rounds (zero for one rank).
fn rounds(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// Modelled time of one call under ideal links: `⌈log2 N⌉` rounds of one
/// zero-byte message each. Exact for every `N`; the buffer size and type do
/// not matter.
pub fn cost_ps(model: &CostModel, n: usize, _count: usize, _dtype: DType, _params: &Params) -> u64 {
    u64::from(rounds(n)) * model.message_ps(0)
}

/// Every rank's buffer after the call: unchanged.
pub fn reference(inputs: &[Payload], _op: ReduceOp, params: &Params) -> Vec<Payload> {
    movement_reference(Collective::Barrier, inputs, params.root)
}

/// The dissemination barrier, as the [`Registry`](crate::Registry) holds it:
/// [`run`], [`cost_ps`] and [`reference()`] behind
/// [`CollectiveAlgorithm`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Dissemination;

impl CollectiveAlgorithm for Dissemination {
    fn name(&self) -> &str {
        "dissemination"
    }

    fn collective(&self) -> Collective {
        Collective::Barrier
    }

    module_items!();

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, _count: usize, _elem: usize, _chunk: u64) -> u64 {
        messages_bound::log_steps(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_is_ceil_log2() {
        let got: Vec<u32> = [1, 2, 3, 4, 5, 8, 9, 64].map(rounds).to_vec();
        assert_eq!(got, [0, 1, 2, 2, 3, 3, 4, 6]);
    }
}
