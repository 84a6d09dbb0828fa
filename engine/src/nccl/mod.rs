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

pub mod constants;
pub(crate) mod env;
pub mod heads;
pub mod machine;
pub mod model;
mod newer;
pub mod search;

use std::sync::Arc;

use algorithms::nccl::plan::binary_tree_node;
use algorithms::nccl::{ChannelPlan, Framing, NcclAlgorithm, Protocol, TreeNode};
use algorithms::{Collective, Rank};
use topologies::{Router, Topology, VertexId};

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

    /// One line describing NCCL on this machine, for report headers.
    pub fn describe(&self) -> String {
        let m = &self.machine;
        let cc = m.compute_capability;
        let g = &self.graph;
        let k = self.constants();
        let cpu = match self.config.cpu {
            CpuVendor::Intel => "Intel",
            CpuVendor::Amd => "AMD",
        };
        let modelled = if k.newer.is_some() { 7 } else { 2 };
        let algorithms = NcclAlgorithm::ALL[..modelled]
            .iter()
            .filter(|&&a| {
                self.config
                    .allowed
                    .algorithms
                    .iter()
                    .any(|f| f[model::a_index(a)])
            })
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(",");
        let protocols = ["LL", "LL128", "Simple"]
            .iter()
            .zip(&self.config.allowed.protocols)
            .filter(|(_, on)| **on)
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(",");
        let intra = if g.intra_nvlink { "NVLink" } else { "PCI" };
        let assumed = if self.config.compute_capability.is_none() && !m.has_nvlink {
            " (assumed: no NVLink tells the GPU; set [nccl] gpu)"
        } else {
            ""
        };
        let version_note =
            if self.config.version.is_none() && self.version != NcclVersion::default() {
                " (the default on Blackwell GPUs: 2.21.5 has no Blackwell tables)"
            } else {
                ""
            };
        let inter = if m.node_count() > 1 {
            format!(", NICs reached by {}", g.inter.name())
        } else {
            String::new()
        };
        let launch = if self.config.launch.gpus_per_process > 1 {
            format!(
                ", {} GPUs per process ({} us per launch)",
                self.config.launch.gpus_per_process, self.config.launch.launch_us
            )
        } else {
            String::new()
        };
        let newer = if k.newer.is_some() {
            self.describe_newer()
        } else {
            String::new()
        };
        format!(
            "NCCL {}{version_note} model: {} ranks on {} nodes, compute capability {}.{}{assumed}, {cpu} CPUs; \
             search: {} channels x {:.1} GB/s ({intra} inside nodes{inter}); {} channels at run time{newer}; \
             algorithms {algorithms}, protocols {protocols}{launch}",
            self.version,
            m.placement.len(),
            m.node_count(),
            cc / 10,
            cc % 10,
            g.channels,
            g.bw_intra,
            self.channels,
        )
    }

    /// The NVLS, CollNet and PAT part of [`Self::describe`].
    fn describe_newer(&self) -> String {
        let c = self.communicator();
        let nvls = match (&self.nvls, self.config.nvls_enable) {
            (_, Some(false)) => "off (NCCL_NVLS_ENABLE=0)".to_string(),
            (Some(g), _) => format!(
                "{} heads x {:.1} GB/s ({:.1} across nodes), {} channels",
                g.channels(),
                g.bw_intra,
                g.bw_inter,
                c.nvls_channels
            ),
            (None, _) => "none (needs an NVSwitch, compute capability 9.0+ and, across nodes, a GPU on each NIC's PCIe switch)".to_string(),
        };
        let collnet = match (c.collnet, &self.collnet_direct) {
            (true, Some(g)) => format!("on, direct with {} heads", g.channels()),
            (true, None) => "on, chain only (no NVSwitch)".to_string(),
            (false, _) if !self.config.collnet_enable => "off (NCCL_COLLNET_ENABLE=0)".to_string(),
            (false, _) if !self.config.network_reduces => {
                "off (the network does not reduce: [topology] sharp = false)".to_string()
            }
            (false, _) => "off (one node)".to_string(),
        };
        let pat = if c.pat {
            "on"
        } else {
            "off (needs one GPU per node)"
        };
        format!("; NVLS: {nvls}; CollNet: {collnet}; PAT: {pat}")
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

/// Microseconds to picoseconds, rounded.
fn us_to_ps(us: f64) -> u64 {
    (us * 1e6).round().max(0.0) as u64
}

/// `ncclTopoPostset`'s channel count: the graph's channels doubled, again
/// on multi-node Hopper or newer with fast rings below 16 (`connect.cc:474-476`
/// @b91894bd), capped at the version's `MAXCHANNELS`, then
/// `NCCL_MAX_NCHANNELS` and `NCCL_MIN_NCHANNELS` (`src/graph/connect.cc:443-472` @ab2b89c4).
fn runtime_channels(
    graph: &Graph,
    machine: &Machine,
    config: &NcclConfig,
    constants: &Constants,
) -> usize {
    let max = constants.max_channels;
    let mut n = (2 * graph.channels).min(max);
    if machine.compute_capability >= 90
        && machine.node_count() > 1
        && graph.bw_intra > 45.0
        && n < 16
    {
        n = (2 * n).min(max);
    }
    if let Some(m) = config.max_channels {
        n = n.min(m.max(1));
    }
    if let Some(m) = config.min_channels {
        n = n.max(m.min(max));
    }
    n.max(1)
}

/// The tree of one channel: each node's chain in `order` (entry first),
/// the nodes joined by tree `t` of the double binary tree (NCCL's
/// `BALANCED_TREE`: a node's first rank talks to its parent node and its
/// right child node, its second rank to its left child node; with one rank
/// per node, the `TREE` pattern, the first does everything).
fn tree_of(order: &[Vec<Rank>], t: u8, one_per_node: bool, n: usize) -> Vec<TreeNode> {
    let mut tree = vec![TreeNode::default(); n];
    for chain in order {
        for w in chain.windows(2) {
            tree[w[1]].parent = Some(w[0]);
            tree[w[0]].children.push(w[1]);
        }
    }
    let nodes = order.len();
    if nodes < 2 {
        return tree;
    }
    let head = |k: usize| order[k][0];
    let left_port = |k: usize| {
        if one_per_node || order[k].len() < 2 {
            order[k][0]
        } else {
            order[k][1]
        }
    };
    for k in 0..nodes {
        let (_, left, right) = binary_tree_node(nodes, t, k);
        if let Some(d0) = left {
            tree[head(d0)].parent = Some(left_port(k));
            tree[left_port(k)].children.push(head(d0));
        }
        if let Some(d1) = right {
            tree[head(d1)].parent = Some(head(k));
            tree[head(k)].children.push(head(d1));
        }
    }
    tree
}
