//! [`Simulation`]: the simulator for those who prefer code to scenario
//! files. A world (ideal links, a preset or any `[topology]` table, the
//! model, the seed, the placement) is built once; [`Simulation::measure`]
//! then runs any algorithm over a range of sizes and returns the rows
//! `sim run` prints, checked against the exact result.
//!
//! Everything goes through the scenario validator, so a builder mistake is
//! reported exactly as in a file (naming the key), and a measured run is
//! the run `sim run` would make of the same scenario.
//!
//! ```
//! use algorithms::{Collective, Registry};
//! use engine::simulation::{Measure, Simulation};
//!
//! let registry = Registry::builtin();
//! // One DGX H100-style node, simulated flow by flow.
//! let sim = Simulation::preset("dgx_h100")
//!     .model("flow")
//!     .seed(1)
//!     .build(&registry)
//!     .expect("a valid world");
//! let ring = registry.get(Collective::Allreduce, "ring").expect("built in");
//! let rows = sim
//!     .measure(&ring, &Measure::sizes(1 << 10, 1 << 20).factor(32).iters(2).warmup(1))
//!     .expect("the allreduce completes");
//! assert_eq!(rows.len(), 3); // 1 KiB, 32 KiB, 1 MiB
//! assert!(rows.iter().all(|r| r.wrong == Some(0) && r.busbw_gb_per_s > 0.0));
//! print!("{}", engine::report::table(&rows));
//! ```

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use algorithms::{Algorithm, DType, ReduceOp, Registry};
use toml::{Table, Value};

use crate::scenario::{Scenario, ScenarioError};
use crate::study::{Failure, Options, Point, Row, run_scenario};
use crate::tuning::AlgoFilter;

/// A simulated world, ready to measure algorithms on.
#[derive(Clone, Debug)]
pub struct Simulation {
    /// The world as a scenario document, without `[[collective]]`.
    doc: Table,
    /// Where it came from, for errors.
    path: PathBuf,
    /// The validated world.
    world: Scenario,
    /// The algorithms names resolve in.
    registry: Registry,
}

impl Simulation {
    /// A world with ideal per-pair links of `latency_us` and
    /// `bandwidth_gb_per_s` (per direction), to finish with
    /// [`SimulationBuilder::world_size`] and [`SimulationBuilder::build`].
    pub fn ideal(latency_us: f64, bandwidth_gb_per_s: f64) -> SimulationBuilder {
        let mut links = Table::new();
        links.insert("latency_us".into(), Value::Float(latency_us));
        links.insert(
            "bandwidth_gb_per_s".into(),
            Value::Float(bandwidth_gb_per_s),
        );
        SimulationBuilder::with("links", links)
    }

    /// A world on the topology preset `name` (`dgx_h100`, `fat_tree`, ...:
    /// see the README's `[topology]` section); its parameters with
    /// [`SimulationBuilder::param`].
    pub fn preset(name: &str) -> SimulationBuilder {
        let mut topology = Table::new();
        topology.insert("preset".into(), Value::String(name.into()));
        SimulationBuilder::with("topology", topology)
    }

    /// A world from scenario text: `[links]` or `[topology]`, `world_size`,
    /// `seed`, faults and the rest of a scenario file; `[[collective]]`
    /// entries are allowed and ignored by [`measure`](Self::measure).
    /// Errors name `path` with the line and column.
    pub fn from_toml(
        path: &Path,
        text: &str,
        registry: &Registry,
    ) -> Result<Simulation, ScenarioError> {
        let world = Scenario::parse_world(path, text, registry)?;
        let mut doc: Table = text
            .parse()
            .map_err(|e: toml::de::Error| ScenarioError::Read {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        doc.remove("collective");
        doc.remove("sweep");
        Ok(Simulation {
            doc,
            path: path.to_path_buf(),
            world,
            registry: registry.clone(),
        })
    }

    /// The validated world (ranks, network, seed, notes).
    pub fn world(&self) -> &Scenario {
        &self.world
    }

    /// Runs `algorithm` over `measure`'s sizes, as `sim run` runs a
    /// `[[collective]]` entry naming it: the rows of the table, or the
    /// point that did not complete and why. `algorithm` need not be in the
    /// registry the world was built with (a closure from
    /// [`Algorithm::from_fn`] is added for the run), but a different
    /// algorithm of the same name is an error.
    pub fn measure(
        &self,
        algorithm: &Algorithm,
        measure: &Measure,
    ) -> Result<Vec<Row>, MeasureError> {
        let mut registry = self.registry.clone();
        match registry.get(algorithm.collective(), algorithm.name()) {
            Some(known) if !known.is(algorithm) => {
                return Err(MeasureError::NameTaken(format!("{algorithm:?}")));
            }
            Some(_) => {}
            None => {
                registry
                    .insert(algorithm.clone())
                    .map_err(|e| MeasureError::NameTaken(e.to_string()))?;
            }
        }
        let mut doc = self.doc.clone();
        let mut entry = measure.table();
        entry.insert("kind".into(), algorithm.collective().name().into());
        entry.insert("algorithm".into(), algorithm.name().into());
        doc.insert("collective".into(), Value::Array(vec![Value::Table(entry)]));
        let text = toml::to_string(&doc).expect("a TOML table serialises");
        let scenario = Scenario::parse(&self.path, &text, &registry)?;
        run_scenario(
            &scenario,
            &AlgoFilter::default(),
            Options::default(),
            |_| ControlFlow::Continue(()),
        )
        .map_err(|failed| {
            let (point, failure) = *failed;
            MeasureError::Failed {
                point,
                failure: Box::new(failure),
            }
        })
    }
}

/// Why [`Simulation::measure`] produced no rows.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MeasureError {
    /// The measurement's parameters are not valid for this world (the
    /// error names the key, as in a scenario file).
    #[error(transparent)]
    Invalid(#[from] ScenarioError),
    /// The world's registry has another algorithm of that name.
    #[error("the world's registry has another {0}: rename one")]
    NameTaken(String),
    /// A size did not complete: the simulated system deadlocked, timed
    /// out, failed or ran out of virtual time.
    #[error("{} at {} bytes did not complete: {}", point.collective, point.size_bytes, crate::sweep::status::describe(failure))]
    Failed {
        /// Which size.
        point: Point,
        /// What happened instead.
        failure: Box<Failure>,
    },
}

/// Builds a [`Simulation`]: the world's keys, validated by
/// [`build`](Self::build) as a scenario file's would be.
#[derive(Clone, Debug)]
pub struct SimulationBuilder {
    doc: Table,
    /// `"links"` or `"topology"`: the table [`param`](Self::param) sets.
    network: &'static str,
}

impl SimulationBuilder {
    fn with(network: &'static str, table: Table) -> SimulationBuilder {
        let mut doc = Table::new();
        doc.insert(network.into(), Value::Table(table));
        SimulationBuilder { doc, network }
    }

    /// Sets key `key` of the network's table (`[topology]`'s `nodes`,
    /// `gpus_per_node`, `placement`, `routing`, `symmetry`, ...).
    pub fn param(mut self, key: &str, value: impl Into<Value>) -> SimulationBuilder {
        if let Some(Value::Table(t)) = self.doc.get_mut(self.network) {
            t.insert(key.into(), value.into());
        }
        self
    }

    /// The network model of a topology: `"packet"` or `"flow"`.
    pub fn model(self, model: &str) -> SimulationBuilder {
        self.param("model", model)
    }

    /// The number of ranks (ideal links need it; a topology places one
    /// rank per GPU unless told otherwise).
    pub fn world_size(mut self, ranks: usize) -> SimulationBuilder {
        self.doc
            .insert("world_size".into(), Value::Integer(ranks as i64));
        self
    }

    /// The seed of the run's random number generator (inputs, losses,
    /// ECMP routes).
    pub fn seed(mut self, seed: u64) -> SimulationBuilder {
        // TOML integers are signed: a larger seed cannot be written, and
        // validation refuses the text that says so, at `seed`.
        let value = i64::try_from(seed).map_or_else(
            |_| Value::String(format!("{seed} (seeds go up to 2^63 - 1)")),
            Value::Integer,
        );
        self.doc.insert("seed".into(), value);
        self
    }

    /// Sets a top-level key of the scenario (`timeout_ms`, `[compute]`, ...).
    pub fn key(mut self, key: &str, value: impl Into<Value>) -> SimulationBuilder {
        self.doc.insert(key.into(), value.into());
        self
    }

    /// Validates the world with `registry`'s algorithms.
    pub fn build(self, registry: &Registry) -> Result<Simulation, ScenarioError> {
        let text = toml::to_string(&self.doc).expect("a TOML table serialises");
        Simulation::from_toml(Path::new("<simulation>"), &text, registry)
    }
}

/// The sizes and settings of one measurement: a `[[collective]]` entry
/// without its `kind` and `algorithm` (see the scenario docs for each
/// key's meaning); the defaults are a scenario's.
#[derive(Clone, Debug, PartialEq)]
pub struct Measure {
    min_bytes: u64,
    max_bytes: u64,
    table: Table,
}

impl Measure {
    /// From `min_bytes` to `max_bytes`, doubling.
    pub fn sizes(min_bytes: u64, max_bytes: u64) -> Measure {
        Measure {
            min_bytes,
            max_bytes,
            table: Table::new(),
        }
    }

    fn set(mut self, key: &str, value: impl Into<Value>) -> Measure {
        self.table.insert(key.into(), value.into());
        self
    }

    /// Each size is the previous one times `factor`.
    pub fn factor(self, factor: u64) -> Measure {
        self.set("step_factor", factor as i64)
    }

    /// Timed calls per size.
    pub fn iters(self, iters: u32) -> Measure {
        self.set("iters", i64::from(iters))
    }

    /// Untimed calls before them.
    pub fn warmup(self, warmup: u32) -> Measure {
        self.set("warmup", i64::from(warmup))
    }

    /// The element type.
    pub fn dtype(self, dtype: DType) -> Measure {
        self.set("dtype", dtype.name())
    }

    /// The reduction.
    pub fn op(self, op: ReduceOp) -> Measure {
        self.set("op", op.name())
    }

    /// The ranks the collective runs on (default: the world's).
    pub fn ranks(self, ranks: usize) -> Measure {
        self.set("world_size", ranks as i64)
    }

    /// The root of a rooted collective.
    pub fn root(self, root: usize) -> Measure {
        self.set("root", root as i64)
    }

    /// The pipeline chunk in bytes.
    pub fn chunk_bytes(self, bytes: u64) -> Measure {
        self.set("chunk_bytes", bytes as i64)
    }

    /// Chunks in flight per connection.
    pub fn slots(self, slots: usize) -> Measure {
        self.set("slots", slots as i64)
    }

    /// Ranks per node, for hierarchical algorithms.
    pub fn ranks_per_node(self, ranks: usize) -> Measure {
        self.set("ranks_per_node", ranks as i64)
    }

    /// Size-only payloads (nothing allocated, nothing checked).
    pub fn phantom(self) -> Measure {
        self.set("phantom", true)
    }

    /// The `[[collective]]` table, without `kind` and `algorithm`.
    fn table(&self) -> Table {
        let mut t = self.table.clone();
        t.insert("min_bytes".into(), Value::Integer(self.min_bytes as i64));
        t.insert("max_bytes".into(), Value::Integer(self.max_bytes as i64));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::Collective;

    fn ring(registry: &Registry) -> Algorithm {
        registry
            .get(Collective::Allreduce, "ring")
            .expect("built in")
    }

    #[test]
    fn a_world_needs_no_collective_and_measures_like_a_scenario() {
        let registry = Registry::builtin();
        let text =
            "seed = 3\nworld_size = 4\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 10.0\n";
        let sim = Simulation::from_toml(Path::new("w.toml"), text, &registry).unwrap();
        assert_eq!(sim.world().world_size, 4);
        let rows = sim
            .measure(
                &ring(&registry),
                &Measure::sizes(64, 256).iters(1).warmup(0),
            )
            .unwrap();
        // The same rows as the scenario file with the entry written in.
        let file = format!(
            "{text}[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
             min_bytes = 64\nmax_bytes = 256\niters = 1\nwarmup = 0\n"
        );
        let scenario = Scenario::parse(Path::new("w.toml"), &file, &registry).unwrap();
        let want = run_scenario(
            &scenario,
            &AlgoFilter::default(),
            Options::default(),
            |_| ControlFlow::Continue(()),
        )
        .unwrap();
        assert_eq!(rows, want);
        assert_eq!(rows.len(), 3);
    }

    #[test]
    fn builder_mistakes_are_located_like_file_mistakes() {
        let registry = Registry::builtin();
        let e = Simulation::preset("fat_tree")
            .param("nodes", 0)
            .build(&registry)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("<simulation>:"), "{e}");
        assert!(e.contains("nodes"), "{e}");
        let e = Simulation::ideal(1.0, 10.0)
            .world_size(2)
            .seed(u64::MAX)
            .build(&registry)
            .unwrap_err()
            .to_string();
        assert!(e.contains("seed"), "{e}");
    }

    #[test]
    fn a_closure_is_measured_and_a_name_clash_is_refused() {
        let registry = Registry::builtin();
        let sim = Simulation::ideal(1.0, 10.0)
            .world_size(3)
            .seed(1)
            .build(&registry)
            .unwrap();
        // The catalogue's ring, under another name.
        let mine = Algorithm::from_fn("my_ring", Collective::Allreduce, |f, buf, op, params| {
            Box::pin(async move { algorithms::allreduce::ring::run(&f, buf, op, params).await })
        });
        let measure = Measure::sizes(12, 48).iters(1).warmup(0);
        let rows = sim.measure(&mine, &measure).unwrap();
        assert!(
            rows.iter()
                .all(|r| r.algorithm == "my_ring" && r.wrong == Some(0))
        );
        let theirs = sim.measure(&ring(&registry), &measure).unwrap();
        let times = |rows: &[Row]| rows.iter().map(|r| r.time_ps).collect::<Vec<_>>();
        assert_eq!(times(&rows), times(&theirs));
        let impostor = Algorithm::from_fn("ring", Collective::Allreduce, |_, _, _, _| {
            Box::pin(async { Ok(()) })
        });
        assert!(matches!(
            sim.measure(&impostor, &measure),
            Err(MeasureError::NameTaken(_))
        ));
    }

    #[test]
    fn a_point_that_does_not_complete_says_why() {
        let registry = Registry::builtin();
        let sim = Simulation::ideal(1.0, 10.0)
            .world_size(2)
            .seed(1)
            .build(&registry)
            .unwrap();
        // Rank 0 waits for a message nobody sends.
        let hangs = Algorithm::from_fn("hangs", Collective::Allreduce, |f, buf, _, params| {
            Box::pin(async move {
                use algorithms::Fabric;
                if f.rank() == 0 {
                    f.recv(1, params.tag, buf.shape()).await?;
                }
                Ok(())
            })
        });
        let e = sim
            .measure(&hangs, &Measure::sizes(8, 8).iters(1).warmup(0))
            .unwrap_err();
        let MeasureError::Failed { failure, .. } = &e else {
            panic!("{e}");
        };
        assert!(matches!(**failure, Failure::Deadlock(_)), "{e}");
        assert!(e.to_string().contains("deadlocked"), "{e}");
    }
}
