//! How NCCL launches a call it chose: channels and threads per call
//! (`getChannnelThreadInfo`), the chunk size (`computeCollChunkInfo`), and
//! how many channels the call's bytes really occupy.

use algorithms::Collective;
use algorithms::nccl::{NcclAlgorithm, Protocol};

use super::{Communicator, log2i, p_index};
use crate::nccl::constants::Rules;

impl Communicator<'_> {
    /// `getChannnelThreadInfo`: channels and threads for `bytes`
    /// (`enqueue.cc:1566-1619` @ab2b89c4, `:1977-2022` @b91894bd).
    pub fn channels_and_threads(&self, a: NcclAlgorithm, p: Protocol, bytes: u64) -> (usize, u32) {
        let k = self.constants;
        let pi = p_index(p);
        if let Some(shape) = self.newer_channels_and_threads(a, p, bytes) {
            return shape;
        }
        let mut nt = k.max_threads[pi];
        if a == NcclAlgorithm::Ring
            && p == Protocol::Simple
            && self.ring.bw_intra * self.ring.channels as f64 <= k.pci_bw
        {
            nt = 256;
        }
        let threshold = if a == NcclAlgorithm::Ring && p == Protocol::Ll {
            k.thread_threshold[pi] * self.ranks as u64
        } else {
            k.thread_threshold[pi]
        };
        let mut nc = self.channels.max(1);
        while bytes < nc as u64 * u64::from(nt) * threshold && nc >= 2 {
            nc -= 1;
        }
        while bytes < nc as u64 * u64::from(nt) * threshold && nt.is_multiple_of(128) {
            nt /= 2;
        }
        if p == Protocol::Simple {
            nt += if a == NcclAlgorithm::Ring { 32 } else { 128 };
        }
        // "Tree now uses all threads always" (`enqueue.cc:2019` @b91894bd).
        if let (Rules::V2_29, Some(newer)) = (k.rules, k.newer)
            && a == NcclAlgorithm::Tree
        {
            nt = newer.max_threads_all;
        }
        (nc, nt.max(96))
    }

    /// NCCL's chunk size for a call (`computeCollChunkInfo`,
    /// `src/enqueue.cc:1722-1776` @ab2b89c4, `:2138-2193` @b91894bd): the
    /// protocol's step payload (ring Simple: a 2-step slice, the unit that
    /// moves; broadcast and reduce one step), except the tree's LL128,
    /// halved while the call is short of `(1 + log2 nodes + ppn/10) x 64 /
    /// ppn` chunks per channel (down to 128 KiB), then of a quarter of
    /// that (down to 32 KiB), so that small calls still pipeline through
    /// the tree; the newer algorithms' rules are in `newer.rs`.
    pub fn chunk_bytes(
        &self,
        collective: Collective,
        a: NcclAlgorithm,
        p: Protocol,
        bytes: u64,
        channels: usize,
    ) -> u64 {
        let chunk = match a {
            NcclAlgorithm::Ring => p.ring_pipeline(collective).0,
            NcclAlgorithm::Tree => p.tree_pipeline().0,
            _ => return self.newer_chunk_bytes(collective, a, bytes, channels),
        };
        if !(a == NcclAlgorithm::Tree && p == Protocol::Ll128) {
            return chunk;
        }
        let ppn = self.ppn();
        let steps = 1.0 + log2i(self.nodes as u64) as f64 + 0.1 * ppn;
        let per = |chunk: u64| (bytes / (channels.max(1) as u64 * chunk)) as f64;
        let mut chunk = chunk;
        while per(chunk) < steps * 64.0 / ppn && chunk > 131_072 {
            chunk /= 2;
        }
        while per(chunk) < steps * 16.0 / ppn && chunk > 32_768 {
            chunk /= 2;
        }
        chunk
    }

    /// How many of `nc` channels the call's `work_bytes` really occupy:
    /// pieces of `ceil16(work_bytes / nc)` bytes rounded up to the
    /// protocol's alignment (`enqueue.cc:214-223,431-489`).
    pub(super) fn channels_used(
        &self,
        p: Protocol,
        nc: usize,
        threads: u32,
        work_bytes: u64,
        elem_bytes: u64,
    ) -> usize {
        let elem = elem_bytes.max(1);
        let count = work_bytes / elem;
        if count == 0 {
            return 1;
        }
        let align = match p {
            Protocol::Simple => 32 * 8 * 16 / elem,
            Protocol::Ll128 => 480 / elem * u64::from(threads / 32),
            Protocol::Ll => 8 / elem.min(8) * u64::from(threads),
        }
        .max(1);
        let per_channel = work_bytes.div_ceil(nc as u64).div_ceil(16) * 16;
        let piece = per_channel.div_ceil(elem).div_ceil(align) * align;
        count.div_ceil(piece.max(1)).clamp(1, nc as u64) as usize
    }
}
