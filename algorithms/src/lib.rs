//! Collective algorithms, written once against the [`Fabric`] trait.
//!
//! This crate is the portable core of the project. It has no I/O, no clock
//! and no random number generator of its own: everything it knows about the
//! network and about time comes through [`Fabric`], so the same algorithm
//! code runs in the discrete-event simulator (`sim`), under the model checker
//! and on real transports (`realnet`).
//!
//! # Map of the crate
//! - [`fabric`]: what one rank sees of the network: [`Rank`], [`Tag`],
//!   [`Time`], the [`Fabric`] trait and its errors.
//! - [`dtype`]: element types ([`DType`]), reduction operators
//!   ([`ReduceOp`]) and the [`Element`] trait that implements them.
//! - [`payload`]: what travels: a [`Payload`] is real typed data or a
//!   size-only phantom.
//! - [`ring`]: the chunked, pipelined ring allreduce.
//! - [`reference`](mod@reference): sequential reference results used to check collectives.
//! - [`error`]: [`CollectiveError`], what a collective returns when it fails.
//!
//! # Writing a collective
//! A collective is an `async fn` generic over `F: Fabric`. It exchanges
//! [`Payload`]s with `fabric.send(..)` and `fabric.recv(..)`, charges local
//! work with `fabric.compute(..)` and does the arithmetic itself on the
//! payloads. It must not read a clock or spawn threads: concurrency inside a
//! rank is expressed by joining futures (`futures_util::join!`).

pub mod dtype;
pub mod error;
pub mod fabric;
pub mod payload;
pub mod reference;
pub mod ring;

pub use dtype::{DType, Element, ReduceOp};
pub use error::CollectiveError;
pub use fabric::{Fabric, FabricError, Rank, Tag, Time, Work};
pub use payload::{Payload, Shape};
pub use ring::{RingAllreduce, ring_allreduce, ring_allreduce_messages};
