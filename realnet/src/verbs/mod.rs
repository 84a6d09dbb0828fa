//! [`VerbsFabric`]: ranks connected by RDMA verbs (InfiniBand, RoCE) through
//! the `ibverbs` crate (feature `verbs`).
//!
//! # Connections
//! Each rank opens one device ([`VerbsOptions::device`], else the first),
//! one protection domain, one completion queue shared by all its queue
//! pairs, and one reliable-connected (RC) queue pair per peer. The queue
//! pair numbers, LIDs and GIDs travel through the [`Bootstrap`](crate::Bootstrap)
//! allgather ([`exchange`]: each rank contributes its address for every
//! peer); a second allgather makes sure every rank has connected and posted
//! its receives before anyone sends, and that a rank that failed to set up
//! fails everyone at once with its reason.
//!
//! # Data path: eager sends through fixed slots
//! One registered memory region holds, per connection, `slots + 3` receive
//! slots and `slots` send slots of `slot_bytes` (default 8 x 128 KiB, like
//! NCCL's 8 slots per connection), plus 3 header-sized control slots. A
//! message is framed ([`frame`]: tag, [`CallId`](crate::CallId), shape) into
//! as many slots as it needs; each frame is one `IBV_WR_SEND` into a
//! receive slot the peer posted in advance. Credits ([`slots`]) keep a
//! sender from sending more data frames than the peer has slots for; the
//! receiver hands them back in the headers of its own frames, or in a
//! credit frame when it has nothing to send.
//!
//! Why send/recv through slots and not RDMA write into a staging buffer:
//! the `ibverbs` crate's safe API posts `IBV_WR_SEND` only (no RDMA write
//! or read), and a send into pre-posted slots needs no remote keys, no
//! ring of remote addresses and no separate completion signal: the receive
//! completion says which slot filled and how much. Registering each user
//! payload instead would pin pages on every call (tens of microseconds);
//! copying through registered bounce slots is what NCCL's simple protocol
//! does too. With 8 slots in flight per connection a large message streams
//! at the link's rate while each slot is copied out and re-posted.
//!
//! # Progress and failures
//! [`Endpoint::progress`](crate::Endpoint::progress) polls the completion
//! queue: send completions free slots, receive completions are decoded,
//! delivered to the [`Mailbox`](crate::Mailbox) when a message is whole,
//! and their slots re-posted. A failed completion (for instance
//! `IBV_WC_RETRY_EXC_ERR` when a peer died: the hardware's retry budget is
//! sized to the job timeout) fails that peer in the mailbox, naming it and
//! the work-completion status. [`Endpoint::finish`](crate::Endpoint::finish)
//! sends every peer a Bye after the last message and waits for theirs.
//!
//! # Modules
//! - [`options`]: [`VerbsOptions`] and its `REALNET_VERBS_*` environment variables.
//! - [`frame`]: the 48-byte frame header.
//! - [`slots`]: credits, slot layout and work-request ids (pure arithmetic).
//! - [`channel`]: one connection's protocol, without verbs (tested in memory).
//! - [`exchange`]: the connect-time addresses.
//! - [`diagnose`]: device and GID choice, retry timing, completion errors.
//! - [`wire`]: the verbs the fabric uses, as a trait.
//! - `device`: the verbs objects (the only unsafe code of this module).
//! - `fake` (tests): an in-memory device, so the fabric's logic is tested without RDMA.
//! - `fabric`: [`VerbsFabric`].
//!
//! See `realnet/VERBS.md` for building and running on real hardware.

pub mod channel;
mod device;
pub mod diagnose;
pub mod exchange;
mod fabric;
#[cfg(test)]
mod fake;
pub mod frame;
pub mod options;
pub mod slots;
pub mod wire;

pub use device::device_names;
pub use fabric::VerbsFabric;
pub use options::VerbsOptions;
