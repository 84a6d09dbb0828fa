//! The sweep's CSV: `point`, one column per axis, `status`, the columns of
//! `sim run --csv` ([`CSV_HEADER`]), then `speedup` and `efficiency`.
//! Rows are kept as text, so a merge of shard files writes exactly what
//! one run writes.

use std::io::{self, Write};

use super::axes::Axis;
use super::shard::ShardLine;
use super::status::Status;
use crate::report::CSV_HEADER;

/// The columns after the run's.
pub const SCALING_COLUMNS: [&str; 2] = ["speedup", "efficiency"];

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

    /// Writes the table as CSV, after `shard`'s `# sweep` line for a
    /// shard file.
    pub fn write(&self, mut out: impl Write, shard: Option<&ShardLine>) -> io::Result<()> {
        if let Some(line) = shard {
            writeln!(out, "{line}")?;
        }
        let mut w = csv::Writer::from_writer(out);
        w.write_record(&self.header)?;
        for row in &self.rows {
            w.write_record(row)?;
        }
        w.flush()
    }
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
    }
}
