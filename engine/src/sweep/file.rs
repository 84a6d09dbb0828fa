//! A sweep CSV read back, for `sim merge` (shard files) and `sim sweep
//! --resume` (a file the sweep stopped writing): its `# sweep` line, its
//! header (checked to be a sweep's), its rows (each a point the line says
//! the file may hold, with a known status) and, if it ends with one, the
//! `# partial: ...` line's reason. Errors name the file and line.

use std::path::Path;

use super::shard::SweepLine;
use super::status::Status;
use super::table::{PARTIAL_PREFIX, SCALING_COLUMNS, Table};
use crate::report::CSV_HEADER;

/// A sweep CSV that cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The file could not or may not be read (missing, a device, over
    /// the cap, not UTF-8).
    #[error(transparent)]
    Read(#[from] inputs::InputError),
    /// The file is not a sweep CSV.
    #[error("{path}:{line}: {message}")]
    Format {
        /// The file.
        path: String,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

/// A sweep CSV, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepFile {
    /// Its first line.
    pub line: SweepLine,
    /// Its header and rows.
    pub table: Table,
    /// Why it stopped early, if it ends with a `# partial:` line.
    pub partial: Option<String>,
}

impl SweepFile {
    /// The points that have rows, in file order, each once.
    pub fn points(&self) -> Vec<usize> {
        let mut points: Vec<usize> = self
            .table
            .rows
            .iter()
            .filter_map(|r| r[0].parse().ok())
            .collect();
        points.dedup();
        points
    }
}

/// Reads the sweep CSV at `path`.
pub fn read(path: &Path) -> Result<SweepFile, FileError> {
    let shown = path.display().to_string();
    let text = inputs::read_text(path, &inputs::kind::SWEEP_SHARD)?;
    parse(&shown, &text)
}

/// Reads a sweep CSV's `text`; `shown` names it in errors.
pub fn parse(shown: &str, text: &str) -> Result<SweepFile, FileError> {
    let format = |line: u64, message: String| FileError::Format {
        path: shown.to_string(),
        line,
        message,
    };
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let Some(line) = SweepLine::parse(first) else {
        return Err(format(
            1,
            "not a CSV of `sim sweep`: the first line must be `# sweep <fingerprint> <points>` \
             (then ` shard I/N` in a shard file)"
                .to_string(),
        ));
    };
    let (body, partial) = split_partial(rest);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(body.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| format(2, e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let status = check_header(&header).ok_or_else(|| {
        format(
            2,
            "the header is not a sweep's: point, the axes, status, the run columns, speedup, efficiency"
                .to_string(),
        )
    })?;
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
            Ok(p) if line.holds(p) => {}
            _ => {
                let of = match line.shard {
                    Some(shard) => format!("shard {shard} of this {}-point sweep", line.points),
                    None => format!("this {}-point sweep", line.points),
                };
                return Err(format(at, format!("`{}` is not a point of {of}", row[0])));
            }
        }
        if Status::parse(&row[status]).is_none() {
            return Err(format(at, format!("unknown status `{}`", row[status])));
        }
        rows.push(row);
    }
    Ok(SweepFile {
        line,
        table: Table { header, rows },
        partial,
    })
}

/// Splits off a last `# partial: <reason>` line.
fn split_partial(text: &str) -> (&str, Option<String>) {
    let trimmed = text.trim_end_matches('\n');
    let last_start = trimmed.rfind('\n').map_or(0, |i| i + 1);
    match trimmed[last_start..].strip_prefix(PARTIAL_PREFIX) {
        Some(reason) => (&text[..last_start], Some(reason.to_string())),
        None => (text, None),
    }
}

/// The status column of a sweep's header, if it is one: `point`, the
/// axes, `status`, the run columns, the scaling columns.
fn check_header(header: &[String]) -> Option<usize> {
    let tail: Vec<&str> = CSV_HEADER.iter().chain(&SCALING_COLUMNS).copied().collect();
    let status = header.iter().position(|h| h == "status")?;
    let shaped = header.first().is_some_and(|h| h == "point")
        && Some(status) == header.len().checked_sub(tail.len() + 1)
        && header[status + 1..].iter().zip(&tail).all(|(h, t)| h == t);
    shaped.then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> String {
        let mut h = vec!["point", "world_size", "status"];
        h.extend(CSV_HEADER);
        h.extend(SCALING_COLUMNS);
        h.join(",")
    }

    fn row(point: usize, status: &str) -> String {
        let mut r = vec![point.to_string(), "2".to_string(), status.to_string()];
        r.extend((0..CSV_HEADER.len() + SCALING_COLUMNS.len()).map(|_| String::new()));
        r.join(",")
    }

    #[test]
    fn a_partial_file_reads_with_its_points_and_reason() {
        let text = format!(
            "# sweep 00000000000000ab 4\n{}\n{}\n{}\n{}\n# partial: interrupted by SIGINT\n",
            header(),
            row(0, "ok"),
            row(0, "ok"),
            row(1, "deadlock")
        );
        let file = parse("s.csv", &text).unwrap();
        assert_eq!(file.line.fingerprint, 0xab);
        assert_eq!(file.points(), [0, 1]);
        assert_eq!(file.partial.as_deref(), Some("interrupted by SIGINT"));
        let whole = parse(
            "s.csv",
            &format!("# sweep ab 4\n{}\n{}\n", header(), row(3, "ok")),
        );
        assert_eq!(whole.unwrap().partial, None);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let err = |text: &str| parse("s.csv", text).unwrap_err().to_string();
        assert!(err("point,status\n").starts_with("s.csv:1: not a CSV of `sim sweep`"));
        assert!(err("# sweep ab 4\npoint,status\n").starts_with("s.csv:2: the header"));
        let e = err(&format!("# sweep ab 4\n{}\n{}\n", header(), row(4, "ok")));
        assert!(
            e.starts_with("s.csv:3: `4` is not a point of this 4-point sweep"),
            "{e}"
        );
        let e = err(&format!(
            "# sweep ab 4 shard 1/2\n{}\n{}\n",
            header(),
            row(2, "ok")
        ));
        assert!(e.contains("`2` is not a point of shard 1/2"), "{e}");
        let e = err(&format!("# sweep ab 4\n{}\n{}\n", header(), row(1, "fine")));
        assert!(e.starts_with("s.csv:3: unknown status `fine`"), "{e}");
        // A comment anywhere but last is not a row.
        let e = err(&format!(
            "# sweep ab 4\n{}\n# partial: x\n{}\n",
            header(),
            row(1, "ok")
        ));
        assert!(e.starts_with("s.csv:3: "), "{e}");
    }
}
