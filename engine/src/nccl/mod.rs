//! The NCCL model: what NCCL would do on a simulated machine, so that a
//! topology scenario predicts what a user's NCCL job does.
//!
//! - [`constants`]: NCCL's tuning constants per pinned version, cited.
//! - [`machine`]: what NCCL's topology detection sees (nodes, GPUs, NICs,
//!   path types, GPU architecture).
//! - [`search`]: NCCL's channel search, simplified: channels, their speed,
//!   each channel's order through every node and its NIC.
//! - [`model`]: NCCL's tuning model: predicted time per algorithm and
//!   protocol, NCCL's choice, channels and threads per call.
//!
//! [`NcclSystem`] puts them together for one scenario: the
//! [`ChannelPlan`] the `nccl_ring` and `nccl_tree` algorithms run on
//! (through [`SimFabric`](crate::SimFabric)), NCCL's choice for each size,
//! and the mechanisms the simulator charges: each call's base latency
//! (`baseLat`) before it starts, each message's per-hop latency
//! (`hwLat`, beyond what the modelled links already take), the protocol's
//! wire bytes, and each channel's inter-node traffic pinned to its NIC.

pub mod constants;
pub mod machine;
pub mod model;
pub mod search;

use std::sync::Arc;

use algorithms::nccl::plan::binary_tree_node;
use algorithms::nccl::{ChannelPlan, Framing, NcclAlgorithm, Protocol, TreeNode};
use algorithms::{Collective, Rank};
use topologies::{Router, Topology, VertexId};

pub use constants::{Constants, NcclVersion};
pub use machine::{Machine, PathType};
pub use model::{Allowed, Choice, Communicator};
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
    /// The pinned NCCL version.
    pub version: NcclVersion,
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
    /// The machine as NCCL sees it.
    pub machine: Machine,
    /// The ring graph NCCL's search finds.
    pub graph: Graph,
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
        config: NcclConfig,
    ) -> NcclSystem {
        let constants = config.version.constants();
        let machine = Machine::detect(topology, placement, config.compute_capability);
        let graph = search::search(topology, router, &machine, constants);
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
            machine,
            graph,
            channels,
            plan: Arc::new(ChannelPlan { rings, trees }),
            nic,
        }
    }

    /// The version's constants.
    pub fn constants(&self) -> &'static Constants {
        self.config.version.constants()
    }

    /// The communicator NCCL's model prices calls on.
    pub fn communicator(&self) -> Communicator<'_> {
        Communicator {
            constants: self.constants(),
            ranks: self.machine.placement.len(),
            nodes: self.machine.node_count(),
            compute_capability: self.machine.compute_capability,
            amd_cpu: self.config.cpu == CpuVendor::Amd,
            ring: &self.graph,
            tree_pattern: self.machine.ranks_per_node() == 1,
            channels: self.channels,
            allowed: self.config.allowed,
        }
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
    pub fn call_latency_ps(&self, algorithm: NcclAlgorithm, protocol: Protocol) -> u64 {
        let (a, p) = (model::a_index(algorithm), model::p_index(protocol));
        us_to_ps(self.constants().base_latency_us[a][p])
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
        let mut us = k.hop_latency_us[class.index()][a][p];
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
        let cpu = match self.config.cpu {
            CpuVendor::Intel => "Intel",
            CpuVendor::Amd => "AMD",
        };
        let names = |allowed: &[bool], all: &[&str]| {
            all.iter()
                .zip(allowed)
                .filter(|(_, on)| **on)
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(",")
        };
        let intra = if g.intra_nvlink { "NVLink" } else { "PCI" };
        let assumed = if self.config.compute_capability.is_none() && !m.has_nvlink {
            " (assumed: no NVLink tells the GPU; set [nccl] gpu)"
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
        format!(
            "NCCL {} model: {} ranks on {} nodes, compute capability {}.{}{assumed}, {cpu} CPUs; \
             search: {} channels x {:.1} GB/s ({intra} inside nodes{inter}); {} channels at run time; \
             algorithms {}, protocols {}{launch}",
            self.config.version,
            m.placement.len(),
            m.node_count(),
            cc / 10,
            cc % 10,
            g.channels,
            g.bw_intra,
            self.channels,
            names(&self.config.allowed.algorithms, &["Tree", "Ring"]),
            names(&self.config.allowed.protocols, &["LL", "LL128", "Simple"]),
        )
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
/// on multi-node Hopper with fast rings below 16, then
/// `NCCL_MAX_NCHANNELS` and `NCCL_MIN_NCHANNELS` (`src/graph/connect.cc:443-472` @ab2b89c4).
fn runtime_channels(
    graph: &Graph,
    machine: &Machine,
    config: &NcclConfig,
    constants: &Constants,
) -> usize {
    let max = constants.max_channels;
    let mut n = (2 * graph.channels).min(max);
    if machine.compute_capability == 90
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

/// Parses an `NCCL_ALGO`/`NCCL_PROTO`-style list: names separated by
/// commas, any case, a leading `^` excluding them instead. `names` are the
/// names NCCL knows, the first `N` of them modelled; the result says which
/// of those are allowed.
fn parse_list<const N: usize>(
    what: &str,
    value: &str,
    names: &[&str],
) -> Result<[bool; N], String> {
    let (exclude, list) = match value.trim().strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, value.trim()),
    };
    let mut named = [false; N];
    let mut any = false;
    for token in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(token)) else {
            return Err(format!(
                "{what}: unknown name `{token}`; valid: {} (a leading ^ excludes)",
                names.join(", ")
            ));
        };
        any = true;
        if i < N {
            named[i] = true;
        }
    }
    if !any {
        return Err(format!("{what}: `{value}` names nothing"));
    }
    Ok(named.map(|n| n != exclude))
}

impl NcclConfig {
    /// Applies an `NCCL_ALGO` value: `Tree`, `Ring` (NCCL's other names,
    /// `CollNetDirect`, `CollNetChain`, `NVLS`, `NVLSTree`, are accepted
    /// and are never available in the model).
    pub fn set_algo(&mut self, value: &str) -> Result<(), String> {
        let names = [
            "Tree",
            "Ring",
            "CollNetDirect",
            "CollNetChain",
            "NVLS",
            "NVLSTree",
        ];
        self.allowed.algorithms = parse_list::<2>("NCCL_ALGO", value, &names)?;
        Ok(())
    }

    /// Applies an `NCCL_PROTO` value: `LL`, `LL128`, `Simple`.
    pub fn set_proto(&mut self, value: &str) -> Result<(), String> {
        self.allowed.protocols = parse_list::<3>("NCCL_PROTO", value, &["LL", "LL128", "Simple"])?;
        Ok(())
    }

    /// Applies NCCL's environment variables from `var` (a lookup such as
    /// `std::env::var`): `NCCL_PROTO`, `NCCL_MIN_NCHANNELS`,
    /// `NCCL_MAX_NCHANNELS` (`NCCL_ALGO` restricts every tuner, so the
    /// study takes it as an [`AlgoFilter`](crate::tuning::AlgoFilter)).
    /// Returns the ones it applied, as `NAME=value`.
    pub fn apply_env(
        &mut self,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<String>, String> {
        let mut applied = Vec::new();
        if let Some(v) = var("NCCL_PROTO") {
            self.set_proto(&v)?;
            applied.push(format!("NCCL_PROTO={v}"));
        }
        for (name, slot) in [
            ("NCCL_MIN_NCHANNELS", &mut self.min_channels),
            ("NCCL_MAX_NCHANNELS", &mut self.max_channels),
        ] {
            if let Some(v) = var(name) {
                let n: usize = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=32).contains(n))
                    .ok_or_else(|| {
                        format!("{name}: `{v}` is not a channel count between 1 and 32")
                    })?;
                *slot = Some(n);
                applied.push(format!("{name}={v}"));
            }
        }
        Ok(applied)
    }
}
