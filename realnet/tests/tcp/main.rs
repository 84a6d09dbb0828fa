//! The TCP fabric, ranks as threads over loopback: the whole catalogue,
//! the handshake's refusals and the failure behaviour of issue 7.
//!
//! Every test keeps its timeouts short so the suite takes seconds.

mod catalogue;
mod failures;
mod handshake;
mod support;
mod throughput;
