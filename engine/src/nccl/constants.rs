//! NCCL's tuning constants, per pinned NCCL version.
//!
//! Every figure is read from NCCL's source at the version's tag, file and
//! line cited beside it; none is fitted to a measurement. Version 2.21.5
//! is tag `v2.21.5-1`, commit `ab2b89c4c339bd7f816fbc114a4b05d386b66290`
//! ("@ab2b89c4" below); version 2.29.7 is tag `v2.29.7-1`, commit
//! `b91894bd5b190c874d98a017f93f5daa515b65d0` ("@b91894bd"). Adding a
//! version means adding a [`NcclVersion`] and its [`Constants`].
//!
//! Units are NCCL's: latencies in microseconds, bandwidths in GB/s (1 GB/s
//! = 1000 bytes per microsecond). Array indices follow NCCL's enums:
//! algorithms Tree = 0, Ring = 1, CollNetDirect = 2, CollNetChain = 3,
//! NVLS = 4, NVLSTree = 5, PAT = 6; protocols LL = 0, LL128 = 1, Simple = 2
//! (`src/include/plugin/nccl_tuner.h:27-52` @b91894bd); hardware classes
//! NVLINK = 0, PCI = 1, NET = 2; GPU architecture rows Volta = 0, Ampere =
//! 1, Hopper = 2, Blackwell = 3 (2.21.5 has no Blackwell row: its
//! [`Constants::arch_rows`] is 3 and cc >= 10.0 is refused for it).

use std::fmt;

/// A NCCL version whose tuning model the simulator knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NcclVersion {
    /// NCCL 2.21.5 (`v2.21.5-1`, commit `ab2b89c4`): Ring and Tree.
    #[default]
    V2_21_5,
    /// NCCL 2.29.7 (`v2.29.7-1`, commit `b91894bd`): Ring, Tree, NVLS,
    /// NVLS tree, CollNet direct and chain, PAT; Blackwell tables.
    V2_29_7,
}

impl NcclVersion {
    /// Every known version.
    pub const ALL: [NcclVersion; 2] = [NcclVersion::V2_21_5, NcclVersion::V2_29_7];

    /// The name scenarios use: `"2.21.5"`, `"2.29.7"`.
    pub fn name(self) -> &'static str {
        match self {
            NcclVersion::V2_21_5 => "2.21.5",
            NcclVersion::V2_29_7 => "2.29.7",
        }
    }

    /// The version a scenario names (`"2.21.5"`, also `"2.21"`,
    /// `"2.21.5-1"`; likewise 2.29.7).
    pub fn parse(name: &str) -> Option<NcclVersion> {
        match name.trim_start_matches('v') {
            "2.21.5" | "2.21" | "2.21.5-1" => Some(NcclVersion::V2_21_5),
            "2.29.7" | "2.29" | "2.29.7-1" => Some(NcclVersion::V2_29_7),
            _ => None,
        }
    }

    /// Its tuning constants.
    pub fn constants(self) -> &'static Constants {
        match self {
            NcclVersion::V2_21_5 => &V2_21_5,
            NcclVersion::V2_29_7 => &V2_29_7,
        }
    }

    /// Whether its tables know GPUs of compute capability `cc` (x 10):
    /// 2.21.5 stops at Hopper.
    pub fn supports(self, cc: u32) -> bool {
        cc < 100 || self.constants().arch_rows > 3
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which version's tuning formulas apply where the versions differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// 2.21.5: ring allreduce crosses the network `2 x nNodes` times, ring
    /// LL128 is 0.7 efficient with one rank per node, LL128 only on cc
    /// 7.0/8.0/9.0, a ring fallback when nothing is allowed; no NVLS,
    /// CollNet or PAT.
    V2_21,
    /// 2.29.7 (`src/graph/tuning.cc` @b91894bd): `2 x (nNodes - 1)` ring
    /// network steps (`:379`), the tree's network latency with one rank
    /// per node (`:357`), ring LL128 always 0.92 (`:306`), LL128 on any
    /// cc from 7.0 (`:479-495`), tree caps for allreduce only (`:307`), tree
    /// and PAT on 640 threads (`src/enqueue.cc:2019-2020`), the new
    /// algorithms.
    V2_29,
}

/// One version's tuning model constants (see the module docs for units
/// and indices).
#[derive(Clone, Debug, PartialEq)]
pub struct Constants {
    /// Which formulas apply.
    pub rules: Rules,
    /// `baseLat[algo][proto]`, us: a call's fixed cost.
    pub base_latency_us: [[f64; 3]; 7],
    /// `hwLat[hw][algo][proto]`, us: the cost of one step over one hop.
    pub hop_latency_us: [[[f64; 3]; 7]; 3],
    /// Architecture rows the per-architecture tables have: 3 (up to
    /// Hopper) or 4 (Blackwell too); rows past them repeat the last.
    pub arch_rows: usize,
    /// `llMaxBws[row][nodes]`, GB/s: LL's whole-communicator cap; rows are
    /// the architecture on one node, else 0 for Intel and 1 for AMD CPUs;
    /// columns 1, 2 and 3+ nodes.
    pub ll_max_bw: [[f64; 3]; 4],
    /// `perChMaxRingLL128Bws[arch][nodes]`, GB/s per channel.
    pub ring_ll128_per_channel: [[f64; 3]; 4],
    /// `perChMaxTreeLL128Bws[arch][nodes]`, GB/s per channel.
    pub tree_ll128_per_channel: [[f64; 3]; 4],
    /// `perChMaxTreeBws[arch][nodes]`, GB/s per channel.
    pub tree_per_channel: [[f64; 3]; 4],
    /// Network overhead per step on Intel and on AMD CPUs, us
    /// (`NCCL_NET_OVERHEAD` unset).
    pub net_overhead_us: [f64; 2],
    /// `treeCorrectionFactor[proto][log2(bytes / 64)]` for sizes below 512
    /// MiB.
    pub tree_correction: [[f64; 23]; 3],
    /// The ring Simple allreduce latency factor across nodes when a
    /// channel's share per rank is at least 64 bytes: before Ampere, and
    /// from Ampere on.
    pub ring_plateau_factor: [f64; 2],
    /// Channel search speeds (GB/s per channel), tried in order: before
    /// Hopper within a node and across nodes, Hopper within and across,
    /// Blackwell within and across.
    pub speeds: [&'static [f64]; 6],
    /// The most channels a ring search may find (`MAXCHANNELS / 2`).
    pub max_search_channels: usize,
    /// The most channels a communicator runs (`MAXCHANNELS`).
    pub max_channels: usize,
    /// Threads per block: LL, LL128, Simple (ring Simple on links at or
    /// below `pci_bw` uses 256).
    pub max_threads: [u32; 3],
    /// NCCL's `PCI_BW`, GB/s: the ring Simple thread-count threshold.
    pub pci_bw: f64,
    /// Bytes per thread below which fewer channels and threads are used:
    /// LL, LL128, Simple (ring LL multiplies by the rank count).
    pub thread_threshold: [u64; 3],
    /// NCCL's arity of a tree within a node's chain plus across nodes.
    pub tree_arity: usize,
    /// The constants of NVLS, NVLS tree, CollNet and PAT, in the versions
    /// whose model has them (`None`: those algorithms are unavailable).
    pub newer: Option<&'static NewerAlgorithms>,
}

/// The constants of NCCL's NVLS, NVLS tree, CollNet and PAT model.
#[derive(Clone, Debug, PartialEq)]
pub struct NewerAlgorithms {
    /// `perChMaxNVLSTreeBws[arch][nodes]`, GB/s per channel.
    pub nvls_tree_per_channel: [[f64; 3]; 4],
    /// `nvlsEfficiency[arch]`: the fraction of the NVLS graph's bandwidth
    /// the switch reduction achieves.
    pub nvls_efficiency: [f64; 4],
    /// NVLS and NVLS tree need a graph of at least this many channels.
    pub nvls_min_graph_channels: usize,
    /// PAT's bus bandwidth factor on the tree graph.
    pub pat_bus_factor: f64,
    /// PAT's network latency divisor (`log2i(nNodes) x interLat / 3.5`).
    pub pat_log_latency_divisor: f64,
    /// PAT's latency per rank, us (`nRanks x 2.8`).
    pub pat_latency_per_rank_us: f64,
    /// PAT needs this compute capability (x 10) or more.
    pub pat_min_compute_capability: u32,
    /// CollNet direct's per-local-peer serialization latency, us.
    pub collnet_direct_arity_latency_us: f64,
    /// CollNet direct's bandwidth factor from Hopper on.
    pub collnet_direct_sm90_factor: f64,
    /// CollNet direct allgather/reduce-scatter: the network share
    /// (`bwInter x 0.9`).
    pub collnet_agrs_inter_factor: f64,
    /// CollNet needs at most this many GPUs per node
    /// (`NCCL_MAX_DIRECT_ARITY + 1`); CollNet direct's most heads.
    pub collnet_max_local_ranks: usize,
    /// CollNet needs at least this many nodes (`NCCL_COLLNET_NODE_THRESHOLD`).
    pub collnet_min_nodes: usize,
    /// NVLS outside allreduce needs at most this many GPUs per node
    /// (`NCCL_MAX_NVLS_ARITY`); the NVLS graph's most heads.
    pub nvls_max_local_ranks: usize,
    /// NVLS compute channels (`NVLS_NCHANNELS`): Hopper; Blackwell on one
    /// node (or one NVLink domain); Blackwell across nodes.
    pub nvls_channels: [usize; 3],
    /// NVLS chunk size (`NCCL_NVLS_CHUNKSIZE` default), bytes.
    pub nvls_chunk: u64,
    /// NVLS across nodes: the chunk cap and the allreduce bandwidth below
    /// which it applies (GB/s).
    pub nvls_multinode_small_chunk: (u64, f64),
    /// NVLS chunk steps: `(k, chunk)`: the chunk drops to `chunk` when the
    /// call has fewer than `k x channels x heads x chunk` bytes.
    pub nvls_chunk_steps: [(u64, u64); 3],
    /// NVLS tree's chunk cap from 4 nodes on, bytes
    /// (`NCCL_NVLSTREE_MAX_CHUNKSIZE` default -2).
    pub nvls_tree_max_chunk_4_nodes: u64,
    /// NVLS tree chunk steps, as [`Self::nvls_chunk_steps`].
    pub nvls_tree_chunk_steps: [(u64, u64); 4],
    /// PAT's chunk: halved while `chunk x channels x div > bytes`, for
    /// allgather and for reduce-scatter, down to the floor (bytes).
    pub pat_chunk_div: (u64, u64, u64),
    /// CollNet chain's largest chunk, bytes.
    pub collnet_chain_max_chunk: u64,
    /// CollNet's bytes per thread below which fewer threads are used
    /// (Simple).
    pub collnet_thread_threshold: u64,
    /// Threads of NVLS, NVLS tree, CollNet, tree and PAT blocks
    /// (`NCCL_MAX_NTHREADS`).
    pub max_threads_all: u32,
    /// The NVLS search's largest channel count (`NCCL_MAX_NVLS_ARITY`).
    pub nvls_max_heads: usize,
}

/// NCCL 2.21.5's constants.
pub static V2_21_5: Constants = Constants {
    rules: Rules::V2_21,
    // src/graph/tuning.cc:56-59 @ab2b89c4 (no PAT in 2.21.5: its row is 0)
    base_latency_us: [
        [6.8, 14.0, 0.0],
        [6.6, 14.0, 8.4],
        [0.0; 3],
        [0.0; 3],
        [0.0; 3],
        [0.0; 3],
        [0.0; 3],
    ],
    // src/graph/tuning.cc:61-78 @ab2b89c4
    hop_latency_us: [
        [
            [0.6, 1.25, 28.0],
            [0.6, 1.9, 3.4],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0, 0.0, 25.0],
            [0.0, 0.0, 25.0],
            [0.0; 3],
        ],
        [
            [1.0, 1.9, 28.0],
            [1.0, 2.5, 5.7],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0; 3],
            [0.0; 3],
            [0.0; 3],
        ],
        [
            [5.0, 8.5, 28.0],
            [2.7, 4.0, 14.0],
            [0.0, 0.0, 31.0],
            [0.0, 0.0, 30.0],
            [0.0, 0.0, 18.0],
            [0.0, 0.0, 14.0],
            [0.0; 3],
        ],
    ],
    // src/graph/tuning.cc:80-83 @ab2b89c4: Volta, Ampere, Hopper (the
    // fourth rows below repeat Hopper's and are never read)
    arch_rows: 3,
    // src/graph/tuning.cc:86-90 @ab2b89c4
    ll_max_bw: [
        [39.0, 39.0, 20.4],
        [87.7, 22.5, 19.0],
        [141.0, 45.0, 35.0],
        [141.0, 45.0, 35.0],
    ],
    // src/graph/tuning.cc:92-106 @ab2b89c4
    ring_ll128_per_channel: [
        [20.0, 20.0, 20.0],
        [20.0, 20.0, 20.0],
        [36.7, 36.7, 36.7],
        [36.7, 36.7, 36.7],
    ],
    tree_ll128_per_channel: [
        [20.0, 20.0, 20.0],
        [20.0, 20.0, 20.0],
        [36.7, 36.7, 29.0],
        [36.7, 36.7, 29.0],
    ],
    tree_per_channel: [
        [26.5, 18.5, 10.0],
        [24.0, 23.6, 17.8],
        [38.7, 41.4, 36.0],
        [38.7, 41.4, 36.0],
    ],
    // src/graph/tuning.cc:108-118 @ab2b89c4
    net_overhead_us: [1.0, 2.0],
    // src/graph/tuning.cc:412-416 @ab2b89c4
    tree_correction: TREE_CORRECTION,
    // src/graph/tuning.cc:437-440 @ab2b89c4
    ring_plateau_factor: [1.9, 1.4],
    // src/graph/search.cc:850-858 @ab2b89c4 (no Blackwell arrays: the
    // Hopper ones, as 2.21.5 uses them for cc >= 9.0)
    speeds: [
        SPEEDS_INTRA,
        SPEEDS_INTER,
        SM90_SPEEDS_INTRA,
        SM90_SPEEDS_INTER,
        SM90_SPEEDS_INTRA,
        SM90_SPEEDS_INTER,
    ],
    // src/include/device.h:54 (MAXCHANNELS 32); src/init.cc:1047-1081
    max_search_channels: 16,
    max_channels: 32,
    // src/include/device.h:55-57,74; src/graph/tuning.cc:121-133 @ab2b89c4
    max_threads: [512, 640, 512],
    // src/graph/topo.h:26 @ab2b89c4
    pci_bw: 12.0,
    // src/include/comm.h:35-37 @ab2b89c4
    thread_threshold: [8, 8, 64],
    // src/include/device.h:147-156 @ab2b89c4 (NCCL_MAX_TREE_ARITY 3)
    tree_arity: 3,
    newer: None,
};

/// `treeCorrectionFactor`, the same in both versions for the 23 sizes up to
/// 256 MiB (`src/graph/tuning.cc:412-416` @ab2b89c4, `:581-585` @b91894bd).
const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];

// src/graph/search.cc:850-858 @ab2b89c4 = search.cc:977-983 @b91894bd
const SPEEDS_INTRA: &[f64] = &[
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
const SPEEDS_INTER: &[f64] = &[
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];
const SM90_SPEEDS_INTRA: &[f64] = &[
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
const SM90_SPEEDS_INTER: &[f64] = &[
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];
// src/graph/search.cc:987-988 @b91894bd
const SM100_SPEEDS_INTRA: &[f64] = &[
    90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
const SM100_SPEEDS_INTER: &[f64] = &[
    96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
    1.2, 0.24, 0.12,
];

/// NCCL 2.29.7's constants.
pub static V2_29_7: Constants = Constants {
    rules: Rules::V2_29,
    // src/graph/tuning.cc:144-149 @b91894bd
    base_latency_us: [
        [6.8, 14.0, 8.4],
        [6.6, 14.0, 8.4],
        [0.0; 3],
        [0.0; 3],
        [0.0; 3],
        [0.0; 3],
        [8.0, 8.0, 8.0],
    ],
    // src/graph/tuning.cc:150-169 @b91894bd
    hop_latency_us: [
        [
            [0.6, 1.25, 4.0],
            [0.6, 1.9, 3.4],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0, 0.0, 25.0],
            [0.0, 0.0, 25.0],
            [0.0, 0.0, 4.0],
        ],
        [
            [1.0, 1.9, 4.0],
            [1.0, 2.5, 5.7],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0; 3],
            [0.0; 3],
            [0.0, 0.0, 4.0],
        ],
        [
            [5.0, 8.5, 14.0],
            [2.7, 4.0, 14.0],
            [0.0, 0.0, 31.0],
            [0.0, 0.0, 30.0],
            [0.0, 0.0, 18.0],
            [0.0, 0.0, 20.9],
            [0.0, 0.0, 14.0],
        ],
    ],
    // src/graph/tuning.cc:250 @b91894bd: Blackwell from cc 10.0
    arch_rows: 4,
    // src/graph/tuning.cc:170-175 @b91894bd (Blackwell written 2 x Hopper)
    ll_max_bw: [
        [39.0, 39.0, 20.4],
        [87.7, 22.5, 19.0],
        [141.0, 45.0, 35.0],
        [282.0, 90.0, 70.0],
    ],
    // src/graph/tuning.cc:176-181 @b91894bd
    ring_ll128_per_channel: [
        [20.0, 20.0, 20.0],
        [20.0, 20.0, 20.0],
        [36.7, 36.7, 36.7],
        [40.0, 40.0, 40.0],
    ],
    // src/graph/tuning.cc:182-187 @b91894bd
    tree_ll128_per_channel: [
        [20.0, 20.0, 20.0],
        [20.0, 20.0, 20.0],
        [36.7, 36.7, 29.0],
        [55.6, 31.67, 20.0],
    ],
    // src/graph/tuning.cc:188-193 @b91894bd
    tree_per_channel: [
        [26.5, 18.5, 10.0],
        [24.0, 23.6, 17.8],
        [38.7, 41.4, 36.0],
        [70.0, 42.8, 24.0],
    ],
    // src/graph/tuning.cc:213-220 @b91894bd
    net_overhead_us: [1.0, 2.0],
    // src/graph/tuning.cc:581-585 @b91894bd
    tree_correction: TREE_CORRECTION,
    // src/graph/tuning.cc:597-600 @b91894bd
    ring_plateau_factor: [1.9, 1.4],
    // src/graph/search.cc:977-990, 1091-1095 @b91894bd
    speeds: [
        SPEEDS_INTRA,
        SPEEDS_INTER,
        SM90_SPEEDS_INTRA,
        SM90_SPEEDS_INTER,
        SM100_SPEEDS_INTRA,
        SM100_SPEEDS_INTER,
    ],
    // src/include/device.h:88 (MAXCHANNELS 64); src/init.cc:1093
    // (ring search maxChannels = MAXCHANNELS / 2) @b91894bd
    max_search_channels: 32,
    max_channels: 64,
    // src/include/device.h:92,94,111 @b91894bd
    max_threads: [512, 640, 512],
    // src/graph/topo.h:24 @b91894bd
    pci_bw: 12.0,
    // src/include/comm.h:45-47 @b91894bd
    thread_threshold: [8, 8, 64],
    // src/include/device.h:189 @b91894bd
    tree_arity: 3,
    newer: Some(&NEWER_2_29_7),
};

/// NCCL 2.29.7's NVLS, NVLS tree, CollNet and PAT constants.
pub static NEWER_2_29_7: NewerAlgorithms = NewerAlgorithms {
    // src/graph/tuning.cc:194-199 @b91894bd
    nvls_tree_per_channel: [
        [26.5, 18.5, 10.0],
        [24.0, 23.6, 17.8],
        [0.0, 57.7, 45.5],
        [0.0, 96.0, 43.8],
    ],
    // src/graph/tuning.cc:134-140 @b91894bd
    nvls_efficiency: [0.0, 0.0, 0.85, 0.74],
    // src/graph/tuning.cc:289 @b91894bd
    nvls_min_graph_channels: 2,
    // src/graph/tuning.cc:311 @b91894bd
    pat_bus_factor: 0.75,
    // src/graph/tuning.cc:399-400 @b91894bd
    pat_log_latency_divisor: 3.5,
    pat_latency_per_rank_us: 2.8,
    // src/graph/tuning.cc:205 @b91894bd
    pat_min_compute_capability: 60,
    // src/graph/tuning.cc:389 @b91894bd
    collnet_direct_arity_latency_us: 0.4,
    // src/graph/tuning.cc:322 @b91894bd
    collnet_direct_sm90_factor: 0.85,
    // src/graph/tuning.cc:316 @b91894bd
    collnet_agrs_inter_factor: 0.9,
    // src/include/device.h:196 (NCCL_MAX_DIRECT_ARITY 7, + 1);
    // src/enqueue.cc:1911-1913 @b91894bd
    collnet_max_local_ranks: 8,
    // src/init.cc:798 @b91894bd
    collnet_min_nodes: 2,
    // src/include/device.h:210; src/enqueue.cc:1914 @b91894bd
    nvls_max_local_ranks: 32,
    // src/transport/nvls.cc:149-151 @b91894bd (SM90 16, SM100 NVL 24, SM100 32)
    nvls_channels: [16, 24, 32],
    // src/transport/nvls.cc:154 @b91894bd
    nvls_chunk: 131_072,
    // src/enqueue.cc:2158 @b91894bd
    nvls_multinode_small_chunk: (32_768, 150.0),
    // src/enqueue.cc:2164-2166 @b91894bd
    nvls_chunk_steps: [(64, 65_536), (8, 32_768), (2, 16_384)],
    // src/enqueue.cc:2089,2175 @b91894bd
    nvls_tree_max_chunk_4_nodes: 65_536,
    // src/enqueue.cc:2177-2180 @b91894bd
    nvls_tree_chunk_steps: [(32, 262_144), (16, 131_072), (4, 65_536), (1, 32_768)],
    // src/enqueue.cc:2190-2193 @b91894bd
    pat_chunk_div: (32, 16, 65_536),
    // src/enqueue.cc:2149 @b91894bd
    collnet_chain_max_chunk: 262_144,
    // src/graph/tuning.cc:549-550 @b91894bd
    collnet_thread_threshold: 512,
    // src/include/device.h:90 @b91894bd
    max_threads_all: 640,
    // src/include/device.h:210; src/graph/search.cc:1065 @b91894bd
    nvls_max_heads: 32,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_by_their_names() {
        for v in NcclVersion::ALL {
            assert_eq!(NcclVersion::parse(v.name()), Some(v));
        }
        assert_eq!(NcclVersion::parse("2.21"), Some(NcclVersion::V2_21_5));
        assert_eq!(NcclVersion::parse("2.18.3"), None);
    }

    #[test]
    fn speed_arrays_are_decreasing() {
        for v in NcclVersion::ALL {
            for speeds in v.constants().speeds {
                assert!(speeds.windows(2).all(|w| w[0] > w[1]), "{speeds:?}");
            }
        }
    }

    #[test]
    fn only_2_29_7_knows_blackwell() {
        assert!(!NcclVersion::V2_21_5.supports(100));
        assert!(NcclVersion::V2_21_5.supports(90));
        assert!(NcclVersion::V2_29_7.supports(100));
        assert_eq!(NcclVersion::parse("2.29"), Some(NcclVersion::V2_29_7));
    }
}
