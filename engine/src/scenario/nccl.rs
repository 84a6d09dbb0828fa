//! Validation of `tuner` and `[nccl]`: which model picks the algorithm of
//! a collective that names none, and the NCCL model's settings (pinned
//! version, GPU, CPU, NCCL's environment variables, process layout).
//!
//! The NCCL model is the default on a topology (it needs one: NCCL's
//! channels run through the hardware), except in a folded run, which only
//! rotation-symmetric algorithms can use; `tuner = "alpha_beta"` keeps the
//! research tuner (each algorithm's closed-form cost on the tuner link).

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::Spanned;

use super::ScenarioError;
use super::raw::{RawNccl, RawScenario};
use super::validate::Source;
use crate::nccl::{CpuVendor, Machine, NcclConfig, NcclSystem, NcclVersion};
use crate::network::NetworkConfig;

/// What picks the algorithm of a collective that names none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunerModel {
    /// NCCL's own choice of algorithm, protocol and channels
    /// ([`crate::nccl`]), run as `nccl_ring` or `nccl_tree`.
    Nccl,
    /// The research tuner: the cheapest algorithm of the registry by its
    /// closed-form cost on the tuner link.
    #[default]
    AlphaBeta,
}

impl TunerModel {
    /// The scenario name.
    pub fn name(self) -> &'static str {
        match self {
            TunerModel::Nccl => "nccl",
            TunerModel::AlphaBeta => "alpha_beta",
        }
    }
}

/// GPUs `[nccl] gpu` accepts, with their compute capability x 10.
const GPUS: [(&str, u32); 7] = [
    ("v100", 70),
    ("a100", 80),
    ("h100", 90),
    ("h200", 90),
    ("b200", 100),
    ("gb200", 100),
    ("b100", 100),
];

/// Validates `tuner` and `[nccl]` for a scenario on `network` (folded by
/// `fold`): the tuner model and, on a topology, the NCCL settings. With
/// `tuned_shift`, a folded scenario may name `tuner = "nccl"`: it folds by
/// the node shift, and validation checks every size's choice folds so
/// (`fold_check::check_shifted_sizes`).
pub(super) fn nccl(
    src: &Source,
    raw: &RawScenario,
    network: &NetworkConfig,
    fold: Option<usize>,
    tuned_shift: bool,
) -> Result<(TunerModel, Option<NcclConfig>), ScenarioError> {
    let on_topology = matches!(network, NetworkConfig::Topology(_));
    let tuner = match &raw.tuner {
        None if on_topology && fold.is_none() => TunerModel::Nccl,
        None => TunerModel::AlphaBeta,
        Some(t) => match t.get_ref().as_str() {
            "alpha_beta" => TunerModel::AlphaBeta,
            "nccl" if !on_topology => {
                return Err(src.at(
                    t,
                    "tuner = \"nccl\" needs a [topology]: NCCL's channels run through the hardware, which ideal links do not have",
                ));
            }
            "nccl" if fold.is_some() && !tuned_shift => {
                return Err(src.at(
                    t,
                    "tuner = \"nccl\" folds only by a shift of whole nodes, for collectives that name no \
                     algorithm, when NCCL's choice at every size folds so (nccl_ring, nccl_pat); \
                     nccl_tree and nccl_nvls_tree fold by another map (they turn every node's GPUs together with the channels or heads), so a \
                     scenario folded by that turn, or whose collectives all name their algorithm, cannot use it; \
                     drop symmetry = \"fold\" to simulate every rank, name the algorithm, or use \
                     tuner = \"alpha_beta\" with an algorithm that folds",
                ));
            }
            "nccl" => TunerModel::Nccl,
            other => {
                return Err(src.at(
                    t,
                    format!("unknown tuner `{other}`; expected \"nccl\" or \"alpha_beta\""),
                ));
            }
        },
    };
    let Some(spanned) = &raw.nccl else {
        return Ok((tuner, on_topology.then(|| default_config(raw))));
    };
    if !on_topology {
        return Err(src.at(
            spanned,
            "[nccl] needs a [topology]: the NCCL model runs on a hardware model",
        ));
    }
    let config = config(src, spanned.get_ref(), default_config(raw))?;
    check_version(src, spanned.get_ref(), &config, network)?;
    Ok((tuner, Some(config)))
}

/// The settings when `[nccl]` says nothing: NCCL 2.21.5 (2.29.7 on
/// Blackwell GPUs), one process per GPU, the CPU of the preset (the DGX
/// A100's are AMD EPYC).
fn default_config(raw: &RawScenario) -> NcclConfig {
    let topology = raw.topology.as_ref().map(|t| t.get_ref());
    let preset = topology.map(|t| t.preset.get_ref().as_str());
    let style = topology
        .and_then(|t| t.style.as_ref())
        .map(|s| s.get_ref().as_str());
    let amd = matches!(
        (preset, style),
        (Some("dgx_a100"), _) | (Some("fat_tree"), Some("a100"))
    );
    NcclConfig {
        cpu: if amd {
            CpuVendor::Amd
        } else {
            CpuVendor::Intel
        },
        ..NcclConfig::default()
    }
}

/// `[nccl]` over `config`.
fn config(src: &Source, r: &RawNccl, mut config: NcclConfig) -> Result<NcclConfig, ScenarioError> {
    if let Some(v) = &r.version {
        config.version = Some(NcclVersion::parse(v.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = NcclVersion::ALL.iter().map(|v| v.name()).collect();
            src.at(
                v,
                format!(
                    "unknown NCCL version `{}`; known: {}",
                    v.get_ref(),
                    known.join(", ")
                ),
            )
        })?);
    }
    if let Some(g) = &r.gpu {
        let name = g.get_ref().to_ascii_lowercase();
        let cc = GPUS.iter().find(|(n, _)| *n == name).map(|&(_, cc)| cc);
        config.compute_capability = Some(cc.ok_or_else(|| {
            let known: Vec<&str> = GPUS.iter().map(|(n, _)| *n).collect();
            src.at(
                g,
                format!("unknown gpu `{}`; known: {}", g.get_ref(), known.join(", ")),
            )
        })?);
    }
    if let Some(c) = &r.cpu {
        config.cpu = match c.get_ref().to_ascii_lowercase().as_str() {
            "intel" => CpuVendor::Intel,
            "amd" => CpuVendor::Amd,
            other => {
                return Err(src.at(
                    c,
                    format!("unknown cpu `{other}`; expected \"intel\" or \"amd\""),
                ));
            }
        };
    }
    if let Some(a) = &r.algo {
        config.set_algo(a.get_ref()).map_err(|e| src.at(a, e))?;
    }
    if let Some(p) = &r.proto {
        config.set_proto(p.get_ref()).map_err(|e| src.at(p, e))?;
    }
    // Up to 2.29.7's MAXCHANNELS (64); 2.21.5 caps the count at its 32.
    let channels = |v: &Spanned<i64>, what: &str| src.count(v, what, 1, 64).map(|n| n as usize);
    if let Some(v) = &r.min_nchannels {
        config.min_channels = Some(channels(v, "min_nchannels")?);
    }
    if let Some(v) = &r.max_nchannels {
        config.max_channels = Some(channels(v, "max_nchannels")?);
    }
    if let Some(v) = &r.gpus_per_process {
        config.launch.gpus_per_process = src.count(v, "gpus_per_process", 1, 1024)? as usize;
    }
    if let Some(v) = &r.launch_us {
        config.launch.launch_us = src.number(v, "launch_us", true)?;
    }
    if let Some(v) = &r.nvls_enable {
        let n = src.count(v, "nvls_enable", 0, 2)?;
        config
            .set_nvls_enable(&n.to_string())
            .map_err(|e| src.at(v, e))?;
    }
    if let Some(v) = &r.pat_enable {
        let n = src.count(v, "pat_enable", 0, 2)?;
        config
            .set_pat_enable(&n.to_string())
            .map_err(|e| src.at(v, e))?;
    }
    if let Some(v) = &r.collnet_enable {
        config.collnet_enable = src.count(v, "collnet_enable", 0, 1)? == 1;
    }
    if let Some(v) = &r.nvls_nchannels {
        config.nvls_channels = Some(src.count(v, "nvls_nchannels", 1, 64)? as usize);
    }
    Ok(config)
}

/// Refuses a pinned NCCL version whose tables do not know the GPUs (2.21.5
/// on Blackwell), at the `version` key.
fn check_version(
    src: &Source,
    r: &RawNccl,
    config: &NcclConfig,
    network: &NetworkConfig,
) -> Result<(), ScenarioError> {
    let (Some(pinned), Some(key), NetworkConfig::Topology(t)) =
        (config.version, &r.version, network)
    else {
        return Ok(());
    };
    let cc = config
        .compute_capability
        .unwrap_or_else(|| Machine::detect(&t.topology, &t.placement, None).compute_capability);
    if pinned.supports(cc) {
        return Ok(());
    }
    let supporting: Vec<&str> = NcclVersion::ALL
        .iter()
        .filter(|v| v.supports(cc))
        .map(|v| v.name())
        .collect();
    Err(src.at(
        key,
        format!(
            "NCCL {pinned} does not know these GPUs (compute capability {}.{}, Blackwell): its tuning tables stop at Hopper; \
             use version = \"{}\" or leave version out",
            cc / 10,
            cc % 10,
            supporting.join("\" or \"")
        ),
    ))
}

/// The NCCL system of every collective's rank count on `network`.
pub(crate) fn systems(
    network: &NetworkConfig,
    config: &NcclConfig,
    sizes: impl IntoIterator<Item = usize>,
) -> BTreeMap<usize, Arc<NcclSystem>> {
    let NetworkConfig::Topology(t) = network else {
        return BTreeMap::new();
    };
    let mut router = t
        .router
        .lock()
        .expect("validation never panics while routing");
    sizes
        .into_iter()
        .map(|n| {
            let system =
                NcclSystem::build(&t.topology, &t.placement[..n], &mut router, config.clone());
            (n, Arc::new(system))
        })
        .collect()
}
