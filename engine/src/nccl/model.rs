//! NCCL's tuning model: for a collective and a size, the time NCCL's cost
//! model predicts for each algorithm and protocol, which one NCCL picks,
//! and how many channels and threads it launches
//! (`src/graph/tuning.cc`, `src/enqueue.cc` @ab2b89c4; the notation of
//! the comments is NCCL's).
//!
//! ```text
//! time(a, p) = lat(a, p) + nBytes / (1000 * bw(a, p))      [us, GB/s]
//! ```
//!
//! - `bw`: the graph's `nChannels x bwIntra` (`bwInter` beyond 2 nodes),
//!   cut by each protocol's efficiency and caps (LL: half, at most
//!   `llMaxBw`; LL128: 0.92, 0.7 with one rank per node, at most
//!   `perChMaxRingLL128Bw` per channel; tree: 0.92 and `perChMaxTreeBw`,
//!   LL /3.8, LL128 7/9 on one node else 120/128), then turned into an
//!   algorithm bandwidth: ring x `nRanks / nsteps`, tree x 0.5
//!   (`tuning.cc:157-223`).
//! - `lat`: `baseLat` plus one `hwLat` per step, steps inside a node at
//!   the NVLink or PCI latency (at least the network overhead when there
//!   are several nodes), steps across nodes at the NET latency; the tree
//!   twice its depth (`tuning.cc:225-263`).
//! - Ring Simple allreduce across nodes multiplies the latency by 1.4 (1.9
//!   before Ampere) once a channel's share per rank reaches 64 bytes; the
//!   tree's bandwidth is corrected by size (`tuning.cc:410-445`).
//! - LL128 is on only for compute capability 7.0, 8.0 or 9.0 with NVLink
//!   inside nodes and NICs within PCIe reach (PXN too on 9.0)
//!   (`tuning.cc:305-317`).
//! - The choice scans Tree then Ring, LL then LL128 then Simple, keeping
//!   the strictly fastest (`enqueue.cc:1484-1539`); `nBytes` is the whole
//!   buffer for allgather and reduce-scatter.
//! - Channels per call start at the communicator's and drop by one while
//!   `nBytes < nc x nThreads x threshold`; threads halve the same way
//!   (`enqueue.cc:1566-1619`); the call's bytes are then dealt to channels
//!   in aligned pieces of at least `ceil16(bytes / nc)` (`enqueue.cc:431-489,834`).
//!
//! NCCL 2.29.7 ([`Rules::V2_29`]) adds NVLS, NVLS tree, CollNet direct and
//! chain and PAT, and changes the ring and tree as listed there; its
//! formulas for the new algorithms are in `newer.rs`. In 2.21.5 the
//! choice is among Ring and Tree, as on a system without NVLink SHARP or
//! SHARP switches.
//!
//! This file holds the communicator, the tables' indices, the prediction
//! and the choice; `model/tables.rs` the ring's and tree's bandwidth and
//! latency entries, `model/launch.rs` the channels, threads and chunk of
//! a call.

mod launch;
mod tables;

use algorithms::Collective;
use algorithms::nccl::{NcclAlgorithm, Protocol};

use super::constants::{Constants, Rules};
use super::heads::HeadGraph;
use super::machine::PathType;
use super::search::Graph;

/// The inputs of the model besides the size: the communicator.
#[derive(Clone, Debug)]
pub struct Communicator<'a> {
    /// The version's constants.
    pub constants: &'a Constants,
    /// Ranks.
    pub ranks: usize,
    /// Nodes.
    pub nodes: usize,
    /// Compute capability x 10.
    pub compute_capability: u32,
    /// Whether the CPUs are AMD's (NCCL's network overhead and LL caps).
    pub amd_cpu: bool,
    /// The ring graph (the tree, PAT and CollNet chain use the same
    /// channels).
    pub ring: &'a Graph,
    /// Whether the tree is NCCL's plain TREE pattern (one rank per node).
    pub tree_pattern: bool,
    /// The communicator's channels (`collChannels`).
    pub channels: usize,
    /// Which algorithms and protocols are allowed (`NCCL_ALGO`,
    /// `NCCL_PROTO`, and what the caller can run).
    pub allowed: Allowed,
    /// The most GPUs on one node (`maxLocalRanks`).
    pub max_local_ranks: usize,
    /// The NVLS graph when NVLS is supported (`nvlsSupport`: an NVSwitch,
    /// `NCCL_NVLS_ENABLE`, a version that models it).
    pub nvls: Option<&'a HeadGraph>,
    /// NVLS compute channels (`nvlsChannels`).
    pub nvls_channels: usize,
    /// Whether the call's reduction and element type are ones NVLS
    /// reduces in the switch (`ncclNvlsSupported`; allgather always is).
    pub nvls_reduces: bool,
    /// Whether CollNet is supported (`NCCL_COLLNET_ENABLE`, a network that
    /// reduces, enough nodes, a version that models it).
    pub collnet: bool,
    /// The CollNet direct graph (`None`: no NVSwitch, or no CollNet).
    pub collnet_direct: Option<&'a HeadGraph>,
    /// Whether PAT is enabled (`ncclPatEnable`).
    pub pat: bool,
}

/// NCCL's functions, in NCCL's order (`src/include/nccl_common.h`):
/// Broadcast, Reduce, AllGather, ReduceScatter, AllReduce.
pub const FUNCTIONS: [Collective; 5] = [
    Collective::Broadcast,
    Collective::Reduce,
    Collective::Allgather,
    Collective::ReduceScatter,
    Collective::Allreduce,
];

/// Index of a collective among NCCL's [`FUNCTIONS`] (collectives NCCL
/// has no function for share AllReduce's row).
pub fn f_index(c: Collective) -> usize {
    FUNCTIONS.iter().position(|&f| f == c).unwrap_or(4)
}

/// The algorithms and protocols `NCCL_ALGO` and `NCCL_PROTO` allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// `algorithms[function][algorithm]`, by NCCL's function order
    /// ([`FUNCTIONS`]) and algorithm order ([`NcclAlgorithm::ALL`]).
    pub algorithms: [[bool; 7]; 5],
    /// LL, LL128, Simple.
    pub protocols: [bool; 3],
}

impl Default for Allowed {
    fn default() -> Self {
        Allowed {
            algorithms: [[true; 7]; 5],
            protocols: [true; 3],
        }
    }
}

impl Allowed {
    /// Whether `a` is allowed for `c`.
    pub fn algorithm(&self, c: Collective, a: NcclAlgorithm) -> bool {
        self.algorithms[f_index(c)][a_index(a)]
    }

    /// Disallows `a` for `c` unless `keep`.
    pub fn restrict(&mut self, c: Collective, a: NcclAlgorithm, keep: bool) {
        self.algorithms[f_index(c)][a_index(a)] &= keep;
    }
}

/// NCCL's choice for one call: what the algorithm that runs it needs.
///
/// For the algorithms of the other kinds: `channels` is the call's
/// channel count (NVLS: NCCL's `nvlsChannels`, the CTAs; NVLS tree the
/// same; CollNet direct: channels after NCCL's staged reduction), `heads`
/// the head GPUs per node NVLS, NVLS tree and CollNet direct split every
/// chunk among ([`NcclSystem::heads`](super::NcclSystem::heads) names
/// them), `chunk_bytes` the pipeline unit (NVLS: NCCL's chunk after its
/// size steps; PAT: after its halving).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The algorithm.
    pub algorithm: NcclAlgorithm,
    /// The protocol.
    pub protocol: Protocol,
    /// Channels the call runs on.
    pub channels: usize,
    /// NCCL's chunk size for the call: the pipeline unit, bytes.
    pub chunk_bytes: u64,
    /// Threads per channel.
    pub threads: u32,
    /// Head GPUs per node (NVLS, NVLS tree, CollNet direct; 0 otherwise).
    pub heads: usize,
    /// The time NCCL's model predicts, us.
    pub predicted_us: f64,
}

/// NCCL's predicted time of every algorithm and protocol for one call,
/// us: `time[algorithm][protocol]` in NCCL's orders, `None` where
/// unavailable (what `NCCL_DEBUG_SUBSYS=TUNING` lists per function).
pub type Table = [[Option<f64>; 3]; 7];

/// Index of an algorithm in NCCL's tables.
pub fn a_index(a: NcclAlgorithm) -> usize {
    match a {
        NcclAlgorithm::Tree => 0,
        NcclAlgorithm::Ring => 1,
        NcclAlgorithm::CollNetDirect => 2,
        NcclAlgorithm::CollNetChain => 3,
        NcclAlgorithm::Nvls => 4,
        NcclAlgorithm::NvlsTree => 5,
        NcclAlgorithm::Pat => 6,
    }
}

/// Index of a protocol in NCCL's tables.
pub fn p_index(p: Protocol) -> usize {
    match p {
        Protocol::Ll => 0,
        Protocol::Ll128 => 1,
        Protocol::Simple => 2,
    }
}

/// The 24th column of 2.29.7's `treeCorrectionFactor` (256 MiB to 512
/// MiB), which only its NVLS tree correction reads
/// (`src/graph/tuning.cc:581-585,596` @b91894bd).
const TREE_CORRECTION_256M: [f64; 3] = [1.0, 1.0, 0.9];

/// NCCL's `log2i`: floor(log2 x), 0 for 0.
pub(super) fn log2i(x: u64) -> usize {
    if x == 0 { 0 } else { x.ilog2() as usize }
}

impl Communicator<'_> {
    /// Row of the per-architecture tables: Volta 0, Ampere 1, Hopper 2,
    /// Blackwell 3 (in versions that have the row).
    pub(super) fn arch(&self) -> usize {
        let row = match self.compute_capability {
            c if c >= 100 => 3,
            c if c >= 90 => 2,
            c if c >= 80 => 1,
            _ => 0,
        };
        row.min(self.constants.arch_rows - 1)
    }

    /// Column of the per-node-count tables: 1, 2, 3+ nodes.
    pub(super) fn node_column(&self) -> usize {
        (self.nodes - 1).min(2)
    }

    /// Ranks per node as NCCL's float `ppn`.
    pub(super) fn ppn(&self) -> f64 {
        self.ranks as f64 / self.nodes as f64
    }

    /// Whether LL128 is enabled by default (`tuning.cc:305-317` @ab2b89c4:
    /// cc 7.0, 8.0, 9.0 only; `tuning.cc:479-495` @b91894bd: any cc from
    /// 7.0).
    fn ll128_enabled(&self) -> bool {
        let cc = self.compute_capability;
        let inter_ok =
            self.ring.inter <= PathType::Pxb || (cc >= 90 && self.ring.inter <= PathType::Pxn);
        let arch_ok = match self.constants.rules {
            Rules::V2_21 => matches!(cc, 70 | 80 | 90),
            Rules::V2_29 => cc >= 70,
        };
        arch_ok && self.ring.intra_nvlink && inter_ok
    }

    /// Steps of a ring collective (`nsteps`).
    pub(super) fn ring_steps(&self, collective: Collective) -> usize {
        let n = self.ranks;
        match collective {
            Collective::Allreduce => 2 * (n - 1),
            Collective::Allgather | Collective::ReduceScatter => n - 1,
            _ => n,
        }
    }

    /// The hardware row of the ring graph's intra-node steps: NVLINK or
    /// PCI.
    pub(super) fn intra_hw(&self) -> usize {
        if self.ring.intra_nvlink { 0 } else { 1 }
    }

    /// The per-step network latency of `a` (`interLat`): 2.29.7 uses the
    /// tree's row with one rank per node ("latencies are fully exposed",
    /// `tuning.cc:357` @b91894bd).
    pub(super) fn inter_latency(&self, a: NcclAlgorithm, p: Protocol) -> f64 {
        let row = if self.constants.rules == Rules::V2_29 && self.ranks == self.nodes {
            NcclAlgorithm::Tree
        } else {
            a
        };
        self.constants.hop_latency_us[2][a_index(row)][p_index(p)]
    }

    /// Whether `(a, p)` may run `collective` here: `NCCL_ALGO`,
    /// `NCCL_PROTO`, the LL128 rule, and the new algorithms' per-call
    /// filters.
    fn enabled(&self, collective: Collective, a: NcclAlgorithm, p: Protocol) -> bool {
        self.allowed.algorithm(collective, a)
            && self.allowed.protocols[p_index(p)]
            && (p != Protocol::Ll128 || self.ll128_enabled())
            && self.newer_available(collective, a)
    }

    /// The predicted time of `(a, p)` for `bytes` (NCCL's `nBytes`), us,
    /// with its enable rules, or `None` when unavailable.
    pub fn time_us(
        &self,
        collective: Collective,
        a: NcclAlgorithm,
        p: Protocol,
        bytes: u64,
    ) -> Option<f64> {
        let mut bw = self.bandwidth(collective, a, p);
        if !self.enabled(collective, a, p) || bw <= 0.0 {
            return None;
        }
        Some(self.raw_time_us(collective, a, p, bytes, &mut bw))
    }

    /// NCCL's predicted time of every algorithm and protocol for
    /// `collective` of `bytes` ([`Table`]).
    pub fn table(&self, collective: Collective, bytes: u64) -> Table {
        let mut table = [[None; 3]; 7];
        for a in NcclAlgorithm::ALL {
            for p in Protocol::ALL {
                table[a_index(a)][p_index(p)] = self.time_us(collective, a, p, bytes);
            }
        }
        table
    }

    /// `lat + bytes / (1000 bw)` with the size corrections, for a
    /// bandwidth `bw` already known to be positive.
    fn raw_time_us(
        &self,
        collective: Collective,
        a: NcclAlgorithm,
        p: Protocol,
        bytes: u64,
        bw: &mut f64,
    ) -> f64 {
        let mut lat = self.latency(collective, a, p);
        let k = log2i(bytes >> 6);
        if a == NcclAlgorithm::Tree && k < 23 {
            *bw *= self.constants.tree_correction[p_index(p)][k];
        }
        // 2.29.7 corrects NVLS tree allreduce on Blackwell with x86 CPUs
        // too, over 24 sizes (`tuning.cc:595-596` @b91894bd; both CPU
        // vendors modelled are x86).
        if a == NcclAlgorithm::NvlsTree
            && collective == Collective::Allreduce
            && self.compute_capability >= 100
        {
            if k < 23 {
                *bw *= self.constants.tree_correction[p_index(p)][k];
            } else if k == 23 {
                *bw *= TREE_CORRECTION_256M[p_index(p)];
            }
        }
        if a == NcclAlgorithm::Ring
            && p == Protocol::Simple
            && collective == Collective::Allreduce
            && self.nodes > 1
            && bytes / (self.channels as u64 * self.ranks as u64) >= 64
        {
            lat *= self.constants.ring_plateau_factor[usize::from(self.compute_capability >= 80)];
        }
        lat + bytes as f64 / (1000.0 * *bw)
    }

    /// NCCL's choice for `collective` of `bytes` (`nBytes`: the whole
    /// buffer for allgather and reduce-scatter), split as `work_bytes`
    /// per rank in elements of `elem_bytes`: the strict minimum over the
    /// available cells, scanned in NCCL's order.
    pub fn choose(
        &self,
        collective: Collective,
        bytes: u64,
        work_bytes: u64,
        elem_bytes: u64,
    ) -> Choice {
        let mut best: Option<(NcclAlgorithm, Protocol, f64)> = None;
        for a in NcclAlgorithm::ALL {
            for p in Protocol::ALL {
                if let Some(t) = self.time_us(collective, a, p, bytes)
                    && best.is_none_or(|(_, _, b)| t < b)
                {
                    best = Some((a, p, t));
                }
            }
        }
        // Nothing allowed: NCCL 2.21 restores the ring entries (`ringbdw`,
        // `tuning.cc:322-336` @ab2b89c4), before its enable rules. 2.29.7
        // fails the call instead (`enqueue.cc:1960-1973` @b91894bd); the
        // model runs the same ring then, so that a run still happens.
        let (algorithm, protocol, predicted_us) = best.unwrap_or_else(|| {
            let mut fallback = (NcclAlgorithm::Ring, Protocol::Simple, f64::INFINITY);
            for p in Protocol::ALL {
                let mut bw = self.bandwidth(collective, NcclAlgorithm::Ring, p);
                if bw > 0.0 {
                    let t = self.raw_time_us(collective, NcclAlgorithm::Ring, p, bytes, &mut bw);
                    if t < fallback.2 {
                        fallback = (NcclAlgorithm::Ring, p, t);
                    }
                }
            }
            fallback
        });
        let (nc, threads) = self.channels_and_threads(algorithm, protocol, bytes);
        let channels = match algorithm {
            NcclAlgorithm::Tree | NcclAlgorithm::Ring | NcclAlgorithm::Pat => {
                self.channels_used(protocol, nc, threads, work_bytes, elem_bytes)
            }
            // Split evenly over their channels (`enqueue.cc`'s CollNet and
            // NVLS scheduling).
            _ => nc,
        };
        Choice {
            algorithm,
            protocol,
            chunk_bytes: self.chunk_bytes(collective, algorithm, protocol, bytes, nc),
            channels,
            threads,
            heads: self.heads(algorithm),
            predicted_us,
        }
    }
}
