//! The ring's and the tree's entries of NCCL's bandwidth and latency
//! tables (`tuning.cc:157-263` @ab2b89c4, `:285-402` @b91894bd): the
//! protocols' efficiencies and caps, the algorithm bandwidth, and the
//! latency of the steps inside and across nodes. The newer algorithms'
//! entries are in `newer.rs`.

use algorithms::Collective;
use algorithms::nccl::{NcclAlgorithm, Protocol};

use super::{Communicator, a_index, log2i, p_index};
use crate::nccl::constants::Rules;

impl Communicator<'_> {
    /// The LL cap `llMaxBw`.
    fn ll_max(&self) -> f64 {
        let row = if self.nodes == 1 {
            self.arch()
        } else {
            usize::from(self.amd_cpu)
        };
        self.constants.ll_max_bw[row][self.node_column()]
    }

    /// Steps across nodes (`nInterSteps`): ring allreduce crosses
    /// `2 x nNodes` times in 2.21.5, `2 x (nNodes - 1)` in 2.29.7.
    fn inter_steps(&self, collective: Collective) -> usize {
        let nodes = self.nodes;
        match collective {
            Collective::Allreduce if nodes > 1 => match self.constants.rules {
                Rules::V2_21 => 2 * nodes,
                Rules::V2_29 => 2 * (nodes - 1),
            },
            Collective::Allreduce => 0,
            Collective::Allgather | Collective::ReduceScatter => nodes - 1,
            _ => nodes,
        }
    }

    /// The bandwidth table entry, GB/s, before the enable masks (0 when
    /// the collective has no such algorithm).
    pub fn bandwidth(&self, collective: Collective, a: NcclAlgorithm, p: Protocol) -> f64 {
        match a {
            NcclAlgorithm::Tree | NcclAlgorithm::Ring => self.ring_tree_bandwidth(collective, a, p),
            _ => self.newer_bandwidth(collective, a, p),
        }
    }

    /// The ring's and the tree's bandwidth (`tuning.cc:157-223` @ab2b89c4,
    /// `:285-352` @b91894bd).
    fn ring_tree_bandwidth(&self, collective: Collective, a: NcclAlgorithm, p: Protocol) -> f64 {
        if a == NcclAlgorithm::Tree && collective != Collective::Allreduce {
            return 0.0;
        }
        let k = self.constants;
        let (ci, ni) = (self.arch(), self.node_column());
        let n_ch = self.ring.channels as f64;
        let per_channel = if self.nodes <= 2 {
            self.ring.bw_intra
        } else {
            self.ring.bw_inter
        };
        let ppn = self.ppn();
        let mut bus = n_ch * per_channel;
        match (a, p) {
            (NcclAlgorithm::Ring, Protocol::Ll) => bus = f64::min(self.ll_max(), 0.5 * bus),
            (NcclAlgorithm::Ring, Protocol::Ll128) => {
                let eff = if ppn < 2.0 && k.rules == Rules::V2_21 {
                    0.7
                } else {
                    0.92
                };
                bus = f64::min(bus * eff, n_ch * k.ring_ll128_per_channel[ci][ni]);
            }
            (NcclAlgorithm::Ring, Protocol::Simple) => {}
            (_, _) => {
                bus = f64::min(bus * 0.92, n_ch * k.tree_per_channel[ci][ni]);
                match p {
                    Protocol::Ll => bus = f64::min(bus / 3.8, self.ll_max()),
                    Protocol::Ll128 => {
                        let eff = if self.nodes == 1 {
                            7.0 / 9.0
                        } else {
                            120.0 / 128.0
                        };
                        bus = f64::min(bus * eff, n_ch * k.tree_ll128_per_channel[ci][ni]);
                    }
                    Protocol::Simple => {}
                }
                if self.tree_pattern {
                    bus *= 0.85;
                }
            }
        }
        match a {
            NcclAlgorithm::Ring => bus * self.ranks as f64 / self.ring_steps(collective) as f64,
            _ => bus * 0.5,
        }
    }

    /// The latency table entry, us (`tuning.cc:225-263` @ab2b89c4,
    /// `:353-402` @b91894bd).
    pub fn latency(&self, collective: Collective, a: NcclAlgorithm, p: Protocol) -> f64 {
        let k = self.constants;
        let (ai, pi) = (a_index(a), p_index(p));
        let base = k.base_latency_us[ai][pi];
        let intra = k.hop_latency_us[self.intra_hw()][ai][pi];
        let inter = self.inter_latency(a, p);
        match a {
            NcclAlgorithm::Ring
                if matches!(collective, Collective::Broadcast | Collective::Reduce) =>
            {
                // sameChannels: one step's latency on the graph's hardware.
                let hw = if self.nodes == 1 { self.intra_hw() } else { 2 };
                base + k.hop_latency_us[hw][1][pi]
            }
            NcclAlgorithm::Ring => {
                let overhead = if self.nodes == 1 {
                    0.0
                } else {
                    let per_step = k.net_overhead_us[usize::from(self.amd_cpu)];
                    if p == Protocol::Simple {
                        3.0 * per_step
                    } else {
                        per_step
                    }
                };
                let steps = self.ring_steps(collective);
                let net = self.inter_steps(collective);
                base + (steps - net.min(steps)) as f64 * f64::max(intra, overhead)
                    + net as f64 * inter
            }
            NcclAlgorithm::Tree => {
                let per_node = self.ranks / self.nodes;
                base + 2.0
                    * ((per_node - 1) as f64 * intra + log2i(self.nodes as u64) as f64 * inter)
            }
            _ => self.newer_latency(collective, a, p),
        }
    }
}
