//! The collectives: which exist, what each one's buffers hold, and the
//! references and size rules every algorithm of a collective shares.
//!
//! # Buffer conventions
//! Every algorithm works **in place** on one buffer of `count` elements per
//! rank, the collective's full size (what nccl-tests calls the size), split
//! into per-rank blocks by [`crate::layout::block_range`]:
//!
//! | collective | input | output (the part [`defined_output`] names) |
//! | --- | --- | --- |
//! | allreduce | whole buffer | whole buffer: the reduction |
//! | reduce-scatter | whole buffer | block `r`: the reduction of every rank's block `r` |
//! | allgather | block `r` | whole buffer: block `j` from rank `j` |
//! | broadcast | root's buffer | whole buffer |
//! | reduce | whole buffer | root's whole buffer; other ranks' buffers are scratch |
//! | alltoall | block `j` goes to rank `j` (count divisible by `N`) | block `j` came from rank `j` |
//! | gather | block `r` | root's whole buffer |
//! | scatter | root's whole buffer | block `r` |
//! | barrier | nothing | nothing |
//! | sendrecv | whole buffer, sent to rank `r+1` | whole buffer: rank `r-1`'s input |
//!
//! [`Algorithm::run_out_of_place`](crate::Algorithm::run_out_of_place)
//! wraps these for callers with separate input and output buffers (the
//! input is never modified).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::{Fabric, Rank, Tag};
use crate::layout::block_range;
use crate::payload::Payload;

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            /// Every value, in catalogue order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The name used in scenarios, reports and `NCCL_ALGO`.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let wanted = s.to_ascii_lowercase().replace('-', "_");
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == wanted)
                    .ok_or_else(|| {
                        let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                        format!("unknown {} `{s}`; valid: {}", stringify!($name).to_ascii_lowercase(), names.join(", "))
                    })
            }
        }
    };
}

named_enum! {
    /// A collective operation.
    Collective {
        /// Every rank ends with the reduction of all ranks' buffers.
        Allreduce = "allreduce",
        /// Rank `r` ends with the reduction of every rank's block `r`.
        ReduceScatter = "reduce_scatter",
        /// Every rank ends with every rank's block.
        Allgather = "allgather",
        /// Every rank ends with the root's buffer.
        Broadcast = "broadcast",
        /// The root ends with the reduction of all ranks' buffers.
        Reduce = "reduce",
        /// Rank `r`'s block `j` goes to rank `j`'s block `r`.
        Alltoall = "alltoall",
        /// No rank returns before every rank has entered.
        Barrier = "barrier",
        /// The root ends with every rank's block.
        Gather = "gather",
        /// Rank `r` ends with the root's block `r`.
        Scatter = "scatter",
        /// Rank `r` sends its buffer to `r+1` and receives `r-1`'s into it
        /// (nccl-tests' `sendrecv_perf`: a ring shift of whole buffers).
        SendRecv = "sendrecv",
    }
}

impl Collective {
    /// nccl-tests' bus-bandwidth factor for `n` ranks: busbw = algbw x
    /// factor (nccl-tests `doc/PERFORMANCE.md`).
    pub fn busbw_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Collective::Allreduce => 2.0 * (n - 1.0) / n,
            Collective::ReduceScatter | Collective::Allgather | Collective::Alltoall => {
                (n - 1.0) / n
            }
            Collective::Gather | Collective::Scatter => (n - 1.0) / n,
            // sendrecv_perf: busbw = algbw (nccl-tests `src/sendrecv.cu`
            // @f476f4a17af7).
            Collective::Broadcast
            | Collective::Reduce
            | Collective::Barrier
            | Collective::SendRecv => 1.0,
        }
    }

    /// Whether the collective combines values with a [`ReduceOp`].
    pub fn reduces(self) -> bool {
        matches!(
            self,
            Collective::Allreduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// Whether the collective has a root rank.
    pub fn has_root(self) -> bool {
        matches!(
            self,
            Collective::Broadcast | Collective::Reduce | Collective::Gather | Collective::Scatter
        )
    }
}

/// Parameters every algorithm receives (each uses the ones it needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Largest pipeline chunk in bytes (pipelined algorithms).
    pub chunk_bytes: u64,
    /// Chunks a rank may send ahead of what it has received.
    pub slots: usize,
    /// The tag of this call; algorithms derive phase tags from it.
    pub tag: Tag,
    /// The root of rooted collectives.
    pub root: Rank,
    /// Ranks per node for hierarchical algorithms (consecutive ranks share
    /// a node; when it does not divide the world size, the hierarchical
    /// allreduce falls back to the flat ring).
    pub ranks_per_node: usize,
    /// The NCCL protocol of the [`crate::nccl`] algorithms.
    pub protocol: crate::nccl::Protocol,
    /// Channels the [`crate::nccl`] algorithms split the buffer over; 0:
    /// every channel of the fabric's plan.
    pub channels: usize,
}

impl Default for Params {
    /// 512 KiB chunks (NCCL's default 4 MiB `NCCL_BUFFSIZE` over its 8
    /// `NCCL_STEPS`), 8 slots, tag 0, root 0, 8 ranks per node; NCCL's
    /// Simple protocol on every channel of the plan.
    fn default() -> Self {
        Params {
            chunk_bytes: 512 * 1024,
            slots: crate::allreduce::ring::NCCL_STEPS,
            tag: Tag(0),
            root: 0,
            ranks_per_node: 8,
            protocol: crate::nccl::Protocol::Simple,
            channels: 0,
        }
    }
}

/// The part of rank `rank`'s buffer that `collective` defines on return.
pub fn defined_output(
    collective: Collective,
    rank: Rank,
    n: usize,
    count: usize,
    root: Rank,
) -> Range<usize> {
    match collective {
        Collective::Allreduce
        | Collective::Allgather
        | Collective::Broadcast
        | Collective::Alltoall
        | Collective::SendRecv => 0..count,
        Collective::ReduceScatter | Collective::Scatter => block_range(count, n, rank),
        Collective::Reduce | Collective::Gather if rank == root => 0..count,
        Collective::Reduce | Collective::Gather | Collective::Barrier => 0..0,
    }
}

/// What every rank's buffer must hold after a collective that only moves
/// data (allgather, broadcast, alltoall, gather, scatter, barrier,
/// sendrecv), given
/// every rank's buffer before it. Parts outside [`defined_output`] keep the
/// input.
pub fn movement_reference(collective: Collective, inputs: &[Payload], root: Rank) -> Vec<Payload> {
    let n = inputs.len();
    let count = inputs[0].len();
    let block = |j| block_range(count, n, j);
    (0..n)
        .map(|r| {
            let mut out = inputs[r].clone();
            let mut place = |dst: Range<usize>, src: &Payload, from: Range<usize>| {
                out.copy_from(dst, &src.extract(from))
                    .expect("reference buffers share a shape");
            };
            match collective {
                Collective::Allgather => (0..n).for_each(|j| place(block(j), &inputs[j], block(j))),
                Collective::Broadcast => place(0..count, &inputs[root], 0..count),
                Collective::Alltoall => (0..n).for_each(|j| place(block(j), &inputs[j], block(r))),
                Collective::Gather if r == root => {
                    (0..n).for_each(|j| place(block(j), &inputs[j], block(j)))
                }
                Collective::Scatter => place(block(r), &inputs[root], block(r)),
                Collective::SendRecv => place(0..count, &inputs[(r + n - 1) % n], 0..count),
                _ => {}
            }
            out
        })
        .collect()
}

/// The common start of every reducing algorithm: rejects an operator the
/// buffer's type does not support, and says whether the call has nothing
/// to do (one rank, or no elements), so that algorithm modules called
/// directly are as safe as [`crate::Algorithm::run`] (public so that algorithms written
/// outside the catalogue start the same way).
pub fn reduction_is_trivial<F: Fabric>(
    fabric: &F,
    buf: &Payload,
    op: ReduceOp,
) -> Result<bool, CollectiveError> {
    let dtype = buf.shape().dtype;
    if !op.supports(dtype) {
        return Err(CollectiveError::UnsupportedOp { op, dtype });
    }
    Ok(fabric.world_size() == 1 || buf.is_empty())
}

/// Whether every algorithm's cost for this call certainly fits in a `u64`
/// of picoseconds, so that the formulas can use plain integer arithmetic.
///
/// On any chain of dependent events, no algorithm of the catalogue sends
/// more than `2N·(K+2)` messages (`K` chunks of the whole buffer; the
/// ring's `2(N-1)·K` is the most) nor moves or reduces more than `4N` times
/// the buffer's `n` bytes (recursive doubling's `n·log2 N` is the most). So
/// `2N·(K+2)·α + 4N·(n/B + n/R)` bounds every cost; a margin of 64 covers
/// the partial sums inside the formulas. Only absurd links or sizes fail.
pub fn cost_fits(model: &CostModel, n: usize, count: usize, dtype: DType, params: &Params) -> bool {
    let bytes = (count as u128) * dtype.size_bytes() as u128;
    if bytes > u128::from(u64::MAX) {
        return false;
    }
    let chunks = bytes.div_ceil(u128::from(params.chunk_bytes.max(1))) + 2;
    let whole = u64::try_from(bytes).unwrap_or(u64::MAX);
    let per_byte_pass = u128::from(model.wire_ps(whole)) + u128::from(model.reduce_ps(whole));
    let n = n as u128;
    let latencies = (2 * n)
        .saturating_mul(chunks)
        .saturating_mul(u128::from(model.latency_ps));
    let transfers = (4 * n).saturating_mul(per_byte_pass);
    latencies.saturating_add(transfers) < u128::from(u64::MAX / 64)
}

/// What every rank's buffer must hold after `collective`, when the inputs
/// make every reduction exact (so its order does not matter, as with the
/// simulator's generated data): the rank-order reduction for reducing
/// collectives, [`movement_reference`] for the others. Cheap for any world
/// size, unlike the per-algorithm references ([`Algorithm::reference`](crate::Algorithm::reference)) that reproduce an order.
/// `None` for no ranks or a root outside the world.
pub fn exact_reference(
    collective: Collective,
    inputs: &[Payload],
    op: ReduceOp,
    root: Rank,
) -> Option<Vec<Payload>> {
    if inputs.is_empty() || (collective.has_root() && root >= inputs.len()) {
        return None;
    }
    if collective.reduces() {
        let reduced = crate::reference::rank_order_reference(inputs, op);
        return Some(vec![reduced; inputs.len()]);
    }
    Some(movement_reference(collective, inputs, root))
}

/// The sizes in bytes a size sweep runs, nccl-tests style: `min, min*f,
/// ...` up to `max`, each rounded down to whole elements of `dtype` (for
/// alltoall, whole elements per rank). A zero minimum yields one empty run,
/// then continues from one element. A barrier moves no data: one size, 0.
pub fn sweep_sizes(
    collective: Collective,
    dtype: DType,
    world_size: usize,
    min_bytes: u64,
    max_bytes: u64,
    step_factor: u64,
) -> Vec<u64> {
    if collective == Collective::Barrier {
        return vec![0];
    }
    let mut elem = dtype.size_bytes() as u64;
    if collective == Collective::Alltoall {
        elem *= world_size as u64;
    }
    let mut sizes = Vec::new();
    let mut size = min_bytes;
    if size == 0 {
        sizes.push(0);
        size = elem;
    }
    while size <= max_bytes {
        let rounded = size / elem * elem;
        if sizes.last() != Some(&rounded) {
            sizes.push(rounded);
        }
        match size.checked_mul(step_factor) {
            Some(next) if next > size => size = next,
            _ => break,
        }
    }
    sizes
}
