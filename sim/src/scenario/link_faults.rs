//! Validation of `[[link_fault]]`: scheduled faults of the links between
//! two vertices (down, degraded, flapping), expanded into the timed
//! bandwidth changes the network models apply.

use toml::Spanned;
use topologies::Topology;

use super::ScenarioError;
use super::raw::RawLinkFault;
use super::validate::{Source, micros};
use crate::network::LinkChange;
use algorithms::Time;

/// The most link changes a scenario may schedule (a flapping link over a
/// long window could otherwise ask for millions).
pub const LINK_CHANGES_MAX: usize = 100_000;

/// Validates every `[[link_fault]]` against `topology`; returns the
/// changes, sorted by time (stable, so faults apply in file order at equal
/// times), and one note per fault.
pub(super) fn link_faults(
    src: &Source,
    faults: &[Spanned<RawLinkFault>],
    topology: Option<&Topology>,
) -> Result<(Vec<LinkChange>, Vec<String>), ScenarioError> {
    let mut changes: Vec<(LinkChange, bool)> = Vec::new();
    let mut notes = Vec::new();
    // (link, [start, end), where it was given) of every fault so far.
    let mut windows: Vec<(topologies::LinkId, (u64, u64), String)> = Vec::new();
    for spanned in faults {
        let f = spanned.get_ref();
        let Some(t) = topology else {
            return Err(src.at(
                spanned,
                "link faults need a [topology]: ideal links have no links to name",
            ));
        };
        let vertex = |name: &Spanned<String>| {
            t.find(name.get_ref()).ok_or_else(|| {
                src.at(
                    name,
                    format!("no vertex named `{}` in the topology", name.get_ref()),
                )
            })
        };
        let (a, b) = (vertex(&f.from)?, vertex(&f.to)?);
        let both = f.both_directions.unwrap_or(true);
        let links: Vec<_> = t
            .link_ids()
            .filter(|&l| {
                let (x, y) = t.ends(l);
                (x, y) == (a, b) || (both && (x, y) == (b, a))
            })
            .collect();
        if links.is_empty() {
            return Err(src.at(
                &f.to,
                format!(
                    "no link joins `{}` and `{}`",
                    f.from.get_ref(),
                    f.to.get_ref()
                ),
            ));
        }
        let at = micros(src, &f.at_us, "at_us")?;
        let until = match &f.until_us {
            Some(u) => {
                let until = micros(src, u, "until_us")?;
                if until <= at {
                    return Err(src.at(u, "until_us must be after at_us"));
                }
                Some(until)
            }
            None => None,
        };
        let kind = f.kind.get_ref().as_str();
        let reject = |name: &str, given: bool| -> Result<(), ScenarioError> {
            if given {
                return Err(src.at(
                    &f.kind,
                    format!("`{name}` does not apply to a {kind} link fault"),
                ));
            }
            Ok(())
        };
        // The window this fault holds its links in, for the overlap check.
        let end = until.unwrap_or(u64::MAX);
        for &link in &links {
            if let Some((_, _, earlier)) = windows
                .iter()
                .find(|(l, (s, e), _)| *l == link && at < *e && *s < end)
            {
                return Err(src.at(
                    &f.at_us,
                    format!(
                        "this fault overlaps the fault on {} at {}; give one fault per link and time window",
                        t.link_name(link),
                        earlier
                    ),
                ));
            }
        }
        let here = format!("line {}", src.line_of(spanned));
        windows.extend(links.iter().map(|&l| (l, (at, end), here.clone())));
        // (time, factor) steps of this fault.
        let mut steps: Vec<(u64, f64)> = Vec::new();
        let window = match until {
            Some(u) => format!("from {} to {}", Time(at), Time(u)),
            None => format!("from {} on", Time(at)),
        };
        let what = match kind {
            "down" => {
                reject("bandwidth_factor", f.bandwidth_factor.is_some())?;
                reject("period_us", f.period_us.is_some())?;
                reject("down_us", f.down_us.is_some())?;
                steps.push((at, 0.0));
                if let Some(u) = until {
                    steps.push((u, 1.0));
                }
                format!("down {window}")
            }
            "degraded" => {
                reject("period_us", f.period_us.is_some())?;
                reject("down_us", f.down_us.is_some())?;
                let Some(factor) = &f.bandwidth_factor else {
                    return Err(src.at(
                        spanned,
                        "a degraded link needs bandwidth_factor (e.g. 0.25)",
                    ));
                };
                let x = src.number(factor, "bandwidth_factor", false)?;
                if x > 1.0 {
                    return Err(src.at(
                        factor,
                        format!("bandwidth_factor must be at most 1, got {x}"),
                    ));
                }
                steps.push((at, x));
                if let Some(u) = until {
                    steps.push((u, 1.0));
                }
                format!("degraded to {x:.3e} of its bandwidth {window}")
            }
            "flapping" => {
                reject("bandwidth_factor", f.bandwidth_factor.is_some())?;
                let (Some(period), Some(down)) = (&f.period_us, &f.down_us) else {
                    return Err(src.at(
                        spanned,
                        "a flapping link needs period_us and down_us (down for down_us in every period_us)",
                    ));
                };
                let Some(u) = until else {
                    return Err(src.at(spanned, "a flapping link needs until_us, when it settles"));
                };
                let (period, down_ps) = (
                    micros(src, period, "period_us")?,
                    micros(src, down, "down_us")?,
                );
                if period == 0 || down_ps == 0 || down_ps >= period {
                    return Err(src.at(
                        f.down_us.as_ref().expect("given"),
                        "down_us must be positive and shorter than period_us",
                    ));
                }
                let mut t0 = at;
                while t0 < u {
                    steps.push((t0, 0.0));
                    steps.push(((t0 + down_ps).min(u), 1.0));
                    if steps.len() * links.len() > LINK_CHANGES_MAX {
                        break; // reported just below
                    }
                    t0 += period;
                }
                format!(
                    "flapping {window}: down {} in every {}",
                    Time(down_ps),
                    Time(period)
                )
            }
            other => {
                return Err(src.at(
                    &f.kind,
                    format!(
                        "unknown link fault kind `{other}`; expected down, degraded or flapping"
                    ),
                ));
            }
        };
        for (i, &(time, factor)) in steps.iter().enumerate() {
            // Steps alternate: a period starts, then (odd steps) it ends.
            let ends = i % 2 == 1;
            for &link in &links {
                let change = LinkChange::bandwidth(Time(time), link, factor);
                changes.push((change, ends));
            }
        }
        if changes.len() > LINK_CHANGES_MAX {
            return Err(src.at(
                spanned,
                format!("the link faults schedule more than {LINK_CHANGES_MAX} link changes; use a longer period or a shorter window"),
            ));
        }
        let arrow = if both { "<->" } else { "->" };
        notes.push(format!(
            "link fault: {}{arrow}{} ({} link direction(s)) {what}",
            f.from.get_ref(),
            f.to.get_ref(),
            links.len()
        ));
    }
    // At equal times, a fault's end applies before another's start, so two
    // windows that meet hand over whatever their order in the file.
    changes.sort_by_key(|(c, ends)| (c.time, !*ends));
    Ok((changes.into_iter().map(|(c, _)| c).collect(), notes))
}
