//! NCCL's tuning constants, per pinned NCCL version.
//!
//! Every figure is read from NCCL's source at the version's tag, file and
//! line cited beside it; none is fitted to a measurement. Version 2.21.5
//! is tag `v2.21.5-1`, commit `ab2b89c4c339bd7f816fbc114a4b05d386b66290`
//! ("@ab2b89c4" below). Adding a version means adding a [`NcclVersion`]
//! and its [`Constants`].
//!
//! Units are NCCL's: latencies in microseconds, bandwidths in GB/s (1 GB/s
//! = 1000 bytes per microsecond). Array indices follow NCCL's enums:
//! algorithms Tree = 0, Ring = 1; protocols LL = 0, LL128 = 1, Simple = 2
//! (`src/include/nccl_common.h:17-41`); hardware classes NVLINK = 0,
//! PCI = 1, NET = 2; GPU architecture rows Volta = 0, Ampere = 1,
//! Hopper = 2 (`src/graph/tuning.cc:80-83`).

use std::fmt;

/// A NCCL version whose tuning model the simulator knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NcclVersion {
    /// NCCL 2.21.5 (`v2.21.5-1`, commit `ab2b89c4`).
    #[default]
    V2_21_5,
}

impl NcclVersion {
    /// Every known version.
    pub const ALL: [NcclVersion; 1] = [NcclVersion::V2_21_5];

    /// The name scenarios use: `"2.21.5"`.
    pub fn name(self) -> &'static str {
        match self {
            NcclVersion::V2_21_5 => "2.21.5",
        }
    }

    /// The version a scenario names (`"2.21.5"`, also `"2.21"`).
    pub fn parse(name: &str) -> Option<NcclVersion> {
        match name.trim_start_matches('v') {
            "2.21.5" | "2.21" | "2.21.5-1" => Some(NcclVersion::V2_21_5),
            _ => None,
        }
    }

    /// Its tuning constants.
    pub fn constants(self) -> &'static Constants {
        match self {
            NcclVersion::V2_21_5 => &V2_21_5,
        }
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One version's tuning model constants (see the module docs for units
/// and indices).
#[derive(Clone, Debug, PartialEq)]
pub struct Constants {
    /// `baseLat[algo][proto]`, us: a call's fixed cost.
    pub base_latency_us: [[f64; 3]; 2],
    /// `hwLat[hw][algo][proto]`, us: the cost of one step over one hop.
    pub hop_latency_us: [[[f64; 3]; 2]; 3],
    /// `llMaxBws[row][nodes]`, GB/s: LL's whole-communicator cap; rows are
    /// the architecture on one node, else 0 for Intel and 1 for AMD CPUs;
    /// columns 1, 2 and 3+ nodes.
    pub ll_max_bw: [[f64; 3]; 3],
    /// `perChMaxRingLL128Bws[arch][nodes]`, GB/s per channel.
    pub ring_ll128_per_channel: [[f64; 3]; 3],
    /// `perChMaxTreeLL128Bws[arch][nodes]`, GB/s per channel.
    pub tree_ll128_per_channel: [[f64; 3]; 3],
    /// `perChMaxTreeBws[arch][nodes]`, GB/s per channel.
    pub tree_per_channel: [[f64; 3]; 3],
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
    /// Hopper within a node, before Hopper across nodes, Hopper within a
    /// node, Hopper across nodes.
    pub speeds: [&'static [f64]; 4],
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
}

/// NCCL 2.21.5's constants.
pub static V2_21_5: Constants = Constants {
    // src/graph/tuning.cc:56-59 @ab2b89c4
    base_latency_us: [[6.8, 14.0, 0.0], [6.6, 14.0, 8.4]],
    // src/graph/tuning.cc:61-78 @ab2b89c4
    hop_latency_us: [
        [[0.6, 1.25, 28.0], [0.6, 1.9, 3.4]],
        [[1.0, 1.9, 28.0], [1.0, 2.5, 5.7]],
        [[5.0, 8.5, 28.0], [2.7, 4.0, 14.0]],
    ],
    // src/graph/tuning.cc:86-90 @ab2b89c4
    ll_max_bw: [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], [141.0, 45.0, 35.0]],
    // src/graph/tuning.cc:92-106 @ab2b89c4
    ring_ll128_per_channel: [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7]],
    tree_ll128_per_channel: [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0]],
    tree_per_channel: [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0]],
    // src/graph/tuning.cc:108-118 @ab2b89c4
    net_overhead_us: [1.0, 2.0],
    // src/graph/tuning.cc:412-416 @ab2b89c4
    tree_correction: [
        [
            1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7,
            0.8, 0.9, 1.0, 1.0, 1.0, 1.0,
        ],
        [
            1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8,
            0.9, 0.9, 0.9, 0.9, 1.0, 1.0,
        ],
        [
            0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7,
            0.8, 0.7, 0.7, 0.8, 0.9, 0.9,
        ],
    ],
    // src/graph/tuning.cc:437-440 @ab2b89c4
    ring_plateau_factor: [1.9, 1.4],
    // src/graph/search.cc:850-858 @ab2b89c4
    speeds: [
        &[
            40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
        ],
        &[
            48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
            2.4, 1.2, 0.24, 0.12,
        ],
        &[
            60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
        ],
        &[
            48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
            0.24, 0.12,
        ],
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
        for speeds in V2_21_5.speeds {
            assert!(speeds.windows(2).all(|w| w[0] > w[1]), "{speeds:?}");
        }
    }
}
