//! A check scenario file as written: serde structures that mirror the TOML,
//! with spans kept on every value that validation may reject, and unknown
//! keys refused everywhere.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use engine::scenario::ByteSize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheck {
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub expect: Option<Spanned<String>>,
    #[serde(default)]
    pub concurrent: Option<bool>,
    #[serde(default)]
    pub cost: Option<Spanned<bool>>,
    #[serde(default)]
    pub call: Vec<Spanned<RawCall>>,
    /// `[order]`: `default` or a rank number, each naming call ids.
    #[serde(default)]
    pub order: Option<RawOrder>,
    #[serde(default)]
    pub params: Option<Spanned<RawParams>>,
    #[serde(default)]
    pub faults: Option<RawFaults>,
    #[serde(default)]
    pub search: Option<RawSearch>,
    #[serde(default, rename = "assert")]
    pub asserts: Vec<Spanned<RawAssert>>,
}

/// `[order]`: each key (`default` or a rank number) with its list of call
/// ids.
pub type RawOrder = BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>;

/// One `[[call]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCall {
    #[serde(default)]
    pub id: Option<Spanned<String>>,
    pub collective: Spanned<String>,
    pub algorithm: Spanned<String>,
    #[serde(default)]
    pub op: Option<Spanned<String>>,
    #[serde(default)]
    pub tag: Option<Spanned<i64>>,
}

/// `[params]`: each key one value, a list or a range table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawParams {
    #[serde(default)]
    pub world_size: Option<Spanned<RawAxis>>,
    #[serde(default)]
    pub count: Option<Spanned<RawAxis>>,
    #[serde(default)]
    pub chunks: Option<Spanned<RawAxis>>,
    #[serde(default)]
    pub root: Option<Spanned<RawAxis>>,
    #[serde(default)]
    pub in_place: Option<Spanned<RawAxis>>,
    #[serde(default)]
    pub buffering: Option<Spanned<RawAxis>>,
}

/// `[faults]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFaults {
    #[serde(default)]
    pub drops: Option<Spanned<i64>>,
    #[serde(default)]
    pub retransmit: Option<bool>,
    #[serde(default)]
    pub retry_count: Option<Spanned<i64>>,
    #[serde(default)]
    pub crashes: Option<Spanned<i64>>,
    #[serde(default)]
    pub timeouts: Option<Spanned<i64>>,
}

/// `[search]`: which keys apply depends on `kind`; validation rejects the
/// others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    #[serde(default)]
    pub kind: Option<Spanned<String>>,
    #[serde(default)]
    pub schedules: Option<Spanned<i64>>,
    #[serde(default)]
    pub seed: Option<Spanned<i64>>,
    #[serde(default)]
    pub depth: Option<Spanned<i64>>,
    #[serde(default)]
    pub max_schedules: Option<Spanned<i64>>,
    #[serde(default)]
    pub max_depth: Option<Spanned<i64>>,
    #[serde(default)]
    pub delay_bound: Option<Spanned<i64>>,
}

/// One `[[assert]]`: which keys apply depends on `kind`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAssert {
    pub kind: Spanned<String>,
    #[serde(default)]
    pub rank: Option<Spanned<i64>>,
    #[serde(default)]
    pub bytes: Option<Spanned<ByteSize>>,
    #[serde(default)]
    pub messages: Option<Spanned<i64>>,
    #[serde(default)]
    pub steps: Option<Spanned<i64>>,
}

/// A `[params]` value as written: one value (its span is the enclosing
/// `Spanned`'s), a list of values each with its span, or a range table's
/// entries in the order written.
#[derive(Debug)]
pub enum RawAxis {
    /// A single value.
    One(toml::Value),
    /// A list.
    List(Vec<Spanned<toml::Value>>),
    /// A table, meant as `{ from, to, step }`; its keys are checked later.
    Range(Vec<(Spanned<String>, Spanned<toml::Value>)>),
}

impl<'de> Deserialize<'de> for RawAxis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawAxis;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value, a list of values, or a range { from = 2, to = 5 }")
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawAxis, E> {
                Ok(RawAxis::One(toml::Value::Boolean(v)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawAxis, E> {
                Ok(RawAxis::One(toml::Value::Integer(v)))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawAxis, E> {
                i64::try_from(v)
                    .map(|v| RawAxis::One(toml::Value::Integer(v)))
                    .map_err(|_| E::custom(format!("integer {v} is out of range")))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawAxis, E> {
                Ok(RawAxis::One(toml::Value::Float(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawAxis, E> {
                Ok(RawAxis::One(toml::Value::String(v.to_string())))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawAxis, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<toml::Value>>()? {
                    items.push(item);
                }
                Ok(RawAxis::List(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawAxis, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    let value = map.next_value::<Spanned<toml::Value>>()?;
                    entries.push((key, value));
                }
                Ok(RawAxis::Range(entries))
            }
        }
        d.deserialize_any(V)
    }
}
