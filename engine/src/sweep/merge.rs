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

#[cfg(test)]
mod tests {
    use super::*;

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
        let table = merge(&[b, a]).expect("both shards");
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
