//! NCCL 2.29.7's model of NVLS, NVLS tree, CollNet direct and chain and
//! PAT (`src/graph/tuning.cc`, `src/enqueue.cc` @b91894bd; notation as
//! NCCL's). Versions without [`Constants::newer`](super::Constants::newer)
//! have none of them.
//!
//! - **Cells** (`tuning.cc:268-283`): allreduce has CollNet direct and
//!   chain, NVLS and NVLS tree; allgather and reduce-scatter CollNet
//!   direct, NVLS and PAT; broadcast and reduce none. All are Simple only.
//! - **Bandwidth** (`:285-352`): NVLS and NVLS tree take
//!   `min(bwIntra x nvlsEfficiency x (nCh - 1) / nCh x (2 for allreduce,
//!   else (ppn - 1) / ppn), bwInter (x 2 for NVLS tree on 2 nodes),
//!   perChMaxNVLSTreeBw for NVLS tree)` per channel, then `x nRanks /
//!   nsteps` for allreduce; PAT `0.75 x nCh x bw` of the tree graph with
//!   no conversion; CollNet `nCh x bwIntra`, direct divided by its
//!   GPU-to-NIC factor and x 0.85 from Hopper on, then x 0.5. Allgather
//!   and reduce-scatter by NVLS or CollNet direct across nodes need the
//!   CollNet plugin's `iallgather` / `ireducescatter`, which the model
//!   takes as absent (the SHARP plugin's support varies by version), so
//!   they are unavailable there.
//! - **Latency** (`:353-402`): NVLS `hwLat` 25 us over NVLink (+ the
//!   network's 18 across nodes); NVLS tree `25 + 2 log2i(nNodes) x 20.9`;
//!   CollNet direct `2 (min(1, P - 1) x intraLat + 0.4 (P - 1)) +
//!   interLat`; chain `2 (P - 1) x intraLat + interLat`; PAT `8 +
//!   log2i(nNodes) x interLat / 3.5 + 2.8 nRanks`.
//! - **Per-call filters** (`enqueue.cc:1908-1918`, `tuning.cc:464-476`):
//!   CollNet needs CollNet support and at most 8 GPUs per node, direct an
//!   NVSwitch; NVLS and NVLS tree need NVLS support, a reduction the switch
//!   does (allgather always), and outside allreduce at most 32 GPUs per
//!   node; NVLS across nodes needs CollNet; NVLS tree needs several nodes;
//!   PAT needs `ncclPatEnable` (the study also drops it for a
//!   reduce-scatter average, as `enqueue.cc:1917-1918` does).
//! - **Channels and threads** (`enqueue.cc:1977-2022`): NVLS runs
//!   `nvlsChannels` CTAs (across nodes at most the communicator's
//!   channels), CollNet direct reduces its channels in stages by heads,
//!   PAT keeps all channels (its `maxThreads` entry is never set,
//!   `tuning.cc:233-244`, so the decrement never runs) on 640 threads.
//! - **Chunks** (`enqueue.cc:2138-2193`): from the Simple step (512 KiB),
//!   NVLS capped at `NCCL_NVLS_CHUNKSIZE` (32 KiB across nodes below 150
//!   GB/s) then stepped down by `bytes / (channels x heads)`; NVLS tree
//!   likewise from its own cap; CollNet halved by depth; PAT halved while
//!   `chunk x channels x 32` (allgather; 16 reduce-scatter) exceeds the
//!   call.

use algorithms::Collective;
use algorithms::nccl::{NcclAlgorithm, Protocol};

use super::model::{Communicator, a_index, log2i, p_index};

/// Whether `c` is allgather or reduce-scatter.
fn ag_rs(c: Collective) -> bool {
    matches!(c, Collective::Allgather | Collective::ReduceScatter)
}

impl Communicator<'_> {
    /// The bandwidth table entry of a newer algorithm, GB/s (0: none).
    pub(super) fn newer_bandwidth(&self, c: Collective, a: NcclAlgorithm, p: Protocol) -> f64 {
        let Some(newer) = self.constants.newer else {
            return 0.0;
        };
        let computed = match c {
            Collective::Allreduce => a != NcclAlgorithm::Pat,
            Collective::Allgather | Collective::ReduceScatter => matches!(
                a,
                NcclAlgorithm::CollNetDirect | NcclAlgorithm::Nvls | NcclAlgorithm::Pat
            ),
            _ => false,
        };
        if !computed || p != Protocol::Simple {
            return 0.0;
        }
        let (ci, ni) = (self.arch(), self.node_column());
        let ppn = self.ppn();
        let n = self.ranks as f64;
        let bus = match a {
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree => {
                let Some(g) = self.nvls else {
                    return 0.0;
                };
                let n_ch = g.channels();
                if n_ch < newer.nvls_min_graph_channels {
                    return 0.0;
                }
                let mut intra =
                    g.bw_intra * newer.nvls_efficiency[ci] * (n_ch - 1) as f64 / n_ch as f64;
                if c == Collective::Allreduce {
                    intra *= 2.0;
                } else {
                    intra *= (ppn - 1.0) / ppn;
                }
                let tree = a == NcclAlgorithm::NvlsTree;
                let inter = g.bw_inter * if tree && self.nodes <= 2 { 2.0 } else { 1.0 };
                let cap = if tree {
                    newer.nvls_tree_per_channel[ci][ni]
                } else {
                    f64::INFINITY
                };
                n_ch as f64 * intra.min(inter).min(cap)
            }
            NcclAlgorithm::Pat => {
                let bw = if self.nodes <= 2 {
                    self.ring.bw_intra
                } else {
                    self.ring.bw_inter
                };
                self.ring.channels as f64 * bw * newer.pat_bus_factor
            }
            NcclAlgorithm::CollNetDirect => {
                let Some(g) = self.collnet_direct else {
                    return 0.0;
                };
                if ag_rs(c) {
                    ppn * g.bw_intra.min(g.bw_inter * newer.collnet_agrs_inter_factor)
                } else {
                    let mut factor = ppn / g.channels() as f64;
                    factor -= (factor - 1.0) / 2.0;
                    let mut bus = g.channels() as f64 * g.bw_intra / factor;
                    if self.compute_capability >= 90 {
                        bus *= newer.collnet_direct_sm90_factor;
                    }
                    bus
                }
            }
            NcclAlgorithm::CollNetChain => self.ring.channels as f64 * self.ring.bw_intra,
            NcclAlgorithm::Tree | NcclAlgorithm::Ring => return 0.0,
        };
        // Allgather and reduce-scatter across nodes by NVLS or CollNet
        // direct need the plugin's iallgather / ireducescatter (see the
        // module docs).
        if ag_rs(c)
            && self.nodes > 1
            && matches!(a, NcclAlgorithm::Nvls | NcclAlgorithm::CollNetDirect)
        {
            return 0.0;
        }
        if ag_rs(c) {
            return bus;
        }
        match a {
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree => bus * n / self.ring_steps(c) as f64,
            _ => bus * 0.5,
        }
    }

    /// The latency table entry of a newer algorithm, us.
    pub(super) fn newer_latency(&self, c: Collective, a: NcclAlgorithm, p: Protocol) -> f64 {
        let k = self.constants;
        let Some(newer) = k.newer else {
            return 0.0;
        };
        let (ai, pi) = (a_index(a), p_index(p));
        let base = k.base_latency_us[ai][pi];
        // NVLS and CollNet direct graphs run over the NVSwitch (NVLINK);
        // chain and PAT use the ring's and tree's graph.
        let hw = match a {
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree | NcclAlgorithm::CollNetDirect => 0,
            _ => self.intra_hw(),
        };
        let intra = k.hop_latency_us[hw][ai][pi];
        let inter = self.inter_latency(a, p);
        let per_node = (self.ranks / self.nodes) as f64;
        let log_nodes = log2i(self.nodes as u64) as f64;
        match a {
            NcclAlgorithm::CollNetDirect => {
                base + 2.0
                    * (f64::min(1.0, per_node - 1.0) * intra
                        + (per_node - 1.0) * newer.collnet_direct_arity_latency_us)
                    + inter
            }
            NcclAlgorithm::CollNetChain => base + 2.0 * (per_node - 1.0) * intra + inter,
            NcclAlgorithm::Nvls if self.nodes > 1 => intra + inter,
            NcclAlgorithm::Nvls => intra,
            NcclAlgorithm::NvlsTree => base + intra + 2.0 * log_nodes * inter,
            NcclAlgorithm::Pat if ag_rs(c) => {
                base + log_nodes * inter / newer.pat_log_latency_divisor
                    + self.ranks as f64 * newer.pat_latency_per_rank_us
            }
            _ => base,
        }
    }

    /// Whether a newer algorithm may run `c` here (the enable rules and
    /// per-call filters; Tree and Ring always may).
    pub(super) fn newer_available(&self, c: Collective, a: NcclAlgorithm) -> bool {
        let Some(newer) = self.constants.newer else {
            return matches!(a, NcclAlgorithm::Tree | NcclAlgorithm::Ring);
        };
        let collnet = self.collnet && self.max_local_ranks <= newer.collnet_max_local_ranks;
        let nvls = self.nvls.is_some()
            && (c == Collective::Allreduce || self.max_local_ranks <= newer.nvls_max_local_ranks)
            && (c == Collective::Allgather || self.nvls_reduces);
        match a {
            NcclAlgorithm::Tree | NcclAlgorithm::Ring => true,
            NcclAlgorithm::CollNetDirect => collnet && self.collnet_direct.is_some(),
            NcclAlgorithm::CollNetChain => collnet,
            NcclAlgorithm::Nvls => nvls && (self.nodes == 1 || self.collnet),
            NcclAlgorithm::NvlsTree => nvls && self.nodes > 1,
            NcclAlgorithm::Pat => self.pat,
        }
    }

    /// Head GPUs per node of `a`'s graph (0 for algorithms without heads).
    pub(super) fn heads(&self, a: NcclAlgorithm) -> usize {
        match a {
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree => self.nvls.map_or(0, |g| g.channels()),
            NcclAlgorithm::CollNetDirect => self.collnet_direct.map_or(0, |g| g.channels()),
            _ => 0,
        }
    }

    /// Channels and threads of a newer algorithm's call (`None`: Tree and
    /// Ring, which the common rule covers).
    pub(super) fn newer_channels_and_threads(
        &self,
        a: NcclAlgorithm,
        p: Protocol,
        bytes: u64,
    ) -> Option<(usize, u32)> {
        let newer = self.constants.newer?;
        let nt = newer.max_threads_all;
        let channels = self.channels.max(1);
        let shape = match a {
            NcclAlgorithm::Tree | NcclAlgorithm::Ring => return None,
            NcclAlgorithm::Nvls if self.nodes > 1 => (self.nvls_channels.min(channels), nt),
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree => (self.nvls_channels, nt),
            NcclAlgorithm::Pat => (channels, nt),
            NcclAlgorithm::CollNetDirect => {
                let heads = self.heads(a).max(1) as u64;
                let mut threshold = newer.collnet_thread_threshold;
                let mut nc = channels;
                let mut switch = 16;
                let mut short = true;
                while switch >= 1 && short {
                    loop {
                        short = bytes < nc as u64 * u64::from(nt) * heads * threshold;
                        if !(short && nc > switch) {
                            break;
                        }
                        if nc == switch + switch / 2 {
                            threshold /= 2;
                        }
                        nc -= 1;
                    }
                    switch /= 2;
                }
                (nc, nt)
            }
            NcclAlgorithm::CollNetChain => {
                let threshold = if p == Protocol::Simple {
                    newer.collnet_thread_threshold
                } else {
                    self.constants.thread_threshold[p_index(p)]
                };
                let mut nc = channels;
                let mut nt = nt;
                while bytes < nc as u64 * u64::from(nt) * threshold && nc >= 2 {
                    nc -= 1;
                }
                while bytes < nc as u64 * u64::from(nt) * threshold && nt.is_multiple_of(128) {
                    nt /= 2;
                }
                (nc, nt.max(96))
            }
        };
        Some(shape)
    }

    /// The chunk of a newer algorithm's call of `bytes` on `channels`.
    pub(super) fn newer_chunk_bytes(
        &self,
        c: Collective,
        a: NcclAlgorithm,
        bytes: u64,
        channels: usize,
    ) -> u64 {
        let step = Protocol::Simple.tree_pipeline().0;
        let Some(newer) = self.constants.newer else {
            return step;
        };
        let nc = channels.max(1) as u64;
        let heads = self.heads(a).max(1) as u64;
        let mut chunk = step;
        match a {
            NcclAlgorithm::CollNetDirect => {
                let depth = if self.ranks > self.nodes { 2 } else { 1 };
                let per = |chunk: u64| bytes / (nc * heads * chunk);
                while per(chunk) < depth * 64 && chunk > 131_072 {
                    chunk /= 2;
                }
                while per(chunk) < depth * 8 && chunk > 65_536 {
                    chunk /= 2;
                }
                while per(chunk) < depth * 8 && chunk > 32_768 {
                    chunk /= 2;
                }
            }
            NcclAlgorithm::CollNetChain => {
                chunk = chunk.min(newer.collnet_chain_max_chunk);
                let depth = (self.ranks / self.nodes) as u64;
                let per = |chunk: u64| bytes / (nc * chunk);
                while per(chunk) < depth * 64 && chunk > 131_072 {
                    chunk /= 2;
                }
                while per(chunk) < depth * 8 && chunk > 65_536 {
                    chunk /= 2;
                }
                while per(chunk) < depth && chunk > 32_768 {
                    chunk /= 2;
                }
            }
            NcclAlgorithm::Nvls => {
                let (small, below) = newer.nvls_multinode_small_chunk;
                let mut max = newer.nvls_chunk;
                if self.nodes > 1
                    && self.newer_bandwidth(Collective::Allreduce, a, Protocol::Simple) < below
                {
                    max = small;
                }
                chunk = chunk.min(max);
                for (k, to) in newer.nvls_chunk_steps {
                    if bytes < k * nc * heads * chunk && chunk > to {
                        chunk = to;
                    }
                }
            }
            NcclAlgorithm::NvlsTree => {
                chunk = newer.nvls_chunk;
                if self.nodes >= 4 {
                    chunk = chunk.min(newer.nvls_tree_max_chunk_4_nodes);
                }
                for (k, to) in newer.nvls_tree_chunk_steps {
                    if bytes < k * nc * heads * chunk && chunk > to {
                        chunk = to;
                    }
                }
            }
            NcclAlgorithm::Pat => {
                let (ag, rs, floor) = newer.pat_chunk_div;
                let div = if c == Collective::ReduceScatter {
                    rs
                } else {
                    ag
                };
                while chunk * nc * div > bytes && chunk > floor {
                    chunk /= 2;
                }
            }
            NcclAlgorithm::Tree | NcclAlgorithm::Ring => {}
        }
        chunk
    }
}
