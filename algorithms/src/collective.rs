//! The catalogue: which collectives exist, which algorithms implement each,
//! and one entry point that runs, costs or checks any of them.
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
//!
//! [`run_out_of_place`] wraps these for callers with separate input and
//! output buffers (the input is never modified).

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
    }
}

named_enum! {
    /// An algorithm; see [`CATALOGUE`] for which collectives each implements.
    Algorithm {
        /// Ring (pipelined, chunked).
        Ring = "ring",
        /// Recursive doubling (pairwise exchanges at distance 1, 2, 4, ...).
        RecursiveDoubling = "recursive_doubling",
        /// Recursive halving (pairwise exchanges at distance N/2, N/4, ...).
        RecursiveHalving = "recursive_halving",
        /// Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather.
        Rabenseifner = "rabenseifner",
        /// NCCL-style double binary tree, pipelined.
        Tree = "tree",
        /// Reduce-scatter in a node, allreduce across nodes, allgather in a node.
        Hierarchical = "hierarchical",
        /// Bruck's algorithm (log-step, non-power-of-two friendly).
        Bruck = "bruck",
        /// Binomial tree rooted at the root.
        Binomial = "binomial",
        /// Pipelined chain from (or to) the root, chunked.
        Chain = "chain",
        /// Pairwise exchange.
        Pairwise = "pairwise",
        /// Dissemination.
        Dissemination = "dissemination",
        /// Root talks to every rank directly.
        Linear = "linear",
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
            Collective::Broadcast | Collective::Reduce | Collective::Barrier => 1.0,
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

    /// The algorithms that implement this collective, in catalogue order.
    pub fn algorithms(self) -> Vec<Algorithm> {
        CATALOGUE
            .iter()
            .filter(|e| e.collective == self)
            .map(|e| e.algorithm)
            .collect()
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
}

impl Default for Params {
    /// 512 KiB chunks (NCCL's default 4 MiB `NCCL_BUFFSIZE` over its 8
    /// `NCCL_STEPS`), 8 slots, tag 0, root 0, 8 ranks per node.
    fn default() -> Self {
        Params {
            chunk_bytes: 512 * 1024,
            slots: crate::allreduce::ring::NCCL_STEPS,
            tag: Tag(0),
            root: 0,
            ranks_per_node: 8,
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
        | Collective::Alltoall => 0..count,
        Collective::ReduceScatter | Collective::Scatter => block_range(count, n, rank),
        Collective::Reduce | Collective::Gather if rank == root => 0..count,
        Collective::Reduce | Collective::Gather | Collective::Barrier => 0..0,
    }
}

/// What every rank's buffer must hold after a collective that only moves
/// data (allgather, broadcast, alltoall, gather, scatter, barrier), given
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
                _ => {}
            }
            out
        })
        .collect()
}

/// The common start of every reducing algorithm: rejects an operator the
/// buffer's type does not support, and says whether the call has nothing
/// to do (one rank, or no elements), so that algorithm modules called
/// directly are as safe as [`run`].
pub(crate) fn reduction_is_trivial<F: Fabric>(
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
/// size, unlike the per-algorithm [`reference`](fn@reference)s that reproduce an order.
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

/// Whether every rank of `algorithm` for `collective` does what rank 0
/// does, moved by its rank: rank `r`'s partners are rank 0's plus `r`
/// (mod `N`) at every step, with the same message sizes when the buffer
/// splits into equal blocks. Rings, shifted pairwise exchanges, Bruck and
/// dissemination are; partners by XOR (recursive doubling and halving,
/// Rabenseifner), roots and trees are not. The hierarchical allreduce is
/// when the rotation moves whole nodes. A simulator may then simulate one
/// rank per orbit of a rotation (see the `sim` crate's `fold`).
pub fn rotation_symmetric(collective: Collective, algorithm: Algorithm) -> bool {
    use Algorithm as A;
    use Collective as C;
    matches!(
        (collective, algorithm),
        (C::Allreduce, A::Ring | A::Hierarchical)
            | (C::ReduceScatter, A::Ring)
            | (C::Allgather, A::Ring | A::Bruck)
            | (C::Alltoall, A::Pairwise | A::Bruck)
            | (C::Barrier, A::Dissemination)
    )
}

/// An upper bound on the messages one call of the pair sends over all
/// ranks, for `count` elements of `elem_bytes` bytes in chunks of at most
/// `chunk_bytes`: `N(N-1)`-like for rings and pairwise exchanges,
/// `N·log N`-like for the log-step algorithms, `N` per chunk for the
/// pipelined tree and chains (credits included). `None` (no algorithm
/// named) takes the largest, the ring's. Used to refuse runs that would
/// take hours.
pub fn messages_bound(
    collective: Collective,
    algorithm: Option<Algorithm>,
    n: usize,
    count: usize,
    elem_bytes: usize,
    chunk_bytes: u64,
) -> u64 {
    use Algorithm::*;
    let n64 = n as u64;
    let ring = crate::allreduce::ring::messages(count, n, elem_bytes, chunk_bytes)
        .max(2 * n64 * n64.saturating_sub(1));
    let log = u64::from(n.next_power_of_two().trailing_zeros());
    let chunks = (count as u64 * elem_bytes as u64).div_ceil(chunk_bytes.max(1)) + 1;
    let per_rank = match (collective, algorithm) {
        (_, None | Some(Ring | Pairwise)) => return ring,
        (Collective::Allreduce, Some(Hierarchical)) => return ring,
        (_, Some(Tree | Chain)) => 6u64.saturating_mul(chunks),
        (_, Some(Linear | Binomial)) => 2,
        _ => 2 * log + 4,
    };
    n64.saturating_mul(per_rank)
}

/// Whether the pair cuts its buffer into `Params::chunk_bytes` pieces, so
/// that its cost depends on the chunk size (the tuner tries chunk sizes
/// only for these).
pub fn uses_chunks(collective: Collective, algorithm: Algorithm) -> bool {
    use Algorithm::{Chain, Hierarchical, Ring, Tree};
    matches!(
        (collective, algorithm),
        (Collective::Allreduce, Ring | Tree | Hierarchical)
            | (Collective::Broadcast | Collective::Reduce, Chain)
    )
}

/// One entry of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The collective.
    pub collective: Collective,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its cost under the alpha-beta-gamma model, as a formula for people
    /// (`n` bytes in total, `N` ranks, `K` chunks; see the module docs).
    pub formula: &'static str,
}

macro_rules! catalogue {
    ($($coll:ident, $alg:ident => $module:path;)*) => {
        /// Every implemented (collective, algorithm) pair with its cost
        /// formula, in the order `sim algorithms` lists them.
        pub const CATALOGUE: &[Entry] = &[$(Entry {
            collective: Collective::$coll,
            algorithm: Algorithm::$alg,
            formula: { use $module as m; m::FORMULA },
        }),*];

        /// Runs `algorithm` for `collective` in place on `buf` (see the
        /// module docs for what `buf` holds before and after).
        pub async fn run<F: Fabric>(
            fabric: &F,
            collective: Collective,
            algorithm: Algorithm,
            buf: &mut Payload,
            op: ReduceOp,
            params: &Params,
        ) -> Result<(), CollectiveError> {
            if collective.reduces() && !op.supports(buf.shape().dtype) {
                return Err(CollectiveError::UnsupportedOp { op, dtype: buf.shape().dtype });
            }
            if collective.has_root() && params.root >= fabric.world_size() {
                return Err(CollectiveError::InvalidRoot { root: params.root, world_size: fabric.world_size() });
            }
            match (collective, algorithm) {
                $((Collective::$coll, Algorithm::$alg) => { use $module as m; m::run(fabric, buf, op, params).await })*
                _ => Err(CollectiveError::NoSuchAlgorithm { collective, algorithm }),
            }
        }

        /// The modelled time of one call, in picoseconds, under ideal links
        /// (`None` for a pair not in the catalogue, or when the time could
        /// exceed what a `u64` of picoseconds holds: see [`cost_fits`]).
        pub fn cost_ps(
            collective: Collective,
            algorithm: Algorithm,
            model: &CostModel,
            n: usize,
            count: usize,
            dtype: DType,
            params: &Params,
        ) -> Option<u64> {
            if !cost_fits(model, n, count, dtype, params) {
                return None;
            }
            match (collective, algorithm) {
                $((Collective::$coll, Algorithm::$alg) => { use $module as m; Some(m::cost_ps(model, n, count, dtype, params)) })*
                _ => None,
            }
        }

        /// What every rank's buffer holds after the call, bit for bit, given
        /// every rank's buffer before it (`None` for a pair not in the
        /// catalogue). Only [`defined_output`] is meaningful.
        pub fn reference(
            collective: Collective,
            algorithm: Algorithm,
            inputs: &[Payload],
            op: ReduceOp,
            params: &Params,
        ) -> Option<Vec<Payload>> {
            if inputs.is_empty() || (collective.has_root() && params.root >= inputs.len()) {
                return None;
            }
            match (collective, algorithm) {
                $((Collective::$coll, Algorithm::$alg) => { use $module as m; Some(m::reference(inputs, op, params)) })*
                _ => None,
            }
        }
    };
}

catalogue! {
    Allreduce, Ring => crate::allreduce::ring;
    Allreduce, RecursiveDoubling => crate::allreduce::recursive_doubling;
    Allreduce, Rabenseifner => crate::allreduce::rabenseifner;
    Allreduce, Tree => crate::allreduce::tree;
    Allreduce, Hierarchical => crate::allreduce::hierarchical;
    ReduceScatter, Ring => crate::reduce_scatter::ring;
    ReduceScatter, RecursiveHalving => crate::reduce_scatter::recursive_halving;
    Allgather, Ring => crate::allgather::ring;
    Allgather, RecursiveDoubling => crate::allgather::recursive_doubling;
    Allgather, Bruck => crate::allgather::bruck;
    Broadcast, Binomial => crate::broadcast::binomial;
    Broadcast, Chain => crate::broadcast::chain;
    Reduce, Binomial => crate::reduce::binomial;
    Reduce, Chain => crate::reduce::chain;
    Alltoall, Pairwise => crate::alltoall::pairwise;
    Alltoall, Bruck => crate::alltoall::bruck;
    Barrier, Dissemination => crate::barrier::dissemination;
    Gather, Binomial => crate::gather::binomial;
    Gather, Linear => crate::gather::linear;
    Scatter, Binomial => crate::scatter::binomial;
    Scatter, Linear => crate::scatter::linear;
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

/// Runs a collective with separate input and output buffers; `input` is
/// never modified. `output_count` is the full size of the collective (the
/// input of allgather and gather is this rank's block of it).
pub async fn run_out_of_place<F: Fabric>(
    fabric: &F,
    collective: Collective,
    algorithm: Algorithm,
    input: &Payload,
    output_count: usize,
    op: ReduceOp,
    params: &Params,
) -> Result<Payload, CollectiveError> {
    let n = fabric.world_size();
    let r = fabric.rank();
    let mut work = match collective {
        Collective::Allgather | Collective::Gather => {
            let mut work = Payload::zeros(input.shape().dtype, output_count, input.is_phantom());
            work.copy_from(block_range(output_count, n, r), input)?;
            work
        }
        _ => input.clone(),
    };
    run(fabric, collective, algorithm, &mut work, op, params).await?;
    Ok(match collective {
        Collective::ReduceScatter | Collective::Scatter => {
            work.extract(block_range(work.len(), n, r))
        }
        _ => work,
    })
}
