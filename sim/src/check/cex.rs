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

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::spec::{Buffering, Point, Verdict};
use super::world::{ChannelKey, Choice};

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
    /// The file could not be read or written.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is not a valid counterexample.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

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

fn parse_key(text: &str) -> Option<ChannelKey> {
    // "S->D tag T"
    let (pair, tag) = text.split_once(" tag ")?;
    let (src, dst) = pair.split_once("->")?;
    Some(ChannelKey {
        src: src.trim().parse().ok()?,
        dst: dst.trim().parse().ok()?,
        tag: tag.trim().parse().ok()?,
    })
}

impl FromStr for Choice {
    type Err = String;

    /// Reads a choice as [`Choice`]'s `Display` writes it.
    fn from_str(s: &str) -> Result<Choice, String> {
        let bad = || format!("cannot read choice `{s}`");
        let (verb, rest) = s.split_once(' ').ok_or_else(bad)?;
        let choice = match verb {
            "deliver" => Choice::Deliver(parse_key(rest).ok_or_else(bad)?),
            "drop" => Choice::Drop(parse_key(rest).ok_or_else(bad)?),
            "timeout" => Choice::Timeout(parse_key(rest).ok_or_else(bad)?),
            "crash" => Choice::Crash(rest.trim().parse().map_err(|_| bad())?),
            "start" => {
                let (rank, call) = rest.split_once(" call ").ok_or_else(bad)?;
                Choice::Start {
                    rank: rank.trim().parse().map_err(|_| bad())?,
                    call: call.trim().parse().map_err(|_| bad())?,
                }
            }
            "notify" => {
                let (from, to) = rest.split_once("->").ok_or_else(bad)?;
                Choice::Notify {
                    from: from.trim().parse().map_err(|_| bad())?,
                    to: to.trim().parse().map_err(|_| bad())?,
                }
            }
            _ => return Err(bad()),
        };
        Ok(choice)
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

    /// Writes the file.
    pub fn save(&self, path: &Path) -> Result<(), CexError> {
        let body = toml::to_string(self).map_err(|e| CexError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let text = format!(
            "# sim check counterexample; re-run it with: sim replay {}\n{body}",
            path.display()
        );
        std::fs::write(path, text).map_err(|e| CexError::Io {
            path: path.display().to_string(),
            reason: format!("cannot write counterexample: {e}"),
        })
    }

    /// Reads a file.
    pub fn load(path: &Path) -> Result<CexFile, CexError> {
        let text = std::fs::read_to_string(path).map_err(|e| CexError::Io {
            path: path.display().to_string(),
            reason: format!("cannot read counterexample: {e}"),
        })?;
        toml::from_str(&text).map_err(|e| CexError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// The parameter point and the choices, checked.
    pub fn decode(&self, path: &Path) -> Result<(Point, Vec<Choice>, Verdict), CexError> {
        let invalid = |reason: String| CexError::Invalid {
            path: path.display().to_string(),
            reason,
        };
        let buffering = parse_buffering(&self.buffering).map_err(invalid)?;
        let verdict = Verdict::ALL
            .into_iter()
            .find(|v| v.name() == self.verdict)
            .ok_or_else(|| invalid(format!("unknown verdict `{}`", self.verdict)))?;
        let choices = self
            .choices
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.parse()
                    .map_err(|e| invalid(format!("choice {}: {e}", i + 1)))
            })
            .collect::<Result<Vec<Choice>, CexError>>()?;
        if self.world_size == 0 || self.chunks == 0 {
            return Err(invalid("world_size and chunks must be at least 1".into()));
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
