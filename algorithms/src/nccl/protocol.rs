//! NCCL's three wire protocols as mechanisms: how a step's payload is
//! framed on the wire, how big a step is, and how many steps a connection
//! keeps in flight.
//!
//! All figures are NCCL's defaults, read from its source at tag
//! `v2.21.5-1` (commit `ab2b89c4c339bd7f816fbc114a4b05d386b66290`):
//! - **LL** (low latency): 16-byte lines of 8 bytes of data and two 4-byte
//!   flags (`ncclLLFifoLine`, `src/include/device.h:38-51`), so half the
//!   wire bytes are payload; the receiver polls the flags, so a line is
//!   usable as soon as it lands (no separate synchronisation).
//!   Buffer `NCCL_LL_BUFFSIZE` = 8 lines/thread x 512 threads x 8 steps x
//!   16 B = 524,288 B (`src/init.cc:542-562`), a step of 65,536 wire
//!   bytes carrying 32,768 payload bytes (`src/enqueue.cc:1728`).
//! - **LL128**: 128-byte lines, 120 bytes of data and one 8-byte flag word
//!   (`device.h:70-75`, `src/device/prims_ll128.h`); buffer 120 x 640 x 8
//!   x 8 = 4,915,200 B, a step of 614,400 wire bytes carrying 576,000
//!   (`enqueue.cc:1729`).
//! - **Simple**: raw data in steps of `NCCL_BUFFSIZE` / 8 = 524,288 B, each
//!   step synchronised by head/tail counters and a memory fence (the
//!   per-step latency NCCL's tuning table charges); ring allreduce,
//!   allgather and reduce-scatter move slices of 2 steps (chunk 4 steps;
//!   `src/include/collectives.h:13-23`), the other cases one step.
//!
//! A connection has `NCCL_STEPS` = 8 slots (`device.h:22`): at most 8
//! steps of one sender are ahead of what its receiver has consumed.

use std::fmt;

use crate::collective::Collective;

/// NCCL's `NCCL_STEPS`: slots (steps in flight) per connection
/// (`src/include/device.h:22` @ ab2b89c4).
pub const STEPS: usize = 8;

/// A wire protocol of NCCL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// LL: 8 bytes of data per 16-byte line.
    Ll,
    /// LL128: 120 bytes of data per 128-byte line.
    Ll128,
    /// Simple: raw data, synchronised per step.
    #[default]
    Simple,
}

impl Protocol {
    /// Every protocol, in NCCL's order (LL, LL128, Simple), the order its
    /// tuner scans them in.
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// NCCL's name (`NCCL_PROTO` accepts it, case-insensitively).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "Simple",
        }
    }

    /// The protocol NCCL calls `name` (any case), if there is one.
    pub fn parse(name: &str) -> Option<Protocol> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Bytes on the wire for `payload` bytes: LL rounds up to whole 8-byte
    /// halves of 16-byte lines, LL128 to whole 120-byte lines of 128,
    /// Simple sends the payload as it is.
    pub fn wire_bytes(self, payload: u64) -> u64 {
        match self {
            Protocol::Ll => payload.div_ceil(8).saturating_mul(16),
            Protocol::Ll128 => payload.div_ceil(120).saturating_mul(128),
            Protocol::Simple => payload,
        }
    }

    /// Payload bytes one step carries (see the module docs).
    pub fn step_payload_bytes(self) -> u64 {
        match self {
            Protocol::Ll => 32_768,
            Protocol::Ll128 => 576_000,
            Protocol::Simple => 524_288,
        }
    }

    /// The pipeline unit of a ring collective and how many of them a
    /// connection keeps in flight: `(bytes, units)`. Simple's ring
    /// allreduce, allgather and reduce-scatter move 2-step slices (4 in
    /// the 8 slots); everything else moves single steps (8 in flight).
    pub fn ring_pipeline(self, collective: Collective) -> (u64, usize) {
        let sliced = matches!(
            collective,
            Collective::Allreduce | Collective::Allgather | Collective::ReduceScatter
        );
        if self == Protocol::Simple && sliced {
            (2 * self.step_payload_bytes(), STEPS / 2)
        } else {
            (self.step_payload_bytes(), STEPS)
        }
    }

    /// The pipeline unit of the tree allreduce and the units in flight:
    /// one step, 8 in flight (NCCL's tree uses chunk = slice = one step,
    /// `src/enqueue.cc:1722-1776`).
    pub fn tree_pipeline(self) -> (u64, usize) {
        (self.step_payload_bytes(), STEPS)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ll_carries_half_its_wire_bytes_and_ll128_fifteen_sixteenths() {
        assert_eq!(Protocol::Ll.wire_bytes(8), 16);
        assert_eq!(Protocol::Ll.wire_bytes(32_768), 65_536);
        assert_eq!(Protocol::Ll.wire_bytes(1), 16, "a partial line is a line");
        assert_eq!(Protocol::Ll128.wire_bytes(120), 128);
        assert_eq!(Protocol::Ll128.wire_bytes(576_000), 614_400);
        assert_eq!(Protocol::Ll128.wire_bytes(121), 256);
        assert_eq!(Protocol::Simple.wire_bytes(1000), 1000);
        assert_eq!(Protocol::Ll.wire_bytes(0), 0);
    }

    #[test]
    fn steps_fill_the_default_buffers() {
        // Each step's wire bytes times NCCL_STEPS is the buffer size.
        assert_eq!(Protocol::Ll.wire_bytes(32_768) * STEPS as u64, 524_288);
        assert_eq!(
            Protocol::Ll128.wire_bytes(576_000) * STEPS as u64,
            4_915_200
        );
        assert_eq!(524_288 * STEPS as u64, 4 << 20);
        assert_eq!(
            Protocol::Simple.ring_pipeline(Collective::Allreduce),
            (1 << 20, 4)
        );
        assert_eq!(
            Protocol::Simple.ring_pipeline(Collective::Broadcast),
            (524_288, 8)
        );
    }

    #[test]
    fn names_parse_in_any_case() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::parse(&p.name().to_lowercase()), Some(p));
        }
        assert_eq!(Protocol::parse("ll64"), None);
    }
}
