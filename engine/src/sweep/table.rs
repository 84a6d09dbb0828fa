//! The sweep's CSV: the `# sweep` line ([`SweepLine`]), then `point`, one
//! column per axis, `status`, the columns of `sim run --csv`
//! ([`CSV_HEADER`]), then `speedup` and `efficiency`; a file of a sweep
//! that stopped early ends with a `# partial: ...` line. Rows are kept as
//! text, so a merge of shard files, or a resumed sweep, writes exactly
//! what one run writes.

use std::io::{self, Write};

use super::axes::Axis;
use super::shard::SweepLine;
use super::status::Status;
use crate::report::CSV_HEADER;

/// The columns after the run's.
pub const SCALING_COLUMNS: [&str; 2] = ["speedup", "efficiency"];

/// How the last line of a sweep CSV that does not hold every point
/// begins (an interrupted sweep); the reason follows.
pub const PARTIAL_PREFIX: &str = "# partial: ";

/// A sweep's rows, as text, with their header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// The column names.
    pub header: Vec<String>,
    /// The rows, each as long as the header; field 0 is the point index.
    pub rows: Vec<Vec<String>>,
}

/// An axis's column: the axis's name, or `axis_<name>` where that name is
/// already a run column (`algorithm`: the run column says which algorithm
/// ran, `auto` included).
pub fn axis_column(axis: &Axis) -> String {
    let name = axis.kind.name();
    if CSV_HEADER.contains(&name) {
        format!("axis_{name}")
    } else {
        name.to_string()
    }
}

/// The header of a sweep over `axes`.
pub fn header(axes: &[Axis]) -> Vec<String> {
    let mut h = vec!["point".to_string()];
    h.extend(axes.iter().map(axis_column));
    h.push("status".to_string());
    h.extend(CSV_HEADER.iter().map(|c| c.to_string()));
    h.extend(SCALING_COLUMNS.iter().map(|c| c.to_string()));
    h
}

impl Table {
    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The worst status of the rows (the one with the largest exit code),
    /// `ok` for none.
    pub fn worst(&self) -> Status {
        let Some(col) = self.column("status") else {
            return Status::Ok;
        };
        self.rows
            .iter()
            .filter_map(|r| Status::parse(&r[col]))
            .max_by_key(|s| s.severity())
            .unwrap_or(Status::Ok)
    }

    /// Writes the table as CSV, after its `# sweep` line.
    pub fn write<W: Write + ?Sized>(&self, out: &mut W, line: &SweepLine) -> io::Result<()> {
        write_head(out, line, &self.header)?;
        write_rows(out, &self.rows)?;
        out.flush()
    }

    /// The index of the rank-count axis the scaling columns compare
    /// along (`nodes`, else `world_size`), if the sweep has one: only then
    /// do `speedup` and `efficiency` depend on other points' rows.
    pub fn rank_axis(&self) -> Option<usize> {
        let status = self.column("status")?;
        ["nodes", "world_size"]
            .iter()
            .find_map(|name| self.header[1..status].iter().position(|h| h == name))
            .map(|i| i + 1)
    }
}

/// Writes the `# sweep` line and the header.
pub fn write_head<W: Write + ?Sized>(
    out: &mut W,
    line: &SweepLine,
    header: &[String],
) -> io::Result<()> {
    writeln!(out, "{line}")?;
    write_rows(out, std::slice::from_ref(&header.to_vec()))
}

/// Writes rows as CSV records.
pub fn write_rows<W: Write + ?Sized>(out: &mut W, rows: &[Vec<String>]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    for row in rows {
        w.write_record(row)?;
    }
    w.flush()
}

/// Writes the last line of a partial sweep CSV: `# partial: <note>` (the
/// note on one line).
pub fn write_partial<W: Write + ?Sized>(out: &mut W, note: &str) -> io::Result<()> {
    writeln!(out, "{PARTIAL_PREFIX}{}", note.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_status_has_the_largest_severity() {
        let mut t = Table {
            header: vec!["point".into(), "status".into()],
            rows: vec![vec!["0".into(), "ok".into()]],
        };
        assert_eq!(t.worst(), Status::Ok);
        t.rows.push(vec!["1".into(), "deadlock".into()]);
        t.rows.push(vec!["2".into(), "timeout".into()]);
        t.rows.push(vec!["3".into(), "wrong".into()]);
        assert_eq!(t.worst(), Status::Timeout);
        assert_eq!(t.column("status"), Some(1));
        assert_eq!(t.rank_axis(), None);
    }

    #[test]
    fn the_written_file_is_the_line_the_header_and_the_rows() {
        let t = Table {
            header: vec!["point".into(), "world_size".into(), "status".into()],
            rows: vec![vec!["0".into(), "2".into(), "ok".into()]],
        };
        assert_eq!(t.rank_axis(), Some(1));
        let line = SweepLine {
            fingerprint: 1,
            points: 1,
            shard: None,
        };
        let mut out = Vec::new();
        t.write(&mut out, &line).unwrap();
        write_partial(&mut out, "stopped\nhere").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# sweep 0000000000000001 1\npoint,world_size,status\n0,2,ok\n# partial: stopped here\n"
        );
    }
}
