//! The scenario file as written: serde structures that mirror the TOML,
//! with spans kept on every value that validation may reject.

use serde::Deserialize;
use toml::Spanned;

use super::size::ByteSize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<String>,
    #[serde(default)]
    pub world_size: Option<Spanned<i64>>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub timeout_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub links: Option<Spanned<RawLinks>>,
    #[serde(default)]
    pub topology: Option<Spanned<RawTopology>>,
    #[serde(default)]
    pub compute: Option<RawCompute>,
    /// `[calibration]`: the fitted links and compute of a real fabric.
    #[serde(default)]
    pub calibration: Option<Spanned<RawCalibration>>,
    #[serde(default)]
    pub collective: Vec<Spanned<RawCollective>>,
    #[serde(default)]
    pub inject: Vec<Spanned<RawInject>>,
    #[serde(default)]
    pub fault: Vec<Spanned<RawFault>>,
    #[serde(default)]
    pub link_fault: Vec<Spanned<RawLinkFault>>,
    #[serde(default)]
    pub rdma: Option<Spanned<RawRdma>>,
    #[serde(default)]
    pub pfc: Option<Spanned<RawPfc>>,
    #[serde(default)]
    pub tcp: Option<Spanned<RawTcp>>,
    /// Also run every point without the link faults, for comparison.
    #[serde(default)]
    pub compare_without_link_faults: Option<Spanned<bool>>,
    /// `[sweep]`: the axes of a study, read by `sim sweep`
    /// ([`crate::sweep`]); `sim run` runs the file as written without it.
    #[serde(default)]
    pub sweep: Option<toml::Value>,
    /// `"nccl"` or `"alpha_beta"`: what picks the algorithm of a
    /// collective that names none.
    #[serde(default)]
    pub tuner: Option<Spanned<String>>,
    /// `[nccl]`: the NCCL model's settings.
    #[serde(default)]
    pub nccl: Option<Spanned<RawNccl>>,
}

/// `[nccl]`: the pinned NCCL version, the machine facts NCCL's model
/// needs that a topology does not hold, and NCCL's environment variables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNccl {
    #[serde(default)]
    pub version: Option<Spanned<String>>,
    #[serde(default)]
    pub gpu: Option<Spanned<String>>,
    #[serde(default)]
    pub cpu: Option<Spanned<String>>,
    #[serde(default)]
    pub algo: Option<Spanned<String>>,
    #[serde(default)]
    pub proto: Option<Spanned<String>>,
    #[serde(default)]
    pub min_nchannels: Option<Spanned<i64>>,
    #[serde(default)]
    pub max_nchannels: Option<Spanned<i64>>,
    #[serde(default)]
    pub gpus_per_process: Option<Spanned<i64>>,
    #[serde(default)]
    pub launch_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub nvls_enable: Option<Spanned<i64>>,
    #[serde(default)]
    pub nvls_nchannels: Option<Spanned<i64>>,
    #[serde(default)]
    pub collnet_enable: Option<Spanned<i64>>,
    #[serde(default)]
    pub pat_enable: Option<Spanned<i64>>,
}

/// `[rdma]`: the RDMA reliable transport's parameters, named as NCCL's
/// environment variables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRdma {
    #[serde(default)]
    pub ib_timeout: Option<Spanned<i64>>,
    #[serde(default)]
    pub ib_retry_cnt: Option<Spanned<i64>>,
}

/// `[pfc]`: priority flow control thresholds of the RoCE links.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPfc {
    #[serde(default)]
    pub xoff_bytes: Option<Spanned<ByteSize>>,
    #[serde(default)]
    pub xon_bytes: Option<Spanned<ByteSize>>,
    #[serde(default)]
    pub headroom_bytes: Option<Spanned<ByteSize>>,
}

/// `[tcp]`: the TCP-like transport of flows over plain Ethernet, named
/// as Linux's sysctls (`tcp_rto_min_us` in ms, `tcp_rto_max_ms`,
/// `tcp_retries2`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTcp {
    #[serde(default)]
    pub rto_min_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub rto_max_ms: Option<Spanned<i64>>,
    #[serde(default)]
    pub retries2: Option<Spanned<i64>>,
}

/// One `[[link_fault]]`: a scheduled fault of the links between two
/// vertices of the topology.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLinkFault {
    pub kind: Spanned<String>,
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    #[serde(default)]
    pub both_directions: Option<bool>,
    pub at_us: Spanned<f64>,
    #[serde(default)]
    pub until_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub bandwidth_factor: Option<Spanned<f64>>,
    #[serde(default)]
    pub period_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub down_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub loss_rate: Option<Spanned<f64>>,
    #[serde(default)]
    pub corruption_rate: Option<Spanned<f64>>,
}

/// One `[[fault]]`: a scheduled fault of a rank.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub kind: Spanned<String>,
    pub rank: Spanned<i64>,
    #[serde(default)]
    pub delay_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub compute_slowdown: Option<Spanned<f64>>,
    #[serde(default)]
    pub at_us: Option<Spanned<f64>>,
}

/// `[links]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLinks {
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    pub latency_us: Spanned<f64>,
    pub bandwidth_gb_per_s: Spanned<f64>,
    /// Per-message sender overhead (see `crate::links`).
    #[serde(default)]
    pub overhead_us: Option<Spanned<f64>>,
    /// Each rank's total sending rate.
    #[serde(default)]
    pub injection_gb_per_s: Option<Spanned<f64>>,
}

/// `[calibration]`: a file `sim calibrate` wrote.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCalibration {
    pub file: Spanned<String>,
    /// Racks of consecutive ranks joined by shared links (with `rack_gb_per_s`).
    #[serde(default)]
    pub racks: Option<Spanned<i64>>,
    /// The rate of each rack-to-rack link, per direction.
    #[serde(default)]
    pub rack_gb_per_s: Option<Spanned<f64>>,
    /// The latency a rack-to-rack link adds (default 0).
    #[serde(default)]
    pub rack_latency_us: Option<Spanned<f64>>,
}

/// `[compute]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompute {
    pub reduce_gb_per_s: Spanned<f64>,
}

/// One `[[collective]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCollective {
    pub kind: Spanned<String>,
    #[serde(default)]
    pub algorithm: Option<Spanned<String>>,
    #[serde(default)]
    pub world_size: Option<Spanned<i64>>,
    #[serde(default)]
    pub root: Option<Spanned<i64>>,
    #[serde(default)]
    pub ranks_per_node: Option<Spanned<i64>>,
    pub min_bytes: Spanned<ByteSize>,
    pub max_bytes: Spanned<ByteSize>,
    #[serde(default)]
    pub step_factor: Option<Spanned<i64>>,
    #[serde(default)]
    pub dtype: Option<Spanned<String>>,
    #[serde(default)]
    pub op: Option<Spanned<String>>,
    #[serde(default)]
    pub iters: Option<Spanned<i64>>,
    #[serde(default)]
    pub warmup: Option<Spanned<i64>>,
    #[serde(default)]
    pub chunk_bytes: Option<Spanned<ByteSize>>,
    #[serde(default)]
    pub slots: Option<Spanned<i64>>,
    #[serde(default)]
    pub phantom: bool,
    #[serde(default)]
    pub check: Option<bool>,
    /// Sizes above this are extrapolated from two simulated ones.
    #[serde(default)]
    pub extrapolate_above: Option<Spanned<ByteSize>>,
}

impl RawCollective {
    /// Where a message about `size` of `spec` points: the `min_bytes`
    /// value when `size` is the smallest size (`min_bytes`), the
    /// `extrapolate_above` value when `size` is a base of it that `spec`
    /// does not list, else `max_bytes`.
    pub fn size_span(&self, size: u64, spec: &super::CollectiveSpec) -> std::ops::Range<usize> {
        match &self.extrapolate_above {
            _ if size == spec.min_bytes => self.min_bytes.span(),
            Some(above) if !spec.sizes().contains(&size) => above.span(),
            _ => self.max_bytes.span(),
        }
    }
}

/// One `[[inject]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInject {
    pub kind: Spanned<String>,
    pub rank: Spanned<i64>,
    #[serde(default)]
    pub from: Option<Spanned<i64>>,
}

/// `[topology]`: a preset with its parameters, an `nvidia-smi topo -m`
/// file, or an explicit list of vertices and links. Which parameters apply
/// depends on the preset; validation rejects the others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    pub preset: Spanned<String>,
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    #[serde(default)]
    pub placement: Option<Spanned<Vec<Spanned<i64>>>>,
    // Routing, for every preset.
    #[serde(default)]
    pub routing: Option<Spanned<String>>,
    #[serde(default)]
    pub routing_root: Option<Spanned<String>>,
    /// `"routes"` or `"fold"`: the preset's rotation (symmetric routes,
    /// and with `"fold"` a folded run).
    #[serde(default)]
    pub symmetry: Option<Spanned<String>>,
    // Nodes and fat-trees.
    #[serde(default)]
    pub nodes: Option<Spanned<i64>>,
    #[serde(default)]
    pub gpus_per_node: Option<Spanned<i64>>,
    /// DGX/HGX nodes and fat-trees: NICs next to each GPU (1 or 2).
    #[serde(default)]
    pub nics_per_gpu: Option<Spanned<i64>>,
    #[serde(default)]
    pub style: Option<Spanned<String>>,
    /// nvl72_cluster: NVL72 racks.
    #[serde(default)]
    pub racks: Option<Spanned<i64>>,
    #[serde(default)]
    pub leaves: Option<Spanned<i64>>,
    /// fat_tree: nodes one leaf of a rail holds (sets `leaves`).
    #[serde(default)]
    pub nodes_per_leaf: Option<Spanned<i64>>,
    #[serde(default)]
    pub spines: Option<Spanned<i64>>,
    #[serde(default)]
    pub oversubscription: Option<Spanned<f64>>,
    #[serde(default)]
    pub nic: Option<Spanned<String>>,
    /// fat_tree, leaf_spine: the InfiniBand leaves and spines reduce in
    /// the network (SHARP).
    #[serde(default)]
    pub sharp: Option<Spanned<bool>>,
    // PCIe box.
    #[serde(default)]
    pub sockets: Option<Spanned<i64>>,
    #[serde(default)]
    pub switches_per_socket: Option<Spanned<i64>>,
    #[serde(default)]
    pub gpus_per_switch: Option<Spanned<i64>>,
    #[serde(default)]
    pub pcie: Option<Spanned<String>>,
    #[serde(default)]
    pub smp_links: Option<Spanned<i64>>,
    // Leaf-spine.
    #[serde(default)]
    pub hosts: Option<Spanned<i64>>,
    #[serde(default)]
    pub hosts_per_leaf: Option<Spanned<i64>>,
    // CPU cluster (also hosts, sockets, smp_links, nic, hosts_per_leaf,
    // spines, oversubscription).
    /// The CPU model whose cores and memory are the defaults.
    #[serde(default)]
    pub cpu: Option<Spanned<String>>,
    #[serde(default)]
    pub cores_per_socket: Option<Spanned<i64>>,
    /// Memory bandwidth per socket, GB/s.
    #[serde(default)]
    pub memory_gb_per_s: Option<Spanned<f64>>,
    // Ring and torus.
    #[serde(default)]
    pub gpus: Option<Spanned<i64>>,
    #[serde(default)]
    pub x: Option<Spanned<i64>>,
    #[serde(default)]
    pub y: Option<Spanned<i64>>,
    #[serde(default)]
    pub kind: Option<Spanned<String>>,
    #[serde(default)]
    pub links_per_pair: Option<Spanned<i64>>,
    // nvidia-smi import.
    #[serde(default)]
    pub file: Option<Spanned<String>>,
    #[serde(default)]
    pub nvlink: Option<Spanned<String>>,
    // Explicit.
    #[serde(default)]
    pub vertex: Vec<Spanned<RawVertex>>,
    #[serde(default)]
    pub link: Vec<Spanned<RawLink>>,
}

/// One `[[topology.vertex]]` of an explicit topology.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVertex {
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    #[serde(default)]
    pub forwards: Option<bool>,
    #[serde(default)]
    pub forward_latency_ns: Option<Spanned<f64>>,
}

/// One `[[topology.link]]` of an explicit topology.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLink {
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    pub kind: Spanned<String>,
    #[serde(default)]
    pub count: Option<Spanned<i64>>,
    #[serde(default)]
    pub bandwidth_gb_per_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub latency_ns: Option<Spanned<f64>>,
    #[serde(default)]
    pub mtu_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    pub buffer_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    pub lossless: Option<bool>,
}
