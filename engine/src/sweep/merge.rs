//! `sim merge`: joins the shard files of one sweep into the file a single
//! run writes. Every shard's `# sweep` line must carry the same
//! fingerprint and point count, every header must be the same, and every
//! point must be present exactly once; then the rows are sorted by point
//! and the scaling columns computed as a whole run computes them.

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
    /// A file could not be read.
    #[error("{path}: cannot read: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
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
            FileError::Read { path, reason } => MergeError::Read { path, reason },
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

/// Reads one shard file: its `# sweep` line, header and rows; a whole
/// sweep's file or a partial shard is refused.
fn read(path: &Path) -> Result<ShardFile, MergeError> {
    let read = file::read(path)?;
    let format = |line: u64, message: String| MergeError::Format {
        path: path.display().to_string(),
        line,
        message,
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
