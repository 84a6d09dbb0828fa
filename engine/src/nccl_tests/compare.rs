//! Measured rows beside their predictions: the error of each row and
//! placement, `(predicted - measured) / measured x 100` (positive: the
//! simulator is slower than the cluster), the median |error| of a table
//! and of a whole log, and the text and CSV of `sim compare`.
//!
//! The simulator runs every collective in place, so one prediction
//! serves both of nccl-tests' placements: each is compared with it.
//! Numbers are printed with fixed decimals, so the output is the same for
//! the same log and scenario.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::predict::{Outcome, Prediction};
use super::{Measured, Placement, Table, Test};

/// A table's rows and their predictions.
#[derive(Clone, Debug)]
pub struct Comparison<'a> {
    /// The measured table.
    pub table: &'a Table,
    /// One outcome per row, and the notes.
    pub prediction: Prediction,
}

/// The errors of one or more tables, for their medians.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Errors {
    /// Rows with at least one error.
    pub rows: usize,
    /// Each (row, placement)'s |error| in percent, by placement.
    pub by_placement: Vec<(Placement, Vec<f64>)>,
}

/// The error of `predicted_us` against `measured_us`, in percent;
/// `None` when nothing was measured (a zero time).
pub fn error_pct(predicted_us: f64, measured_us: f64) -> Option<f64> {
    (measured_us > 0.0).then(|| (predicted_us - measured_us) / measured_us * 100.0)
}

/// The median of `values` (the mean of the middle two for an even
/// count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        len if len % 2 == 1 => Some(sorted[mid]),
        _ => Some((sorted[mid - 1] + sorted[mid]) / 2.0),
    }
}

impl Errors {
    /// Adds `other`'s errors to these.
    pub fn merge(&mut self, other: &Errors) {
        self.rows += other.rows;
        for (placement, errors) in &other.by_placement {
            match self.by_placement.iter_mut().find(|(p, _)| p == placement) {
                Some((_, mine)) => mine.extend(errors),
                None => self.by_placement.push((*placement, errors.clone())),
            }
        }
    }

    /// `# median |error|: X % over N sizes (out-of-place Y %, in-place Z %)`,
    /// the headline over both placements' errors; `label` goes after
    /// `|error|`.
    pub fn median_line(&self, label: &str) -> String {
        let all: Vec<f64> = self
            .by_placement
            .iter()
            .flat_map(|(_, e)| e.iter().copied())
            .collect();
        let Some(pooled) = median(&all) else {
            return format!("# median |error|{label}: none (no size was simulated)\n");
        };
        let mut parts = Vec::new();
        if self.by_placement.len() > 1 {
            for (placement, errors) in &self.by_placement {
                if let Some(m) = median(errors) {
                    parts.push(format!("{} {m:.1} %", placement.name()));
                }
            }
        }
        let detail = if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        };
        let sizes = if self.rows == 1 { "size" } else { "sizes" };
        format!(
            "# median |error|{label}: {pooled:.1} % over {} {sizes}{detail}\n",
            self.rows
        )
    }
}

impl<'a> Comparison<'a> {
    /// `table`'s rows beside `prediction`'s outcomes.
    pub fn new(table: &'a Table, prediction: Prediction) -> Comparison<'a> {
        Comparison { table, prediction }
    }

    /// Each row with its outcome.
    fn pairs(&self) -> impl Iterator<Item = (&Measured, &Outcome)> {
        self.table.rows.iter().zip(&self.prediction.outcomes)
    }

    /// The |error| of every predicted row and placement.
    pub fn errors(&self) -> Errors {
        let mut errors = Errors::default();
        for placement in &self.table.placements {
            errors.by_placement.push((*placement, Vec::new()));
        }
        for (row, outcome) in self.pairs() {
            let Outcome::Predicted(p) = outcome else {
                continue;
            };
            let mut any = false;
            for (placement, list) in &mut errors.by_placement {
                let error = row
                    .timing(*placement)
                    .and_then(|t| error_pct(p.time_ps as f64 / 1e6, t.time_us));
                if let Some(e) = error {
                    list.push(e.abs());
                    any = true;
                }
            }
            errors.rows += usize::from(any);
        }
        errors
    }

    /// The section `sim compare` prints for the table: a title naming
    /// `log` and the line, notes, the rows and the median line.
    pub fn text(&self, log: &str) -> String {
        let t = self.table;
        let named = match t.named_at {
            Some(line) => format!("{}, named at line {line}", t.test.binary()),
            None => format!("{}, as told", t.test.binary()),
        };
        let world = t
            .world
            .map_or_else(|| "ranks not in the log".to_string(), |w| w.to_string());
        let mut out = format!("#\n# {}: {log}:{} ({named}), {world}\n", t.test, t.line);
        if let Test::Unsupported(_) = t.test {
            let why = match self.prediction.outcomes.first() {
                Some(Outcome::NotSimulated(why)) => why.clone(),
                _ => "no collective here".to_string(),
            };
            let lines = match (t.rows.first(), t.rows.last()) {
                (Some(a), Some(b)) => format!(", lines {}-{}", a.line, b.line),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "# not simulated: {why}: {} rows left out{lines}",
                t.rows.len()
            );
            return out;
        }
        for note in &self.prediction.notes {
            let _ = writeln!(out, "# note: {note}");
        }
        out += &self.header();
        for (row, outcome) in self.pairs() {
            out += &self.row(row, outcome);
        }
        let missed = self
            .prediction
            .outcomes
            .iter()
            .filter(|o| !matches!(o, Outcome::Predicted(_)))
            .count();
        if missed > 0 {
            let _ = writeln!(
                out,
                "# {missed} of {} rows without a prediction (see their last column)",
                t.rows.len()
            );
        }
        out + &self.errors().median_line("")
    }

    /// The column headers, three lines.
    fn header(&self) -> String {
        let mut groups = format!("#{:>52}", "");
        let mut names = format!(
            "#{:>11} {:>13} {:>9} {:>6} {:>5}",
            "size", "count", "type", "redop", "root"
        );
        let mut units = format!(
            "#{:>11} {:>13} {:>9} {:>6} {:>5}",
            "(B)", "(elements)", "", "", ""
        );
        for (i, placement) in self.table.placements.iter().enumerate() {
            if i == 0 {
                let _ = write!(groups, "{:<51}", placement.name());
                names += &format!(
                    " {:>10} {:>10} {:>8} {:>9} {:>10}",
                    "time", "predicted", "error", "busbw", "predicted"
                );
                units += &format!(
                    " {:>10} {:>10} {:>8} {:>9} {:>10}",
                    "(us)", "(us)", "(%)", "(GB/s)", "(GB/s)"
                );
            } else {
                let _ = write!(groups, "{:<29}", placement.name());
                names += &format!(" {:>10} {:>8} {:>9}", "time", "error", "busbw");
                units += &format!(" {:>10} {:>8} {:>9}", "(us)", "(%)", "(GB/s)");
            }
        }
        format!(
            "{}\n{names}  algorithm\n{units}  (* tuned)\n",
            groups.trim_end()
        )
    }

    /// One row's line.
    fn row(&self, row: &Measured, outcome: &Outcome) -> String {
        let mut out = format!(
            "{:>12} {:>13} {:>9} {:>6} {:>5}",
            row.size_bytes,
            row.count,
            row.dtype,
            row.redop.as_deref().unwrap_or("-"),
            row.root.map_or_else(|| "-".to_string(), |r| r.to_string())
        );
        let predicted = match outcome {
            Outcome::Predicted(p) => Some(p),
            _ => None,
        };
        let pred_us = predicted.map(|p| p.time_ps as f64 / 1e6);
        for (i, placement) in self.table.placements.iter().enumerate() {
            let timing = row.timing(*placement);
            let time = timing.map_or_else(|| "-".to_string(), |t| format!("{:.2}", t.time_us));
            let busbw =
                timing.map_or_else(|| "-".to_string(), |t| format!("{:.2}", t.busbw_gb_per_s));
            let error = match (pred_us, timing) {
                (Some(p), Some(t)) => error_pct(p, t.time_us).map(|e| format!("{e:+.1}")),
                _ => None,
            }
            .unwrap_or_else(|| "-".to_string());
            if i == 0 {
                let pred = pred_us.map_or_else(|| "-".to_string(), |p| format!("{p:.2}"));
                let pred_bw = predicted
                    .map_or_else(|| "-".to_string(), |p| format!("{:.2}", p.busbw_gb_per_s));
                let _ = write!(
                    out,
                    " {time:>10} {pred:>10} {error:>8} {busbw:>9} {pred_bw:>10}"
                );
            } else {
                let _ = write!(out, " {time:>10} {error:>8} {busbw:>9}");
            }
        }
        let last = match outcome {
            Outcome::Predicted(p) => format!("{}{}", p.algorithm, if p.tuned { "*" } else { "" }),
            Outcome::Failed(why) => format!("failed: {why}"),
            Outcome::NotSimulated(why) => format!("not simulated: {why}"),
        };
        format!("{out}  {last}\n")
    }

    /// The CSV records of the table: one per row and placement, fields in
    /// the order of [`CSV_HEADER`].
    pub fn csv_records(&self) -> Vec<[String; CSV_HEADER.len()]> {
        let mut records = Vec::new();
        for (row, outcome) in self.pairs() {
            let predicted = match outcome {
                Outcome::Predicted(p) => Some(p),
                _ => None,
            };
            let (status, note) = match outcome {
                Outcome::Predicted(_) => ("ok", String::new()),
                Outcome::Failed(why) => ("failed", why.clone()),
                Outcome::NotSimulated(why) => ("not_simulated", why.clone()),
            };
            let ranks = predicted
                .map(|p| p.ranks)
                .or(self.table.world.map(|w| w.ranks))
                .map_or_else(String::new, |n| n.to_string());
            for placement in &self.table.placements {
                let timing = row.timing(*placement);
                let pred_us = predicted.map(|p| p.time_ps as f64 / 1e6);
                let error = pred_us
                    .zip(timing)
                    .and_then(|(p, t)| error_pct(p, t.time_us));
                let text = |v: Option<String>| v.unwrap_or_default();
                records.push([
                    self.table.test.to_string(),
                    row.line.to_string(),
                    ranks.clone(),
                    row.size_bytes.to_string(),
                    row.count.to_string(),
                    row.dtype.clone(),
                    row.redop.clone().unwrap_or_default(),
                    text(row.root.map(|r| r.to_string())),
                    placement.name().to_string(),
                    text(timing.map(|t| t.time_us.to_string())),
                    text(pred_us.map(|p| format!("{p:.6}"))),
                    text(error.map(|e| format!("{e:.3}"))),
                    text(timing.map(|t| t.busbw_gb_per_s.to_string())),
                    text(predicted.map(|p| format!("{:.6}", p.busbw_gb_per_s))),
                    text(predicted.map(|p| p.algorithm.clone())),
                    text(predicted.map(|p| p.tuned.to_string())),
                    text(predicted.map(|p| p.dtype.to_string())),
                    status.to_string(),
                    note.clone(),
                ]);
            }
        }
        records
    }
}

/// The CSV column names, in order.
pub const CSV_HEADER: [&str; 19] = [
    "collective",
    "log_line",
    "ranks",
    "size_bytes",
    "count",
    "type",
    "redop",
    "root",
    "placement",
    "measured_time_us",
    "predicted_time_us",
    "error_pct",
    "measured_busbw_gb_per_s",
    "predicted_busbw_gb_per_s",
    "algorithm",
    "tuned",
    "simulated_type",
    "status",
    "note",
];

/// Writes `comparisons`' records as CSV with a header line.
pub fn write_csv(out: impl Write, comparisons: &[Comparison]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(CSV_HEADER)?;
    for c in comparisons {
        for record in c.csv_records() {
            w.write_record(&record)?;
        }
    }
    w.flush()
}
