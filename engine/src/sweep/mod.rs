//! Sweeps: a scenario run over the cross product of parameter axes, in
//! parallel, with byte-identical output whatever the thread count, and
//! shardable across machines.
//!
//! A scenario file becomes a study with a `[sweep]` table; each key is an
//! axis and its value a list or a range:
//!
//! ```toml
//! [sweep]
//! nodes = [2, 4, 8]                               # a list of values
//! bytes = { from = "1M", to = "64M", factor = 4 } # multiplicative range
//! seed = { from = 1, to = 3, step = 1 }           # additive range
//! ```
//!
//! Ranges include `to` when they reach it. The axes are in
//! [`axes::AxisKind`]; each point of the product is the file with the
//! point's values written into it and `[sweep]` removed, validated as any
//! scenario is ([`Sweep::scenario`]). Points are numbered in the order
//! the axes are written, the last axis fastest.
//!
//! - [`axes`]: axis names, value lists and ranges, located errors.
//! - `apply`: which keys of the scenario each axis sets.
//! - [`run`](mod@run): runs the points on a thread pool, one study each,
//!   handing finished points over in point order as they complete (so a
//!   CSV streams), skipping points already done, stopping on a flag.
//! - [`status`]: how a point ended (`ok`, `deadlock`, ...) and its exit code.
//! - [`shard`]: `--shard I/N` and the `# sweep` line (fingerprint, points,
//!   shard) every sweep CSV opens with.
//! - [`table`]: the CSV's columns and rows, and the `# partial:` last line
//!   of a sweep that stopped early.
//! - [`file`](mod@file): a sweep CSV read back (merges, `--resume`), located errors.
//! - [`scaling`]: the speedup and efficiency columns, for runs and merges alike.
//! - [`merge`]: joins shard files into the file one run writes.

mod apply;
pub mod axes;
pub mod file;
pub mod merge;
pub mod run;
pub mod scaling;
pub mod shard;
pub mod status;
pub mod table;

use std::ops::Range;
use std::path::{Path, PathBuf};

use algorithms::Registry;
use toml::de::{DeTable, DeValue};

use crate::scenario::{Scenario, ScenarioError, Source};
use crate::tuning::AlgoFilter;
use axes::{Axis, AxisValue};

/// A scenario with its `[sweep]` axes, ready to give the scenario of any
/// point.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The file.
    path: PathBuf,
    /// Its text, for locating errors.
    text: String,
    /// The file as a TOML document, without `[sweep]`.
    doc: toml::Table,
    /// The axes, in the order written.
    axes: Vec<Axis>,
    /// Where the `sweep` key is, for errors of single points.
    span: Range<usize>,
    /// The algorithms the points' names are resolved in.
    registry: Registry,
}

impl Sweep {
    /// Reads the scenario at `path` and its `[sweep]`; algorithm names
    /// are resolved in `registry`.
    pub fn load(path: &Path, registry: &Registry) -> Result<Sweep, ScenarioError> {
        let text = crate::scenario::read_file(path)?;
        Sweep::parse(path, &text, registry)
    }

    /// Parses scenario `text` with its `[sweep]`, reporting errors against
    /// `path`. The file as written must be a valid scenario too (it is the
    /// one `sim run` runs), so mistakes outside `[sweep]` are located there.
    pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<Sweep, ScenarioError> {
        Scenario::parse(path, text, registry)?;
        let src = Source { path, text };
        let spanned = DeTable::parse(text)
            .map_err(|e| src.error(e.span(), e.message().trim_end().to_string()))?;
        let Some((key, value)) = spanned.get_ref().get_key_value("sweep") else {
            return Err(src.error(
                None,
                "the scenario has no [sweep] table: `sim sweep` needs one (`sim run` runs a single scenario)",
            ));
        };
        let DeValue::Table(table) = value.get_ref() else {
            return Err(src.at(value, "`sweep` must be a table of axes, [sweep]"));
        };
        let axes = axes::parse(&src, key, table)?;
        let mut doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| src.error(e.span(), e.message().to_string()))?;
        doc.remove("sweep");
        for axis in &axes {
            apply::check(&src, &doc, axis)?;
        }
        Ok(Sweep {
            path: path.to_path_buf(),
            text: text.to_string(),
            doc,
            axes,
            span: key.span(),
            registry: registry.clone(),
        })
    }

    /// The axes, in the order written.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// The file the sweep was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of points: the product of the axes' lengths.
    pub fn points(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// The axis values of `point`, one per axis (the last axis varies
    /// fastest).
    pub fn values(&self, point: usize) -> Vec<&AxisValue> {
        assert!(point < self.points(), "point {point} is out of range");
        let mut rest = point;
        let mut values: Vec<&AxisValue> = self
            .axes
            .iter()
            .rev()
            .map(|a| {
                let v = &a.values[rest % a.values.len()];
                rest /= a.values.len();
                v
            })
            .collect();
        values.reverse();
        values
    }

    /// `point`'s axis values as `world_size = 8, bytes = 1024`.
    pub fn describe(&self, point: usize) -> String {
        let parts: Vec<String> = self
            .axes
            .iter()
            .zip(self.values(point))
            .map(|(a, v)| format!("{} = {v}", a.kind.name()))
            .collect();
        parts.join(", ")
    }

    /// The scenario of `point`: the file with the point's values and
    /// without `[sweep]`, fully validated. An invalid point is an error
    /// at the `sweep` key naming the point's values.
    pub fn scenario(&self, point: usize) -> Result<Scenario, ScenarioError> {
        let text = self.point_toml(point)?;
        Scenario::parse(&self.path, &text, &self.registry).map_err(|e| {
            self.invalid(
                point,
                match e {
                    ScenarioError::Invalid { message, .. } => message,
                    ScenarioError::Read { reason, .. } => reason,
                },
            )
        })
    }

    /// The scenario file of `point` (not validated): the file with the
    /// point's values and without `[sweep]`, for `sim run` to run alone
    /// (`sim sweep --print-point`). Comments and key order are not kept.
    pub fn point_toml(&self, point: usize) -> Result<String, ScenarioError> {
        if point >= self.points() {
            let src = Source {
                path: &self.path,
                text: &self.text,
            };
            return Err(src.error(
                Some(self.span.clone()),
                format!(
                    "the sweep has {} points (0 to {}); there is no point {point}",
                    self.points(),
                    self.points() - 1
                ),
            ));
        }
        let mut doc = self.doc.clone();
        for (axis, value) in self.axes.iter().zip(self.values(point)) {
            apply::apply(&mut doc, axis.kind, value);
        }
        let header = format!(
            "# point {point} of the sweep in {} ({})\n",
            self.path.display(),
            self.describe(point)
        );
        toml::to_string(&doc)
            .map(|text| header + text.trim_end() + "\n")
            .map_err(|e| self.invalid(point, e.to_string()))
    }

    /// An error at the `sweep` key: `point` is not a valid scenario.
    fn invalid(&self, point: usize, message: String) -> ScenarioError {
        let src = Source {
            path: &self.path,
            text: &self.text,
        };
        src.error(
            Some(self.span.clone()),
            format!(
                "point {point} of the sweep ({}) is not a valid scenario: {message}",
                self.describe(point)
            ),
        )
    }

    /// Identifies the sweep in shard files: a hash (64-bit FNV-1a) of the
    /// file's text and of the `NCCL_ALGO` restriction, which both decide
    /// every row.
    pub fn fingerprint(&self, filter: &AlgoFilter) -> u64 {
        let algo = filter.source.as_deref().unwrap_or("");
        let bytes = self.text.bytes().chain([0xff]).chain(algo.bytes());
        bytes.fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "world_size = 4\nseed = 1\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
        [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 64\nphantom = true\n";

    #[test]
    fn points_follow_the_axes_last_fastest() {
        let text = format!("{BASE}[sweep]\nworld_size = [2, 4, 8]\nseed = [5, 6]\n");
        let sweep = Sweep::parse(Path::new("s.toml"), &text, &Registry::builtin()).unwrap();
        assert_eq!(sweep.points(), 6);
        assert_eq!(sweep.describe(0), "world_size = 2, seed = 5");
        assert_eq!(sweep.describe(1), "world_size = 2, seed = 6");
        assert_eq!(sweep.describe(5), "world_size = 8, seed = 6");
        let s = sweep.scenario(3).unwrap();
        assert_eq!((s.world_size, s.seed), (4, 6));
        assert_eq!(s.collectives[0].world_size, 4);
        assert!(!s.has_sweep);
    }

    #[test]
    fn a_bytes_axis_simulates_in_full_the_sizes_at_or_below_extrapolate_above() {
        let text = format!(
            "{}[sweep]\nbytes = [16, \"32\", 64]\n",
            BASE.replace(
                "phantom = true\n",
                "phantom = true\nalgorithm = \"ring\"\nextrapolate_above = \"32\"\n"
            )
        );
        let sweep = Sweep::parse(Path::new("s.toml"), &text, &Registry::builtin()).unwrap();
        let above = |p: usize| sweep.scenario(p).unwrap().collectives[0].extrapolate_above;
        assert_eq!([above(0), above(1), above(2)], [None, None, Some(32)]);
    }

    #[test]
    fn an_invalid_point_names_its_values() {
        let text = format!("{BASE}[sweep]\nalgorithm = [\"ring\", \"pairwise\"]\n");
        let sweep = Sweep::parse(Path::new("s.toml"), &text, &Registry::builtin()).unwrap();
        assert!(sweep.scenario(0).is_ok());
        let e = sweep.scenario(1).unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:11:2: point 1 of the sweep (algorithm = pairwise)"),
            "{e}"
        );
        assert!(e.contains("unknown algorithm `pairwise`"), "{e}");
    }

    #[test]
    fn axes_the_scenario_cannot_take_are_errors() {
        let text = format!("{BASE}[sweep]\nnodes = [2, 4]\n");
        let e = Sweep::parse(Path::new("s.toml"), &text, &Registry::builtin())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("s.toml:12:1: the nodes axis needs a [topology]"),
            "{e}"
        );
        let text = format!("{BASE}[sweep]\nloss_rate = [0.1]\n");
        let e = Sweep::parse(Path::new("s.toml"), &text, &Registry::builtin())
            .unwrap_err()
            .to_string();
        assert!(e.contains("has none"), "{e}");
        let e = Sweep::parse(Path::new("s.toml"), BASE, &Registry::builtin())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no [sweep] table"), "{e}");
    }
}
