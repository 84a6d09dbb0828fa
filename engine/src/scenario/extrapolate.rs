//! Validation of `extrapolate_above` (see [`crate::study::extrapolate`]):
//! two distinct sizes to draw the line through, a size above them to
//! carry it to, nothing that acts at a fixed time or on a fixed rank, and
//! one plan (algorithm, protocol, channels, chunk) at the bases and at
//! every size carried to.

use toml::Spanned;

use super::raw::RawScenario;
use super::size::ByteSize;
use super::validate::Source;
use super::{CollectiveSpec, Scenario, ScenarioError};
use crate::study::extrapolate::Plan;

/// Checks one entry's `extrapolate_above = T` on its own: half of `T` and
/// `T`, in whole size units, are two distinct sizes, and some size of the
/// entry lies above `T`.
pub(super) fn check_bases(
    src: &Source,
    above: &Spanned<ByteSize>,
    spec: &CollectiveSpec,
) -> Result<(), ScenarioError> {
    let t = above.get_ref().0;
    let unit = spec.size_unit().max(1);
    let (low, high) = spec.extrapolation_bases().unwrap_or((0, 0));
    if low == 0 || low >= high {
        return Err(src.at(
            above,
            format!(
                "extrapolate_above = {t} leaves no two sizes to draw the line through (half of \
                 it and it, in whole {unit}-byte units); use at least {}",
                2 * unit
            ),
        ));
    }
    let sizes = spec.sizes();
    if !sizes.iter().any(|&s| spec.extrapolates(s)) {
        return Err(src.at(
            above,
            format!(
                "extrapolate_above = {t}: no size of this entry is above it (the largest is {} \
                 B), so nothing would be extrapolated; lower it or drop it",
                sizes.last().copied().unwrap_or(0)
            ),
        ));
    }
    Ok(())
}

/// Checks every entry with `extrapolate_above` against the whole
/// scenario: no `[[link_fault]]`, `[[fault]]`, `[[inject]]` or
/// `timeout_ms` (they act at fixed times or on fixed ranks, which a line
/// through two sizes does not carry), and the tuner's or the scenario's
/// plan the same at both bases and at every size above them (else the
/// error names the first size that differs and the smallest doubling of
/// `extrapolate_above` that would hold).
pub(super) fn check_scenario(
    src: &Source,
    raw: &RawScenario,
    scenario: &Scenario,
) -> Result<(), ScenarioError> {
    for (raw_c, c) in raw.collective.iter().zip(&scenario.collectives) {
        let Some(above) = &raw_c.get_ref().extrapolate_above else {
            continue;
        };
        let acting: Vec<&str> = [
            (!raw.link_fault.is_empty(), "[[link_fault]]"),
            (!raw.fault.is_empty(), "[[fault]]"),
            (!raw.inject.is_empty(), "[[inject]]"),
            (raw.timeout_ms.is_some(), "timeout_ms"),
        ]
        .into_iter()
        .filter_map(|(present, name)| present.then_some(name))
        .collect();
        if !acting.is_empty() {
            return Err(src.at(
                above,
                format!(
                    "extrapolate_above needs a run without {}: they act at fixed times or on \
                     fixed ranks, which the line through two sizes does not carry to a larger \
                     one; drop extrapolate_above to simulate every size",
                    acting.join(" or ")
                ),
            ));
        }
        if let Some((size, base, plan, base_plan)) = mismatch(scenario, c, c.extrapolate_above) {
            let hint = match raise(scenario, c) {
                Some(t) => format!("extrapolate_above = {t} keeps one plan"),
                None => "no larger extrapolate_above keeps one plan; drop it to simulate every \
                         size"
                    .to_string(),
            };
            return Err(src.at(
                above,
                format!(
                    "extrapolate_above = {}: {size} B runs {}, but the base {base} B runs {}, \
                     so the line through the bases does not describe it; {hint}",
                    above.get_ref().0,
                    plan.describe(),
                    base_plan.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// The first extrapolated size whose plan differs from a base's, with
/// that base and both plans; `None` when all share one.
fn mismatch(
    scenario: &Scenario,
    c: &CollectiveSpec,
    above: Option<u64>,
) -> Option<(u64, u64, Plan, Plan)> {
    let c = CollectiveSpec {
        extrapolate_above: above,
        ..c.clone()
    };
    let (low, high) = c.extrapolation_bases()?;
    let plan = |size: u64| Plan::at(scenario, &c, &crate::tuning::AlgoFilter::default(), size);
    let bases = [(low, plan(low)), (high, plan(high))];
    for size in c.sizes().into_iter().filter(|&s| c.extrapolates(s)) {
        let here = plan(size);
        if let Some((base, base_plan)) = bases.iter().find(|(_, p)| *p != here) {
            return Some((size, *base, here, base_plan.clone()));
        }
    }
    None
}

/// The smallest `extrapolate_above` that doubles the entry's one and
/// keeps one plan, below its largest size.
fn raise(scenario: &Scenario, c: &CollectiveSpec) -> Option<u64> {
    let largest = c.sizes().last().copied()?;
    let mut t = c.extrapolate_above?;
    loop {
        t = t.checked_mul(2)?;
        if t >= largest {
            return None;
        }
        if mismatch(scenario, c, Some(t)).is_none() {
            return Some(t);
        }
    }
}
