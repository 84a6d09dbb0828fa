//! One interface for every collective algorithm, built in or brought by a
//! user: [`CollectiveAlgorithm`] is what an algorithm implements,
//! [`Algorithm`] is the cheap handle the rest of the project passes around.
//!
//! Everything the simulator, the model checker and the real fabrics know
//! about an algorithm comes through this trait: its name and collective,
//! its code, and optionally its cost formula, its reference result and the
//! facts the engine needs (what its chunk size cuts, whether it is
//! symmetric under a rotation of the ranks, how many messages it may send).
//! The catalogue's algorithms implement it in their own files and are
//! registered in [`Registry::builtin`](crate::Registry::builtin) like any
//! other; nothing elsewhere branches on an algorithm's name.
//!
//! # Writing one
//! ```
//! use algorithms::{
//!     AnyFabric, Collective, CollectiveAlgorithm, CollectiveError, Fabric, Params, Payload,
//!     ReduceOp, Registry, Running,
//! };
//!
//! /// Every rank sends its buffer to every other rank and reduces what it
//! /// receives, in rank order (correct, not fast).
//! async fn all_to_all_reduce<F: Fabric>(
//!     fabric: &F,
//!     buf: &mut Payload,
//!     op: ReduceOp,
//!     params: &Params,
//! ) -> Result<(), CollectiveError> {
//!     let (n, me) = (fabric.world_size(), fabric.rank());
//!     for to in (0..n).filter(|&r| r != me) {
//!         fabric.send(to, params.tag, buf.clone()).await?;
//!     }
//!     let mut total = buf.clone();
//!     for from in (0..n).filter(|&r| r != me) {
//!         let theirs = fabric.recv(from, params.tag, buf.shape()).await?;
//!         total.reduce_from(0..buf.len(), &theirs, op)?;
//!     }
//!     *buf = total;
//!     Ok(())
//! }
//!
//! struct Naive;
//!
//! impl CollectiveAlgorithm for Naive {
//!     fn name(&self) -> &str {
//!         "naive"
//!     }
//!     fn collective(&self) -> Collective {
//!         Collective::Allreduce
//!     }
//!     fn run<'a>(
//!         &'a self,
//!         fabric: AnyFabric<'a>,
//!         buf: &'a mut Payload,
//!         op: ReduceOp,
//!         params: &'a Params,
//!     ) -> Running<'a> {
//!         Box::pin(async move { all_to_all_reduce(&fabric, buf, op, params).await })
//!     }
//! }
//!
//! let mut registry = Registry::builtin();
//! registry.register(Naive).expect("a new name");
//! assert!(registry.get(Collective::Allreduce, "naive").is_some());
//! ```

use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;

use crate::any_fabric::AnyFabric;
use crate::collective::{Collective, Params, cost_fits};
use crate::cost::CostModel;
use crate::dtype::{DType, ReduceOp};
use crate::error::CollectiveError;
use crate::fabric::Fabric;
use crate::layout::block_range;
use crate::payload::Payload;

/// The future of one call of an algorithm on one rank.
pub type Running<'a> = Pin<Box<dyn Future<Output = Result<(), CollectiveError>> + 'a>>;

/// What an algorithm's `Params::chunk_bytes` cuts, so that the tuner knows
/// whether trying chunk sizes can change its cost and the model checker
/// knows what its `chunks` axis means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chunking {
    /// The algorithm ignores the chunk size.
    Unchunked,
    /// It pipelines the whole buffer in chunks (trees, chains).
    Buffer,
    /// It pipelines each rank's block of the buffer in chunks (rings).
    Block,
}

/// Whether every rank does what rank 0 does, moved by its rank: rank `r`'s
/// partners are rank 0's plus `r` (mod `N`) at every step, with the same
/// message sizes when the buffer splits into equal blocks. A simulator may
/// then simulate one rank per orbit of a rotation of the topology (the
/// engine's folded runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RotationSymmetry {
    /// Not symmetric (partners by XOR, roots, trees).
    None,
    /// Symmetric under any rotation of the ranks (rings, shifted pairwise
    /// exchanges, Bruck, dissemination).
    Any,
    /// Symmetric when the rotation moves whole nodes: its shift is a
    /// multiple of `Params::ranks_per_node` (hierarchical algorithms).
    WholeNodes,
}

/// A collective algorithm, as the simulator, the model checker and the
/// real fabrics see it. Implement it for a type of your own and register a
/// value of that type ([`Registry::register`](crate::Registry::register));
/// see the [module docs](self) for an example.
///
/// Only [`name`](Self::name), [`collective`](Self::collective) and
/// [`run`](Self::run) are required. Without [`cost_ps`](Self::cost_ps) the
/// algorithm runs everywhere, but the tuner never picks it and the model
/// checker skips its cost property.
pub trait CollectiveAlgorithm: Send + Sync + 'static {
    /// The name scenarios, flags and reports use: lower-case ASCII letters,
    /// digits and `_`, starting with a letter (e.g. `bidir_ring`).
    fn name(&self) -> &str;

    /// The collective it implements (see [`crate::collective`] for what
    /// each collective's buffer holds before and after).
    fn collective(&self) -> Collective;

    /// Runs one call on the calling rank, in place on `buf`. Every rank of
    /// the fabric calls it with a buffer of the same shape, the same `op`
    /// and the same `params`; derive tags from `params.tag`
    /// ([`Tag::phase`](crate::Tag::phase)). The registry has already
    /// checked the operator against the element type and the root against
    /// the world size.
    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a>;

    /// Its cost under the alpha-beta-gamma model, for people: `n` bytes in
    /// total, `N` ranks, `K` chunks (shown by `sim algorithms`).
    fn formula(&self) -> Option<&str> {
        None
    }

    /// The modelled time of one call in picoseconds under ideal links
    /// (each ordered rank pair its own link of `model`'s latency and
    /// bandwidth), for the tuner and the checker's cost property. The
    /// arithmetic may assume the result fits a `u64` (the registry asks
    /// only when [`cost_fits`] says so).
    fn cost_ps(
        &self,
        _model: &CostModel,
        _n: usize,
        _count: usize,
        _dtype: DType,
        _params: &Params,
    ) -> Option<u64> {
        None
    }

    /// Every rank's buffer after the call, bit for bit (this algorithm's
    /// reduction order), given every rank's buffer before it. Only the
    /// part the collective defines ([`crate::collective::defined_output`])
    /// is compared. Without it, results are checked against an
    /// order-independent reference on exact inputs.
    fn reference(
        &self,
        _inputs: &[Payload],
        _op: ReduceOp,
        _params: &Params,
    ) -> Option<Vec<Payload>> {
        None
    }

    /// What `Params::chunk_bytes` cuts.
    fn chunking(&self) -> Chunking {
        Chunking::Unchunked
    }

    /// Its symmetry under a rotation of the ranks.
    fn rotation_symmetry(&self) -> RotationSymmetry {
        RotationSymmetry::None
    }

    /// An upper bound on the messages one call sends over all `n` ranks,
    /// for `count` elements of `elem_bytes` bytes in chunks of at most
    /// `chunk_bytes`; runs that would take hours are refused with it. The
    /// default is the pipelined ring's, the largest of the catalogue's.
    fn messages_bound(&self, n: usize, count: usize, elem_bytes: usize, chunk_bytes: u64) -> u64 {
        messages_bound::ring(n, count, elem_bytes, chunk_bytes)
    }

    /// The name of the NCCL algorithm this one is (`NCCL_ALGO` selects it
    /// by that name too): `ring` or `tree`.
    fn nccl_algorithm(&self) -> Option<&str> {
        None
    }

    /// Whether it runs on NCCL's channels with NCCL's protocols: it reads
    /// `Params::protocol` and `Params::channels` and the fabric's
    /// [`ChannelPlan`](crate::nccl::ChannelPlan), so the engine's NCCL
    /// model picks it (by [`nccl_algorithm`](Self::nccl_algorithm)) and
    /// chooses its protocol and channels per size, as NCCL would.
    fn runs_nccl_channels(&self) -> bool {
        false
    }

    /// Whether it needs a switch that reduces in the network
    /// ([`Fabric::reduce_in_network`]: NVLS, CollNet): fabrics without
    /// one (real transports, topologies without such a switch) refuse it
    /// with their reason.
    fn reduces_in_network(&self) -> bool {
        false
    }
}

/// The four methods of a catalogue algorithm that its module's items
/// give (`run`, `FORMULA`, `cost_ps` and `reference`, side by side in
/// every algorithm's file), written once for the catalogue's
/// `impl CollectiveAlgorithm` blocks: `run` boxes the module's `async fn
/// run` on the `AnyFabric`, the others wrap the module's values in `Some`.
macro_rules! module_items {
    () => {
        fn run<'a>(
            &'a self,
            fabric: $crate::AnyFabric<'a>,
            buf: &'a mut $crate::Payload,
            op: $crate::ReduceOp,
            params: &'a $crate::Params,
        ) -> $crate::Running<'a> {
            Box::pin(async move { run(&fabric, buf, op, params).await })
        }

        fn formula(&self) -> Option<&str> {
            Some(FORMULA)
        }

        fn cost_ps(
            &self,
            model: &$crate::CostModel,
            n: usize,
            count: usize,
            dtype: $crate::DType,
            params: &$crate::Params,
        ) -> Option<u64> {
            Some(cost_ps(model, n, count, dtype, params))
        }

        fn reference(
            &self,
            inputs: &[$crate::Payload],
            op: $crate::ReduceOp,
            params: &$crate::Params,
        ) -> Option<Vec<$crate::Payload>> {
            Some(reference(inputs, op, params))
        }
    };
}
pub(crate) use module_items;

mod from_fn;
mod inline;
/// The message bounds the catalogue's algorithms share (see
/// [`CollectiveAlgorithm::messages_bound`]).
pub mod messages_bound;
mod wire;

use from_fn::FnAlgorithm;
pub use inline::Inline;

use wire::wire_names;
pub use wire::{describe_wire_id, wire_id};

/// A registered algorithm: a cheap, clonable handle to a
/// [`CollectiveAlgorithm`] that checks every call's arguments before
/// running it. Two handles are equal when they name the same algorithm of
/// the same collective.
#[derive(Clone)]
pub struct Algorithm {
    inner: Arc<dyn CollectiveAlgorithm>,
    builtin: bool,
    wire_id: u16,
    /// Set by the catalogue only: the same code, runnable on the caller's
    /// fabric type ([`Algorithm::run_inline`]).
    inline: Option<Inline>,
}

impl Algorithm {
    /// A handle to `algorithm` (registered by a user).
    pub fn new(algorithm: impl CollectiveAlgorithm) -> Algorithm {
        let wire_id = wire_id(algorithm.collective(), algorithm.name());
        let algorithm = Algorithm {
            inner: Arc::new(algorithm),
            builtin: false,
            wire_id,
            inline: None,
        };
        wire_names()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(algorithm.wire_id())
            .or_insert_with(|| format!("{}, {}", algorithm.collective(), algorithm.name()));
        algorithm
    }

    /// A closure as an algorithm of `collective` named `name` (for tests,
    /// notebooks and one-off experiments; a type implementing
    /// [`CollectiveAlgorithm`] can also give a cost formula and facts):
    ///
    /// ```
    /// use algorithms::{Algorithm, Collective, Fabric};
    ///
    /// // Every rank keeps its own buffer: a correct allreduce on one rank.
    /// let alone = Algorithm::from_fn("alone", Collective::Allreduce, |fabric, _buf, _op, _params| {
    ///     Box::pin(async move {
    ///         assert_eq!(fabric.world_size(), 1);
    ///         Ok(())
    ///     })
    /// });
    /// assert_eq!(alone.name(), "alone");
    /// ```
    pub fn from_fn<F>(name: &str, collective: Collective, run: F) -> Algorithm
    where
        F: for<'a> Fn(AnyFabric<'a>, &'a mut Payload, ReduceOp, &'a Params) -> Running<'a>
            + Send
            + Sync
            + 'static,
    {
        Algorithm::new(FnAlgorithm {
            name: name.to_string(),
            collective,
            run,
        })
    }

    /// A handle to one of the catalogue's algorithms.
    pub(crate) fn builtin(algorithm: impl CollectiveAlgorithm) -> Algorithm {
        Algorithm {
            builtin: true,
            ..Algorithm::new(algorithm)
        }
    }

    /// A handle to one of the catalogue's algorithms whose module code
    /// `inline` also names (see [`Algorithm::run_inline`]).
    pub(crate) fn builtin_inline(algorithm: impl CollectiveAlgorithm, inline: Inline) -> Algorithm {
        Algorithm {
            inline: Some(inline),
            ..Algorithm::builtin(algorithm)
        }
    }

    /// The catalogue's mark that [`Algorithm::run_inline`] runs this
    /// algorithm on the caller's fabric type, if it has one.
    pub fn inline(&self) -> Option<Inline> {
        self.inline
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The collective it implements.
    pub fn collective(&self) -> Collective {
        self.inner.collective()
    }

    /// Whether `other` runs the same code: a handle to the very same
    /// registered value, or the catalogue's same algorithm (two handles of
    /// equal name and collective may otherwise hold different code).
    pub fn is(&self, other: &Algorithm) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || (self.builtin && other.builtin && self == other)
    }

    /// Whether it is one of the catalogue's (not a user's).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// The algorithm itself, for its optional facts.
    pub fn facts(&self) -> &dyn CollectiveAlgorithm {
        &*self.inner
    }

    /// Runs one call in place on `buf` on this rank of `fabric` (see
    /// [`crate::collective`] for what `buf` holds before and after), after
    /// checking the operator against the element type and the root
    /// against the world size.
    pub async fn run<F: Fabric>(
        &self,
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        params: &Params,
    ) -> Result<(), CollectiveError> {
        self.check(fabric.world_size(), buf, op, params)?;
        self.inner
            .run(AnyFabric::new(fabric), buf, op, params)
            .await
    }

    /// Runs one call as [`run`](Self::run) does, with the same checks,
    /// messages and result; an algorithm the catalogue marks
    /// [`Inline`] runs its module's code on `fabric` itself instead of
    /// through the registry's boxed future and [`AnyFabric`] (a real
    /// fabric's per-call path: fewer layers for a call of a few bytes).
    /// The simulator and the model checker call [`run`](Self::run).
    pub async fn run_inline<F: Fabric>(
        &self,
        fabric: &F,
        buf: &mut Payload,
        op: ReduceOp,
        params: &Params,
    ) -> Result<(), CollectiveError> {
        match self.inline {
            Some(inline) => {
                self.check(fabric.world_size(), buf, op, params)?;
                inline.run(fabric, buf, op, params).await
            }
            None => self.run(fabric, buf, op, params).await,
        }
    }

    /// The registry's checks of a call's arguments: the operator against
    /// the element type, the root against the world size.
    fn check(
        &self,
        world_size: usize,
        buf: &Payload,
        op: ReduceOp,
        params: &Params,
    ) -> Result<(), CollectiveError> {
        let collective = self.collective();
        let dtype = buf.shape().dtype;
        if collective.reduces() && !op.supports(dtype) {
            return Err(CollectiveError::UnsupportedOp { op, dtype });
        }
        if collective.has_root() && params.root >= world_size {
            return Err(CollectiveError::InvalidRoot {
                root: params.root,
                world_size,
            });
        }
        Ok(())
    }

    /// Runs one call with separate input and output buffers; `input` is
    /// never modified. `output_count` is the full size of the collective
    /// (the input of allgather and gather is this rank's block of it); the
    /// output of reduce-scatter and scatter is this rank's block.
    pub async fn run_out_of_place<F: Fabric>(
        &self,
        fabric: &F,
        input: &Payload,
        output_count: usize,
        op: ReduceOp,
        params: &Params,
    ) -> Result<Payload, CollectiveError> {
        let n = fabric.world_size();
        let own = |count| block_range(count, n, fabric.rank());
        let mut work = match self.collective() {
            Collective::Allgather | Collective::Gather => {
                let mut work =
                    Payload::zeros(input.shape().dtype, output_count, input.is_phantom());
                work.copy_from(own(output_count), input)?;
                work
            }
            _ => input.clone(),
        };
        self.run(fabric, &mut work, op, params).await?;
        Ok(match self.collective() {
            Collective::ReduceScatter | Collective::Scatter => work.extract(own(work.len())),
            _ => work,
        })
    }

    /// Its modelled time in picoseconds under ideal links; `None` without
    /// a cost formula, or when the time could exceed what a `u64` of
    /// picoseconds holds ([`cost_fits`]).
    pub fn cost_ps(
        &self,
        model: &CostModel,
        n: usize,
        count: usize,
        dtype: DType,
        params: &Params,
    ) -> Option<u64> {
        if !cost_fits(model, n, count, dtype, params) {
            return None;
        }
        self.inner.cost_ps(model, n, count, dtype, params)
    }

    /// Every rank's buffer after the call, bit for bit; `None` without a
    /// reference, for no ranks, or for a root outside the world.
    pub fn reference(
        &self,
        inputs: &[Payload],
        op: ReduceOp,
        params: &Params,
    ) -> Option<Vec<Payload>> {
        if inputs.is_empty() || (self.collective().has_root() && params.root >= inputs.len()) {
            return None;
        }
        self.inner.reference(inputs, op, params)
    }

    /// Whether its cost depends on the chunk size.
    pub fn uses_chunks(&self) -> bool {
        self.inner.chunking() != Chunking::Unchunked
    }

    /// Whether a rotation of the ranks by `shift` maps this algorithm's
    /// schedule onto itself (see [`RotationSymmetry`]).
    pub fn folds_by(&self, shift: usize, params: &Params) -> bool {
        match self.inner.rotation_symmetry() {
            RotationSymmetry::None => false,
            RotationSymmetry::Any => true,
            RotationSymmetry::WholeNodes => shift.is_multiple_of(params.ranks_per_node.max(1)),
        }
    }

    /// An upper bound on the messages one call sends over all ranks.
    pub fn messages_bound(
        &self,
        n: usize,
        count: usize,
        elem_bytes: usize,
        chunk_bytes: u64,
    ) -> u64 {
        self.inner.messages_bound(n, count, elem_bytes, chunk_bytes)
    }

    /// The identity of this algorithm on the wire: a 16-bit hash of its
    /// collective and name (FNV-1a, folded). The registry refuses two
    /// algorithms with the same one, and the ranks of a real job agree on
    /// their registries before any collective runs, so a message's
    /// algorithm is never mistaken for another.
    pub fn wire_id(&self) -> u16 {
        self.wire_id
    }

    /// The sort key: collective, then name.
    fn key(&self) -> (Collective, &str) {
        (self.collective(), self.name())
    }
}

impl PartialEq for Algorithm {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Algorithm {}

impl PartialOrd for Algorithm {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Algorithm {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Hash for Algorithm {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.collective(), self.name())
    }
}
