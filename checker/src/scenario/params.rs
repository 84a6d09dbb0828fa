//! `[params]`: the parameter axes of a check, each a value, a list or a
//! range, checked value by value and then against the calls (roots of
//! rooted collectives, whole alltoall blocks) and the point cap.

use std::fmt;
use std::ops::Range;

use algorithms::Collective;
use toml::Spanned;

use super::raw::{RawAxis, RawCall, RawParams};
use super::{BUFFER_SLOTS_MAX, COUNT_MAX, POINTS_MAX, WORLD_SIZE_MAX};
use crate::spec::{Axes, Buffering, CallSpec};
use engine::scenario::{ScenarioError, Source};

/// An axis value and where it is written (`None`: a default).
#[derive(Clone, Debug)]
struct Located<T> {
    value: T,
    span: Option<Range<usize>>,
}

/// Reads one value of an axis at a place in the file.
type Reader<'a, T> = dyn Fn(&toml::Value, Range<usize>) -> Result<Located<T>, ScenarioError> + 'a;

/// An axis's values with their places, and the place of the axis itself.
struct Axis<T> {
    values: Vec<Located<T>>,
    span: Option<Range<usize>>,
}

impl<T: Copy> Axis<T> {
    fn values(&self) -> Vec<T> {
        self.values.iter().map(|v| v.value).collect()
    }
}

impl Axis<i64> {
    /// The values as counts (every integer axis is checked non-negative).
    fn counts(&self) -> Vec<usize> {
        let count = |v: &Located<i64>| usize::try_from(v.value).expect("checked non-negative");
        self.values.iter().map(count).collect()
    }
}

/// Validates `[params]` (absent: every default) against the calls.
pub(super) fn axes(
    src: &Source,
    params: Option<&Spanned<RawParams>>,
    raw_calls: &[Spanned<RawCall>],
    calls: &[CallSpec],
) -> Result<Axes, ScenarioError> {
    let p = params.map(|p| p.get_ref());
    let field = |f: fn(&RawParams) -> &Option<Spanned<RawAxis>>| p.and_then(|p| f(p).as_ref());
    let count_in = |min: i64, max: i64| move |v: &toml::Value| whole(v, min, max);
    let world_size = axis(
        src,
        "world_size",
        field(|p| &p.world_size),
        &[2, 3, 4],
        count_in(1, WORLD_SIZE_MAX as i64),
        true,
    )?;
    let count = axis(
        src,
        "count",
        field(|p| &p.count),
        &[4],
        count_in(0, COUNT_MAX as i64),
        true,
    )?;
    let chunks = axis(
        src,
        "chunks",
        field(|p| &p.chunks),
        &[1],
        count_in(1, COUNT_MAX as i64),
        true,
    )?;
    let root = axis(
        src,
        "root",
        field(|p| &p.root),
        &[0],
        count_in(0, WORLD_SIZE_MAX as i64 - 1),
        true,
    )?;
    let in_place = axis(
        src,
        "in_place",
        field(|p| &p.in_place),
        &[true],
        |v| match v {
            toml::Value::Boolean(b) => Ok(*b),
            other => Err(format!("true or false, got {}", a_type(other))),
        },
        false,
    )?;
    let buffering = axis(
        src,
        "buffering",
        field(|p| &p.buffering),
        &[Buffering::Eager(8)],
        buffering,
        false,
    )?;

    check_roots(src, &world_size, &root, raw_calls, calls)?;
    check_alltoall_blocks(src, &world_size, &count, raw_calls, calls)?;

    let lengths = [
        world_size.values.len(),
        count.values.len(),
        chunks.values.len(),
        root.values.len(),
        in_place.values.len(),
        buffering.values.len(),
    ];
    let points = lengths
        .iter()
        .try_fold(1usize, |acc, &l| acc.checked_mul(l))
        .unwrap_or(usize::MAX);
    if points > POINTS_MAX {
        let shown: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
        return Err(src.error(
            params.map(|p| p.span()),
            format!(
                "[params] has {points} parameter points ({}), more than the {POINTS_MAX} limit; use fewer or shorter axes",
                shown.join(" x ")
            ),
        ));
    }
    Ok(Axes {
        world_size: world_size.counts(),
        count: count.counts(),
        chunks: chunks.counts(),
        root: root.counts(),
        in_place: in_place.values(),
        buffering: buffering.values(),
    })
}

/// One axis: the default when absent, else a value, a list (no value
/// twice) or, where `ranges` allows, a range of whole numbers; each value
/// read by `scalar`, which says what it expected when it refuses one.
fn axis<T: Copy + PartialEq + fmt::Display>(
    src: &Source,
    name: &str,
    raw: Option<&Spanned<RawAxis>>,
    default: &[T],
    scalar: impl Fn(&toml::Value) -> Result<T, String>,
    ranges: bool,
) -> Result<Axis<T>, ScenarioError> {
    let Some(raw) = raw else {
        let values = default
            .iter()
            .map(|&value| Located { value, span: None })
            .collect();
        return Ok(Axis { values, span: None });
    };
    let read = |v: &toml::Value, span: Range<usize>| {
        scalar(v)
            .map(|value| Located {
                value,
                span: Some(span.clone()),
            })
            .map_err(|wanted| src.error(Some(span), format!("{name} values are {wanted}")))
    };
    let values = match raw.get_ref() {
        RawAxis::One(v) => vec![read(v, raw.span())?],
        RawAxis::List(items) if items.is_empty() => {
            return Err(src.at(
                raw,
                format!("the {name} list is empty; give at least one value"),
            ));
        }
        RawAxis::List(items) => {
            let mut values: Vec<Located<T>> = Vec::with_capacity(items.len());
            for item in items {
                let v = read(item.get_ref(), item.span())?;
                if values.iter().any(|seen| seen.value == v.value) {
                    return Err(src.at(item, format!("the {name} list has {} twice", v.value)));
                }
                values.push(v);
            }
            values
        }
        RawAxis::Range(_) if !ranges => {
            return Err(src.at(
                raw,
                format!("{name} takes a value or a list of values, not a range"),
            ));
        }
        RawAxis::Range(entries) => range(src, name, raw, entries, &read)?,
    };
    Ok(Axis {
        values,
        span: Some(raw.span()),
    })
}

/// A range table `{ from, to, step }`, expanded (inclusive, step 1 by
/// default); every value is located at `to`, the end a user would change.
fn range<T: Copy>(
    src: &Source,
    name: &str,
    at: &Spanned<RawAxis>,
    entries: &[(Spanned<String>, Spanned<toml::Value>)],
    read: &Reader<T>,
) -> Result<Vec<Located<T>>, ScenarioError> {
    for (key, _) in entries {
        if !["from", "to", "step"].contains(&key.get_ref().as_str()) {
            return Err(src.at(
                key,
                format!(
                    "unknown range key `{}`; a range has from, to and optionally step",
                    key.get_ref()
                ),
            ));
        }
    }
    let get = |k: &str| entries.iter().find(|(key, _)| key.get_ref() == k);
    let (Some((_, from)), Some((_, to))) = (get("from"), get("to")) else {
        return Err(src.at(
            at,
            format!("a range of {name} needs `from` and `to`, e.g. {{ from = 2, to = 5 }}"),
        ));
    };
    let step = match get("step") {
        None => 1,
        Some((_, s)) => whole(s.get_ref(), 1, COUNT_MAX as i64).map_err(|_| {
            src.at(
                s,
                format!(
                    "a range's step must be a whole number from 1 to {COUNT_MAX}, got {}",
                    s.get_ref()
                ),
            )
        })?,
    };
    // Reading `from` and `to` checks them against the axis's limits; every
    // value between them then lies within the limits too.
    read(from.get_ref(), from.span())?;
    read(to.get_ref(), to.span())?;
    let (first, last) = (as_int(from.get_ref()), as_int(to.get_ref()));
    if first > last {
        return Err(src.at(
            to,
            format!("the range ends (to = {last}) below its start (from = {first})"),
        ));
    }
    (first..=last)
        .step_by(usize::try_from(step).expect("the step is at least 1"))
        .map(|v| read(&toml::Value::Integer(v), to.span()))
        .collect()
}

/// A whole number in `min..=max`, or what was expected instead.
fn whole(v: &toml::Value, min: i64, max: i64) -> Result<i64, String> {
    let wanted = || format!("whole numbers from {min} to {max}");
    match v {
        toml::Value::Integer(x) if (min..=max).contains(x) => Ok(*x),
        toml::Value::Integer(x) => Err(format!("{}, got {x}", wanted())),
        other => Err(format!("{}, got {}", wanted(), a_type(other))),
    }
}

/// "a string", "an integer", ...: the type of a value, for messages.
fn a_type(v: &toml::Value) -> String {
    let t = v.type_str();
    let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {t}")
}

/// The integer of a value [`whole`] accepted.
fn as_int(v: &toml::Value) -> i64 {
    v.as_integer().expect("checked to be an integer")
}

/// `"eager:K"`, `"rendezvous"` (`eager:0`) or `"unbounded"`.
fn buffering(v: &toml::Value) -> Result<Buffering, String> {
    let wanted = format!(
        "\"eager:K\" (K from 0 to {BUFFER_SLOTS_MAX} buffer slots per connection), \"rendezvous\" or \"unbounded\""
    );
    let toml::Value::String(s) = v else {
        return Err(format!("{wanted}, got {}", a_type(v)));
    };
    match s.as_str() {
        "rendezvous" => Ok(Buffering::Eager(0)),
        "unbounded" => Ok(Buffering::Unbounded),
        _ => s
            .strip_prefix("eager:")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&k| k <= BUFFER_SLOTS_MAX)
            .map(Buffering::Eager)
            .ok_or_else(|| format!("{wanted}, got \"{s}\"")),
    }
}

/// Roots of rooted calls must exist at every world size.
fn check_roots(
    src: &Source,
    world_size: &Axis<i64>,
    root: &Axis<i64>,
    raw_calls: &[Spanned<RawCall>],
    calls: &[CallSpec],
) -> Result<(), ScenarioError> {
    let Some(rooted) = calls.iter().position(|c| c.collective.has_root()) else {
        return Ok(());
    };
    let smallest = world_size
        .values
        .iter()
        .min_by_key(|w| w.value)
        .expect("axes are never empty");
    for r in &root.values {
        if r.value >= smallest.value {
            let call = &calls[rooted];
            return Err(src.error(
                r.span.clone().or_else(|| Some(raw_calls[rooted].span())),
                format!(
                    "root {} does not exist at world size {}, the smallest, and call `{}` ({}) has a root; roots must be below {}",
                    r.value, smallest.value, call.id, call.collective, smallest.value
                ),
            ));
        }
    }
    Ok(())
}

/// An alltoall splits each buffer into one block per rank: its count must
/// divide by every world size.
fn check_alltoall_blocks(
    src: &Source,
    world_size: &Axis<i64>,
    count: &Axis<i64>,
    raw_calls: &[Spanned<RawCall>],
    calls: &[CallSpec],
) -> Result<(), ScenarioError> {
    let Some(i) = calls
        .iter()
        .position(|c| c.collective == Collective::Alltoall)
    else {
        return Ok(());
    };
    for c in &count.values {
        for w in &world_size.values {
            if c.value % w.value != 0 {
                let at = c
                    .span
                    .clone()
                    .or_else(|| world_size.span.clone())
                    .unwrap_or_else(|| raw_calls[i].get_ref().collective.span());
                let default = if c.span.is_none() {
                    " (the default; set count in [params])"
                } else {
                    ""
                };
                return Err(src.error(
                    Some(at),
                    format!(
                        "count {}{default} is not divisible by world size {}: alltoall call `{}` sends every rank an equal block, so it needs a count divisible by every world size",
                        c.value, w.value, calls[i].id
                    ),
                ));
            }
        }
    }
    Ok(())
}
