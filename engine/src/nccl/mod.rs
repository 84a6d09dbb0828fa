//! The NCCL model: what NCCL would do on a simulated machine, so that a
//! topology scenario predicts what a user's NCCL job does.
//!
//! - [`constants`]: NCCL's tuning constants per pinned version, cited.
//! - [`machine`]: what NCCL's topology detection sees (nodes, GPUs, NICs,
//!   path types, GPU architecture).
//! - [`search`]: NCCL's channel search, simplified: channels, their speed,
//!   each channel's order through every node and its NIC.
//! - [`heads`]: the NVLS and CollNet direct graphs: head GPUs and their
//!   bandwidths.
//! - [`model`]: NCCL's tuning model: predicted time per algorithm and
//!   protocol, NCCL's choice, channels and threads per call; `newer.rs`
//!   adds 2.29.7's NVLS, NVLS tree, CollNet and PAT.
//!
//! The version is the scenario's, else 2.21.5, except on Blackwell GPUs
//! (compute capability 10.0 and up), which only 2.29.7's tables know: there
//! it defaults to 2.29.7 (and [`NcclSystem::describe`] says so).
//!
//! [`NcclSystem`] puts them together for one scenario: the
//! [`ChannelPlan`] the `nccl_ring` and `nccl_tree` algorithms run on
//! (through [`SimFabric`](crate::SimFabric)), NCCL's choice for each size,
//! and the mechanisms the simulator charges: each call's base latency
//! (`baseLat`) before it starts, each message's per-hop latency
//! (`hwLat`, beyond what the modelled links already take), the protocol's
//! wire bytes, and each channel's inter-node traffic pinned to its NIC.
//! Its pieces: `channels.rs` (the run-time channel count and each
//! channel's tree), `latency.rs` (the latencies charged per call and per
//! hop), `describe.rs` (the line report headers print).

mod channels;
pub mod constants;
mod describe;
pub(crate) mod env;
pub mod heads;
mod latency;
pub mod machine;
pub mod model;
mod newer;
pub mod search;

use std::sync::Arc;

use algorithms::nccl::{ChannelPlan, NcclAlgorithm};
use algorithms::{Collective, Rank};
use topologies::{Router, Topology, VertexId};

use channels::{runtime_channels, tree_of};

pub use constants::{Constants, NcclVersion};
pub use env::registry_name;
pub use heads::HeadGraph;
pub use machine::{Machine, PathType};
pub use model::{Allowed, Choice, Communicator, Table};
pub use search::Graph;

/// The CPU vendor NCCL's model distinguishes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuVendor {
    /// Intel (and anything not AMD).
    #[default]
    Intel,
    /// AMD.
    Amd,
}

/// How the ranks' processes launch their kernels (nccl-tests `-g`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Launch {
    /// GPUs each process drives (nccl-tests `-g`; 1: one process per GPU).
    pub gpus_per_process: usize,
    /// Host time to launch one GPU's kernel, us: a process driving several
    /// GPUs launches them one after another, so its `k`-th GPU starts
    /// `k x launch_us` late.
    pub launch_us: f64,
}

impl Default for Launch {
    /// One process per GPU; 5 us per launch (an estimate of a CUDA kernel
    /// launch's host cost, a few microseconds; calibrate it against your
    /// own `-g` runs).
    fn default() -> Self {
        Launch {
            gpus_per_process: 1,
            launch_us: 5.0,
        }
    }
}

/// A scenario's `[nccl]` settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NcclConfig {
    /// The pinned NCCL version (`None`: 2.21.5, or 2.29.7 on Blackwell
    /// GPUs, which 2.21.5 does not know).
    pub version: Option<NcclVersion>,
    /// The GPUs' compute capability x 10, if the scenario names the GPU
    /// (otherwise implied by the NVLink generation).
    pub compute_capability: Option<u32>,
    /// The CPUs' vendor.
    pub cpu: CpuVendor,
    /// `NCCL_ALGO` and `NCCL_PROTO`.
    pub allowed: Allowed,
    /// `NCCL_MIN_NCHANNELS`.
    pub min_channels: Option<usize>,
    /// `NCCL_MAX_NCHANNELS`.
    pub max_channels: Option<usize>,
    /// Process layout.
    pub launch: Launch,
    /// `NCCL_NVLS_ENABLE`: `Some(false)` turns NVLS off; otherwise NVLS
    /// runs where the hardware has it (an NVSwitch, compute capability
    /// 9.0 or more).
    pub nvls_enable: Option<bool>,
    /// `NCCL_NVLS_NCHANNELS`: NVLS's CTAs (default 16 on Hopper, 24 on
    /// Blackwell within one node, 32 across nodes), clamped to 1..64.
    pub nvls_channels: Option<usize>,
    /// `NCCL_COLLNET_ENABLE` (default off, as in NCCL).
    pub collnet_enable: bool,
    /// Whether the network's switches reduce (SHARP): CollNet, and NVLS
    /// across nodes, need it. [`NcclSystem::build`] sets it from the
    /// topology (`[topology] sharp = true`).
    pub network_reduces: bool,
    /// `NCCL_PAT_ENABLE`: `Some(false)` turns PAT off; otherwise PAT runs
    /// with one GPU per node (the only layout NCCL builds PAT's
    /// connections for, `src/init.cc:1381` @b91894bd).
    pub pat_enable: Option<bool>,
}

impl NcclConfig {
    /// The version NCCL runs on GPUs of compute capability `cc` (x 10):
    /// the pinned one, else 2.21.5 before Blackwell and 2.29.7 from it.
    pub fn version_for(&self, cc: u32) -> NcclVersion {
        self.version.unwrap_or(if cc >= 100 {
            NcclVersion::V2_29_7
        } else {
            NcclVersion::V2_21_5
        })
    }
}

/// How a hop is classified for NCCL's per-hop latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HopClass {
    /// NVLink only.
    NvLink,
    /// Within a node, not NVLink only.
    Pci,
    /// Across the network.
    Net,
}

impl HopClass {
    fn index(self) -> usize {
        match self {
            HopClass::NvLink => 0,
            HopClass::Pci => 1,
            HopClass::Net => 2,
        }
    }
}

/// NCCL on one simulated machine (see the module docs).
#[derive(Clone, Debug)]
pub struct NcclSystem {
    /// The scenario's settings.
    pub config: NcclConfig,
    /// The NCCL version modelled (the scenario's, or its default).
    pub version: NcclVersion,
    /// The machine as NCCL sees it.
    pub machine: Machine,
    /// The ring graph NCCL's search finds.
    pub graph: Graph,
    /// The NVLS graph (versions that model NVLS, NVSwitch machines).
    pub nvls: Option<HeadGraph>,
    /// The CollNet direct graph (versions that model CollNet, multi-node
    /// NVSwitch machines with NIC-local GPUs).
    pub collnet_direct: Option<HeadGraph>,
    /// The communicator's channels (`collChannels`).
    pub channels: usize,
    /// The channels' rings and trees.
    pub plan: Arc<ChannelPlan>,
    /// `nic[c][node]`: the NIC runtime channel `c` uses on each node.
    nic: Vec<Vec<Option<VertexId>>>,
}

impl NcclSystem {
    /// NCCL on `topology` with ranks on `placement`, routes from `router`.
    pub fn build(
        topology: &Topology,
        placement: &[VertexId],
        router: &mut Router,
        mut config: NcclConfig,
    ) -> NcclSystem {
        // SHARP: a network switch (not an NVSwitch, which is NVLS's) that
        // reduces in the network (`[topology] sharp = true`).
        config.network_reduces = topology.vertex_ids().any(|v| {
            topology.vertex(v).kind != topologies::VertexKind::NvSwitch
                && topology.reduces_in_network(v)
        });
        let machine = Machine::detect(topology, placement, config.compute_capability);
        let version = config.version_for(machine.compute_capability);
        let constants = version.constants();
        let graph = search::search(topology, router, &machine, constants);
        let nvls = heads::nvls_graph(topology, router, &machine, constants);
        let collnet_direct = heads::collnet_direct_graph(topology, router, &machine, constants);
        let channels = runtime_channels(&graph, &machine, &config, constants);
        let g = graph.channels.max(1);
        let rings = (0..channels)
            .map(|c| graph.order[c % g].iter().flatten().copied().collect())
            .collect();
        let one_per_node = machine.ranks_per_node() == 1;
        // The tree's chain through a node starts at the channel's entry GPU
        // and then takes the GPU the ring leaves from (next to the same
        // NIC), so both GPUs a node's tree edges use reach the NIC
        // directly (NCCL's tree search starts from the NIC too).
        let trees = (0..channels)
            .map(|c| {
                let chains: Vec<Vec<Rank>> = graph.order[c % g]
                    .iter()
                    .map(|ring| match ring.as_slice() {
                        [entry, middle @ .., exit] if !middle.is_empty() => [*entry, *exit]
                            .into_iter()
                            .chain(middle.iter().copied())
                            .collect(),
                        other => other.to_vec(),
                    })
                    .collect();
                tree_of(&chains, (c / g % 2) as u8, one_per_node, placement.len())
            })
            .collect();
        let nic = (0..channels).map(|c| graph.nic[c % g].clone()).collect();
        NcclSystem {
            config,
            version,
            machine,
            graph,
            nvls,
            collnet_direct,
            channels,
            plan: Arc::new(ChannelPlan { rings, trees }),
            nic,
        }
    }

    /// The version's constants.
    pub fn constants(&self) -> &'static Constants {
        self.version.constants()
    }

    /// The communicator NCCL's model prices calls on.
    pub fn communicator(&self) -> Communicator<'_> {
        let k = self.constants();
        let m = &self.machine;
        let (ranks, nodes) = (m.placement.len(), m.node_count());
        let newer = k.newer;
        let collnet = newer.is_some_and(|n| {
            self.config.collnet_enable
                && self.config.network_reduces
                && nodes >= n.collnet_min_nodes
        });
        let nvls_channels = match (self.config.nvls_channels, newer) {
            (Some(c), _) => c.clamp(1, k.max_channels),
            (None, Some(n)) if m.compute_capability >= 100 => {
                n.nvls_channels[if nodes == 1 { 1 } else { 2 }]
            }
            (None, Some(n)) => n.nvls_channels[0],
            (None, None) => 0,
        };
        Communicator {
            constants: k,
            ranks,
            nodes,
            compute_capability: m.compute_capability,
            amd_cpu: self.config.cpu == CpuVendor::Amd,
            ring: &self.graph,
            tree_pattern: m.ranks_per_node() == 1,
            channels: self.channels,
            allowed: self.config.allowed,
            max_local_ranks: m.nodes.iter().map(|n| n.ranks.len()).max().unwrap_or(1),
            nvls: self
                .nvls
                .as_ref()
                .filter(|_| self.config.nvls_enable != Some(false)),
            nvls_channels,
            nvls_reduces: true,
            collnet,
            collnet_direct: self.collnet_direct.as_ref().filter(|_| collnet),
            pat: newer.is_some_and(|n| {
                m.compute_capability >= n.pat_min_compute_capability
                    && self.config.pat_enable != Some(false)
                    && ranks == nodes
            }),
        }
    }

    /// The head GPUs of `algorithm` on every node, as ranks:
    /// `heads[node][h]`, head `h` owning the `h`-th share of every chunk
    /// (NVLS and NVLS tree: the NVLS graph's heads; CollNet direct: its
    /// NIC-local heads; empty for the other algorithms). Nodes with fewer
    /// GPUs than the first node's head index have no such head.
    pub fn heads(&self, algorithm: NcclAlgorithm) -> Vec<Vec<Rank>> {
        let graph = match algorithm {
            NcclAlgorithm::Nvls | NcclAlgorithm::NvlsTree => self.nvls.as_ref(),
            NcclAlgorithm::CollNetDirect => self.collnet_direct.as_ref(),
            _ => None,
        };
        let Some(graph) = graph else {
            return Vec::new();
        };
        self.machine
            .nodes
            .iter()
            .map(|node| {
                graph
                    .heads
                    .iter()
                    .filter_map(|&h| node.ranks.get(h).copied())
                    .collect()
            })
            .collect()
    }

    /// NCCL's predicted time of every algorithm and protocol for
    /// `collective` on a buffer of `size_bytes` (as [`Self::choose`]
    /// takes it), us, `None` where unavailable.
    pub fn table(&self, collective: Collective, size_bytes: u64) -> Table {
        self.communicator().table(collective, size_bytes)
    }

    /// NCCL's choice for `collective` on a buffer of `size_bytes` (the
    /// whole buffer, as reports give sizes) of `elem_bytes` elements.
    pub fn choose(&self, collective: Collective, size_bytes: u64, elem_bytes: u64) -> Choice {
        let n = self.machine.placement.len() as u64;
        let work = match collective {
            Collective::Allgather | Collective::ReduceScatter => size_bytes / n.max(1),
            _ => size_bytes,
        };
        self.communicator()
            .choose(collective, size_bytes, work, elem_bytes)
    }

    /// The NICs a message of `channel` from `src` to `dst` crosses, when
    /// they are on different nodes: `(src's node's NIC, dst's node's)`.
    pub fn nics(&self, src: Rank, dst: Rank, channel: u16) -> Option<(VertexId, VertexId)> {
        let (a, b) = (self.machine.node_of[src], self.machine.node_of[dst]);
        if a == b {
            return None;
        }
        let per_node = self.nic.get(channel as usize % self.nic.len().max(1))?;
        Some((per_node[a]?, per_node[b]?))
    }

    /// The NIC runtime channel `channel` crosses node `node` through, if
    /// it has one there.
    pub fn channel_nic(&self, channel: usize, node: usize) -> Option<VertexId> {
        let per_node = self.nic.get(channel % self.nic.len().max(1))?;
        per_node.get(node).copied().flatten()
    }

    /// The GPU next to `nic` that proxies a far GPU's sends to it (NCCL's
    /// PXN): the rank entering the node through it on some channel.
    pub fn proxy(&self, nic: VertexId) -> Option<VertexId> {
        let c = self
            .nic
            .iter()
            .position(|per_node| per_node.contains(&Some(nic)))?;
        let node = self.nic[c].iter().position(|&v| v == Some(nic))?;
        let g = self.graph.channels.max(1);
        let entry = *self.graph.order[c % g][node].first()?;
        Some(self.machine.placement[entry])
    }
}
