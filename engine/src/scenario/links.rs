//! The ideal links of a scenario without a topology: `[links]`, or a
//! `[calibration]` file's fitted links (with racks over it, and the
//! software costs the calibration measured).

use std::path::Path;

use toml::Spanned;
use topologies::LinkSpec;

use super::raw::{RawCalibration, RawLinks, RawScenario};
use super::validate::Source;
use super::{LoadedCalibration, ScenarioError, WORLD_SIZE_MAX};
use crate::calibration::Calibration;
use crate::network::NetworkConfig;

/// Validates `[calibration]`: the file read (relative to the scenario's
/// directory) and turned into ideal links; `[links]`, `[topology]` and
/// `[compute]` are refused beside it.
pub(super) fn calibrated(
    src: &Source,
    raw: &RawScenario,
    spanned: &Spanned<RawCalibration>,
) -> Result<(super::topology::Network, LoadedCalibration), ScenarioError> {
    if raw.links.is_some() || raw.topology.is_some() || raw.compute.is_some() {
        return Err(src.at(
            spanned,
            "[calibration] gives the links and the reduction rate: remove [links], [topology] \
             and [compute], or [calibration]",
        ));
    }
    let Some(world_size) = &raw.world_size else {
        return Err(src.at(
            spanned,
            "a calibrated scenario needs a world_size (the number of ranks)",
        ));
    };
    let world_size = src.count(world_size, "world_size", 1, WORLD_SIZE_MAX as i64)? as usize;
    let file = &spanned.get_ref().file;
    let dir = src.path.parent().unwrap_or(Path::new("."));
    let path = dir.join(file.get_ref());
    let calibration =
        Calibration::load(&path).map_err(|e| src.at(file, format!("calibration: {e}")))?;
    let link = calibration
        .link_spec()
        .map_err(|e| src.at(file, format!("calibration {}: {e}", path.display())))?;
    let (link, racks) = rack_links(src, spanned.get_ref(), link, world_size)?;
    let m = &calibration.model;
    let description = format!(
        "ideal links calibrated on {} ({}: latency {:.3} us, {:.2} GB/s per pair, overhead {:.3} us \
         per message{}{}{}{}){racks}",
        calibration.calibration.fabric,
        path.display(),
        m.latency_us,
        m.bandwidth_gb_per_s,
        m.overhead_us,
        m.injection_gb_per_s
            .map_or(String::new(), |i| format!(", {i:.2} GB/s per rank")),
        m.shared_gb_per_s.map_or(String::new(), |s| format!(
            ", {s:.2} GB/s shared by each {} ranks",
            calibration.calibration.ranks
        )),
        software_cost(m.receive_overhead_us, "per message received"),
        software_cost(m.call_overhead_us, "per call"),
    );
    // The tuner's one link is a pair's with every rank moving data at
    // once (a collective's step): a share of the machine's rate, where
    // there is one.
    let machine_ranks = link
        .shared_machine_ranks
        .map_or(world_size, |n| n.min(world_size));
    let busy_pair = link
        .shared_bytes_per_s
        .map_or(f64::INFINITY, |s| s / machine_ranks.max(1) as f64);
    let tuner_link = LinkSpec::new(
        link.latency_ps + link.overhead_ps + link.receive_overhead_ps,
        link.injection_bytes_per_s
            .map_or(link.bandwidth_bytes_per_s, |i| {
                i.min(link.bandwidth_bytes_per_s)
            })
            .min(busy_pair),
    )
    .map_err(|e| src.at(file, e.to_string()))?;
    Ok((
        super::topology::Network {
            config: NetworkConfig::Ideal(link),
            world_size,
            description,
            tuner_link,
            max_collective_ranks: WORLD_SIZE_MAX,
            fold: None,
            node_turn: None,
            quarter_turn: None,
        },
        LoadedCalibration { path, calibration },
    ))
}

/// The words for a calibrated software cost of `us` (none for 0).
fn software_cost(us: f64, per: &str) -> String {
    if us > 0.0 {
        format!(", {us:.3} us {per}")
    } else {
        String::new()
    }
}

/// `[calibration] racks` and `rack_gb_per_s` (given together): `link`
/// with its ranks in that many racks of consecutive ranks joined by
/// shared links, and the words describing them.
fn rack_links(
    src: &Source,
    raw: &RawCalibration,
    link: LinkSpec,
    world_size: usize,
) -> Result<(LinkSpec, String), ScenarioError> {
    let (racks, rate) = match (&raw.racks, &raw.rack_gb_per_s) {
        (None, None) => {
            if let Some(l) = &raw.rack_latency_us {
                return Err(src.at(l, "rack_latency_us needs racks and rack_gb_per_s"));
            }
            return Ok((link, String::new()));
        }
        (Some(r), Some(g)) => (r, g),
        (Some(r), None) => {
            return Err(src.at(r, "racks needs rack_gb_per_s (the racks' link rate)"));
        }
        (None, Some(g)) => return Err(src.at(g, "rack_gb_per_s needs racks (how many racks)")),
    };
    let count = src.count(racks, "racks", 1, world_size as i64)? as usize;
    if !world_size.is_multiple_of(count) {
        return Err(src.at(
            racks,
            format!("{count} racks do not split world_size = {world_size} ranks evenly"),
        ));
    }
    let gb = src.number(rate, "rack_gb_per_s", false)?;
    let latency_us = match &raw.rack_latency_us {
        Some(l) => src.number(l, "rack_latency_us", true)?,
        None => 0.0,
    };
    let rack = topologies::RackLink {
        ranks_per_rack: (world_size / count) as u32,
        bandwidth_bytes_per_s: gb * 1e9,
        latency_ps: (latency_us * 1e6).round() as u64,
    };
    let link = link
        .with_racks(rack)
        .map_err(|e| src.at(rate, e.to_string()))?;
    Ok((
        link,
        format!(
            ", in {count} racks of {} ranks joined by {gb:.3} GB/s links (+{latency_us:.3} us)",
            rack.ranks_per_rack
        ),
    ))
}

/// Validates `[links]`: ideal links, with a world size of its own.
pub(super) fn ideal(
    src: &Source,
    raw: &RawScenario,
    spanned: &Spanned<RawLinks>,
) -> Result<super::topology::Network, ScenarioError> {
    let Some(world_size) = &raw.world_size else {
        return Err(src.at(
            spanned,
            "ideal links need a world_size (the number of ranks)",
        ));
    };
    let world_size = src.count(world_size, "world_size", 1, WORLD_SIZE_MAX as i64)? as usize;
    let links = spanned.get_ref();
    if let Some(model) = &links.model
        && model.get_ref() != "ideal"
    {
        return Err(src.at(
            model,
            format!(
                "unknown link model `{}`; expected \"ideal\" (packet and flow models need a [topology])",
                model.get_ref()
            ),
        ));
    }
    let latency_us = src.number(&links.latency_us, "latency_us", true)?;
    let bandwidth = src.number(&links.bandwidth_gb_per_s, "bandwidth_gb_per_s", false)?;
    let latency_ps = (latency_us * 1e6).round();
    if latency_ps > 1e18 {
        return Err(src.at(&links.latency_us, "latency_us is unreasonably large"));
    }
    let mut link = LinkSpec::new(latency_ps as u64, bandwidth * 1e9)
        .map_err(|e| src.at(&links.bandwidth_gb_per_s, e.to_string()))?;
    if let Some(o) = &links.overhead_us {
        let us = src.number(o, "overhead_us", true)?;
        if us > 1e12 {
            return Err(src.at(o, "overhead_us is unreasonably large"));
        }
        link = link.with_overhead_ps((us * 1e6).round() as u64);
    }
    let tuner_link = match &links.injection_gb_per_s {
        Some(i) => {
            let gb = src.number(i, "injection_gb_per_s", false)?;
            link = link
                .with_injection(gb * 1e9)
                .map_err(|e| src.at(i, e.to_string()))?;
            LinkSpec::new(
                link.latency_ps + link.overhead_ps,
                (gb * 1e9).min(bandwidth * 1e9),
            )
            .map_err(|e| src.at(i, e.to_string()))?
        }
        None => LinkSpec::new(link.latency_ps + link.overhead_ps, bandwidth * 1e9)
            .map_err(|e| src.at(&links.bandwidth_gb_per_s, e.to_string()))?,
    };
    Ok(super::topology::Network {
        config: NetworkConfig::Ideal(link),
        world_size,
        description: format!(
            "ideal links (latency {:.3} us, {:.2} GB/s per direction)",
            link.latency_ps as f64 / 1e6,
            link.bandwidth_bytes_per_s / 1e9
        ),
        tuner_link,
        max_collective_ranks: WORLD_SIZE_MAX,
        fold: None,
        node_turn: None,
        quarter_turn: None,
    })
}
