//! `[faults]`, `[search]` and `[[assert]]`: what one schedule may contain,
//! how the schedules are searched and within which bounds, and what must
//! hold on each of them.

use std::ops::Range;

use algorithms::Rank;
use toml::Spanned;

use super::raw::{RawAssert, RawFaults, RawSearch};
use super::{FAULTS_MAX, PCT_DEPTH_MAX, RETRY_COUNT_MAX, SCHEDULES_MAX, STEPS_MAX};
use crate::spec::{Assertion, Bounds, Faults, Search};
use engine::scenario::{ScenarioError, Source};

/// `[faults]` (absent: none, retry count 7).
pub(super) fn faults(
    src: &Source,
    raw: Option<&RawFaults>,
    world_size_max: usize,
) -> Result<Faults, ScenarioError> {
    let mut faults = Faults {
        retry_count: RETRY_COUNT_MAX,
        ..Faults::default()
    };
    let Some(f) = raw else {
        return Ok(faults);
    };
    let count =
        |v: &Option<Spanned<i64>>, what: &str, max: usize| -> Result<usize, ScenarioError> {
            match v {
                Some(v) => Ok(src.count(v, what, 0, max as i64)? as usize),
                None => Ok(0),
            }
        };
    faults.drops = count(&f.drops, "drops", FAULTS_MAX)?;
    faults.retransmit = f.retransmit.unwrap_or(false);
    if let Some(r) = &f.retry_count {
        faults.retry_count = src.count(r, "retry_count", 0, RETRY_COUNT_MAX as i64)? as usize;
    }
    faults.crashes = count(&f.crashes, "crashes", world_size_max)?;
    faults.timeouts = count(&f.timeouts, "timeouts", FAULTS_MAX)?;
    Ok(faults)
}

/// `[search]` (absent: exhaustive with default bounds).
pub(super) fn search(
    src: &Source,
    raw: Option<&RawSearch>,
) -> Result<(Search, Bounds), ScenarioError> {
    let mut bounds = Bounds::default();
    let Some(s) = raw else {
        return Ok((Search::Exhaustive, bounds));
    };
    let kind = s
        .kind
        .as_ref()
        .map_or("exhaustive", |k| k.get_ref().as_str());
    let misplaced = |v: &Option<Spanned<i64>>, key: &str| -> Result<(), ScenarioError> {
        match v {
            Some(v) => Err(src.at(v, format!("`{key}` does not apply to the {kind} search"))),
            None => Ok(()),
        }
    };
    let schedules = || -> Result<u64, ScenarioError> {
        match &s.schedules {
            Some(v) => Ok(src.count(v, "schedules", 1, SCHEDULES_MAX as i64)? as u64),
            None => Ok(1000),
        }
    };
    let seed = || -> Result<u64, ScenarioError> {
        match &s.seed {
            Some(v) => Ok(src.count(v, "seed", 0, i64::MAX)? as u64),
            None => Ok(1),
        }
    };
    let search = match kind {
        "exhaustive" => {
            misplaced(&s.schedules, "schedules")?;
            misplaced(&s.seed, "seed")?;
            misplaced(&s.depth, "depth")?;
            Search::Exhaustive
        }
        "random" => {
            misplaced(&s.depth, "depth")?;
            Search::Random {
                schedules: schedules()?,
                seed: seed()?,
            }
        }
        "pct" => Search::Pct {
            schedules: schedules()?,
            seed: seed()?,
            depth: match &s.depth {
                Some(v) => src.count(v, "depth", 1, PCT_DEPTH_MAX as i64)? as usize,
                None => 3,
            },
        },
        other => {
            let at = s.kind.as_ref().expect("only a written kind is unknown");
            return Err(src.at(
                at,
                format!("unknown search kind `{other}`; expected exhaustive, random or pct"),
            ));
        }
    };
    if let Some(v) = &s.max_schedules {
        bounds.max_schedules = src.count(v, "max_schedules", 1, SCHEDULES_MAX as i64)? as u64;
    }
    if let Some(v) = &s.max_depth {
        bounds.max_depth = src.count(v, "max_depth", 1, STEPS_MAX as i64)? as usize;
    }
    if let Some(v) = &s.delay_bound {
        bounds.delay_bound = Some(src.count(v, "delay_bound", 0, STEPS_MAX as i64)? as usize);
    }
    Ok((search, bounds))
}

/// One `[[assert]]`.
pub(super) fn assertion(
    src: &Source,
    spanned: &Spanned<RawAssert>,
    world_size_max: usize,
) -> Result<Assertion, ScenarioError> {
    let a = spanned.get_ref();
    let kind = a.kind.get_ref().as_str();
    let misplaced = |given: Option<Range<usize>>, key: &str| match given {
        Some(at) => Err(src.error(
            Some(at),
            format!("`{key}` does not apply to a {kind} assertion"),
        )),
        None => Ok(()),
    };
    let required = |v: &Option<Spanned<i64>>, key: &str| -> Result<u64, ScenarioError> {
        match v {
            Some(v) => Ok(src.count(v, key, 0, i64::MAX)? as u64),
            None => Err(src.at(spanned, format!("a {kind} assertion needs `{key}`"))),
        }
    };
    let rank = || -> Result<Option<Rank>, ScenarioError> {
        match &a.rank {
            Some(r) => Ok(Some(
                src.count(r, "rank", 0, world_size_max as i64 - 1)? as usize
            )),
            None => Ok(None),
        }
    };
    let bytes_at = a.bytes.as_ref().map(|b| b.span());
    let messages_at = a.messages.as_ref().map(|m| m.span());
    let steps_at = a.steps.as_ref().map(|s| s.span());
    match kind {
        "max_bytes_sent" => {
            misplaced(messages_at, "messages")?;
            misplaced(steps_at, "steps")?;
            let Some(bytes) = &a.bytes else {
                return Err(src.at(spanned, "a max_bytes_sent assertion needs `bytes`"));
            };
            Ok(Assertion::MaxBytesSent {
                rank: rank()?,
                bytes: bytes.get_ref().0,
            })
        }
        "max_messages_sent" => {
            misplaced(bytes_at, "bytes")?;
            misplaced(steps_at, "steps")?;
            Ok(Assertion::MaxMessagesSent {
                rank: rank()?,
                messages: required(&a.messages, "messages")?,
            })
        }
        "max_steps" => {
            misplaced(a.rank.as_ref().map(|r| r.span()), "rank")?;
            misplaced(bytes_at, "bytes")?;
            misplaced(messages_at, "messages")?;
            Ok(Assertion::MaxSteps {
                steps: required(&a.steps, "steps")?,
            })
        }
        other => Err(src.at(
            &a.kind,
            format!(
                "unknown assert kind `{other}`; expected max_bytes_sent, max_messages_sent or max_steps"
            ),
        )),
    }
}
