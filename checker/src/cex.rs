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

use super::scenario::{BUFFER_SLOTS_MAX, COUNT_MAX, WORLD_SIZE_MAX};
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
        // The limits of check scenarios: a file beyond them was not written
        // by `sim check`, and replaying it could exhaust memory.
        if let Buffering::Eager(k) = buffering
            && k > BUFFER_SLOTS_MAX
        {
            return Err(invalid(format!(
                "buffering `{}` has more than {BUFFER_SLOTS_MAX} slots",
                self.buffering
            )));
        }
        for (field, value, min, max) in [
            ("world_size", self.world_size, 1, WORLD_SIZE_MAX),
            ("count", self.count, 0, COUNT_MAX),
            ("chunks", self.chunks, 1, COUNT_MAX),
        ] {
            if !(min..=max).contains(&value) {
                return Err(invalid(format!(
                    "{field} = {value} is out of range: check scenarios allow {min} to {max}"
                )));
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_choice_reads_back_as_written() {
        let key = ChannelKey {
            src: 2,
            dst: 0,
            tag: (3 << 56) | 7,
        };
        for choice in [
            Choice::Start { rank: 1, call: 2 },
            Choice::Deliver(key),
            Choice::Drop(key),
            Choice::Crash(3),
            Choice::Timeout(key),
            Choice::Notify { from: 0, to: 2 },
        ] {
            assert_eq!(choice.to_string().parse::<Choice>(), Ok(choice));
        }
        for bad in [
            "deliver",
            "deliver 0-1 tag 0",
            "crash x",
            "start 1",
            "fly 0->1",
        ] {
            assert!(bad.parse::<Choice>().is_err(), "{bad}");
        }
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
