//! Collective algorithms, written once against the [`Fabric`] trait.
//!
//! This crate is the portable core of the project. It has no I/O, no clock
//! and no random number generator of its own: everything it knows about the
//! network and about time comes through [`Fabric`], so the same algorithm
//! code runs in the discrete-event simulator (`sim`), under the model checker
//! and on real transports (`realnet`).
//!
//! # Map of the crate
//! Foundations:
//! - [`fabric`]: what one rank sees of the network: [`Rank`], [`Tag`],
//!   [`Time`], the [`Fabric`] trait and its errors.
//! - [`dtype`]: element types ([`DType`]), reduction operators
//!   ([`ReduceOp`]) and the [`Element`] trait that implements them.
//! - [`payload`]: what travels: a [`Payload`] is real typed data or a
//!   size-only phantom.
//! - [`symbolic`]: [`Sym`](symbolic::Sym), an element that records its
//!   reduction tree (interned per thread), so a checker sees exactly which
//!   inputs each output combines, and in which order.
//! - [`layout`]: how a buffer splits into per-rank blocks.
//! - [`group`]: a [`Fabric`] over a subset of ranks, for hierarchical algorithms.
//! - [`in_network`]: what in-network reduction ([`Fabric::reduce_in_network`]) shares across back-ends.
//! - [`cost`]: the alpha-beta-gamma [`CostModel`].
//! - [`reference`](mod@reference): sequential references and reduction [`Order`](reference::Order)s.
//! - [`error`], with [`CollectiveError`], what a failed collective returns.
//!
//! Algorithms and the catalogue:
//! - [`collective`]: [`Collective`], [`Params`], the buffer conventions and
//!   the references every algorithm of a collective shares.
//! - [`algorithm`]: [`CollectiveAlgorithm`], the one interface every
//!   algorithm implements (name, collective, `run`, and optionally its cost
//!   formula, reference and the facts the engine needs), and [`Algorithm`],
//!   the handle that checks a call's arguments and runs it.
//! - [`branches`]: [`join_branches`](branches::join_branches), the join of a call's independent channels, told to the fabric for the model checker.
//! - [`any_fabric`]: [`AnyFabric`], the fabric of any back-end an algorithm
//!   reached through a trait object receives.
//! - [`registry`]: [`Registry`], the algorithms a program knows;
//!   [`Registry::builtin`] is the catalogue.
//! - One module per collective, one file per algorithm, each with the same
//!   items: `FORMULA`, `run`, `cost_ps`, `reference` and a unit struct
//!   implementing [`CollectiveAlgorithm`] with them:
//!   [`allreduce`], [`reduce_scatter`], [`allgather`], [`broadcast`],
//!   [`reduce`], [`alltoall`], [`barrier`], [`gather`], [`scatter`],
//!   [`sendrecv`].
//! - [`pat`]: the Parallel Aggregated Trees arithmetic the PAT allgather
//!   and reduce-scatter share (offsets per dimension, packing, order).
//! - [`nccl`]: NCCL's protocols and channels, and the `nccl_ring`,
//!   `nccl_tree`, `nccl_pat` and `nccl_sendrecv` algorithms that run a
//!   collective the way NCCL does.
//! - [`tuner`]: picks an algorithm and chunk size from the cost model.
//! - Private helpers shared by several algorithms: `binomial` (binomial
//!   tree arithmetic), `fold` (the non-power-of-two fold), `schedule`
//!   (schedules as data, executed and timed from one description).
//!
//! # Writing a collective
//! A collective is an `async fn` generic over `F: Fabric`. It exchanges
//! [`Payload`]s with `fabric.send(..)` and `fabric.recv(..)`, charges local
//! work with `fabric.compute(..)` and does the arithmetic itself on the
//! payloads. It must not read a clock or spawn threads: concurrency inside a
//! rank is expressed by joining futures (`futures_util::join!`). To make it
//! reachable by name from scenarios, the checker and the real fabrics,
//! implement [`CollectiveAlgorithm`] for a type and register it (see
//! [`algorithm`] for a complete example).

pub mod algorithm;
pub mod allgather;
pub mod allreduce;
pub mod alltoall;
pub mod any_fabric;
pub mod barrier;
mod binomial;
pub mod branches;
pub mod broadcast;
pub mod collective;
pub mod cost;
pub mod dtype;
pub mod error;
pub mod fabric;
mod fold;
pub mod gather;
pub mod group;
pub mod in_network;
pub mod layout;
pub mod nccl;
pub mod outbox;
pub mod pat;
pub mod payload;
pub mod reduce;
pub mod reduce_scatter;
pub mod reference;
pub mod registry;
pub mod scatter;
mod schedule;
pub mod sendrecv;
pub mod symbolic;
pub mod tuner;

pub use algorithm::{Algorithm, Chunking, CollectiveAlgorithm, Inline, RotationSymmetry, Running};
pub use any_fabric::AnyFabric;
pub use collective::{Collective, Params};
pub use cost::CostModel;
pub use dtype::{DType, Element, ReduceOp};
pub use error::CollectiveError;
pub use fabric::{Fabric, FabricError, Rank, Tag, Time, Work};
pub use payload::{Payload, Shape};
pub use registry::{Registry, RegistryError, UnknownAlgorithm, catalogue_algorithm};
