//! The TCP fabric, ranks as threads over loopback: the whole catalogue,
//! the handshake's refusals, the failure behaviour of issue 7 and large
//! frames spoiled anywhere.
//!
//! Every test keeps its timeouts short so the suite takes seconds.

mod catalogue;
mod failures;
mod handshake;
mod large_frames;
mod support;
mod throughput;
