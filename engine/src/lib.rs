//! A deterministic discrete-event simulator for collective communication:
//! the event engine, the network models, and the scenarios, studies and
//! sweeps built on them. It knows nothing of the command line or of real
//! transports (the `sim` crate puts a command line on top of it).
//!
//! The collectives of the `algorithms` crate run here unchanged: each rank's
//! program is an async task whose [`SimFabric`] turns sends, receives and
//! local work into events in integer virtual time (picoseconds). The same
//! scenario and seed always give byte-identical output.
//!
//! # Map of the crate
//! Engine:
//! - [`event`]: [`Event`](event::Event)s and the [`EventQueue`](event::EventQueue), ordered by `(time, seq)`.
//! - [`slab`]: id-addressed tables that reuse slots (no allocation per event).
//! - [`links`]: the ideal link model (one full-duplex link per rank pair).
//! - [`world`]: the state of one run (clock, queue, links, mailboxes, waits).
//! - [`fabric`]: [`SimFabric`], the `Fabric` a simulated rank uses.
//! - [`executor`]: [`run`] drives every rank's task; quiescence with
//!   unfinished ranks becomes a [`DeadlockReport`].
//! - [`deadlock`]: the deadlock report and its cycle search.
//!
//! - [`cycle`]: the cycle search both wait-for graphs use (ranks, link
//!   buffers; the model checker's deadlock reports too).
//!
//! Studies:
//! - [`scenario`]: TOML scenarios, parsed and validated with file:line:col errors.
//! - [`study`]: runs a scenario's collectives over their size ranges and
//!   checks results against references.
//! - [`sweep`]: `[sweep]` axes, run in parallel and sharded, and the
//!   merge of shard files.
//! - [`nccl`]: the NCCL model: NCCL's channel search, tuning model and
//!   choice on a simulated machine, and the per-call and per-hop costs the
//!   simulator charges `nccl_ring` and `nccl_tree`.
//! - [`tuning`]: `NCCL_ALGO`, restricting the tuner's choice.
//! - [`report`]: the nccl-tests table and the CSV.
//! - [`nccl_tests`]: real nccl-tests output parsed, predicted on a
//!   scenario and compared row by row (`sim compare`).
//! - [`calibration`]: calibration files (`sim calibrate` writes them,
//!   `[calibration] file` in a scenario reads them): a real fabric's
//!   fitted links and reduction rates, with the measurements and host facts.
//! - [`bench`](mod@bench): the engine benchmark (`sim bench-engine`).
//! - [`simulation`]: [`Simulation`], the same from code: build a world
//!   (preset or `[topology]` table, model, seed, placement) and measure
//!   any algorithm over sizes, getting `sim run`'s rows.

pub mod bench;
pub mod calibration;
pub mod cycle;
pub mod deadlock;
pub mod event;
pub mod executor;
pub mod fabric;
pub mod fold;
mod in_network;
pub mod link_report;
pub mod links;
pub mod nccl;
pub mod nccl_tests;
pub mod network;
pub mod report;
pub mod scenario;
pub mod simulation;
pub mod slab;
pub mod study;
pub mod sweep;
pub mod trace;
pub mod tuning;
pub mod world;

pub use deadlock::DeadlockReport;
pub use executor::{Execution, run};
pub use fabric::SimFabric;
pub use simulation::{Measure, Simulation};
pub use world::{EngineStats, WorldConfig};
