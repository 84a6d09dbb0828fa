//! [`ShmFabric`]: ranks that are processes (or threads) of one host,
//! talking through one shared-memory segment.
//!
//! # Design
//! ```text
//!   rank 0 creates /dev/shm/realnet-shm-<job>-...  --bootstrap-->  ranks 1..n map it; then it is unlinked
//!
//!   segment:  header | RankControl x n | PairControl x n(n-1)              | ring data x n(n-1)
//!                        state, pid,      ring: head | tail | copied         one SPSC byte ring
//!                        failure reason   slots: freed | 64 message slots    per ordered pair
//! ```
//! - **Segment** (`segment`): one file per job in `ShmOptions::dir`
//!   (tmpfs), created by rank 0, its name passed to the others through the
//!   [`Bootstrap`](crate::Bootstrap) allgather, and unlinked as soon as every
//!   rank has mapped it, so nothing is left behind even if the job crashes.
//!   Each rank maps in the pages of the rings it uses when it connects, so
//!   that its first messages do not take a page fault per 4 KiB of ring.
//!   A segment whose header names another job id, layout version, world
//!   size or ring size is refused.
//! - **Slots** ([`slots`]): every message is one 64-byte slot of a
//!   lock-free single-producer single-consumer queue per ordered pair: its
//!   header (`wire`: tag, `CallId`, element type and count, how the
//!   payload travels) and, up to 32 bytes, the payload itself, completed
//!   by a stamp word in the same cache line that the receiver spins on. A
//!   small message thus crosses cores as one cache line (as in Open MPI's
//!   vader fast boxes), not a header and payload behind a separately
//!   published position. The receiver copies a small payload into the
//!   payload of the last small message it sent, when the shapes match
//!   (an exchange of small messages allocates one buffer, not two).
//!   Phantom payloads travel as their shape only.
//! - **Rings** ([`ring`]): one lock-free single-producer single-consumer
//!   byte ring per ordered pair, head and tail on their own cache lines,
//!   release/acquire ordering; the payloads above 32 bytes that are not
//!   copied from the sender's memory stream through it in message order,
//!   in pieces when larger than the ring. Both queues are verified by loom
//!   models (the commands are in [`ring`]'s and [`slots`]'s docs).
//! - **Large messages** (`cma`): above `ShmOptions::attach_min_bytes` the
//!   slot carries only the header with the payload's address, and the
//!   receiver copies the bytes straight out of the sender's memory with
//!   `process_vm_readv` (cross-memory attach, as Open MPI's vader does):
//!   one copy instead of two, and no ring space. The sender keeps the
//!   payload until the receiver counts the copy in the ring's `copied`
//!   counter. A part of a caller's buffer sent by
//!   [`Fabric::send_from`](algorithms::Fabric::send_from) or
//!   [`Fabric::exchange_in_place`](algorithms::Fabric::exchange_in_place)
//!   (the ring allreduce's sends) is *lent* rather than copied: the header
//!   carries the caller's own address, and the operation completes only
//!   once the peer's `copied` count passes it (a loan abandoned earlier
//!   fails the rank, so the peer refuses what it read). A buffer lent
//!   for the first time is *registered*: its whole 2 MiB pages collapsed
//!   into transparent huge pages, since the kernel pins the source pages
//!   of a cross-memory copy one by one (see `lend`). A receive that only
//!   copies into a part of the caller's buffer posts that part, and a
//!   matching lent message is copied straight into it (see `landing`).
//!   Each pair is
//!   probed at connect time; where the kernel
//!   refuses (`EPERM` under a strict ptrace policy, no such syscall in a
//!   sandbox) that pair falls back to streaming through the ring.
//! - **Progress** ([`fabric`]): sends are eager (the future completes once
//!   the payload is queued; a message with nothing queued before it goes
//!   straight into a free slot, and an exchange is that send and then the
//!   receive, no joined futures); [`Endpoint::progress`](crate::Endpoint::progress)
//!   pushes queued messages into the slots and rings and pulls arrived ones
//!   straight into a receive buffer, then hands it to the receive waiting
//!   for it directly, when one does and nothing could make the mailbox
//!   answer otherwise (`direct`: no lock, queue or waiter per message),
//!   else to the [`Mailbox`](crate::Mailbox). An idle pass reads one
//!   stamp per peer.
//!   Large fresh buffers are advised onto transparent huge pages before
//!   they are filled, so a receive into new memory takes one page fault per
//!   2 MiB rather than per 4 KiB.
//! - **Read-ahead in cache**: a loan completes only once the peer has
//!   copied it, so a receiver copies each lent chunk as soon as its header
//!   arrives, up to `slots` chunks before the algorithm combines it. Those
//!   chunks must stay in cache, or every byte goes to memory and back:
//!   above a few MiB, with the tuner's 2-4 MiB chunks and 8 slots, that
//!   was why a 2-rank allreduce fell from about 20-24 GB/s busbw (2-4 MiB)
//!   to 3-9 at 16-64 MiB. The fabric caps a tuned chunk at
//!   `fabric::READ_AHEAD_BYTES_MAX` (4 MiB) over the slots
//!   ([`Endpoint::chunk_bytes_max`](crate::Endpoint::chunk_bytes_max)).
//! - **Recycled memory** (`crate::pool`): a payload the peer has copied
//!   (or that was streamed whole into the ring), and a received payload
//!   that [`Fabric::recv_combine`](algorithms::Fabric::recv_combine) has
//!   reduced or copied into the caller's buffer, go back to the rank's
//!   pool; [`Fabric::send_copy`](algorithms::Fabric::send_copy) and the
//!   next receives take their memory from it. A large allreduce then
//!   touches the same few warm buffers call after call instead of faulting
//!   in fresh pages for every chunk.
//! - **Liveness** ([`liveness`]): each rank holds an OFD lock on its own
//!   byte of the segment file (the kernel drops it when the process dies)
//!   and publishes its state (running, finished, failed with a reason) in
//!   its control block. Idle progress probes the peers every
//!   `ShmOptions::probe_interval`; a peer that died or failed fails this
//!   rank with an error naming it. A hung peer (stopped, spinning) is
//!   caught by the mailbox timeout. `finish` flushes, marks the rank
//!   finished and waits (bounded) for the others.
//! - **Idle policy**: spin first (the lowest latency when every rank has a
//!   core), yield when ranks outnumber cores so that spinning never starves
//!   a peer, and park briefly after a long idle stretch.
//!
//! The segment file is created with mode 0600, so only the job's user can
//! map it; the job token of [`JobOptions`] is not needed on one host.

pub mod ring;
pub mod slots;
mod sync;

#[cfg(not(loom))]
mod cma;
#[cfg(not(loom))]
mod connect;
#[cfg(not(loom))]
mod direct;
#[cfg(not(loom))]
pub mod fabric;
#[cfg(not(loom))]
mod landing;
#[cfg(not(loom))]
mod lend;
#[cfg(not(loom))]
pub mod liveness;
#[cfg(not(loom))]
mod progress;
#[cfg(not(loom))]
mod segment;
#[cfg(not(loom))]
mod small;
#[cfg(not(loom))]
mod wire;

use std::path::PathBuf;
use std::time::Duration;

use crate::executor::IdlePolicy;
use crate::job::JobOptions;

#[cfg(not(loom))]
pub use fabric::ShmFabric;

/// Settings of a shared-memory job; every rank must use the same
/// `job.job_id` and `ring_bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmOptions {
    /// Job id (segments of other jobs are refused) and receive timeout.
    pub job: JobOptions,
    /// Where the segment file is created: a tmpfs such as `/dev/shm`.
    pub dir: PathBuf,
    /// Bytes of the ring of each ordered pair of ranks: a power of two
    /// from 4 KiB to 1 GiB. The segment reserves `n(n-1)` of them.
    pub ring_bytes: usize,
    /// Payloads of at least this many bytes are copied straight from the
    /// sender's memory (cross-memory attach) where the kernel allows it;
    /// `None` streams everything through the rings.
    pub attach_min_bytes: Option<usize>,
    /// The largest payload a peer may announce; a larger one is refused as
    /// a corrupt ring.
    pub max_message_bytes: u64,
    /// How often idle progress checks that peers are alive.
    pub probe_interval: Duration,
    /// How the executor waits when nothing moves; `None` picks from the
    /// number of ranks and cores (see [`ShmFabric::idle_policy`](crate::Endpoint::idle_policy)).
    pub idle: Option<IdlePolicy>,
}

impl ShmOptions {
    /// The smallest ring.
    pub const RING_BYTES_MIN: usize = 4096;
    /// The largest ring.
    pub const RING_BYTES_MAX: usize = 1 << 30;
}

impl Default for ShmOptions {
    /// `/dev/shm`, 1 MiB rings, cross-memory attach from 64 KiB, payloads
    /// up to 16 GiB, peers probed every 2 ms, idle policy by core count.
    fn default() -> Self {
        ShmOptions {
            job: JobOptions::default(),
            dir: PathBuf::from("/dev/shm"),
            ring_bytes: 1 << 20,
            attach_min_bytes: Some(64 << 10),
            max_message_bytes: 16 << 30,
            probe_interval: Duration::from_millis(2),
            idle: None,
        }
    }
}
