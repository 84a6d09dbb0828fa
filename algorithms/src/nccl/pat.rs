//! `nccl_pat`: allgather and reduce-scatter the way NCCL's PAT (Parallel
//! Aggregated Trees, NCCL 2.23+) runs them, on NCCL's channels.
//!
//! # Channels
//! PAT runs on the **tree graph's** channels (`src/init.cc:917`, PAT reads
//! `graphs[NCCL_ALGO_TREE]`, `src/transport/generic.cc:67-79` @b91894bd):
//! the call uses `c = Params::channels` channels (0: every tree of the
//! fabric's [`ChannelPlan`](crate::nccl::ChannelPlan)). Channel `k` works
//! on block `k` of every rank's block (blocks in rank order), so each
//! channel runs a whole PAT collective of smaller blocks, all channels at
//! once, every message framed with [`Protocol::Simple`] (PAT's only
//! protocol), [`NcclAlgorithm::Pat`] and the channel ([`Framed`]), tagged
//! with [`channel_tag`]. Peers are rank `± 2^d` in rank order whatever the
//! plan's rings and trees, as NCCL's `ncclTransportPatConnect` connects
//! them.
//!
//! # One channel
//! [`crate::allgather::pat`] / [`crate::reduce_scatter::pat`]'s schedule
//! ([`crate::pat`]) on the channel's blocks, aggregating blocks into
//! messages of at most one chunk: NCCL's PAT chunk
//! ([`chunk_bytes`]: the Simple step of 512 KiB, halved while
//! `chunk · channels · 32` (allgather) or `· 16` (reduce-scatter) exceeds
//! the call's bytes and the chunk is above 64 KiB, `src/enqueue.cc:2190-2193`
//! @b91894bd), or `Params::chunk_bytes` if smaller (how the engine passes
//! NCCL's chunk).
//!
//! # Results
//! Every element of block `j` is reduced in the PAT order of
//! [`crate::reduce_scatter::pat`] whatever the channel, so the result is
//! the catalogue `pat`'s bit for bit ([`ReduceOp::Avg`]: rank `r` divides
//! its block once at the end).

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank};
use crate::nccl::ring::{ChannelSlice, channel_tag};
use crate::nccl::{Framed, Framing, NcclAlgorithm, Protocol, plan_of};
use crate::pat::{self, Packing};
use crate::payload::Payload;
use crate::schedule;

/// NCCL's smallest PAT chunk: the halving stops at 64 KiB
/// (`src/enqueue.cc:2191,2193` @b91894bd).
pub const MIN_CHUNK_BYTES: u64 = 65_536;

/// NCCL's PAT chunk for a call of `bytes` (the whole buffer:
/// `ncclFuncMaxSendRecvCount` elements, `src/enqueue.cc:2035` @b91894bd) on
/// `channels` channels: Simple's step (512 KiB), halved while
/// `chunk · channels · k > bytes` and `chunk > 64 KiB`, `k` = 32 for
/// allgather, 16 for reduce-scatter (`src/enqueue.cc:2190-2193` @b91894bd).
pub fn chunk_bytes(collective: Collective, bytes: u64, channels: usize) -> u64 {
    let k: u64 = if collective == Collective::ReduceScatter {
        16
    } else {
        32
    };
    let mut chunk = Protocol::Simple.step_payload_bytes();
    while chunk
        .saturating_mul(channels.max(1) as u64)
        .saturating_mul(k)
        > bytes
        && chunk > MIN_CHUNK_BYTES
    {
        chunk /= 2;
    }
    chunk
}

/// Runs `collective` (allgather or reduce-scatter) the way NCCL's PAT
/// does, in place on `buf`; see the module docs.
pub async fn run<F: Fabric>(
    fabric: &F,
    collective: Collective,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    if collective.reduces() {
        if reduction_is_trivial(fabric, buf, op)? {
            return Ok(());
        }
    } else if fabric.world_size() == 1 || buf.is_empty() {
        return Ok(());
    }
    let n = fabric.world_size();
    let plan = plan_of(fabric);
    let wanted = match params.channels {
        0 => plan.trees.len(),
        c => c,
    };
    let channels = wanted.clamp(1, (buf.len() / n).max(1));
    let elem = buf.shape().dtype.size_bytes();
    let bytes = (buf.len() as u64).saturating_mul(elem as u64);
    let chunk = chunk_bytes(collective, bytes, channels).min(params.chunk_bytes.max(1));
    let order: Vec<Rank> = (0..n).collect();
    let slices: Vec<ChannelSlice> = (0..channels)
        .map(|c| ChannelSlice::blocked(&order, c, channels, buf.len(), n))
        .collect();
    let runs = slices.iter().enumerate().map(|(c, slice)| {
        let mut input = slice.gather(buf);
        let segments = slice.segments();
        let largest = segments.iter().map(|s| s.len()).max().unwrap_or(0);
        let packing = Packing::new(largest, elem, chunk);
        let block = |j: usize| segments[j].clone();
        let steps = if collective == Collective::ReduceScatter {
            pat::reduce_scatter_steps(n, fabric.rank(), packing, block)
        } else {
            pat::allgather_steps(n, fabric.rank(), packing, block)
        };
        let framing = Framing {
            protocol: Protocol::Simple,
            algorithm: NcclAlgorithm::Pat,
            channel: c as u16,
        };
        let tag = channel_tag(params.tag, c);
        async move {
            let framed = Framed::new(fabric, framing);
            schedule::execute(&framed, &mut input, op, tag, &steps).await?;
            Ok::<_, CollectiveError>(input)
        }
    });
    let outputs = join_branches(fabric, runs).await;
    for (slice, output) in slices.iter().zip(outputs) {
        slice.scatter(buf, &output?)?;
    }
    Ok(())
}

macro_rules! nccl_pat_algorithm {
    ($name:ident, $collective:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl CollectiveAlgorithm for $name {
            fn name(&self) -> &str {
                "nccl_pat"
            }

            fn collective(&self) -> Collective {
                $collective
            }

            fn run<'a>(
                &'a self,
                fabric: AnyFabric<'a>,
                buf: &'a mut Payload,
                op: ReduceOp,
                params: &'a Params,
            ) -> Running<'a> {
                Box::pin(async move { run(&fabric, $collective, buf, op, params).await })
            }

            fn reference(
                &self,
                inputs: &[Payload],
                op: ReduceOp,
                params: &Params,
            ) -> Option<Vec<Payload>> {
                // The same order per element as the catalogue's PAT.
                Some(if $collective == Collective::ReduceScatter {
                    crate::reduce_scatter::pat::reference(inputs, op, params)
                } else {
                    crate::allgather::pat::reference(inputs, op, params)
                })
            }

            fn chunking(&self) -> Chunking {
                Chunking::Block
            }

            fn nccl_algorithm(&self) -> Option<&str> {
                Some("pat")
            }

            fn runs_nccl_channels(&self) -> bool {
                true
            }

            fn rotation_symmetry(&self) -> RotationSymmetry {
                // Peers are rank ± 2^d and channels split every block
                // alike, whatever the plan.
                RotationSymmetry::Any
            }

            fn messages_bound(
                &self,
                n: usize,
                count: usize,
                elem_bytes: usize,
                chunk_bytes: u64,
            ) -> u64 {
                // The most over 1 to 64 channels (NCCL's `MAXCHANNELS`
                // in 2.29), each on its share of the largest block, in
                // chunks no larger than the smallest PAT chunk.
                let largest = crate::layout::block_range(count, n, 0).len();
                let chunk = chunk_bytes.min(MIN_CHUNK_BYTES);
                let per_rank = (1..=64usize)
                    .map(|c| {
                        let share = largest.div_ceil(c);
                        (c as u64)
                            .saturating_mul(Packing::new(share, elem_bytes, chunk).messages(n))
                    })
                    .max()
                    .unwrap_or(0);
                (n as u64).saturating_mul(per_rank)
            }
        }
    };
}

nccl_pat_algorithm!(
    Allgather,
    Collective::Allgather,
    "NCCL's PAT allgather on every tree channel (see the module docs)."
);
nccl_pat_algorithm!(
    ReduceScatter,
    Collective::ReduceScatter,
    "NCCL's PAT reduce-scatter on every tree channel (see the module docs)."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunk_halves_down_to_64_kib_for_small_calls() {
        // 2 channels: allgather keeps 512 KiB from 32 MiB up.
        assert_eq!(chunk_bytes(Collective::Allgather, 32 << 20, 2), 512 << 10);
        assert_eq!(
            chunk_bytes(Collective::Allgather, (32 << 20) - 1, 2),
            256 << 10
        );
        // Reduce-scatter's divisor is 16: 512 KiB from 16 MiB up.
        assert_eq!(
            chunk_bytes(Collective::ReduceScatter, 16 << 20, 2),
            512 << 10
        );
        assert_eq!(
            chunk_bytes(Collective::ReduceScatter, 8 << 20, 2),
            256 << 10
        );
        // Never below 64 KiB.
        assert_eq!(chunk_bytes(Collective::Allgather, 1024, 2), MIN_CHUNK_BYTES);
    }
}
