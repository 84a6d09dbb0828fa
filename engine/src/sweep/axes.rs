//! The axes of a `[sweep]`: their names, the values each takes, and the
//! parsing of value lists and ranges, every mistake located at its
//! line:column.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use crate::scenario::{ByteSize, ScenarioError, Source};

/// The most points (the product of the axes' lengths) one sweep may have;
/// also the most values one range may expand to. Beyond it the sweep
/// is almost certainly a typo (a step of 1 instead of a factor).
pub const SWEEP_POINTS_MAX: usize = 100_000;

/// A parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisKind {
    /// Every `[[collective]]`'s `world_size` (and the scenario's, where it
    /// gives one).
    WorldSize,
    /// The topology preset's node count: `nodes` of `fat_tree`, `hosts`
    /// of `leaf_spine`.
    Nodes,
    /// Every `[[collective]]`'s size: `min_bytes = max_bytes` (an
    /// `extrapolate_above` the size does not exceed dropped).
    Bytes,
    /// Every `[[collective]]`'s `algorithm`.
    Algorithm,
    /// The topology preset's `oversubscription`.
    Oversubscription,
    /// The topology preset's `nic` (a link kind name).
    Nic,
    /// The `loss_rate` of every `[[link_fault]]` of kind `lossy`.
    LossRate,
    /// The scenario's `seed`.
    Seed,
}

/// What kind of value an axis takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ValueType {
    /// A whole number of at least `min`.
    Count { min: i64 },
    /// A size in bytes: an integer or `"64M"`-style text.
    Size,
    /// A finite number.
    Number,
    /// A name (text).
    Name,
}

impl AxisKind {
    /// Every axis, in the order the documentation lists them.
    pub const ALL: [AxisKind; 8] = [
        AxisKind::WorldSize,
        AxisKind::Nodes,
        AxisKind::Bytes,
        AxisKind::Algorithm,
        AxisKind::Oversubscription,
        AxisKind::Nic,
        AxisKind::LossRate,
        AxisKind::Seed,
    ];

    /// The axis's key in `[sweep]`, and its column in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::WorldSize => "world_size",
            AxisKind::Nodes => "nodes",
            AxisKind::Bytes => "bytes",
            AxisKind::Algorithm => "algorithm",
            AxisKind::Oversubscription => "oversubscription",
            AxisKind::Nic => "nic",
            AxisKind::LossRate => "loss_rate",
            AxisKind::Seed => "seed",
        }
    }

    fn from_name(name: &str) -> Option<AxisKind> {
        AxisKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn value_type(self) -> ValueType {
        match self {
            AxisKind::WorldSize | AxisKind::Nodes => ValueType::Count { min: 1 },
            AxisKind::Seed => ValueType::Count { min: 0 },
            AxisKind::Bytes => ValueType::Size,
            AxisKind::Oversubscription | AxisKind::LossRate => ValueType::Number,
            AxisKind::Algorithm | AxisKind::Nic => ValueType::Name,
        }
    }
}

/// One value of an axis.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisValue {
    /// A whole number (counts, sizes in bytes, seeds).
    Int(i64),
    /// A number.
    Number(f64),
    /// A name.
    Name(String),
}

impl AxisValue {
    /// The value as it is written into the scenario.
    pub fn to_toml(&self) -> toml::Value {
        match self {
            AxisValue::Int(i) => toml::Value::Integer(*i),
            AxisValue::Number(x) => toml::Value::Float(*x),
            AxisValue::Name(s) => toml::Value::String(s.clone()),
        }
    }
}

/// As the CSV shows it: integers in full (sizes in bytes), numbers in
/// their shortest exact form, names as written.
impl fmt::Display for AxisValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisValue::Int(i) => write!(f, "{i}"),
            AxisValue::Number(x) => write!(f, "{x}"),
            AxisValue::Name(s) => f.write_str(s),
        }
    }
}

/// One axis of a sweep: which parameter, and its values in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The parameter.
    pub kind: AxisKind,
    /// The values, in the order written (ranges ascending).
    pub values: Vec<AxisValue>,
    /// Where its key is in the file.
    pub span: Range<usize>,
}

/// Parses the `[sweep]` table `table` (its key at `key`): the axes in the
/// order written, with the product of their lengths capped at
/// [`SWEEP_POINTS_MAX`].
pub(crate) fn parse(
    src: &Source,
    key: &Spanned<DeString>,
    table: &DeTable,
) -> Result<Vec<Axis>, ScenarioError> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    if entries.is_empty() {
        return Err(src.at(
            key,
            format!("[sweep] has no axis; give at least one of {}", axis_names()),
        ));
    }
    let axes = entries
        .into_iter()
        .map(|(k, v)| axis(src, k, v))
        .collect::<Result<Vec<_>, _>>()?;
    let lengths: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
    let points = axes
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(a.values.len()));
    match points {
        Some(p) if p <= SWEEP_POINTS_MAX => Ok(axes),
        _ => Err(src.at(
            key,
            format!(
                "the sweep has {} points ({}), more than the {SWEEP_POINTS_MAX} limit; use fewer or shorter axes",
                points.map_or_else(|| "too many".to_string(), |p| p.to_string()),
                lengths.join(" x ")
            ),
        )),
    }
}

fn axis_names() -> String {
    let names: Vec<&str> = AxisKind::ALL.iter().map(|k| k.name()).collect();
    names.join(", ")
}

/// One axis: a list of values or a range table.
fn axis(
    src: &Source,
    key: &Spanned<DeString>,
    value: &Spanned<DeValue>,
) -> Result<Axis, ScenarioError> {
    let Some(kind) = AxisKind::from_name(key.get_ref()) else {
        return Err(src.at(
            key,
            format!(
                "unknown sweep axis `{}`; expected one of {}",
                key.get_ref(),
                axis_names()
            ),
        ));
    };
    let name = kind.name();
    let values = match value.get_ref() {
        DeValue::Array(items) if items.is_empty() => {
            return Err(src.at(
                value,
                format!("the {name} axis lists no value; give at least one"),
            ));
        }
        DeValue::Array(items) => {
            let mut seen = BTreeSet::new();
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                let v = scalar(src, kind, item)?;
                if !seen.insert(v.to_string()) {
                    return Err(src.at(item, format!("the {name} axis lists {v} twice")));
                }
                values.push(v);
            }
            values
        }
        DeValue::Table(t) => range(src, kind, value, t)?,
        other => {
            return Err(src.at(
                value,
                format!(
                    "the {name} axis must be a list of values, e.g. [8, 16], or a range, \
                     e.g. {{ from = 8, to = 64, factor = 2 }}; got a {}",
                    other.type_str()
                ),
            ));
        }
    };
    Ok(Axis {
        kind,
        values,
        span: key.span(),
    })
}

/// One value of `kind`'s type.
fn scalar(src: &Source, kind: AxisKind, v: &Spanned<DeValue>) -> Result<AxisValue, ScenarioError> {
    let name = kind.name();
    let wrong = |wanted: &str| {
        src.at(
            v,
            format!(
                "{name} values are {wanted}, got a {}",
                v.get_ref().type_str()
            ),
        )
    };
    match (kind.value_type(), v.get_ref()) {
        (ValueType::Count { min }, DeValue::Integer(_)) => {
            let x = integer(src, v)?;
            if x < min {
                return Err(src.at(v, format!("{name} values must be at least {min}, got {x}")));
            }
            Ok(AxisValue::Int(x))
        }
        (ValueType::Count { .. }, _) => Err(wrong("whole numbers")),
        (ValueType::Size, DeValue::Integer(_)) => {
            let x = integer(src, v)?;
            if x < 0 {
                return Err(src.at(v, format!("a size cannot be negative, got {x}")));
            }
            Ok(AxisValue::Int(x))
        }
        (ValueType::Size, DeValue::String(s)) => {
            let bytes = ByteSize::parse(s).map_err(|e| src.at(v, e))?;
            i64::try_from(bytes.0)
                .map(AxisValue::Int)
                .map_err(|_| src.at(v, format!("size `{s}` is too large")))
        }
        (ValueType::Size, _) => Err(wrong("sizes (an integer or a string like \"64M\")")),
        (ValueType::Number, DeValue::Integer(_) | DeValue::Float(_)) => {
            Ok(AxisValue::Number(number(src, v)?))
        }
        (ValueType::Number, _) => Err(wrong("numbers")),
        (ValueType::Name, DeValue::String(s)) => Ok(AxisValue::Name(s.to_string())),
        (ValueType::Name, _) => Err(wrong("names (strings)")),
    }
}

/// A TOML integer as `i64`.
fn integer(src: &Source, v: &Spanned<DeValue>) -> Result<i64, ScenarioError> {
    match v.get_ref() {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map_err(|_| src.at(v, "integer out of range")),
        _ => unreachable!("called on integers only"),
    }
}

/// A TOML integer or float as a finite `f64`.
fn number(src: &Source, v: &Spanned<DeValue>) -> Result<f64, ScenarioError> {
    let x = match v.get_ref() {
        DeValue::Integer(_) => integer(src, v)? as f64,
        DeValue::Float(f) => f.as_str().parse::<f64>().unwrap_or(f64::NAN),
        _ => unreachable!("called on numbers only"),
    };
    if !x.is_finite() {
        return Err(src.at(v, format!("expected a finite number, got {x}")));
    }
    Ok(x)
}

/// A range table `{ from, to, step | factor }`, expanded.
fn range(
    src: &Source,
    kind: AxisKind,
    at: &Spanned<DeValue>,
    table: &DeTable,
) -> Result<Vec<AxisValue>, ScenarioError> {
    let name = kind.name();
    if kind.value_type() == ValueType::Name {
        return Err(src.at(
            at,
            format!("the {name} axis takes a list of names, not a range"),
        ));
    }
    let mut keys: Vec<_> = table.iter().collect();
    keys.sort_by_key(|(k, _)| k.span().start);
    for (k, _) in &keys {
        if !["from", "to", "step", "factor"].contains(&k.get_ref().as_ref()) {
            return Err(src.at(
                *k,
                format!(
                    "unknown range key `{}`; a range has from, to, and step or factor",
                    k.get_ref()
                ),
            ));
        }
    }
    let get = |key: &str| table.get(key);
    let (Some(from), Some(to)) = (get("from"), get("to")) else {
        return Err(src.at(
            at,
            format!("a range of {name} needs `from` and `to`, and `step` or `factor`"),
        ));
    };
    let (from_v, to_v) = (scalar(src, kind, from)?, scalar(src, kind, to)?);
    let values = match (get("step"), get("factor")) {
        (Some(_), Some(f)) => {
            return Err(src.at(f, "give a range either `step` or `factor`, not both"));
        }
        (None, None) => {
            return Err(src.at(
                at,
                format!("a range of {name} needs `step` (additive) or `factor` (multiplicative)"),
            ));
        }
        (Some(step), None) => {
            let step_v = increment(src, kind, step, "step")?;
            check_order(src, to, &from_v, &to_v)?;
            expand(src, at, &from_v, &to_v, Stride::Step(step_v))?
        }
        (None, Some(factor)) => {
            let factor_v = increment(src, kind, factor, "factor")?;
            check_order(src, to, &from_v, &to_v)?;
            if as_f64(&from_v) <= 0.0 {
                return Err(src.at(
                    from,
                    format!("a range by factor needs from > 0, got {from_v}"),
                ));
            }
            expand(src, at, &from_v, &to_v, Stride::Factor(factor_v))?
        }
    };
    Ok(values)
}

/// How a range advances.
enum Stride {
    Step(AxisValue),
    Factor(AxisValue),
}

/// A range's `step` (> 0) or `factor` (> 1): whole numbers on whole-number
/// axes.
fn increment(
    src: &Source,
    kind: AxisKind,
    v: &Spanned<DeValue>,
    what: &str,
) -> Result<AxisValue, ScenarioError> {
    let name = kind.name();
    let x = match (kind.value_type(), v.get_ref()) {
        (ValueType::Size, DeValue::String(_)) if what == "step" => scalar(src, kind, v)?,
        (ValueType::Number, DeValue::Integer(_) | DeValue::Float(_)) => {
            AxisValue::Number(number(src, v)?)
        }
        (_, DeValue::Integer(_)) => AxisValue::Int(integer(src, v)?),
        (_, DeValue::Float(_)) => {
            return Err(src.at(
                v,
                format!("the {name} axis takes a whole-number {what}, got a float"),
            ));
        }
        (_, other) => {
            return Err(src.at(
                v,
                format!("a range's {what} is a number, got a {}", other.type_str()),
            ));
        }
    };
    let value = as_f64(&x);
    let (ok, wanted) = match what {
        "step" => (value > 0.0, "positive"),
        _ => (value > 1.0, "greater than 1"),
    };
    if !ok {
        return Err(src.at(v, format!("a range's {what} must be {wanted}, got {x}")));
    }
    Ok(x)
}

fn check_order(
    src: &Source,
    to: &Spanned<DeValue>,
    from_v: &AxisValue,
    to_v: &AxisValue,
) -> Result<(), ScenarioError> {
    if as_f64(from_v) > as_f64(to_v) {
        return Err(src.at(
            to,
            format!("the range ends (to = {to_v}) below its start (from = {from_v})"),
        ));
    }
    Ok(())
}

fn as_f64(v: &AxisValue) -> f64 {
    match v {
        AxisValue::Int(i) => *i as f64,
        AxisValue::Number(x) => *x,
        AxisValue::Name(_) => unreachable!("names have no ranges"),
    }
}

/// Rounds to 12 significant digits, so that `0.1 + 2 x 0.1` is `0.3`.
fn round12(x: f64) -> f64 {
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// The values from `from` up to `to` (inclusive when reached), at most
/// [`SWEEP_POINTS_MAX`] of them.
fn expand(
    src: &Source,
    at: &Spanned<DeValue>,
    from: &AxisValue,
    to: &AxisValue,
    stride: Stride,
) -> Result<Vec<AxisValue>, ScenarioError> {
    let too_many = || {
        src.at(
            at,
            format!(
                "the range has more than {SWEEP_POINTS_MAX} values; use a larger step or factor"
            ),
        )
    };
    let mut values = Vec::new();
    match (from, to, stride) {
        (&AxisValue::Int(from), &AxisValue::Int(to), stride) => {
            let mut v = from;
            loop {
                values.push(AxisValue::Int(v));
                if values.len() > SWEEP_POINTS_MAX {
                    return Err(too_many());
                }
                let next = match &stride {
                    Stride::Step(AxisValue::Int(s)) => v.checked_add(*s),
                    Stride::Factor(AxisValue::Int(f)) => v.checked_mul(*f),
                    _ => unreachable!("whole-number axes have whole-number strides"),
                };
                match next {
                    Some(n) if n <= to => v = n,
                    _ => break,
                }
            }
        }
        (from, to, stride) => {
            // Each value is computed from `from` (not from the previous
            // one), so rounding errors do not accumulate.
            let (from, to) = (as_f64(from), as_f64(to));
            let slack = to.abs() * 1e-9;
            for k in 0.. {
                let v = match &stride {
                    Stride::Step(s) => from + k as f64 * as_f64(s),
                    Stride::Factor(f) => from * as_f64(f).powi(k),
                };
                if v > to + slack {
                    break;
                }
                values.push(AxisValue::Number(round12(v.min(to))));
                if values.len() > SWEEP_POINTS_MAX {
                    return Err(too_many());
                }
            }
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests;
