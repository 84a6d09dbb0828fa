//! `nccl_sendrecv`: sendrecv (nccl-tests' `sendrecv_perf`) the way NCCL's
//! point-to-point path runs one `ncclSend`/`ncclRecv` pair, on channels.
//!
//! Read from NCCL v2.29.7-1 (commit b91894bd):
//! - **Parts**: the `n` bytes are cut into one part per channel, each
//!   `⌈n / c⌉` rounded up to 4 KiB (`ncclP2pPartBounds`,
//!   `src/include/device.h:257-266`); the last parts may be short or
//!   empty (an empty part sends nothing). NCCL picks `c` per operation
//!   from the channels it has, at least one part of `chunk / 8` bytes each
//!   on one node (`chunk / 2` across nodes, `src/enqueue.cc:884-896`);
//!   here `c` is `Params::channels` (0: every channel of the fabric's
//!   [`ChannelPlan`](crate::nccl::ChannelPlan)), lowered so that every
//!   part has at least `chunk / 8` bytes.
//! - **Protocol** ([`protocol`]): LL when `n ≤ c · 16384`
//!   (`NCCL_P2P_LL_THRESHOLD`, `src/enqueue.cc:831,905`), else Simple.
//! - **Chunk**: Simple moves `Params::chunk_bytes` per step, NCCL's
//!   `p2pChunkSize` ([`chunk_bytes`]: 512 KiB all-NVLink on one node,
//!   128 KiB across nodes or over PCI, `src/init.cc:760-784`); LL a step of
//!   its buffer, 64 KiB of lines carrying 32 KiB (`src/enqueue.cc:908`).
//!   The device loop moves `min(chunk, remaining)` per step
//!   (`src/device/sendrecv.h:16-45`), at most `NCCL_STEPS` = 8 steps in
//!   flight per connection.
//!
//! Every channel streams its part at once: round `i` sends unit `i` to
//! `r+1` joined with receiving unit `i - 7` from `r-1`, which replaces the
//! same elements of the buffer (unit `i - 7` went out at round `i - 7`, so
//! nothing is overwritten before it is sent). Messages are framed with the
//! protocol, the channel and [`NcclAlgorithm::Ring`] (NCCL's tuner has no
//! p2p algorithm; a simulator charges the ring's per-hop latency), tagged
//! with [`channel_tag`]. Every rank does the same relative to itself
//! (rotation symmetric). Nothing is reduced; the result is
//! [`crate::sendrecv::direct`]'s. NCCL's tuner has no time model for p2p
//! (`NCCL_NUM_FUNCTIONS` excludes it, `src/include/nccl_common.h:59`), so
//! this algorithm gives no cost formula: name it to run it.

use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, movement_reference};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Tag};
use crate::nccl::protocol::STEPS;
use crate::nccl::ring::channel_tag;
use crate::nccl::{Framed, Framing, NcclAlgorithm, Protocol, plan_of};
use crate::payload::{Payload, Shape};

/// `NCCL_P2P_LL_THRESHOLD`: LL while the bytes are at most this per
/// channel (`src/enqueue.cc:831` @b91894bd).
pub const LL_THRESHOLD_BYTES: u64 = 16_384;
/// `NCCL_P2P_NVL_CHUNKSIZE`, one node joined by NVLink only
/// (`src/init.cc:762` @b91894bd).
pub const NVL_CHUNK_BYTES: u64 = 524_288;
/// `NCCL_P2P_NET_CHUNKSIZE`, across nodes (`src/init.cc:760` @b91894bd).
pub const NET_CHUNK_BYTES: u64 = 131_072;
/// `NCCL_P2P_PCI_CHUNKSIZE`, one node not all NVLink (`src/init.cc:761`
/// @b91894bd).
pub const PCI_CHUNK_BYTES: u64 = 131_072;
/// Parts are aligned to 4 KiB (`src/include/device.h:258` @b91894bd).
pub const PART_ALIGN_BYTES: u64 = 4096;

/// NCCL's `p2pChunkSize` (`src/init.cc:770-784` @b91894bd): across nodes
/// 128 KiB (twice that on ARM hosts with Blackwell GPUs, `grace_blackwell`:
/// GB200/GB300), on one all-NVLink node 512 KiB, otherwise 128 KiB; never
/// above Simple's step (512 KiB with the default buffer).
pub fn chunk_bytes(nodes: usize, all_nvlink: bool, grace_blackwell: bool) -> u64 {
    let chunk = if nodes > 1 {
        NET_CHUNK_BYTES * if grace_blackwell { 2 } else { 1 }
    } else if all_nvlink {
        NVL_CHUNK_BYTES
    } else {
        PCI_CHUNK_BYTES
    };
    chunk.min(Protocol::Simple.step_payload_bytes())
}

/// The protocol NCCL uses for `bytes` over `channels` channels: LL up to
/// [`LL_THRESHOLD_BYTES`] per channel, else Simple
/// (`src/enqueue.cc:905-906` @b91894bd).
pub fn protocol(bytes: u64, channels: usize) -> Protocol {
    if bytes <= (channels as u64).saturating_mul(LL_THRESHOLD_BYTES) {
        Protocol::Ll
    } else {
        Protocol::Simple
    }
}

/// Sendrecv the way NCCL's p2p path runs it, in place on `buf`; see the
/// module docs.
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
    let elem = buf.shape().dtype.size_bytes() as u64;
    let bytes = (buf.len() as u64).saturating_mul(elem);
    let chunk = params.chunk_bytes.max(1);
    let wanted = match params.channels {
        0 => plan_of(fabric).channels(),
        c => c,
    };
    let min_part = (chunk / 8).max(1);
    let channels = usize::try_from(bytes.div_ceil(min_part))
        .unwrap_or(usize::MAX)
        .clamp(1, wanted.max(1));
    let protocol = protocol(bytes, channels);
    let unit_bytes = match protocol {
        Protocol::Simple => chunk,
        _ => protocol.step_payload_bytes(),
    };
    let unit = usize::try_from(unit_bytes / elem)
        .unwrap_or(usize::MAX)
        .max(1);
    let part_bytes = bytes
        .div_ceil(channels as u64)
        .next_multiple_of(PART_ALIGN_BYTES);
    let part = usize::try_from(part_bytes / elem)
        .unwrap_or(usize::MAX)
        .max(1);
    let count = buf.len();
    let ranges: Vec<_> = (0..channels)
        .map(|c| (c.saturating_mul(part)).min(count)..(c + 1).saturating_mul(part).min(count))
        .filter(|r| !r.is_empty())
        .collect();
    let runs = ranges.iter().enumerate().map(|(c, range)| {
        let framing = Framing {
            protocol,
            algorithm: NcclAlgorithm::Ring,
            channel: c as u16,
        };
        let channel = Channel {
            tag: channel_tag(params.tag, c),
            unit,
        };
        stream(
            Framed::new(fabric, framing),
            buf.extract(range.clone()),
            channel,
        )
    });
    let outputs = join_branches(fabric, runs).await;
    for (range, output) in ranges.into_iter().zip(outputs) {
        buf.copy_from(range, &output?)?;
    }
    Ok(())
}

/// One channel's tag and unit (elements per step).
struct Channel {
    tag: Tag,
    unit: usize,
}

/// Streams `part` to `r+1` and receives `r-1`'s part in its place, in
/// units, [`STEPS`] in flight.
async fn stream<F: Fabric>(
    fabric: Framed<'_, F>,
    mut part: Payload,
    channel: Channel,
) -> Result<Payload, CollectiveError> {
    let n = fabric.world_size();
    let r = fabric.rank();
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let units = part.len().div_ceil(channel.unit);
    let window = STEPS.min(units);
    let len = part.len();
    let range = |i: usize| i * channel.unit..((i + 1) * channel.unit).min(len);
    let dtype = part.shape().dtype;
    for round in 0..units + window - 1 {
        let outgoing = (round < units).then(|| part.extract(range(round)));
        let receiving = round.checked_sub(window - 1).map(range);
        let expect = |into: &Range<usize>| Shape::new(dtype, into.len());
        // A send and a receive of one round are one framed exchange.
        let received = match (outgoing, &receiving) {
            (Some(p), Some(into)) => Some(
                fabric
                    .exchange(next, p, prev, expect(into), channel.tag)
                    .await?,
            ),
            (Some(p), None) => {
                fabric.send(next, channel.tag, p).await?;
                None
            }
            (None, Some(into)) => Some(fabric.recv(prev, channel.tag, expect(into)).await?),
            (None, None) => None,
        };
        if let (Some(incoming), Some(into)) = (received, receiving) {
            part.copy_from(into, &incoming)?;
        }
    }
    Ok(part)
}

/// NCCL's p2p sendrecv, as the [`Registry`](crate::Registry) holds it.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendRecv;

impl CollectiveAlgorithm for SendRecv {
    fn name(&self) -> &str {
        "nccl_sendrecv"
    }

    fn collective(&self) -> Collective {
        Collective::SendRecv
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

    fn reference(
        &self,
        inputs: &[Payload],
        _op: ReduceOp,
        _params: &Params,
    ) -> Option<Vec<Payload>> {
        Some(movement_reference(Collective::SendRecv, inputs, 0))
    }

    fn chunking(&self) -> Chunking {
        Chunking::Buffer
    }

    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::Any
    }

    fn messages_bound(&self, n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
        // Units of the smaller of Simple's chunk and LL's step, plus a
        // short last unit per channel (64 channels at most, NCCL's
        // `MAXCHANNELS` in 2.29).
        let bytes = (count as u64).saturating_mul(elem_bytes as u64);
        let unit = chunk_bytes.clamp(1, Protocol::Ll.step_payload_bytes());
        (n as u64).saturating_mul(bytes.div_ceil(unit).saturating_add(64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_and_protocols_follow_nccls_rules() {
        assert_eq!(chunk_bytes(1, true, false), 512 << 10);
        assert_eq!(chunk_bytes(1, false, false), 128 << 10);
        assert_eq!(chunk_bytes(2, true, false), 128 << 10);
        assert_eq!(chunk_bytes(2, true, true), 256 << 10);
        assert_eq!(protocol(16_384, 1), Protocol::Ll);
        assert_eq!(protocol(16_385, 1), Protocol::Simple);
        assert_eq!(protocol(32_768, 2), Protocol::Ll);
    }
}
