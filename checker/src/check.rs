//! [`Check`]: the model checker for code rather than check files. A check
//! of one algorithm (or several calls) is built with the axes, buffering,
//! faults and search of a check file, run, and its shrunk counterexample
//! printed, replayed, or saved with its scenario for `sim replay`.
//!
//! Everything goes through the check-file validator (a builder mistake is
//! an error naming the key, as in a file), so a check built here and the
//! same check written as a file explore the same schedules.
//!
//! ```
//! use algorithms::{Algorithm, Collective};
//! use checker::Check;
//! use checker::spec::Verdict;
//!
//! /// Allreduce through rank 0: the others send their buffer to rank 0
//! /// and wait for its sum. With `late_send` the others wait first (a bug).
//! fn through_zero(name: &str, late_send: bool) -> Algorithm {
//!     Algorithm::from_fn(name, Collective::Allreduce, move |f, buf, op, p| {
//!         Box::pin(async move {
//!             use algorithms::Fabric;
//!             if f.rank() == 0 {
//!                 for from in 1..f.world_size() {
//!                     let theirs = f.recv(from, p.tag, buf.shape()).await?;
//!                     buf.reduce_from(0..buf.len(), &theirs, op)?;
//!                 }
//!                 for to in 1..f.world_size() {
//!                     f.send(to, p.tag, buf.clone()).await?;
//!                 }
//!             } else if late_send {
//!                 let sum = f.recv(0, p.tag, buf.shape()).await?;
//!                 f.send(0, p.tag, buf.clone()).await?;
//!                 *buf = sum;
//!             } else {
//!                 f.send(0, p.tag, buf.clone()).await?;
//!                 *buf = f.recv(0, p.tag, buf.shape()).await?;
//!             }
//!             Ok(())
//!         })
//!     })
//! }
//!
//! let good = Check::of(&through_zero("through_zero", false)).run().expect("runs");
//! assert_eq!(good.verdict, Verdict::Verified);
//!
//! let check = Check::of(&through_zero("late_send", true));
//! let bad = check.run().expect("runs");
//! assert_eq!(bad.verdict, Verdict::Deadlock);
//! let cex = bad.counterexample.expect("a counterexample");
//! assert_eq!(cex.point.world_size, 2); // shrunk from 4 ranks
//! let again = check.replay(&cex).expect("replays");
//! assert_eq!(again.found(), Verdict::Deadlock);
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use algorithms::{Algorithm, Registry};
use engine::scenario::ScenarioError;
use toml::{Table, Value};

use crate::cex::{CexFile, buffering_name};
use crate::explore::SearchError;
use crate::program::Program;
use crate::replay::{ReplayError, Replayed, replay_choices};
use crate::run::{CheckReport, Counterexample, Options, check};
use crate::spec::Buffering;

/// A model check built in code; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Check {
    /// The check as a check-file document.
    doc: Table,
    /// The built-in algorithms and the ones checked.
    registry: Registry,
    /// Options of the search that a file does not hold.
    options: Options,
    /// An algorithm whose name another algorithm has (reported by
    /// [`Check::program`]).
    name_error: Option<String>,
}

/// Why a check could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The check's settings are not valid (the error names the key).
    #[error(transparent)]
    Invalid(#[from] ScenarioError),
    /// An algorithm's name is the catalogue's or another's.
    #[error("{0}")]
    Name(String),
    /// The search failed: a program is not deterministic under the
    /// checker's choices.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A counterexample did not replay.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

impl Check {
    /// A check of one call of `algorithm` on 2, 3 and 4 ranks, 4 elements,
    /// one chunk, in place, 8 eager slots per connection, every schedule
    /// (a check file's defaults).
    pub fn of(algorithm: &Algorithm) -> Check {
        Check::calls(std::slice::from_ref(algorithm))
    }

    /// A check of several calls, each rank making them in this order.
    pub fn calls(algorithms: &[Algorithm]) -> Check {
        let mut registry = Registry::builtin();
        let mut name_error = None;
        let calls = algorithms
            .iter()
            .map(|a| {
                if let Err(e) = registry.insert(a.clone()) {
                    let same = registry
                        .get(a.collective(), a.name())
                        .is_some_and(|known| known.is(a));
                    if !same {
                        name_error.get_or_insert(e.to_string());
                    }
                }
                let mut call = Table::new();
                call.insert("collective".into(), a.collective().name().into());
                call.insert("algorithm".into(), a.name().into());
                Value::Table(call)
            })
            .collect();
        let mut doc = Table::new();
        let name = algorithms
            .first()
            .map_or("check".to_string(), |a| a.name().to_string());
        doc.insert("name".into(), Value::String(name));
        doc.insert("call".into(), Value::Array(calls));
        Check {
            doc,
            registry,
            options: Options::default(),
            name_error,
        }
    }

    /// Sets `key` of table `table` (`""`: the top level).
    fn set(mut self, table: &str, key: &str, value: Value) -> Check {
        if table.is_empty() {
            self.doc.insert(key.into(), value);
            return self;
        }
        let entry = self
            .doc
            .entry(table.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(t) = entry {
            t.insert(key.into(), value);
        }
        self
    }

    /// A list of whole numbers.
    fn numbers(values: &[usize]) -> Value {
        Value::Array(values.iter().map(|&v| Value::Integer(v as i64)).collect())
    }

    /// The check's name (reports, the saved files).
    pub fn name(self, name: &str) -> Check {
        self.set("", "name", name.into())
    }

    /// The world sizes (1 to 16).
    pub fn world_sizes(self, sizes: &[usize]) -> Check {
        self.set("params", "world_size", Check::numbers(sizes))
    }

    /// Elements per rank buffer.
    pub fn counts(self, counts: &[usize]) -> Check {
        self.set("params", "count", Check::numbers(counts))
    }

    /// Pipeline chunks the buffer (or a rank's block) is cut into.
    pub fn chunks(self, chunks: &[usize]) -> Check {
        self.set("params", "chunks", Check::numbers(chunks))
    }

    /// Roots of rooted collectives.
    pub fn roots(self, roots: &[usize]) -> Check {
        self.set("params", "root", Check::numbers(roots))
    }

    /// In place, out of place, or both.
    pub fn in_place(self, modes: &[bool]) -> Check {
        let list = modes.iter().map(|&b| Value::Boolean(b)).collect();
        self.set("params", "in_place", Value::Array(list))
    }

    /// Send buffering: eager slots per connection, rendezvous, unbounded.
    pub fn buffering(self, modes: &[Buffering]) -> Check {
        let list = modes
            .iter()
            .map(|&b| Value::String(buffering_name(b)))
            .collect();
        self.set("params", "buffering", Value::Array(list))
    }

    /// Messages one schedule may lose; with `retransmit` the transport
    /// resends them (up to 7 times), without it they are gone.
    pub fn drops(self, drops: usize, retransmit: bool) -> Check {
        self.set("faults", "drops", Value::Integer(drops as i64))
            .set("faults", "retransmit", Value::Boolean(retransmit))
    }

    /// Ranks one schedule may crash.
    pub fn crashes(self, crashes: usize) -> Check {
        self.set("faults", "crashes", Value::Integer(crashes as i64))
    }

    /// Receives one schedule may time out spuriously.
    pub fn timeouts(self, timeouts: usize) -> Check {
        self.set("faults", "timeouts", Value::Integer(timeouts as i64))
    }

    /// `schedules` random schedules per point from `seed`, instead of
    /// every schedule.
    pub fn random(self, schedules: u64, seed: u64) -> Check {
        self.set("search", "kind", "random".into())
            .set("search", "schedules", Value::Integer(schedules as i64))
            .set("search", "seed", Value::Integer(seed as i64))
    }

    /// `schedules` PCT schedules per point from `seed` (random priorities
    /// with `depth - 1` change points), instead of every schedule.
    pub fn pct(self, schedules: u64, seed: u64, depth: usize) -> Check {
        self.set("search", "kind", "pct".into())
            .set("search", "schedules", Value::Integer(schedules as i64))
            .set("search", "seed", Value::Integer(seed as i64))
            .set("search", "depth", Value::Integer(depth as i64))
    }

    /// Most schedules per point before the search stops.
    pub fn max_schedules(self, schedules: u64) -> Check {
        self.set("search", "max_schedules", Value::Integer(schedules as i64))
    }

    /// Also check the traffic and critical path against the cost formula
    /// (skipped, with a note, for an algorithm without one).
    pub fn cost(self) -> Check {
        self.set("", "cost", Value::Boolean(true))
    }

    /// Report the first counterexample found without shrinking it.
    pub fn no_shrink(mut self) -> Check {
        self.options.no_shrink = true;
        self
    }

    /// The check as a check file's text (what [`save`](Self::save) writes).
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.doc).expect("a TOML table serialises")
    }

    /// The validated check.
    pub fn program(&self) -> Result<Rc<Program>, CheckError> {
        if let Some(e) = &self.name_error {
            return Err(CheckError::Name(e.clone()));
        }
        let path = PathBuf::from(format!("{}.toml", self.file_stem()));
        crate::scenario::parse(&path, &self.to_toml(), &self.registry)
            .map(Rc::new)
            .map_err(CheckError::from)
    }

    /// Runs the check: every point, the verdict, the shrunk
    /// counterexample.
    pub fn run(&self) -> Result<CheckReport, CheckError> {
        let program = self.program()?;
        Ok(check(&program, self.options)?)
    }

    /// Replays a counterexample of this check: the same choices give the
    /// same failure.
    pub fn replay(&self, cex: &Counterexample) -> Result<Replayed, CheckError> {
        let program = self.program()?;
        let path = PathBuf::from(format!("{}.toml", self.file_stem()));
        Ok(replay_choices(
            program,
            &path,
            cex.point,
            cex.choices.clone(),
            cex.violation.verdict,
            "the counterexample",
        )?)
    }

    /// Writes the check as `DIR/NAME.toml` and, if the report has a
    /// counterexample, `DIR/NAME.cex.toml` naming it, so that `sim replay
    /// DIR/NAME.cex.toml` (a `sim` with the same algorithms registered)
    /// reproduces it. Returns the paths written.
    pub fn save(&self, dir: &Path, report: &CheckReport) -> io::Result<(PathBuf, Option<PathBuf>)> {
        let scenario = dir.join(format!("{}.toml", self.file_stem()));
        std::fs::write(&scenario, self.to_toml())?;
        let Some(cex) = &report.counterexample else {
            return Ok((scenario, None));
        };
        let file = CexFile::new(
            &scenario,
            cex.violation.verdict,
            &cex.violation.summary,
            cex.point,
            &cex.choices,
        );
        let path = dir.join(format!("{}.cex.toml", self.file_stem()));
        file.save(&path)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok((scenario, Some(path)))
    }

    /// The file stem of the saved files: the name, with anything but
    /// letters, digits, `_` and `-` replaced.
    fn file_stem(&self) -> String {
        let name = self
            .doc
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("check");
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Verdict;
    use algorithms::Collective;

    fn buggy() -> Algorithm {
        Algorithm::new(crate::demo::BuggyRing)
    }

    #[test]
    fn a_catalogue_algorithm_checks_as_its_file_does() {
        let ring = algorithms::catalogue_algorithm(Collective::Allreduce, "ring");
        let report = Check::of(&ring)
            .world_sizes(&[2, 3])
            .counts(&[3])
            .buffering(&[Buffering::Unbounded, Buffering::Eager(1)])
            .cost()
            .run()
            .unwrap();
        assert_eq!((report.verdict, report.complete), (Verdict::Verified, true));
        assert_eq!(report.points.len(), 4);
    }

    #[test]
    fn settings_are_validated_like_a_file() {
        let e = Check::of(&buggy()).world_sizes(&[17]).run().unwrap_err();
        assert!(e.to_string().contains("world_size"), "{e}");
        let e = Check::of(&buggy()).pct(10, 1, 0).run().unwrap_err();
        assert!(
            e.to_string().contains("depth must be between 1 and 64"),
            "{e}"
        );
        let found = Check::of(&buggy())
            .world_sizes(&[3])
            .counts(&[3])
            .pct(200, 1, 3)
            .run();
        assert_eq!(found.unwrap().verdict, Verdict::WrongResult);
        let impostor = Algorithm::from_fn("ring", Collective::Allreduce, |_, _, _, _| {
            Box::pin(async { Ok(()) })
        });
        let e = Check::of(&impostor).run().unwrap_err().to_string();
        assert!(
            e.contains("already has an algorithm `ring` (built in)"),
            "{e}"
        );
    }

    #[test]
    fn a_saved_counterexample_replays_from_its_files() {
        let check = Check::of(&buggy())
            .world_sizes(&[3])
            .counts(&[3])
            .name("buggy ring");
        let report = check.run().unwrap();
        assert_eq!(report.verdict, Verdict::WrongResult);
        let dir = std::env::temp_dir().join(format!("check_save_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (scenario, cex) = check.save(&dir, &report).unwrap();
        assert!(scenario.ends_with("buggy_ring.toml"));
        let cex = cex.expect("a counterexample file");
        let mut registry = Registry::builtin();
        registry.insert(buggy()).unwrap();
        let replayed = crate::replay::replay_file(&cex, &registry).unwrap();
        assert_eq!(replayed.found(), Verdict::WrongResult);
        assert_eq!(replayed.saved, Verdict::WrongResult);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The algorithms that reduce in the network are verified on 2 to 4
    /// ranks: their contributions ordered every way, the switch's
    /// member-order result is each algorithm's reference.
    #[test]
    fn in_network_algorithms_are_verified_on_small_worlds() {
        let registry = Registry::builtin();
        // CollNet on 4 ranks is 2 nodes of 2 (the checker's ranks_per_node).
        // NVLS-Tree on one element: one channel (two run both trees at
        // once, 14,976 schedules at 4 ranks).
        for (name, sizes, count) in [
            ("nccl_nvls", &[2, 3][..], 2),
            ("nccl_collnet_direct", &[4][..], 2),
            ("nccl_collnet_chain", &[4][..], 2),
            ("nccl_nvls_tree", &[2, 3, 4][..], 1),
        ] {
            let algorithm = registry
                .get(Collective::Allreduce, name)
                .expect("in the catalogue");
            let report = Check::of(&algorithm)
                .world_sizes(sizes)
                .counts(&[count])
                .run()
                .unwrap();
            assert_eq!(report.verdict, Verdict::Verified, "{name}");
        }
    }
}
