//! `nccl_nvls`: allreduce the way NCCL's NVLS algorithm runs it on one
//! NVLink domain, through the NVSwitch's in-network reduction (NVLink
//! SHARP, [`Fabric::reduce_in_network`]).
//!
//! NCCL (`src/device/all_reduce.h:389-457` @b91894bd): every GPU is a
//! head (single node: one head per GPU, `src/graph/search.cc:1195-1214`);
//! the buffer is cut into chunks of `nvlsChunkSize` (128 KiB by default,
//! `NCCL_NVLS_CHUNKSIZE`, `src/transport/nvls.cc:154`, never more than the
//! Simple step, `src/enqueue.cc:2153-2180`), each chunk owned by one head
//! and channel. The scatter warps copy the user's data into the heads'
//! buffers, a head's reduce warps `multimem.ld_reduce` its chunk (the
//! switch sums every GPU's copy) and `multimem.st` the sum (the switch
//! writes it to every GPU), and the gather warps copy it out. Seen from
//! the links, each chunk crosses every GPU's link up to the switch once
//! and comes back down once, reduced: that is one
//! [`Fabric::reduce_in_network`] per chunk among all ranks, which is how
//! this module runs it. Chunks are of `min(Params::chunk_bytes, 128 KiB)`
//! (the engine passes the step as `chunk_bytes`), all issued at once in
//! buffer order, so a fabric that queues each rank's legs in order
//! pipelines them.
//!
//! Reduction order: the switch's, member order, so every element is
//! `((x0 ⊕ x1) ⊕ x2) ⊕ ...` over ranks `0..N` (the rank-order fold);
//! [`ReduceOp::Avg`] divides by `N` afterwards on every rank.
//!
//! Cost on a switch with one link of latency `α` and bandwidth `β⁻¹` per
//! rank and forwarding latency `f`, `k` chunks of `c` bytes (`S = k c`):
//! the chunks go up back to back, each is reduced when the last rank's
//! copy arrives and comes down behind the one before, so the call takes
//! `(k + 1) c β + 2 α + f`: busbw `2 (N-1)/N · S / T` tends to
//! `2 (N-1)/N` times the link's bandwidth, above it for `N > 2`.
//! On fabrics without such a switch the call fails with the fabric's
//! reason ([`crate::in_network::NO_SWITCH_REASON`]).

use std::ops::Range;

use futures_util::future::try_join_all;

use crate::algorithm::{Chunking, CollectiveAlgorithm, Running};
use crate::any_fabric::AnyFabric;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::payload::Payload;

/// NCCL's default `NCCL_NVLS_CHUNKSIZE`, bytes (`src/transport/nvls.cc:154`
/// @b91894bd).
pub const NVLS_CHUNK_BYTES: u64 = 128 * 1024;

/// The ranges of `len` elements of `elem` bytes cut into units of at most
/// `unit_bytes` bytes (at least one element each; one empty unit for an
/// empty buffer).
pub(crate) fn units(len: usize, elem: usize, unit_bytes: u64) -> Vec<Range<usize>> {
    let per = usize::try_from(unit_bytes / elem.max(1) as u64)
        .unwrap_or(usize::MAX)
        .max(1);
    if len == 0 {
        let empty: Range<usize> = 0..0;
        return vec![empty];
    }
    (0..len.div_ceil(per))
        .map(|u| u * per..((u + 1) * per).min(len))
        .collect()
}

/// Allreduce through the switch, in place on `buf`; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if reduction_is_trivial(fabric, buf, op)? {
        return Ok(());
    }
    let n = fabric.world_size();
    let group: Vec<Rank> = (0..n).collect();
    fabric.can_reduce_in_network(&group)?;
    let unit_bytes = params.chunk_bytes.clamp(1, NVLS_CHUNK_BYTES);
    let ranges = units(buf.len(), buf.shape().dtype.size_bytes(), unit_bytes);
    let tag = params.tag.phase(0);
    let calls = ranges
        .iter()
        .map(|r| fabric.reduce_in_network(&group, tag, buf.extract(r.clone()), op));
    let results = try_join_all(calls).await?;
    for (range, result) in ranges.into_iter().zip(results) {
        buf.copy_from(range.clone(), &result)?;
        if op == ReduceOp::Avg {
            buf.divide(range, n);
        }
    }
    Ok(())
}

/// Every rank's result: the rank-order fold (see the module docs).
pub fn reference(inputs: &[Payload], op: ReduceOp, _params: &Params) -> Vec<Payload> {
    vec![crate::reference::rank_order_reference(inputs, op); inputs.len()]
}

/// NCCL's NVLS allreduce, as the registry holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allreduce;

impl CollectiveAlgorithm for Allreduce {
    fn name(&self) -> &str {
        "nccl_nvls"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move { run(&fabric, buf, op, params).await })
    }

    fn reference(&self, inputs: &[Payload], op: ReduceOp, params: &Params) -> Option<Vec<Payload>> {
        Some(reference(inputs, op, params))
    }

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn nccl_algorithm(&self) -> Option<&str> {
        Some("nvls")
    }

    fn runs_nccl_channels(&self) -> bool {
        true
    }

    fn reduces_in_network(&self) -> bool {
        true
    }
}
