//! The simulator's prediction for the rows of an nccl-tests [`Table`]:
//! each distinct (type, operator, root, size) of the table becomes a
//! `[[collective]]` entry of the scenario's world with no algorithm (the
//! tuner picks, as `sim run` does for `algorithm = "auto"`, restricted by
//! `NCCL_ALGO` if the caller's filter says so), exactly that size
//! (`min_bytes = max_bytes`), phantom payloads (timing does not depend on
//! the values, and no size is then too large to hold), one timed call and
//! no warm-up (the simulator is deterministic and starts every call on
//! idle links, so more calls would average to the same time; only random
//! packet loss makes calls differ, and then the one call is one sample).
//! `chunk_bytes`, `slots` and `ranks_per_node` come from the scenario's
//! own first entry of that collective, if it has one; its other entries
//! are not run.
//!
//! nccl-tests types the simulator lacks run as one of the same element
//! size (`int8` as `uint8`, `uint32` as `int32`, ...) or, for the 2-byte
//! `half` and `bfloat16`, as `uint8` of the same bytes (reductions cost
//! per byte); the prediction's notes say so. A row that cannot be run
//! (a test without a collective here, a root outside the world, a point
//! the scenario refuses) or that does not complete is an [`Outcome`] of
//! its own, never an error of the whole table.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use algorithms::{Collective, DType, ReduceOp};
use toml::{Table as TomlTable, Value};

use super::{Measured, Table, Test};
use crate::scenario::{CollectiveSpec, Scenario, ScenarioError};
use crate::study::{Options, Row, run_scenario};
use crate::tuning::AlgoFilter;

/// A scenario's world, ready to predict nccl-tests tables on.
#[derive(Clone, Debug)]
pub struct Predictor {
    /// The scenario as a TOML document, without `[[collective]]` and `[sweep]`.
    doc: TomlTable,
    path: PathBuf,
    world: Scenario,
    /// Settings of the scenario's own first entry of each collective.
    inherited: BTreeMap<Collective, TomlTable>,
}

/// What the simulator says about one measured row.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The simulated row (the algorithm, time and bandwidths).
    Predicted(Row),
    /// The point ran but did not complete: what happened instead.
    Failed(String),
    /// The row was not simulated: why.
    NotSimulated(String),
}

/// The predictions for a table's rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// One per row of the table, in order.
    pub outcomes: Vec<Outcome>,
    /// What was simulated differently from the log (stand-in types and
    /// operators), once each.
    pub notes: Vec<String>,
}

/// One simulated point: what a row becomes in the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    dtype: DType,
    op: ReduceOp,
    root: usize,
    size: u64,
}

/// The keys of a `[[collective]]` entry taken from the scenario's own.
const INHERITED: [&str; 3] = ["chunk_bytes", "slots", "ranks_per_node"];

impl Predictor {
    /// Reads and validates the scenario at `path` as a world (its
    /// `[[collective]]` entries need not exist).
    pub fn load(path: &Path, registry: &algorithms::Registry) -> Result<Predictor, ScenarioError> {
        let text = crate::scenario::read_file(path)?;
        Predictor::from_toml(path, &text, registry)
    }

    /// Validates scenario `text` (read from `path`) as a world.
    pub fn from_toml(
        path: &Path,
        text: &str,
        registry: &algorithms::Registry,
    ) -> Result<Predictor, ScenarioError> {
        let world = Scenario::parse_world(path, text, registry)?;
        let mut doc: TomlTable =
            text.parse()
                .map_err(|e: toml::de::Error| ScenarioError::Read {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
        let mut inherited = BTreeMap::new();
        if let Some(Value::Array(entries)) = doc.remove("collective") {
            for entry in entries.iter().filter_map(Value::as_table) {
                let kind = entry.get("kind").and_then(Value::as_str);
                let Some(kind) = kind.and_then(|k| k.parse::<Collective>().ok()) else {
                    continue;
                };
                let keep = entry
                    .iter()
                    .filter(|(k, _)| INHERITED.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                inherited.entry(kind).or_insert(keep);
            }
        }
        doc.remove("sweep");
        Ok(Predictor {
            doc,
            path: path.to_path_buf(),
            world,
            inherited,
        })
    }

    /// The validated world.
    pub fn world(&self) -> &Scenario {
        &self.world
    }

    /// Why `table` cannot be predicted on this world, if its ranks differ
    /// from the scenario's.
    pub fn world_mismatch(&self, table: &Table) -> Option<String> {
        let world = table.world?;
        (world.ranks != self.world.world_size).then(|| {
            format!(
                "the {} table ran on {world}, but {} has {} ranks",
                table.test,
                self.world.path.display(),
                self.world.world_size
            )
        })
    }

    /// Runs every row of `table` that can run; the tuner's choices are
    /// restricted by `filter`.
    pub fn predict(&self, table: &Table, filter: &AlgoFilter) -> Prediction {
        let mut notes = Vec::new();
        let Test::Collective(kind) = table.test else {
            let why = format!(
                "the simulator has no {} test (nccl-tests' {})",
                table.test,
                table.test.binary()
            );
            return Prediction {
                outcomes: vec![Outcome::NotSimulated(why); table.rows.len()],
                notes,
            };
        };
        let n = self.world.world_size;
        let plans: Vec<Result<Point, String>> = table
            .rows
            .iter()
            .map(|row| point(kind, row, n, &mut notes))
            .collect();
        let mut points: Vec<Point> = plans.iter().filter_map(|p| p.clone().ok()).collect();
        points.sort();
        points.dedup();
        let specs = self.specs(kind, &points);
        let mut results: BTreeMap<Point, Outcome> = BTreeMap::new();
        for (point, spec) in points.iter().zip(specs) {
            let outcome = match spec {
                Ok(spec) => self.run(spec, point.size, filter),
                Err(why) => Outcome::NotSimulated(why),
            };
            results.insert(*point, outcome);
        }
        let outcomes = plans
            .into_iter()
            .map(|plan| match plan {
                Ok(point) => results
                    .get(&point)
                    .cloned()
                    .unwrap_or_else(|| Outcome::NotSimulated("not run".to_string())),
                Err(why) => Outcome::NotSimulated(why),
            })
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        notes.retain(|note| seen.insert(note.clone()));
        Prediction { outcomes, notes }
    }

    /// The `[[collective]]` entry of one point.
    fn entry(&self, kind: Collective, point: &Point) -> TomlTable {
        let mut entry = self.inherited.get(&kind).cloned().unwrap_or_default();
        let mut set = |key: &str, value: Value| {
            entry.insert(key.to_string(), value);
        };
        set("kind", kind.name().into());
        let size = i64::try_from(point.size).unwrap_or(i64::MAX);
        set("min_bytes", size.into());
        set("max_bytes", size.into());
        set("dtype", point.dtype.name().into());
        if kind.reduces() {
            set("op", point.op.name().into());
        }
        if kind.has_root() {
            set("root", (point.root as i64).into());
        }
        set("iters", 1.into());
        set("warmup", 0.into());
        set("phantom", true.into());
        entry
    }

    /// The validated entries of `points`: all at once, or, if the
    /// scenario refuses that, one by one to say which it refuses and why.
    fn specs(&self, kind: Collective, points: &[Point]) -> Vec<Result<CollectiveSpec, String>> {
        let entries: Vec<TomlTable> = points.iter().map(|p| self.entry(kind, p)).collect();
        if entries.is_empty() {
            return Vec::new();
        }
        if let Ok(scenario) = self.scenario_with(entries.clone()) {
            return scenario.collectives.into_iter().map(Ok).collect();
        }
        entries
            .into_iter()
            .map(|entry| {
                self.scenario_with(vec![entry])
                    .map_err(|e| format!("the scenario refuses it: {}", message(e)))
                    .and_then(|s| {
                        let spec = s.collectives.into_iter().next();
                        spec.ok_or_else(|| "the scenario ran no collective".to_string())
                    })
            })
            .collect()
    }

    /// The scenario with `entries` as its `[[collective]]`s, validated.
    fn scenario_with(&self, entries: Vec<TomlTable>) -> Result<Scenario, ScenarioError> {
        let mut doc = self.doc.clone();
        let entries = entries.into_iter().map(Value::Table).collect();
        doc.insert("collective".into(), Value::Array(entries));
        let text = toml::to_string(&doc).map_err(|e| ScenarioError::Read {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        Scenario::parse(&self.path, &text, &self.world.registry)
    }

    /// Runs one point.
    fn run(&self, spec: CollectiveSpec, size: u64, filter: &AlgoFilter) -> Outcome {
        let mut scenario = self.world.clone();
        scenario.collectives = vec![spec];
        let result = run_scenario(&scenario, filter, Options::default(), |_| {
            ControlFlow::Continue(())
        });
        match result {
            Ok(rows) => match rows.into_iter().next() {
                Some(row) if row.size_bytes == size => Outcome::Predicted(row),
                Some(row) => Outcome::NotSimulated(format!(
                    "the simulator ran {} bytes instead of {size}",
                    row.size_bytes
                )),
                None => Outcome::NotSimulated("the simulator ran no size".to_string()),
            },
            Err(failed) => Outcome::Failed(crate::sweep::status::describe(&failed.1)),
        }
    }
}

/// The message of a scenario error, without the place in the generated
/// text (which the user never sees).
fn message(e: ScenarioError) -> String {
    match e {
        ScenarioError::Invalid { message, .. } => message,
        ScenarioError::Read { reason, .. } => reason,
    }
}

/// The point `row` becomes on `n` ranks, noting stand-ins in `notes`; or
/// why it cannot run.
fn point(
    kind: Collective,
    row: &Measured,
    n: usize,
    notes: &mut Vec<String>,
) -> Result<Point, String> {
    let (dtype, stand_in) = sim_dtype(&row.dtype)
        .ok_or_else(|| format!("the simulator has no type like {}", row.dtype))?;
    if let Some(note) = stand_in {
        notes.push(note);
    }
    let op = match (kind.reduces(), row.redop.as_deref()) {
        (false, _) | (true, None) => ReduceOp::Sum,
        (true, Some(name)) => sim_op(name, dtype, notes)?,
    };
    let root = match (kind.has_root(), row.root) {
        (true, Some(root)) => usize::try_from(root)
            .ok()
            .filter(|&r| r < n)
            .ok_or_else(|| format!("root {root} is not one of the scenario's {n} ranks"))?,
        _ => 0,
    };
    Ok(Point {
        dtype,
        op,
        root,
        size: row.size_bytes,
    })
}

/// The simulator's type for nccl-tests type `name`, and a note when it
/// is a stand-in.
fn sim_dtype(name: &str) -> Option<(DType, Option<String>)> {
    let exact = match name {
        "float" => Some(DType::F32),
        "double" => Some(DType::F64),
        "int32" => Some(DType::I32),
        "int64" => Some(DType::I64),
        "uint8" => Some(DType::U8),
        _ => None,
    };
    if let Some(dtype) = exact {
        return Some((dtype, None));
    }
    let (dtype, why) = match name {
        "int8" | "f8e4m3" | "f8e5m2" | "fp8_e4m3" | "fp8_e5m2" => {
            (DType::U8, "the same element size")
        }
        "uint32" => (DType::I32, "the same element size"),
        "uint64" => (DType::I64, "the same element size"),
        "half" | "bfloat16" => (
            DType::U8,
            "the same bytes: the simulator has no 2-byte type, and reductions cost per byte",
        ),
        _ => return None,
    };
    Some((
        dtype,
        Some(format!("{name} is simulated as {dtype} ({why})")),
    ))
}

/// The simulator's operator for nccl-tests' `name` on `dtype`, noting
/// stand-ins; or why there is none.
fn sim_op(name: &str, dtype: DType, notes: &mut Vec<String>) -> Result<ReduceOp, String> {
    if name == "mulsum" {
        notes.push("mulsum (NCCL's pre-multiplied sum) is simulated as sum".to_string());
        return Ok(ReduceOp::Sum);
    }
    let op: ReduceOp = name
        .parse()
        .map_err(|_| format!("the simulator has no reduction like {name}"))?;
    if !op.supports(dtype) {
        notes.push(format!(
            "{op} on {dtype} is simulated as sum (the simulator averages floats only)"
        ));
        return Ok(ReduceOp::Sum);
    }
    Ok(op)
}
