//! The scenario file as written: serde structures that mirror the TOML,
//! with spans kept on every value that validation may reject.

use serde::Deserialize;
use toml::Spanned;

use super::size::ByteSize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: Option<String>,
    pub world_size: Spanned<i64>,
    #[serde(default)]
    pub seed: u64,
    pub links: Spanned<RawLinks>,
    #[serde(default)]
    pub compute: Option<RawCompute>,
    #[serde(default)]
    pub collective: Vec<Spanned<RawCollective>>,
    #[serde(default)]
    pub inject: Vec<Spanned<RawInject>>,
}

/// `[links]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLinks {
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    pub latency_us: Spanned<f64>,
    pub bandwidth_gb_per_s: Spanned<f64>,
}

/// `[compute]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompute {
    pub reduce_gb_per_s: Spanned<f64>,
}

/// One `[[collective]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCollective {
    pub kind: Spanned<String>,
    #[serde(default)]
    pub algorithm: Option<Spanned<String>>,
    #[serde(default)]
    pub world_size: Option<Spanned<i64>>,
    #[serde(default)]
    pub root: Option<Spanned<i64>>,
    #[serde(default)]
    pub ranks_per_node: Option<Spanned<i64>>,
    pub min_bytes: Spanned<ByteSize>,
    pub max_bytes: Spanned<ByteSize>,
    #[serde(default)]
    pub step_factor: Option<Spanned<i64>>,
    #[serde(default)]
    pub dtype: Option<Spanned<String>>,
    #[serde(default)]
    pub op: Option<Spanned<String>>,
    #[serde(default)]
    pub iters: Option<Spanned<i64>>,
    #[serde(default)]
    pub warmup: Option<Spanned<i64>>,
    #[serde(default)]
    pub chunk_bytes: Option<Spanned<ByteSize>>,
    #[serde(default)]
    pub slots: Option<Spanned<i64>>,
    #[serde(default)]
    pub phantom: bool,
    #[serde(default)]
    pub check: Option<bool>,
}

/// One `[[inject]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInject {
    pub kind: Spanned<String>,
    pub rank: Spanned<i64>,
    #[serde(default)]
    pub from: Option<Spanned<i64>>,
}
