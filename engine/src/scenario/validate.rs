//! Turns a [`RawScenario`] into a [`Scenario`], rejecting every value that
//! does not make sense with an error that points at it.
//!
//! This file holds [`parse`], which checks the file's tables in order and
//! decides how a run folds; `source.rs` is the [`Source`] every check
//! reports through, `collective.rs` one `[[collective]]` entry,
//! `faults.rs` the `[[inject]]` and `[[fault]]` entries.

mod collective;
mod faults;
mod source;

use std::path::Path;
use std::sync::Arc;

use algorithms::{DType, Registry};

use crate::network::NetworkConfig;

use super::raw::RawScenario;
use super::{Scenario, ScenarioError};
use collective::collective;
use faults::{fault, inject};
pub use source::Source;
pub(super) use source::micros;

/// What a parse expects of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// A study: at least one `[[collective]]` (what `sim run` runs).
    Study,
    /// A world (links or topology, seed, faults); `[[collective]]`
    /// entries are optional (the library's simulations bring their own).
    World,
}

/// The seed of a scenario that does not give one.
pub const DEFAULT_SEED: u64 = 0;

/// Parses and validates scenario `text` read from `path`.
pub fn parse(
    path: &Path,
    text: &str,
    registry: &Registry,
    expect: Expect,
) -> Result<Scenario, ScenarioError> {
    let src = Source { path, text };
    let raw: RawScenario = toml::from_str(text)
        .map_err(|e| src.error(e.span(), e.message().trim_end().to_string()))?;
    let seed = raw.seed.unwrap_or(DEFAULT_SEED);
    let (calibrated_network, calibration) = match &raw.calibration {
        Some(c) => {
            let (network, loaded) = super::links::calibrated(&src, &raw, c)?;
            (Some(network), Some(loaded))
        }
        None => (None, None),
    };
    let network = match (&raw.links, &raw.topology) {
        _ if calibrated_network.is_some() => calibrated_network.expect("checked by the guard"),
        (Some(links), None) => super::links::ideal(&src, &raw, links)?,
        (None, Some(t)) => super::topology::network(&src, t, raw.world_size.as_ref(), seed)?,
        (Some(_), Some(t)) => {
            return Err(src.at(
                t,
                "give either [links] (ideal links) or [topology] (a hardware model), not both",
            ));
        }
        (None, None) => {
            return Err(src.error(
                None,
                "the scenario needs [links] (ideal links) or [topology] (a hardware model)",
            ));
        }
    };
    let world_size = network.world_size;
    let mut network_config = network.config;
    let topology = match &network_config {
        NetworkConfig::Topology(t) => Some(t),
        NetworkConfig::Ideal(_) => None,
    };
    let (changes, link_fault_notes) =
        super::link_faults::link_faults(&src, &raw.link_fault, topology)?;
    let (transport, rdma_note) = super::transport::rdma(&src, raw.rdma.as_ref(), topology)?;
    let (pfc, pfc_note) = super::transport::pfc(&src, raw.pfc.as_ref(), topology)?;
    let (tcp, tcp_note) = super::transport::tcp(&src, raw.tcp.as_ref(), topology)?;
    let network_notes = rdma_note
        .into_iter()
        .chain(pfc_note)
        .chain(tcp_note)
        .collect();
    if let NetworkConfig::Topology(t) = &mut network_config {
        t.changes = changes.into();
        t.transport = transport;
        t.tcp = tcp;
        t.pfc = pfc;
        t.loss_seed = seed;
    }

    let call_timeout_ps = match &raw.timeout_ms {
        None => None,
        Some(t) => {
            let ms = src.number(t, "timeout_ms", false)?;
            let ps = (ms * 1e9).round();
            if !(1.0..=1e18).contains(&ps) {
                return Err(src.at(t, "timeout_ms must be between 1e-9 and 1e9 (about 11 days)"));
            }
            Some(ps as u64)
        }
    };
    let reduce_bytes_per_s = match (&raw.compute, &calibration) {
        (_, Some(c)) => c.calibration.reduce_bytes_per_s(DType::F32).or_else(|| {
            c.calibration
                .model
                .reduce_gb_per_s
                .values()
                .next()
                .map(|g| g * 1e9)
        }),
        (Some(c), None) => Some(src.number(&c.reduce_gb_per_s, "reduce_gb_per_s", false)? * 1e9),
        (None, None) => None,
    };

    if raw.collective.is_empty() && expect == Expect::Study {
        return Err(src.error(
            None,
            "the scenario has no [[collective]] to run; add at least one",
        ));
    }
    let parse_collectives = |fold: Option<usize>| {
        raw.collective
            .iter()
            .map(|c| {
                collective(
                    &src,
                    c,
                    registry,
                    world_size,
                    network.max_collective_ranks,
                    fold,
                )
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let mut collectives = parse_collectives(network.fold)?;
    // NCCL's channels fold by the node turn, not the shift (see
    // `crate::fold`): its orbits have as many ranks as the turn's order,
    // and the message cap counts that share.
    let turned = network.fold.is_some() && super::fold_check::folds_by_turn(&collectives);
    // NCCL's PAT and ring fold by the shift, their channels kept (see
    // `crate::fold`).
    // NCCL's tuner under a fold: it folds by the shift when every size's
    // choice does (checked once NCCL's model is built).
    let tuned_shift = network.fold.is_some()
        && !turned
        && matches!(network_config, NetworkConfig::Topology(_))
        && raw.tuner.as_ref().is_some_and(|t| t.get_ref() == "nccl")
        && collectives.iter().any(|c| c.algorithm.is_none());
    let shifted_channels = network.fold.is_some()
        && !turned
        && (super::fold_check::folds_nccl_channels(&collectives) || tuned_shift);
    if turned && let Some(Ok(turn)) = &network.node_turn {
        // The message cap counts the simulated share: the quarter turn's
        // where there is one (the fold chosen below, unless NCCL's
        // channels do not fit it; then parsed again with the half's).
        let order = network.quarter_turn.as_ref().unwrap_or(turn).order();
        collectives = parse_collectives(Some(world_size / order.max(1)))?;
    }
    let injects = raw
        .inject
        .iter()
        .map(|i| inject(&src, i, world_size))
        .collect::<Result<Vec<_>, _>>()?;

    let faults = raw
        .fault
        .iter()
        .map(|f| fault(&src, f, world_size))
        .collect::<Result<Vec<_>, _>>()?;

    let mut node_turn = None;
    if turned {
        let turn = super::fold_check::check_turn_foldable(
            &src,
            &raw,
            &collectives,
            world_size,
            network.node_turn.as_ref(),
        )?;
        if let NetworkConfig::Topology(t) = &mut network_config {
            t.rotation = Some(Arc::clone(&turn));
        }
        node_turn = Some(turn);
    } else if let Some(shift) = network.fold {
        super::fold_check::check_foldable(&src, &raw, &collectives, world_size, shift)?;
    }

    let compare_without_link_faults = match &raw.compare_without_link_faults {
        Some(c) if *c.get_ref() && raw.link_fault.is_empty() => {
            return Err(src.at(
                c,
                "compare_without_link_faults needs a [[link_fault]]: without one there is nothing to compare",
            ));
        }
        Some(c) => *c.get_ref(),
        None => false,
    };

    // After each value's own checks, before NCCL's model is built from
    // them: a rate that would run past the end of virtual time on its own
    // is refused where it is written.
    let time_values = super::time_scale::values(&src, &raw);
    super::time_scale::check(&src, &time_values)?;

    let (tuner, nccl) = super::nccl::nccl(&src, &raw, &network_config, network.fold, tuned_shift)?;
    if turned || shifted_channels {
        super::fold_check::check_one_gpu_per_process(&src, &raw, nccl.as_ref())?;
    }
    let nccl_systems = match (&nccl, network.fold) {
        (Some(config), None) | (Some(config), Some(_))
            if network.fold.is_none() || turned || shifted_channels =>
        {
            let mut sizes: Vec<usize> = collectives.iter().map(|c| c.world_size).collect();
            sizes.push(world_size);
            sizes.sort_unstable();
            sizes.dedup();
            super::nccl::systems(&network_config, config, sizes)
        }
        _ => Default::default(),
    };

    if shifted_channels && let NetworkConfig::Topology(t) = &network_config {
        super::fold_check::check_shifted_nics(
            &src,
            &raw,
            nccl_systems.values(),
            t.rotation.as_deref(),
        )?;
    }

    // The largest exact fold: the quarter turn where every system's
    // channels turn with it and keep to the links it carries, else the
    // half turn (refusals below name the half's problems).
    if let (Some(half), Some(quarter), NetworkConfig::Topology(t)) =
        (&mut node_turn, &network.quarter_turn, &mut network_config)
    {
        // NVLS-Tree's heads turn with any turn of the nodes' GPUs, and its
        // tags with them; its routes are checked as they are built.
        let nvls = super::fold_check::folds_nvls_tree(&collectives);
        if nvls || quarter_fits(quarter, nccl_systems.values(), t) {
            *half = Arc::clone(quarter);
            t.rotation = Some(Arc::clone(quarter));
        } else {
            collectives = parse_collectives(Some(world_size / half.order().max(1)))?;
        }
    }

    // The fold's rank action, with NCCL's channels turning (each system's
    // plan must turn with the GPUs).
    let mut fold_turn = None;
    let mut network_description = network.description;
    if let Some(turn) = &node_turn {
        let symmetry = raw
            .topology
            .as_ref()
            .and_then(|t| t.get_ref().symmetry.as_ref().map(|s| s.span()));
        let images = turn.rank_images().unwrap_or_default();
        let mut action = crate::fold::RankAction::permutation(images)
            .map_err(|e| src.error(symmetry.clone(), e))?;
        let nvls = super::fold_check::folds_nvls_tree(&collectives);
        if nvls {
            // NVLS-Tree's heads turn with the GPUs, each channel's head
            // `h` tag becoming head `h + by`'s; NCCL's channels (which it
            // sends nothing framed on) turn along where they do.
            let by = images.first().copied().unwrap_or(0);
            let per_node = collectives.first().map_or(1, |c| c.ranks_per_node.max(1));
            if let Some(r) = (0..images.len())
                .find(|&r| images[r] != r / per_node * per_node + (r % per_node + by) % per_node)
            {
                return Err(src.error(
                    symmetry.clone(),
                    format!(
                        "a folded run of nccl_nvls_tree (symmetry = \"fold\") turns every node's \
                         {per_node} ranks (ranks_per_node) by {by}, and the topology's turn takes \
                         rank {r} to {}; set ranks_per_node to the GPUs of a node, or drop \
                         symmetry = \"fold\" to simulate every rank",
                        images[r]
                    ),
                ));
            }
            for system in nccl_systems.values() {
                if let Ok(channels) = crate::fold::nccl_channel_turn(system, turn) {
                    action = action
                        .with_channels(channels)
                        .map_err(|e| src.error(symmetry.clone(), e))?;
                }
            }
            let tags = algorithms::nccl::nvls_tree::head_turn(
                per_node,
                by,
                super::fold_check::NVLS_TREE_MAX_CHANNELS,
            );
            action = action
                .with_tag_turn(tags)
                .map_err(|e| src.error(symmetry.clone(), e))?;
        }
        for system in nccl_systems.values().filter(|_| !nvls) {
            let channels = crate::fold::nccl_channel_turn(system, turn).map_err(|e| {
                src.error(
                    symmetry.clone(),
                    format!(
                        "a folded run of NCCL's channels (symmetry = \"fold\"): NCCL's channels \
                         do not turn with the GPUs: {e}; drop symmetry = \"fold\" to simulate \
                         every rank"
                    ),
                )
            })?;
            action = action
                .with_channels(channels)
                .map_err(|e| src.error(symmetry.clone(), e))?;
        }
        if let Some(shift) = network.fold {
            network_description = network_description.replace(
                &format!(", folded by {shift} ranks (symmetric routes)"),
                &format!(
                    ", folded by turning every node's GPUs by {} with {} ({} of {world_size} \
                     ranks simulated, symmetric routes{})",
                    images.first().copied().unwrap_or(0),
                    if nvls {
                        "NVLS-Tree's heads"
                    } else {
                        "NCCL's channels"
                    },
                    action.orbits(),
                    if turn.is_partial() {
                        "; the socket links, which no route of the run crosses, stay in place"
                    } else {
                        ""
                    }
                ),
            );
        }
        fold_turn = Some(action);
    }

    let name = raw.name.clone().unwrap_or_else(|| {
        path.file_stem().map_or_else(
            || "scenario".to_string(),
            |s| s.to_string_lossy().into_owned(),
        )
    });
    let scenario = Scenario {
        path: path.to_path_buf(),
        name,
        seed,
        seed_given: raw.seed.is_some(),
        call_timeout_ps,
        world_size,
        network: network_config,
        link_fault_notes,
        network_notes,
        network_description,
        tuner_link: network.tuner_link,
        reduce_bytes_per_s,
        collectives,
        injects,
        faults,
        compare_without_link_faults,
        has_sweep: raw.sweep.is_some(),
        input_files: raw
            .topology
            .as_ref()
            .and_then(|t| {
                let t = t.get_ref();
                let file = t
                    .file
                    .as_ref()
                    .filter(|_| t.preset.get_ref() == "nvidia_smi")?;
                let dir = path.parent().unwrap_or(Path::new("."));
                Some(dir.join(file.get_ref()))
            })
            .into_iter()
            .chain(calibration.as_ref().map(|c| c.path.clone()))
            .collect(),
        calibration,
        fold: if turned { None } else { network.fold },
        fold_turn,
        registry: registry.clone(),
        tuner,
        nccl,
        nccl_systems,
        slowest_value: super::time_scale::slowest(time_values),
    };
    super::extrapolate::check_scenario(&src, &raw, &scenario)?;
    if let Some(action) = &scenario.fold_turn {
        super::fold_check::check_turned_sizes(&src, &raw, &scenario, action)?;
    }
    if shifted_channels {
        super::fold_check::check_shifted_sizes(&src, &raw, &scenario)?;
    }
    Ok(scenario)
}

/// Whether a scenario folds by `quarter`, a partial turn of every node's
/// GPUs: each of `systems`' channel plans turns with it and its channels'
/// routes keep to the links it carries ([`crate::fold::nccl_channel_turn`],
/// [`crate::fold::nccl_routes_carried`], which the fold checks again).
fn quarter_fits<'a>(
    quarter: &topologies::Rotation,
    mut systems: impl Iterator<Item = &'a Arc<crate::nccl::NcclSystem>>,
    t: &crate::network::TopologyConfig,
) -> bool {
    let Some(images) = quarter.rank_images() else {
        return false;
    };
    let Ok(action) = crate::fold::RankAction::permutation(images) else {
        return false;
    };
    let mut router = t
        .router
        .lock()
        .expect("validation never panics while routing");
    systems.all(|system| {
        crate::fold::nccl_channel_turn(system, quarter).is_ok()
            && crate::fold::nccl_routes_carried(system, quarter, &action, &mut router, &t.placement)
                .is_ok()
    })
}
