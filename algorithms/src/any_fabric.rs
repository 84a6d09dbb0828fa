//! [`AnyFabric`]: one fabric type that stands for every back-end.
//!
//! An algorithm reached through the [`Registry`](crate::Registry) is a
//! trait object ([`CollectiveAlgorithm`](crate::CollectiveAlgorithm)), and a
//! trait object cannot have a method generic over the fabric. So the
//! registry hands every algorithm an `AnyFabric`: a borrowed fabric of any
//! type behind a vtable. Algorithms stay generic (`async fn run<F:
//! Fabric>`); they are simply instantiated once more, for `AnyFabric`.
//!
//! # Cost
//! Each operation is one indirect call, and its future is stored in a
//! [`SmallBox`] with [`INLINE_FUTURE_BYTES`] of inline space: the futures
//! of this project's fabrics fit, so an operation allocates nothing (the
//! simulator's allocation test holds this). A larger future is boxed on
//! the heap, which is correct, only slower. The two operations that lend
//! the caller's buffer get [`INLINE_LEND_FUTURE_BYTES`]; a fabric whose
//! future for them does not fit runs their defaults (a copy) instead.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use smallbox::SmallBox;
use smallbox::space::{S16, S32};

use crate::branches::Branching;
use crate::dtype::ReduceOp;
use crate::error::CollectiveError;
use crate::fabric::{Fabric, FabricError, Rank, Tag, Time, Work};
use crate::nccl::{ChannelPlan, Framing};
use crate::payload::{Payload, Shape};

/// Bytes of inline space for one operation's future (beyond it, the heap).
pub const INLINE_FUTURE_BYTES: usize = std::mem::size_of::<S16>();

/// The future of one operation on an [`AnyFabric`].
pub type FabricFuture<'a, T> = SmallBox<dyn Future<Output = Result<T, FabricError>> + 'a, S16>;

/// The future of [`Fabric::recv_combine`] on an [`AnyFabric`].
pub type CombineFuture<'a> = SmallBox<dyn Future<Output = Result<(), CollectiveError>> + 'a, S16>;

/// Bytes of inline space for the future of an operation that lends the
/// caller's buffer ([`Fabric::send_from`], [`Fabric::exchange_in_place`]):
/// a real transport's holds the loan's state besides a receive.
pub const INLINE_LEND_FUTURE_BYTES: usize = std::mem::size_of::<S32>();

/// The future of [`Fabric::send_from`] on an [`AnyFabric`].
pub type LendFuture<'a> = SmallBox<dyn Future<Output = Result<(), FabricError>> + 'a, S32>;

/// The future of [`Fabric::exchange_in_place`] on an [`AnyFabric`].
pub type LendCombineFuture<'a> =
    SmallBox<dyn Future<Output = Result<(), CollectiveError>> + 'a, S32>;

/// The object-safe face of a [`Fabric`], implemented for every fabric.
/// Private: callers see it only through [`AnyFabric`].
trait ErasedFabric {
    fn erased_rank(&self) -> Rank;
    fn erased_world_size(&self) -> usize;
    fn erased_now(&self) -> Time;
    fn erased_send(&self, to: Rank, tag: Tag, payload: Payload) -> FabricFuture<'_, ()>;
    fn erased_recv(&self, from: Rank, tag: Tag, expect: Shape) -> FabricFuture<'_, Payload>;
    fn erased_compute(&self, work: Work) -> FabricFuture<'_, ()>;
    fn erased_compute_framed(&self, work: Work, framing: Framing) -> FabricFuture<'_, ()>;
    fn erased_send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload;
    fn erased_recycle(&self, payload: Payload);
    /// The fabric's own `send_from`, if its future fits the inline space;
    /// else `None` (the caller sends a copy).
    fn erased_send_from<'a>(
        &'a self,
        to: Rank,
        tag: Tag,
        buf: &'a Payload,
        range: Range<usize>,
    ) -> Option<LendFuture<'a>>;
    fn erased_recv_combine<'a>(
        &'a self,
        from: Rank,
        tag: Tag,
        buf: &'a mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> CombineFuture<'a>;
    /// The fabric's own exchange, if its future fits the inline space;
    /// else the payload back (the caller joins send and receive).
    fn erased_exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> Result<FabricFuture<'_, Payload>, Payload>;
    /// The fabric's own in-place exchange, if its future fits the inline
    /// space; else the buffer back (the caller runs the default on its own
    /// inline operations).
    #[allow(clippy::too_many_arguments)]
    fn erased_exchange_in_place<'a>(
        &'a self,
        to: Rank,
        from: Rank,
        tag: Tag,
        buf: &'a mut Payload,
        send: Range<usize>,
        recv: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<LendCombineFuture<'a>, &'a mut Payload>;
    fn erased_send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> FabricFuture<'_, ()>;
    /// The fabric's own framed exchange, if its future fits the inline
    /// space; else the payload back (the caller joins the framed send and
    /// the receive).
    #[allow(clippy::too_many_arguments)]
    fn erased_exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> Result<FabricFuture<'_, Payload>, Payload>;
    fn erased_channel_plan(&self) -> Option<Arc<ChannelPlan>>;
    fn erased_branching(&self, event: Branching) -> Option<u64>;
    fn erased_reduce_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> FabricFuture<'a, Payload>;
    fn erased_can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError>;
    fn erased_reduce_to_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> FabricFuture<'a, Option<Payload>>;
    fn erased_multicast_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        tag: Tag,
        payload: Payload,
    ) -> FabricFuture<'a, Payload>;
    fn erased_can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError>;
}

impl<F: Fabric> ErasedFabric for F {
    fn erased_rank(&self) -> Rank {
        self.rank()
    }

    fn erased_world_size(&self) -> usize {
        self.world_size()
    }

    fn erased_now(&self) -> Time {
        self.now()
    }

    fn erased_send(&self, to: Rank, tag: Tag, payload: Payload) -> FabricFuture<'_, ()> {
        smallbox::smallbox!(self.send(to, tag, payload))
    }

    fn erased_recv(&self, from: Rank, tag: Tag, expect: Shape) -> FabricFuture<'_, Payload> {
        smallbox::smallbox!(self.recv(from, tag, expect))
    }

    fn erased_compute(&self, work: Work) -> FabricFuture<'_, ()> {
        smallbox::smallbox!(self.compute(work))
    }

    fn erased_compute_framed(&self, work: Work, framing: Framing) -> FabricFuture<'_, ()> {
        smallbox::smallbox!(self.compute_framed(work, framing))
    }

    fn erased_send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload {
        self.send_copy(buf, range)
    }

    fn erased_recycle(&self, payload: Payload) {
        self.recycle(payload)
    }

    fn erased_send_from<'a>(
        &'a self,
        to: Rank,
        tag: Tag,
        buf: &'a Payload,
        range: Range<usize>,
    ) -> Option<LendFuture<'a>> {
        // The size of the future, known without calling the method.
        fn output_size<A, R>(_: &impl FnOnce(A) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let send = move |buf: &'a Payload| self.send_from(to, tag, buf, range);
        if output_size(&send) > INLINE_LEND_FUTURE_BYTES {
            return None;
        }
        Some(smallbox::smallbox!(send(buf)))
    }

    fn erased_recv_combine<'a>(
        &'a self,
        from: Rank,
        tag: Tag,
        buf: &'a mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> CombineFuture<'a> {
        smallbox::smallbox!(self.recv_combine(from, tag, buf, range, op))
    }

    fn erased_exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> Result<FabricFuture<'_, Payload>, Payload> {
        // The size of the future, known without calling `exchange` (which
        // may act when called).
        fn output_size<A, B, R>(_: &impl Fn(A, B) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let exchange =
            |payload: Payload, expect: Shape| self.exchange(to, payload, from, expect, tag);
        if output_size(&exchange) > INLINE_FUTURE_BYTES {
            return Err(payload);
        }
        Ok(smallbox::smallbox!(exchange(payload, expect)))
    }

    fn erased_exchange_in_place<'a>(
        &'a self,
        to: Rank,
        from: Rank,
        tag: Tag,
        buf: &'a mut Payload,
        send: Range<usize>,
        recv: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<LendCombineFuture<'a>, &'a mut Payload> {
        // The size of the future, known without calling the method.
        fn output_size<A, R>(_: &impl FnOnce(A) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let exchange =
            move |buf: &'a mut Payload| self.exchange_in_place(to, from, tag, buf, send, recv, op);
        if output_size(&exchange) > INLINE_LEND_FUTURE_BYTES {
            return Err(buf);
        }
        Ok(smallbox::smallbox!(exchange(buf)))
    }

    fn erased_send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> FabricFuture<'_, ()> {
        smallbox::smallbox!(self.send_framed(to, tag, payload, framing))
    }

    fn erased_exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> Result<FabricFuture<'_, Payload>, Payload> {
        // The size of the future, known without calling the method.
        fn output_size<A, B, R>(_: &impl Fn(A, B) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let exchange = |payload: Payload, expect: Shape| {
            self.exchange_framed(to, payload, from, expect, tag, framing)
        };
        if output_size(&exchange) > INLINE_FUTURE_BYTES {
            return Err(payload);
        }
        Ok(smallbox::smallbox!(exchange(payload, expect)))
    }

    fn erased_channel_plan(&self) -> Option<Arc<ChannelPlan>> {
        self.channel_plan()
    }

    fn erased_branching(&self, event: Branching) -> Option<u64> {
        self.branching(event)
    }

    fn erased_reduce_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> FabricFuture<'a, Payload> {
        smallbox::smallbox!(self.reduce_in_network(group, tag, payload, op))
    }

    fn erased_can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.can_reduce_in_network(group)
    }

    fn erased_reduce_to_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> FabricFuture<'a, Option<Payload>> {
        smallbox::smallbox!(self.reduce_to_in_network(group, root, tag, payload, op))
    }

    fn erased_multicast_in_network<'a>(
        &'a self,
        group: &'a [Rank],
        tag: Tag,
        payload: Payload,
    ) -> FabricFuture<'a, Payload> {
        smallbox::smallbox!(self.multicast_in_network(group, tag, payload))
    }

    fn erased_can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.can_multicast_in_network(group)
    }
}

/// A borrowed fabric of any back-end (simulator, model checker, shared
/// memory, TCP, verbs): what [`CollectiveAlgorithm::run`] receives.
/// It is itself a [`Fabric`], so an algorithm written as `async fn run<F:
/// Fabric>(fabric: &F, ..)` takes `&any_fabric` unchanged.
///
/// [`CollectiveAlgorithm::run`]: crate::CollectiveAlgorithm::run
#[derive(Clone, Copy)]
pub struct AnyFabric<'a> {
    inner: &'a dyn ErasedFabric,
}

impl<'a> AnyFabric<'a> {
    /// `fabric`, seen through the vtable.
    pub fn new<F: Fabric>(fabric: &'a F) -> AnyFabric<'a> {
        AnyFabric { inner: fabric }
    }
}

impl std::fmt::Debug for AnyFabric<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AnyFabric(rank {} of {})",
            self.inner.erased_rank(),
            self.inner.erased_world_size()
        )
    }
}

impl Fabric for AnyFabric<'_> {
    fn rank(&self) -> Rank {
        self.inner.erased_rank()
    }

    fn world_size(&self) -> usize {
        self.inner.erased_world_size()
    }

    fn now(&self) -> Time {
        self.inner.erased_now()
    }

    fn send(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
    ) -> impl Future<Output = Result<(), FabricError>> {
        self.inner.erased_send(to, tag, payload)
    }

    fn recv(
        &self,
        from: Rank,
        tag: Tag,
        expect: Shape,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        self.inner.erased_recv(from, tag, expect)
    }

    fn compute(&self, work: Work) -> impl Future<Output = Result<(), FabricError>> {
        self.inner.erased_compute(work)
    }

    fn compute_framed(
        &self,
        work: Work,
        framing: Framing,
    ) -> impl Future<Output = Result<(), FabricError>> {
        self.inner.erased_compute_framed(work, framing)
    }

    fn send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload {
        self.inner.erased_send_copy(buf, range)
    }

    fn recycle(&self, payload: Payload) {
        self.inner.erased_recycle(payload)
    }

    async fn send_from(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        range: Range<usize>,
    ) -> Result<(), FabricError> {
        // A fabric whose future is too large for the inline space sends
        // the default's copy through the inline send.
        match self.inner.erased_send_from(to, tag, buf, range.clone()) {
            Some(send) => send.await,
            None => {
                let part = self.send_copy(buf, range);
                self.send(to, tag, part).await
            }
        }
    }

    async fn recv_combine(
        &self,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<(), CollectiveError> {
        self.inner
            .erased_recv_combine(from, tag, buf, range, op)
            .await
    }

    async fn exchange_in_place(
        &self,
        to: Rank,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        send: Range<usize>,
        recv: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<(), CollectiveError> {
        // A fabric whose future is too large for the inline space runs
        // the default here, on the inline operations, so nothing is
        // allocated.
        let own =
            self.inner
                .erased_exchange_in_place(to, from, tag, buf, send.clone(), recv.clone(), op);
        match own {
            Ok(exchange) => exchange.await,
            Err(buf) => {
                crate::fabric::exchange_in_place_by_copy(self, to, from, tag, buf, send, recv, op)
                    .await
            }
        }
    }

    fn exchange(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        // A fabric whose exchange future is too large for the inline space
        // (a default join of its own send and receive) is joined here, on
        // the inline send and receive, so nothing is allocated. Either of
        // the two, not both side by side: the future the algorithm moves
        // into its own state stays as small as the larger one.
        match self.inner.erased_exchange(to, payload, from, expect, tag) {
            Ok(exchange) => futures_util::future::Either::Left(exchange),
            Err(payload) => futures_util::future::Either::Right(async move {
                let (sent, received) = futures_util::future::join(
                    self.send(to, tag, payload),
                    self.recv(from, tag, expect),
                )
                .await;
                sent?;
                received
            }),
        }
    }

    fn send_framed(
        &self,
        to: Rank,
        tag: Tag,
        payload: Payload,
        framing: Framing,
    ) -> impl Future<Output = Result<(), FabricError>> {
        self.inner.erased_send_framed(to, tag, payload, framing)
    }

    fn exchange_framed(
        &self,
        to: Rank,
        payload: Payload,
        from: Rank,
        expect: Shape,
        tag: Tag,
        framing: Framing,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        // As `exchange`: a future too large for the inline space is
        // joined here from the inline framed send and receive.
        let own = self
            .inner
            .erased_exchange_framed(to, payload, from, expect, tag, framing);
        async move {
            match own {
                Ok(exchange) => exchange.await,
                Err(payload) => {
                    let (sent, received) = futures_util::future::join(
                        self.send_framed(to, tag, payload, framing),
                        self.recv(from, tag, expect),
                    )
                    .await;
                    sent?;
                    received
                }
            }
        }
    }

    fn channel_plan(&self) -> Option<Arc<ChannelPlan>> {
        self.inner.erased_channel_plan()
    }

    fn branching(&self, event: Branching) -> Option<u64> {
        self.inner.erased_branching(event)
    }

    fn can_reduce_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.inner.erased_can_reduce_in_network(group)
    }

    async fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Payload, FabricError> {
        self.inner
            .erased_reduce_in_network(group, tag, payload, op)
            .await
    }

    async fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Option<Payload>, FabricError> {
        self.inner
            .erased_reduce_to_in_network(group, root, tag, payload, op)
            .await
    }

    fn can_multicast_in_network(&self, group: &[Rank]) -> Result<(), FabricError> {
        self.inner.erased_can_multicast_in_network(group)
    }

    async fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<Payload, FabricError> {
        self.inner
            .erased_multicast_in_network(group, tag, payload)
            .await
    }
}
