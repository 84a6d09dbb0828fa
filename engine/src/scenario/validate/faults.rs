//! `[[inject]]` entries (programming mistakes, for deadlock studies) and
//! `[[fault]]` entries (stragglers and crashes of ranks) validated into
//! [`Inject`] and [`Fault`].

use algorithms::Time;
use toml::Spanned;

use super::super::raw::{RawFault, RawInject};
use super::super::{Fault, Inject, ScenarioError};
use super::{Source, micros};

/// Validates one `[[inject]]` entry.
pub(super) fn inject(
    src: &Source,
    spanned: &Spanned<RawInject>,
    world_size: usize,
) -> Result<Inject, ScenarioError> {
    let i = spanned.get_ref();
    let max_rank = world_size as i64 - 1;
    let rank = src.count(&i.rank, "rank", 0, max_rank)? as usize;
    match i.kind.get_ref().as_str() {
        "extra_recv" => {
            let Some(from) = &i.from else {
                return Err(src.error(
                    Some(spanned.span()),
                    "an extra_recv inject needs `from`, the rank it waits for",
                ));
            };
            let from = src.count(from, "from", 0, max_rank)? as usize;
            Ok(Inject::ExtraRecv { rank, from })
        }
        "skip" => Ok(Inject::Skip { rank }),
        "count_mismatch" => Ok(Inject::CountMismatch { rank }),
        "corrupt_result" => Ok(Inject::CorruptResult { rank }),
        other => Err(src.at(
            &i.kind,
            format!(
                "unknown inject kind `{other}`; expected one of extra_recv, skip, count_mismatch, corrupt_result"
            ),
        )),
    }
}

/// Validates one `[[fault]]` entry.
pub(super) fn fault(
    src: &Source,
    spanned: &Spanned<RawFault>,
    world_size: usize,
) -> Result<Fault, ScenarioError> {
    let f = spanned.get_ref();
    let rank = src.count(&f.rank, "rank", 0, world_size as i64 - 1)? as usize;
    let misplaced = |name: &str, given: bool| -> Result<(), ScenarioError> {
        if given {
            return Err(src.at(
                &f.kind,
                format!("`{name}` does not apply to a {} fault", f.kind.get_ref()),
            ));
        }
        Ok(())
    };
    match f.kind.get_ref().as_str() {
        "straggler" => {
            misplaced("at_us", f.at_us.is_some())?;
            if f.delay_us.is_none() && f.compute_slowdown.is_none() {
                return Err(src.at(
                    spanned,
                    "a straggler needs delay_us (how late it starts each call), compute_slowdown, or both",
                ));
            }
            let delay_ps = match &f.delay_us {
                Some(d) => micros(src, d, "delay_us")?,
                None => 0,
            };
            let compute_slowdown = match &f.compute_slowdown {
                Some(s) => {
                    let x = src.number(s, "compute_slowdown", false)?;
                    if !(1.0..=1e6).contains(&x) {
                        return Err(src.at(
                            s,
                            format!("compute_slowdown must be between 1 and 1e6, got {x}"),
                        ));
                    }
                    x
                }
                None => 1.0,
            };
            Ok(Fault::Straggler {
                rank,
                delay_ps,
                compute_slowdown,
            })
        }
        "crash" => {
            misplaced("delay_us", f.delay_us.is_some())?;
            misplaced("compute_slowdown", f.compute_slowdown.is_some())?;
            let Some(at) = &f.at_us else {
                return Err(src.at(spanned, "a crash needs at_us, the virtual time it happens"));
            };
            Ok(Fault::Crash {
                rank,
                at: Time(micros(src, at, "at_us")?),
            })
        }
        other => Err(src.at(
            &f.kind,
            format!("unknown fault kind `{other}`; expected straggler or crash"),
        )),
    }
}
