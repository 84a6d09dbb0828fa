//! `sim merge`: joins the shard files of one sweep into the file a single
//! run writes. Every shard's `# sweep` line must carry the same
//! fingerprint, point count and shard count, each shard `I/N` must be
//! given exactly once, every header must be the same, and every point must
//! be present exactly once; then the rows are sorted by point and the
//! scaling columns computed as a whole run computes them. Each file is
//! read through the bounded reader ([`inputs::kind::SWEEP_SHARD`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::file::{self, FileError};
use super::scaling;
use super::shard::{Shard, SweepLine};
use super::table::Table;

/// The most missing points an error lists.
const MISSING_LISTED_MAX: usize = 10;

/// Shard files that cannot be merged.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// A file could not or may not be read (missing, a device, over the
    /// cap, not UTF-8).
    #[error(transparent)]
    Read(#[from] inputs::InputError),
    /// A file is not a shard file of `sim sweep`.
    #[error("{path}:{line}: {message}")]
    Format {
        /// The file.
        path: String,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The files are not shards of one sweep.
    #[error("{0}")]
    Mismatch(String),
    /// Some points are in no file.
    #[error("{0}")]
    Missing(String),
}

impl From<FileError> for MergeError {
    fn from(e: FileError) -> MergeError {
        match e {
            FileError::Read(e) => MergeError::Read(e),
            FileError::Format {
                path,
                line,
                message,
            } => MergeError::Format {
                path,
                line,
                message,
            },
        }
    }
}

/// One shard file, read.
struct ShardFile {
    path: PathBuf,
    line: SweepLine,
    shard: Shard,
    table: Table,
}

/// Reads the shard files at `paths` and joins them; returns the merged
/// table and the `# sweep` line of the whole sweep.
pub fn merge(paths: &[PathBuf]) -> Result<(Table, SweepLine), MergeError> {
    let shards = paths
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = shards.first() else {
        return Err(MergeError::Missing("no shard file given".to_string()));
    };
    let name = |s: &ShardFile| s.path.display().to_string();
    for s in &shards[1..] {
        if s.shard.count != first.shard.count {
            return Err(MergeError::Mismatch(format!(
                "{} is shard {} but {} is shard {}: the shards of one sweep all have the same \
                 count N (was a `# sweep` line edited, or shards of two runs mixed?)",
                name(s),
                s.shard,
                name(first),
                first.shard
            )));
        }
        if (s.line.fingerprint, s.line.points) != (first.line.fingerprint, first.line.points) {
            return Err(MergeError::Mismatch(format!(
                "{} and {} are shards of different sweeps (`{}` against `{}`): \
                 the scenario file, or NCCL_ALGO, changed between them",
                name(first),
                name(s),
                first.line,
                s.line
            )));
        }
        if s.table.header != first.table.header {
            return Err(MergeError::Mismatch(format!(
                "{} and {} have different headers",
                name(first),
                name(s)
            )));
        }
    }
    let mut owner: BTreeMap<usize, &ShardFile> = BTreeMap::new();
    let mut rows: Vec<(usize, &Vec<String>)> = Vec::new();
    for s in &shards {
        for row in &s.table.rows {
            let point: usize = row[0].parse().expect("checked when read");
            if let Some(other) = owner.get(&point)
                && !std::ptr::eq(*other, s)
            {
                return Err(MergeError::Mismatch(format!(
                    "point {point} is in both {} and {}: the same shard given twice?",
                    name(other),
                    name(s)
                )));
            }
            owner.insert(point, s);
            rows.push((point, row));
        }
    }
    missing(&shards, &owner)?;
    each_shard_once(&shards)?;
    let line = SweepLine {
        shard: None,
        ..first.line
    };
    // Stable: the rows of a point keep their order.
    rows.sort_by_key(|&(point, _)| point);
    let mut table = Table {
        header: first.table.header.clone(),
        rows: rows.into_iter().map(|(_, row)| row.clone()).collect(),
    };
    scaling::fill(&mut table);
    Ok((table, line))
}

/// Fails naming the points no file holds, and the shards that would hold
/// them when the files agree on the shard count.
fn missing(shards: &[ShardFile], owner: &BTreeMap<usize, &ShardFile>) -> Result<(), MergeError> {
    let points = shards[0].line.points;
    let absent: Vec<usize> = (0..points).filter(|p| !owner.contains_key(p)).collect();
    if absent.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = absent
        .iter()
        .take(MISSING_LISTED_MAX)
        .map(|p| p.to_string())
        .collect();
    let more = if absent.len() > MISSING_LISTED_MAX {
        ", ..."
    } else {
        ""
    };
    let count = shards[0].shard.count;
    let hint = if shards.iter().all(|s| s.shard.count == count) {
        let given: Vec<usize> = shards.iter().map(|s| s.shard.index).collect();
        let lacking: Vec<String> = (0..count)
            .filter(|i| !given.contains(i) && absent.iter().any(|p| p % count == *i))
            .map(|i| format!("{i}/{count}"))
            .collect();
        format!("; missing shard(s): {}", lacking.join(", "))
    } else {
        String::new()
    };
    Err(MergeError::Missing(format!(
        "{} of the sweep's {points} points are in no shard file: {}{more}{hint}",
        absent.len(),
        listed.join(", ")
    )))
}

/// Fails naming a shard given twice, or one given in no file (when the
/// files agree on the count and hold every point: a shard with no points
/// of its own is still written, and still expected).
fn each_shard_once(shards: &[ShardFile]) -> Result<(), MergeError> {
    let count = shards[0].shard.count;
    let mut given: BTreeMap<usize, &ShardFile> = BTreeMap::new();
    for s in shards {
        if let Some(other) = given.insert(s.shard.index, s) {
            return Err(MergeError::Mismatch(format!(
                "{} and {} are both shard {}: the same shard given twice?",
                other.path.display(),
                s.path.display(),
                s.shard
            )));
        }
    }
    let lacking: Vec<String> = (0..count)
        .filter(|i| !given.contains_key(i))
        .take(MISSING_LISTED_MAX)
        .map(|i| format!("{i}/{count}"))
        .collect();
    if lacking.is_empty() {
        return Ok(());
    }
    Err(MergeError::Missing(format!(
        "the files are {} of the sweep's {count} shards; missing shard(s): {}{}",
        given.len(),
        lacking.join(", "),
        if count - given.len() > lacking.len() {
            ", ..."
        } else {
            ""
        }
    )))
}

/// Reads one shard file: its `# sweep` line, header and rows; a whole
/// sweep's file or a partial shard is refused.
fn read(path: &Path) -> Result<ShardFile, MergeError> {
    let read = file::read(path)?;
    let format = |line: u64, message: String| MergeError::Format {
        path: path.display().to_string(),
        line,
        message: inputs::shorten_quoted(&message).into_owned(),
    };
    let Some(shard) = read.line.shard else {
        return Err(format(
            1,
            "not a shard file of `sim sweep --shard`: it holds a whole sweep".to_string(),
        ));
    };
    if let Some(reason) = &read.partial {
        let last = read.table.rows.len() as u64 + 3;
        return Err(format(
            last,
            format!(
                "shard {shard} is partial ({reason}): complete it with \
                 `sim sweep --resume --shard {shard} --csv {}`",
                path.display()
            ),
        ));
    }
    Ok(ShardFile {
        path: path.to_path_buf(),
        line: read.line,
        shard,
        table: read.table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CSV_HEADER;
    use crate::sweep::table::SCALING_COLUMNS;

    /// A shard file of a `points`-point sweep over `seed` holding the
    /// points of shard `index/count` below `points`, with a `status` of
    /// `ok` and empty run columns.
    fn shard_text(points: usize, index: usize, count: usize) -> String {
        let mut text = format!("# sweep 00000000000000ab {points} shard {index}/{count}\n");
        let tail: Vec<&str> = CSV_HEADER.iter().chain(&SCALING_COLUMNS).copied().collect();
        text += &format!("point,seed,status,{}\n", tail.join(","));
        for p in (0..points).filter(|p| p % count == index) {
            text += &format!("{p},{p},ok{}\n", ",".repeat(tail.len()));
        }
        text
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("merge-test-{}-{name}", std::process::id()))
    }

    #[test]
    fn every_shard_of_one_sweep_merges_in_point_order() {
        let d = dir("ok");
        let a = write(&d, "a.csv", &shard_text(5, 0, 2));
        let b = write(&d, "b.csv", &shard_text(5, 1, 2));
        let (table, _) = merge(&[b, a]).expect("both shards");
        let points: Vec<&str> = table.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(points, ["0", "1", "2", "3", "4"]);
    }

    #[test]
    fn a_header_edited_to_another_shard_count_is_named() {
        // Points 0 and 1 of a 2-point sweep are both present, but the
        // second file says it is shard 1 of 3.
        let d = dir("count");
        let a = write(&d, "a.csv", &shard_text(2, 0, 2));
        let edited = shard_text(2, 1, 2).replacen("shard 1/2", "shard 1/3", 1);
        let b = write(&d, "b.csv", &edited);
        let e = merge(&[a.clone(), b.clone()]).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{} is shard 1/3 but {} is shard 0/2",
                b.display(),
                a.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn a_shard_given_twice_or_not_at_all_is_named_even_without_points() {
        // A 2-point sweep in 4 shards: shards 2/4 and 3/4 hold no points.
        let d = dir("once");
        let files: Vec<PathBuf> = (0..4)
            .map(|i| write(&d, &format!("s{i}.csv"), &shard_text(2, i, 4)))
            .collect();
        assert!(merge(&files).is_ok());
        let twice = [
            files[0].clone(),
            files[1].clone(),
            files[2].clone(),
            files[2].clone(),
        ];
        let e = merge(&twice).unwrap_err().to_string();
        let s2 = files[2].display();
        assert_eq!(
            e,
            format!("{s2} and {s2} are both shard 2/4: the same shard given twice?")
        );
        let e = merge(&files[..3]).unwrap_err().to_string();
        assert_eq!(
            e,
            "the files are 3 of the sweep's 4 shards; missing shard(s): 3/4"
        );
    }

    #[test]
    fn a_device_or_a_shard_that_is_not_utf8_is_refused_by_the_bounded_reader() {
        let e = merge(&[PathBuf::from("/dev/zero")])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/dev/zero: cannot read sweep shard: it is a character device"),
            "{e}"
        );
        let d = dir("utf8");
        let bad = write(&d, "bad.csv", "");
        std::fs::write(&bad, b"# sweep 00000000000000ab 1 shard 0/1\npoint,s\xff").unwrap();
        let e = merge(std::slice::from_ref(&bad)).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2:8: ", bad.display())), "{e}");
    }
}
