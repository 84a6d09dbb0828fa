//! `sim merge`: joins the shard files of one sweep into the file a single
//! run writes. Every shard's `# sweep` line must carry the same
//! fingerprint, point count and shard count, each shard `I/N` must be
//! given exactly once, every header must be the same, and every point must
//! be present exactly once; then the rows are sorted by point and the
//! scaling columns computed as a whole run computes them. Each file is
//! read through the bounded reader ([`inputs::kind::SWEEP_SHARD`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::scaling;
use super::shard::ShardLine;
use super::status::Status;
use super::table::{SCALING_COLUMNS, Table};
use crate::report::CSV_HEADER;

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

/// One shard file, read.
struct ShardFile {
    path: PathBuf,
    line: ShardLine,
    table: Table,
}

/// Reads the shard files at `paths` and joins them.
pub fn merge(paths: &[PathBuf]) -> Result<Table, MergeError> {
    let shards = paths
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = shards.first() else {
        return Err(MergeError::Missing("no shard file given".to_string()));
    };
    let name = |s: &ShardFile| s.path.display().to_string();
    for s in &shards[1..] {
        if s.line.shard.count != first.line.shard.count {
            return Err(MergeError::Mismatch(format!(
                "{} is shard {} but {} is shard {}: the shards of one sweep all have the same \
                 count N (was a `# sweep` line edited, or shards of two runs mixed?)",
                name(s),
                s.line.shard,
                name(first),
                first.line.shard
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
    // Stable: the rows of a point keep their order.
    rows.sort_by_key(|&(point, _)| point);
    let mut table = Table {
        header: first.table.header.clone(),
        rows: rows.into_iter().map(|(_, row)| row.clone()).collect(),
    };
    scaling::fill(&mut table);
    Ok(table)
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
    let count = shards[0].line.shard.count;
    let hint = if shards.iter().all(|s| s.line.shard.count == count) {
        let given: Vec<usize> = shards.iter().map(|s| s.line.shard.index).collect();
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
    let count = shards[0].line.shard.count;
    let mut given: BTreeMap<usize, &ShardFile> = BTreeMap::new();
    for s in shards {
        if let Some(other) = given.insert(s.line.shard.index, s) {
            return Err(MergeError::Mismatch(format!(
                "{} and {} are both shard {}: the same shard given twice?",
                other.path.display(),
                s.path.display(),
                s.line.shard
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

/// Reads one shard file: its `# sweep` line, header and rows.
fn read(path: &Path) -> Result<ShardFile, MergeError> {
    let shown = path.display().to_string();
    let text = inputs::read_text(path, &inputs::kind::SWEEP_SHARD)?;
    // Values echoed from the file are shortened.
    let format = |line: u64, message: String| MergeError::Format {
        path: shown.clone(),
        line,
        message: inputs::shorten_quoted(&message).into_owned(),
    };
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let Some(line) = ShardLine::parse(first) else {
        return Err(format(
            1,
            "not a shard file of `sim sweep --shard`: the first line must be \
             `# sweep <fingerprint> <points> shard I/N`"
                .to_string(),
        ));
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(rest.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| format(2, e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let tail: Vec<&str> = CSV_HEADER.iter().chain(&SCALING_COLUMNS).copied().collect();
    let status = header.iter().position(|h| h == "status");
    let shaped = header.first().is_some_and(|h| h == "point")
        && status == header.len().checked_sub(tail.len() + 1)
        && header.ends_with(&tail.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    if !shaped {
        return Err(format(
            2,
            "the header is not a sweep's: point, the axes, status, the run columns, speedup, efficiency"
                .to_string(),
        ));
    }
    let status = status.expect("checked with the shape");
    let mut rows = Vec::new();
    for record in reader.records() {
        // Line numbers of the file: the `# sweep` line comes first.
        let record = record.map_err(|e| {
            let at = e.position().map_or(0, |p| p.line() + 1);
            format(at, e.to_string())
        })?;
        let at = record.position().map_or(0, |p| p.line() + 1);
        let row: Vec<String> = record.iter().map(str::to_string).collect();
        match row[0].parse::<usize>() {
            Ok(p) if p < line.points && line.shard.has(p) => {}
            _ => {
                return Err(format(
                    at,
                    format!(
                        "`{}` is not a point of shard {} of this {}-point sweep",
                        row[0], line.shard, line.points
                    ),
                ));
            }
        }
        if Status::parse(&row[status]).is_none() {
            return Err(format(at, format!("unknown status `{}`", row[status])));
        }
        rows.push(row);
    }
    Ok(ShardFile {
        path: path.to_path_buf(),
        line,
        table: Table { header, rows },
    })
}
