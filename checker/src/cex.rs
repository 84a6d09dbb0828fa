//! Counterexample files: the parameters and the choices of a failing
//! schedule, written by `sim check` and re-run by `sim replay`.
//!
//! ```toml
//! # sim check counterexample; re-run it with: sim replay FILE
//! scenario = "scenarios/check/mismatched_order.toml"
//! verdict = "deadlock"
//! summary = "deadlock: rank(s) 0, 1, 2 never finish"
//! world_size = 3
//! count = 4
//! chunks = 1
//! root = 0
//! in_place = true
//! buffering = "eager:1"
//! choices = ["deliver 1->2 tag 1", "notify 2->0"]
//! ```
//!
//! A file is read through the bounded reader
//! ([`inputs::kind::COUNTEREXAMPLE`]: a regular file of at most 64 MiB,
//! UTF-8) and every problem in it is located at its line and column, as
//! in scenarios ([`located`]).
//!
//! - `choice`: choices spelt as [`Choice`]'s `Display` writes them.
//! - [`located`]: [`LoadedCex`], a file read with where its values are.

mod choice;
pub mod located;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scenario::{BUFFER_SLOTS_MAX, COUNT_MAX, WORLD_SIZE_MAX};
use super::spec::{Buffering, Point, Verdict};
use super::world::Choice;
use engine::scenario::ScenarioError;

pub use located::LoadedCex;

/// The file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CexFile {
    /// The check scenario, as given to `sim check`.
    pub scenario: PathBuf,
    /// The violated property.
    pub verdict: String,
    /// What failed, in one line.
    pub summary: String,
    /// World size.
    pub world_size: usize,
    /// Elements per buffer.
    pub count: usize,
    /// Pipeline chunks.
    pub chunks: usize,
    /// Root.
    pub root: usize,
    /// In place or not.
    pub in_place: bool,
    /// Send buffering, as in scenarios (`eager:K`, `rendezvous`, `unbounded`).
    pub buffering: String,
    /// The schedule, one choice per step.
    pub choices: Vec<String>,
}

/// Why a counterexample file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CexError {
    /// The file could not be written.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file could not or may not be read (missing, a device, a FIFO,
    /// over the cap).
    #[error(transparent)]
    Read(inputs::InputError),
    /// A value of a file read from disk is not valid, at its line and
    /// column (`path:line:column: message`, as scenario errors).
    #[error(transparent)]
    Located(#[from] ScenarioError),
    /// A value of a counterexample held in memory is not valid, naming
    /// its key.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<inputs::InputError> for CexError {
    /// Text that is not UTF-8 is located at its first bad byte.
    fn from(e: inputs::InputError) -> CexError {
        match e.line_column() {
            Some(_) => CexError::Located(ScenarioError::from(e)),
            None => CexError::Read(e),
        }
    }
}

/// A value of a counterexample file, for saying where a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `scenario`.
    Scenario,
    /// `verdict`.
    Verdict,
    /// `world_size`.
    WorldSize,
    /// `count`.
    Count,
    /// `chunks`.
    Chunks,
    /// `buffering`.
    Buffering,
    /// `choices`, the whole list.
    Choices,
    /// The choice with this 0-based index.
    Choice(usize),
}

/// What a checked counterexample holds: its point, its choices and the
/// verdict it says they show.
pub type Decoded = (Point, Vec<Choice>, Verdict);

/// The scenario spelling of a buffering mode.
pub fn buffering_name(b: Buffering) -> String {
    match b {
        Buffering::Eager(0) => "rendezvous".into(),
        Buffering::Eager(k) => format!("eager:{k}"),
        Buffering::Unbounded => "unbounded".into(),
    }
}

/// Reads a buffering mode as scenarios spell it.
pub fn parse_buffering(text: &str) -> Result<Buffering, String> {
    match text {
        "rendezvous" => Ok(Buffering::Eager(0)),
        "unbounded" => Ok(Buffering::Unbounded),
        _ => text
            .strip_prefix("eager:")
            .and_then(|k| k.parse().ok())
            .map(Buffering::Eager)
            .ok_or_else(|| {
                format!("unknown buffering `{text}`; valid: eager:K, rendezvous, unbounded")
            }),
    }
}

impl CexFile {
    /// The file for a counterexample.
    pub fn new(
        scenario: &Path,
        verdict: Verdict,
        summary: &str,
        point: Point,
        choices: &[Choice],
    ) -> CexFile {
        CexFile {
            scenario: scenario.to_path_buf(),
            verdict: verdict.name().into(),
            summary: summary.into(),
            world_size: point.world_size,
            count: point.count,
            chunks: point.chunks,
            root: point.root,
            in_place: point.in_place,
            buffering: buffering_name(point.buffering),
            choices: choices.iter().map(Choice::to_string).collect(),
        }
    }

    /// The file's text, as saved at `path` (its first line says how to
    /// replay it).
    pub fn text(&self, path: &Path) -> Result<String, CexError> {
        let body = toml::to_string(self).map_err(|e| CexError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(format!(
            "# sim check counterexample; re-run it with: sim replay {}\n{body}",
            path.display()
        ))
    }

    /// Writes the file.
    pub fn save(&self, path: &Path) -> Result<(), CexError> {
        let text = self.text(path)?;
        std::fs::write(path, text).map_err(|e| CexError::Io {
            path: path.display().to_string(),
            reason: format!("cannot write counterexample: {e}"),
        })
    }

    /// Reads a file and checks it ([`LoadedCex::read`]): every problem is
    /// located at its line and column.
    pub fn load(path: &Path) -> Result<CexFile, CexError> {
        Ok(LoadedCex::read(path)?.file)
    }

    /// The parameter point and the choices, checked; errors name the
    /// file and the key (for a counterexample held in memory; one read
    /// from a file is checked with locations by [`LoadedCex::read`]).
    pub fn decode(&self, path: &Path) -> Result<Decoded, CexError> {
        self.checked(&|field, reason| CexError::Invalid {
            path: path.display().to_string(),
            reason: inputs::shorten_quoted(&format!("{}: {reason}", field_name(field)))
                .into_owned(),
        })
    }

    /// The point, choices and verdict, each value checked; `fail` says
    /// where a problem is.
    fn checked(&self, fail: &dyn Fn(Field, String) -> CexError) -> Result<Decoded, CexError> {
        let buffering = parse_buffering(&self.buffering).map_err(|e| fail(Field::Buffering, e))?;
        let verdict = Verdict::ALL
            .into_iter()
            .find(|v| v.name() == self.verdict)
            .ok_or_else(|| {
                let valid: Vec<&str> = Verdict::ALL.iter().map(|v| v.name()).collect();
                fail(
                    Field::Verdict,
                    format!(
                        "unknown verdict `{}`; valid: {}",
                        self.verdict,
                        valid.join(", ")
                    ),
                )
            })?;
        let choices = self
            .choices
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.parse()
                    .map_err(|e| fail(Field::Choice(i), format!("choice {}: {e}", i + 1)))
            })
            .collect::<Result<Vec<Choice>, CexError>>()?;
        // The limits of check scenarios: a file beyond them was not written
        // by `sim check`, and replaying it could exhaust memory.
        if let Buffering::Eager(k) = buffering
            && k > BUFFER_SLOTS_MAX
        {
            return Err(fail(
                Field::Buffering,
                format!(
                    "buffering `{}` has more than {BUFFER_SLOTS_MAX} slots",
                    self.buffering
                ),
            ));
        }
        for (field, value, min, max) in [
            (Field::WorldSize, self.world_size, 1, WORLD_SIZE_MAX),
            (Field::Count, self.count, 0, COUNT_MAX),
            (Field::Chunks, self.chunks, 1, COUNT_MAX),
        ] {
            if !(min..=max).contains(&value) {
                return Err(fail(
                    field,
                    format!(
                        "{} = {value} is out of range: check scenarios allow {min} to {max}",
                        field_name(field)
                    ),
                ));
            }
        }
        let point = Point {
            world_size: self.world_size,
            count: self.count,
            chunks: self.chunks,
            root: self.root,
            in_place: self.in_place,
            buffering,
        };
        Ok((point, choices, verdict))
    }
}

/// The key of `field` in the file.
fn field_name(field: Field) -> &'static str {
    match field {
        Field::Scenario => "scenario",
        Field::Verdict => "verdict",
        Field::WorldSize => "world_size",
        Field::Count => "count",
        Field::Chunks => "chunks",
        Field::Buffering => "buffering",
        Field::Choices | Field::Choice(_) => "choices",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::ChannelKey;

    fn file() -> CexFile {
        let point = Point {
            world_size: 3,
            count: 3,
            chunks: 1,
            root: 0,
            in_place: true,
            buffering: Buffering::Eager(1),
        };
        let choices = [Choice::Deliver(ChannelKey {
            src: 0,
            dst: 1,
            tag: 0,
        })];
        CexFile::new(
            Path::new("x.toml"),
            Verdict::Deadlock,
            "stuck",
            point,
            &choices,
        )
    }

    #[test]
    fn a_valid_file_decodes_to_its_point() {
        let (point, choices, verdict) = file().decode(Path::new("f")).expect("valid");
        assert_eq!((point.world_size, point.count), (3, 3));
        assert_eq!(point.buffering, Buffering::Eager(1));
        assert_eq!(choices.len(), 1);
        assert_eq!(verdict, Verdict::Deadlock);
    }

    /// A change to a valid file.
    type Edit = fn(&mut CexFile);

    #[test]
    fn values_no_scenario_could_hold_are_refused_before_any_replay() {
        let edits: [(&str, Edit); 5] = [
            ("world_size", |f| f.world_size = 17),
            ("count", |f| f.count = 50_000_000),
            ("chunks", |f| f.chunks = 50_000_000),
            ("buffering", |f| f.buffering = "eager:100000000".into()),
            ("world_size", |f| f.world_size = 0),
        ];
        for (field, edit) in edits {
            let mut f = file();
            edit(&mut f);
            let e = f.decode(Path::new("f.cex.toml")).expect_err(field);
            let text = e.to_string();
            assert!(text.starts_with("f.cex.toml: "), "{text}");
            assert!(text.contains(field), "{field}: {text}");
        }
    }
}
