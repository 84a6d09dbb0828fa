//! Real transports behind the [`algorithms::Fabric`] trait.
//!
//! The collectives of the `algorithms` crate run unchanged on these
//! fabrics, one rank per process (or per thread in tests), so a user swaps
//! the simulator for real hardware and compares.
//!
//! # Map of the crate
//! Shared by every transport:
//! - [`call`]: [`CallId`], which collective call a message belongs to, so a
//!   rank that calls a different collective than its peers is caught.
//! - [`mailbox`]: [`Mailbox`], matching of arrived messages to receives by
//!   `(source, tag, call)`, peer failures and receive timeouts.
//! - [`executor`]: [`block_on`](executor::block_on), the single-threaded
//!   executor that drives one rank's collective and the transport's progress.
//! - [`bootstrap`]: [`Bootstrap`], the out-of-band exchange of addresses at
//!   start-up, and [`LocalBootstrap`] for ranks that are threads of one process.
//! - [`endpoint`]: [`Endpoint`], what a real fabric offers beyond [`algorithms::Fabric`].
//! - [`heartbeat`]: every rank beats on its own thread, so a peer that stopped
//!   responding (a frozen process) is named by every rank, not the live rank
//!   each was waiting for.
//! - [`job`]: [`JobOptions`], the job id, token and timeout every rank shares.
//! - [`selftest`]: the whole catalogue run and checked on one endpoint.
//! - [`launch`]: [`RankEnv`](launch::RankEnv), rank and world size from Slurm, Open MPI, PMI or torchrun variables.
//! - [`rendezvous`]: [`TcpRendezvous`](rendezvous::TcpRendezvous), the [`Bootstrap`] of processes, through rank 0.
//! - `gate`: the admission of connections at a listener strangers can
//!   reach (the rendezvous, TCP's data ports): one thread, a bounded table,
//!   a deadline per connection, nothing answered but a whole hello.
//! - [`bench`](mod@bench): [`run_bench`](bench::run_bench), nccl-tests style timing and checking on any endpoint;
//!   [`memory`]: refuses sizes whose buffers a process cannot hold.
//! - [`connect`]: [`FabricKind`](connect::FabricKind) and [`with_fabric`](connect::with_fabric),
//!   the one place a fabric's name becomes a connected endpoint running a job
//!   (after the ranks agree on the command and the algorithm registry).
//! - [`launcher`]: [`LocalJob`](launcher::LocalJob), N local processes of a
//!   program as one job's ranks, supervised (what `sim launch` runs).
//!
//! Transports:
//! - [`local`]: [`LocalFabric`], ranks that are threads of one process.
//! - [`tcp`]: [`TcpFabric`](tcp::TcpFabric), one connection per pair of ranks, carrying [`frame`]s (the wire format).
//! - [`shm`]: [`ShmFabric`](shm::ShmFabric), processes of one host sharing a memory segment.
//! - `verbs` (feature `verbs`): `VerbsFabric`, RDMA verbs over InfiniBand or RoCE.

pub mod bench;
pub mod bootstrap;
pub mod call;
// Under loom only the shared-memory ring's models build (see shm/ring.rs).
#[cfg(not(loom))]
pub mod connect;
pub mod endpoint;
pub mod executor;
pub mod frame;
mod gate;
pub mod heartbeat;
pub mod job;
pub mod launch;
#[cfg(not(loom))]
pub mod launcher;
pub mod local;
pub mod mailbox;
pub mod memory;
mod pool;
pub mod rendezvous;
pub mod selftest;
pub mod shm;
mod sorted_map;
pub mod tcp;
#[cfg(feature = "verbs")]
pub mod verbs;

pub use bootstrap::{Bootstrap, BootstrapError, LocalBootstrap};
pub use call::CallId;
pub use endpoint::Endpoint;
pub use job::JobOptions;
pub use local::LocalFabric;
pub use mailbox::Mailbox;

#[cfg(target_endian = "big")]
compile_error!(
    "realnet sends payloads in the host's byte order and supports little-endian hosts only"
);
