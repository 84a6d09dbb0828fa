//! The latencies the simulator charges for NCCL beyond its modelled links:
//! a call's base latency (`baseLat`, and the switch steps NVLS and CollNet
//! pay once per call), a multi-GPU process's launch skew, and the per-hop
//! latency (`hwLat`) of a framed message.

use algorithms::Rank;
use algorithms::nccl::{Framing, NcclAlgorithm, Protocol};

use super::{CpuVendor, HopClass, NcclSystem, constants, model};

impl NcclSystem {
    /// NCCL's base latency of a call (`baseLat`), ps.
    ///
    /// The steps that reduce in a switch carry no framed hop to charge, so
    /// their latency is charged here, once per call, as NCCL's model counts
    /// it (`tuning.cc:387-396` @b91894bd): NVLS pays the NVLink row in
    /// place of a base latency, and the network row across nodes; CollNet
    /// pays the network row (its in-node hops are framed and charged per
    /// hop); NVLS tree pays its base, the NVLink row and the network row
    /// twice per level of its tree over nodes (`tuning.cc:395-396`: its
    /// tree's messages are not framed).
    pub fn call_latency_ps(&self, algorithm: NcclAlgorithm, protocol: Protocol) -> u64 {
        let k = self.constants();
        let (a, p) = (model::a_index(algorithm), model::p_index(protocol));
        let (nvlink, net) = (HopClass::NvLink.index(), HopClass::Net.index());
        let multi_node = self.machine.node_count() > 1;
        let switch_us = match algorithm {
            NcclAlgorithm::Nvls => {
                k.hop_latency_us[nvlink][a][p]
                    + if multi_node {
                        k.hop_latency_us[net][a][p]
                    } else {
                        0.0
                    }
            }
            NcclAlgorithm::CollNetDirect | NcclAlgorithm::CollNetChain => {
                k.hop_latency_us[net][a][p]
            }
            NcclAlgorithm::NvlsTree => {
                k.hop_latency_us[nvlink][a][p]
                    + 2.0
                        * model::log2i(self.machine.node_count() as u64) as f64
                        * k.hop_latency_us[net][a][p]
            }
            _ => 0.0,
        };
        us_to_ps(k.base_latency_us[a][p] + switch_us)
    }

    /// How late `rank`'s kernel starts when one process drives several
    /// GPUs: its index among its process's GPUs times the launch cost, ps.
    pub fn launch_skew_ps(&self, rank: Rank) -> u64 {
        let launch = self.config.launch;
        if launch.gpus_per_process <= 1 {
            return 0;
        }
        let node = &self.machine.nodes[self.machine.node_of[rank]];
        let local = node.ranks.iter().position(|&r| r == rank).unwrap_or(0);
        us_to_ps((local % launch.gpus_per_process) as f64 * launch.launch_us)
    }

    /// The latency NCCL charges one step of `framing` over a hop of
    /// `class`, beyond the `idle_ps` the modelled links already take, ps.
    pub fn hop_extra_ps(&self, framing: Framing, class: HopClass, idle_ps: u64) -> u64 {
        let k = self.constants();
        let (a, p) = (
            model::a_index(framing.algorithm),
            model::p_index(framing.protocol),
        );
        // 2.29.7 charges the tree's network row with one rank per node
        // (`tuning.cc:357` @b91894bd).
        let one_per_node = self.machine.ranks_per_node() == 1
            && self.machine.nodes.iter().all(|n| n.ranks.len() == 1);
        let row = if class == HopClass::Net && k.rules == constants::Rules::V2_29 && one_per_node {
            0
        } else {
            a
        };
        let mut us = k.hop_latency_us[class.index()][row][p];
        if framing.algorithm == NcclAlgorithm::Ring
            && class != HopClass::Net
            && self.machine.node_count() > 1
        {
            let overhead = k.net_overhead_us[usize::from(self.config.cpu == CpuVendor::Amd)];
            let factor = if framing.protocol == Protocol::Simple {
                3.0
            } else {
                1.0
            };
            us = us.max(overhead * factor);
        }
        us_to_ps(us).saturating_sub(idle_ps)
    }
}

/// Microseconds to picoseconds, rounded.
fn us_to_ps(us: f64) -> u64 {
    (us * 1e6).round().max(0.0) as u64
}
