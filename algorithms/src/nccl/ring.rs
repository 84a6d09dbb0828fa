//! `nccl_ring`: a collective the way NCCL's ring algorithm runs it.
//!
//! # Channels
//! The call uses `c = Params::channels` channels (0: every channel of the
//! fabric's [`ChannelPlan`]). Channel `k` works on its own slice of the
//! buffer: for allreduce, broadcast and reduce, block `k` of the buffer cut
//! into `c` blocks (NCCL splits a call's bytes evenly over its channels);
//! for allgather and reduce-scatter, block `k` of every rank's block, so
//! that each channel runs a whole allgather or reduce-scatter of smaller
//! blocks. The channels run at once, each on its own ring
//! ([`ChannelPlan::ring`]), every message framed with the call's protocol,
//! [`NcclAlgorithm::Ring`] and the channel's number ([`Framed`]), and
//! tagged with [`channel_tag`]. They are joined with
//! [`join_branches`]: they share nothing
//! but the fabric, so the model checker searches them as separate units.
//!
//! # One channel
//! In the channel's ring order (rank `ring[i]` sends to `ring[i + 1]`):
//! - allreduce: `2(N-1)` steps; at step `s` position `i` sends segment
//!   `(i - s) mod N` and receives segment `(i - s - 1) mod N`, reducing in
//!   the first `N-1` steps and copying in the rest (NCCL's
//!   `runRing` of `src/device/all_reduce.h`);
//! - reduce-scatter: `N-1` reducing steps, sending `(i - s - 1) mod N`,
//!   so that position `i` ends with its own segment reduced;
//! - allgather: `N-1` copying steps sending `(i - s) mod N`;
//! - broadcast and reduce: the catalogue's pipelined chains
//!   ([`crate::broadcast::chain`], [`crate::reduce::chain`]) along the
//!   ring from the root, or ending at it.
//!
//! Segments stream through the ring in pipeline units of the protocol
//! ([`Protocol::ring_pipeline`](crate::nccl::Protocol::ring_pipeline): LL 32 KiB of payload, LL128 576,000 B,
//! Simple 1 MiB slices; `Params::chunk_bytes` if smaller, which is how
//! the engine passes NCCL's chunk size), at most `W` units of a rank ahead of what it has
//! received (NCCL's 8 slots per connection, 4 for Simple's 2-step slices),
//! exactly as the catalogue's ring allreduce streams its chunks
//! ([`crate::allreduce::ring`]). A unit received at step `s` is what goes
//! out at step `s + 1`.
//!
//! # Results
//! Every element is reduced once per rank along its channel's ring, so
//! the reduction order is a ring order that depends on the plan;
//! [`ReduceOp::Avg`] divides once, at the end, on every rank.

use std::ops::Range;

use crate::algorithm::{Chunking, CollectiveAlgorithm, RotationSymmetry, Running};
use crate::any_fabric::AnyFabric;
use crate::branches::join_branches;
use crate::collective::{Collective, Params, reduction_is_trivial};
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag, Work};
use crate::group::Group;
use crate::layout::block_range;
use crate::nccl::{ChannelPlan, Framed, Framing, NcclAlgorithm, channels_used, plan_of};
use crate::payload::{Payload, Shape};
use crate::{broadcast, reduce};

/// The first bit of a tag holding the channel (see [`channel_tag`]).
const CHANNEL_SHIFT: u32 = 40;

/// The tag of channel `channel` of the call tagged `tag`: the channel
/// number plus one in bits 40..56, so calls tagged below 2^40 keep their
/// channels apart (and phases, in the top byte, still apply on top).
pub fn channel_tag(tag: Tag, channel: usize) -> Tag {
    Tag(tag.0 | ((channel as u64 + 1) << CHANNEL_SHIFT))
}

/// The call's tag and the channel of a tag made by [`channel_tag`] (a
/// tag without a channel gives `None`), phases left in place.
pub fn split_channel_tag(tag: Tag) -> (Tag, Option<usize>) {
    let bits = (tag.0 >> CHANNEL_SHIFT) & 0xffff;
    if bits == 0 {
        return (tag, None);
    }
    (
        Tag(tag.0 & !(0xffff << CHANNEL_SHIFT)),
        Some(bits as usize - 1),
    )
}

/// Runs `collective` (allreduce, allgather, reduce-scatter, broadcast or
/// reduce) the way NCCL's ring does, in place on `buf`; see the module
/// docs.
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
    let blocked = matches!(
        collective,
        Collective::Allgather | Collective::ReduceScatter
    );
    let smallest = if blocked { buf.len() / n } else { buf.len() };
    let channels = channels_used(params.channels, &plan, smallest);
    let slices: Vec<ChannelSlice> = (0..channels)
        .map(|c| ChannelSlice::new(&plan, c, channels, buf.len(), n, blocked))
        .collect();
    let runs = slices.iter().enumerate().map(|(c, slice)| {
        let input = slice.gather(buf);
        let segments = if blocked {
            slice.segments()
        } else {
            (0..n).map(|j| block_range(input.len(), n, j)).collect()
        };
        let channel = Channel {
            collective,
            ring: plan.ring(c),
            index: c,
            segments,
        };
        run_channel(fabric, channel, input, op, params)
    });
    let outputs = join_branches(fabric, runs).await;
    for (slice, output) in slices.iter().zip(outputs) {
        slice.scatter(buf, &output?)?;
    }
    if op == ReduceOp::Avg && collective != Collective::Reduce {
        match collective {
            Collective::ReduceScatter => {
                let mine = block_range(buf.len(), n, fabric.rank());
                buf.divide(mine, n);
            }
            _ => buf.divide(0..buf.len(), n),
        }
    }
    Ok(())
}

/// Where channel `c`'s buffer comes from in the call's buffer: the
/// ranges, in order, whose concatenation it is.
pub(crate) struct ChannelSlice {
    parts: Vec<Range<usize>>,
}

impl ChannelSlice {
    /// Channel `c` of `channels`: block `c` of every rank's block, the
    /// ranks' blocks in `order`.
    pub(crate) fn blocked(
        order: &[Rank],
        c: usize,
        channels: usize,
        count: usize,
        n: usize,
    ) -> ChannelSlice {
        let parts = order
            .iter()
            .map(|&r| {
                let block = block_range(count, n, r);
                let sub = block_range(block.len(), channels, c);
                block.start + sub.start..block.start + sub.end
            })
            .collect();
        ChannelSlice { parts }
    }

    /// Channel `c` of `channels`: block `c` of the buffer, or (`blocked`)
    /// block `c` of every rank's block, in the channel's ring order.
    fn new(
        plan: &ChannelPlan,
        c: usize,
        channels: usize,
        count: usize,
        n: usize,
        blocked: bool,
    ) -> ChannelSlice {
        if blocked {
            return ChannelSlice::blocked(plan.ring(c), c, channels, count, n);
        }
        ChannelSlice {
            parts: vec![block_range(count, channels, c)],
        }
    }

    /// Elements in the channel's buffer.
    fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    /// The channel's buffer, copied out of `buf`.
    pub(crate) fn gather(&self, buf: &Payload) -> Payload {
        if let [only] = self.parts.as_slice() {
            return buf.extract(only.clone());
        }
        let mut out = Payload::zeros(buf.shape().dtype, self.len(), buf.is_phantom());
        let mut at = 0;
        for part in &self.parts {
            out.copy_from(at..at + part.len(), &buf.extract(part.clone()))
                .expect("same element type and length");
            at += part.len();
        }
        out
    }

    /// Copies the channel's buffer back into `buf`.
    pub(crate) fn scatter(
        &self,
        buf: &mut Payload,
        channel: &Payload,
    ) -> Result<(), CollectiveError> {
        let mut at = 0;
        for part in &self.parts {
            buf.copy_from(part.clone(), &channel.extract(at..at + part.len()))?;
            at += part.len();
        }
        Ok(())
    }

    /// The channel buffer's segments, one per ring position (per rank of
    /// the order given to [`ChannelSlice::blocked`]).
    pub(crate) fn segments(&self) -> Vec<Range<usize>> {
        let mut at = 0;
        self.parts
            .iter()
            .map(|p| {
                at += p.len();
                at - p.len()..at
            })
            .collect()
    }
}

/// One channel of a call.
struct Channel<'p> {
    collective: Collective,
    /// Its ring order.
    ring: &'p [Rank],
    /// Its number.
    index: usize,
    /// Its buffer's segments, one per ring position.
    segments: Vec<Range<usize>>,
}

/// One channel's share of the call: its buffer in, its buffer out.
async fn run_channel<F: Fabric>(
    fabric: &F,
    channel: Channel<'_>,
    mut buf: Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<Payload, CollectiveError> {
    let n = fabric.world_size();
    let Channel {
        collective,
        ring,
        index: c,
        segments,
    } = channel;
    let framing = Framing {
        protocol: params.protocol,
        algorithm: NcclAlgorithm::Ring,
        channel: c as u16,
    };
    let framed = Framed::new(fabric, framing);
    let (step_bytes, slots) = params.protocol.ring_pipeline(collective);
    let unit_bytes = step_bytes.min(params.chunk_bytes.max(1));
    let tag = channel_tag(params.tag, c);
    let position = ring
        .iter()
        .position(|&r| r == fabric.rank())
        .expect("a ring holds every rank");
    let root_position = ring.iter().position(|&r| r == params.root).unwrap_or(0);
    let chain_params = Params {
        chunk_bytes: unit_bytes,
        slots,
        tag,
        root: 0,
        ..*params
    };
    match collective {
        Collective::Broadcast => {
            let members = (0..n).map(|j| ring[(root_position + j) % n]).collect();
            let group = Group::new(&framed, members).expect("every rank is in the ring");
            broadcast::chain::run(&group, &mut buf, op, &chain_params).await?;
        }
        Collective::Reduce => {
            let members = (0..n).map(|j| ring[(root_position + n - j) % n]).collect();
            let group = Group::new(&framed, members).expect("every rank is in the ring");
            reduce::chain::run(&group, &mut buf, op, &chain_params).await?;
        }
        _ => {
            let group = Group::new(&framed, ring.to_vec()).expect("every rank is in the ring");
            let shape = Schedule::of(collective, n);
            let stream = Stream {
                segments,
                unit_elems: unit_elems(unit_bytes, buf.shape().dtype.size_bytes()),
                slots,
                tag,
            };
            pipeline(&group, position, &mut buf, op, shape, &stream).await?;
        }
    }
    Ok(buf)
}

/// Elements of one pipeline unit (at least one).
fn unit_elems(unit_bytes: u64, elem_bytes: usize) -> usize {
    usize::try_from(unit_bytes / elem_bytes as u64)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Which ring schedule: how many steps, which segment goes first, how many
/// steps reduce.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    steps: usize,
    /// Position `i` sends segment `(i + offset - s) mod N` at step `s`.
    offset: usize,
    reducing_steps: usize,
}

impl Schedule {
    fn of(collective: Collective, n: usize) -> Schedule {
        match collective {
            Collective::Allreduce => Schedule {
                steps: 2 * (n - 1),
                offset: 0,
                reducing_steps: n - 1,
            },
            Collective::ReduceScatter => Schedule {
                steps: n - 1,
                offset: n - 1,
                reducing_steps: n - 1,
            },
            _ => Schedule {
                steps: n - 1,
                offset: 0,
                reducing_steps: 0,
            },
        }
    }
}

/// How a channel's buffer streams: its segments (one per ring position),
/// the pipeline unit, the units in flight, the tag.
struct Stream {
    segments: Vec<Range<usize>>,
    unit_elems: usize,
    slots: usize,
    tag: Tag,
}

/// The ring pipeline of one channel on `group` (positions in ring order):
/// see the module docs.
async fn pipeline<F: Fabric>(
    group: &F,
    position: usize,
    buf: &mut Payload,
    op: ReduceOp,
    schedule: Schedule,
    stream: &Stream,
) -> Result<(), CollectiveError> {
    let n = group.world_size();
    let (next, prev) = ((position + 1) % n, (position + n - 1) % n);
    let largest = stream.segments.iter().map(|s| s.len()).max().unwrap_or(0);
    let per_segment = largest.div_ceil(stream.unit_elems).max(1);
    let total = schedule.steps * per_segment;
    let window = stream.slots.clamp(1, per_segment);
    let segment_sent = |s: usize| (position + schedule.offset + n - s % n) % n;
    let unit = |segment: usize, k: usize| {
        let seg = &stream.segments[segment];
        let start = (seg.start + k * stream.unit_elems).min(seg.end);
        start..(start + stream.unit_elems).min(seg.end)
    };
    let dtype = buf.shape().dtype;
    for round in 0..total + window - 1 {
        let outgoing = (round < total).then(|| {
            let (s, k) = (round / per_segment, round % per_segment);
            buf.extract(unit(segment_sent(s), k))
        });
        let receiving = round.checked_sub(window - 1).map(|i| {
            let (s, k) = (i / per_segment, i % per_segment);
            (s, unit(segment_sent(s + 1), k))
        });
        let expect = |range: &Range<usize>| Shape::new(dtype, range.len());
        // A send and a receive of one round are one exchange (one
        // completion, as `MPI_Sendrecv`), framed through `Framed`.
        let received = match (outgoing, &receiving) {
            (Some(part), Some((_, range))) => Some(
                group
                    .exchange(next, part, prev, expect(range), stream.tag)
                    .await?,
            ),
            (Some(part), None) => {
                group.send(next, stream.tag, part).await?;
                None
            }
            (None, Some((_, range))) => Some(group.recv(prev, stream.tag, expect(range)).await?),
            (None, None) => None,
        };
        if let (Some(incoming), Some((s, range))) = (received, receiving) {
            if s < schedule.reducing_steps {
                let bytes = incoming.shape().bytes();
                buf.reduce_from(range, &incoming, op)?;
                group.compute(Work::Reduce { bytes }).await?;
            } else {
                buf.copy_from(range, &incoming)?;
            }
        }
    }
    Ok(())
}

macro_rules! nccl_ring_algorithm {
    ($name:ident, $collective:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl CollectiveAlgorithm for $name {
            fn name(&self) -> &str {
                "nccl_ring"
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

            fn chunking(&self) -> Chunking {
                Chunking::Unchunked
            }

            fn nccl_algorithm(&self) -> Option<&str> {
                Some("ring")
            }

            fn runs_nccl_channels(&self) -> bool {
                true
            }

            fn rotation_symmetry(&self) -> RotationSymmetry {
                // On a fabric without a channel plan every channel is the
                // rank-order ring; a plan from the hardware folds only by
                // a shift that the engine checks moves every channel's
                // ring onto itself (`engine::fold::nccl_rings_shift`).
                RotationSymmetry::Any
            }
        }
    };
}

nccl_ring_algorithm!(
    Allreduce,
    Collective::Allreduce,
    "NCCL's ring allreduce on every channel (see the module docs)."
);
nccl_ring_algorithm!(
    Allgather,
    Collective::Allgather,
    "NCCL's ring allgather on every channel (see the module docs)."
);
nccl_ring_algorithm!(
    ReduceScatter,
    Collective::ReduceScatter,
    "NCCL's ring reduce-scatter on every channel (see the module docs)."
);
nccl_ring_algorithm!(
    Broadcast,
    Collective::Broadcast,
    "NCCL's ring broadcast on every channel (see the module docs)."
);
nccl_ring_algorithm!(
    Reduce,
    Collective::Reduce,
    "NCCL's ring reduce on every channel (see the module docs)."
);
