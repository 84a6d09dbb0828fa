//! The one line describing NCCL on a simulated machine that report
//! headers print: version, machine, search result, run-time channels, the
//! newer algorithms' state, and what `NCCL_ALGO` and `NCCL_PROTO` allow.

use algorithms::nccl::NcclAlgorithm;

use super::{CpuVendor, NcclSystem, NcclVersion, model};

impl NcclSystem {
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
}
