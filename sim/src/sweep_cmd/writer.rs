//! The CSV of `sim sweep` as it is written: where it goes ([`Sink`]: the
//! `--csv` file or stdout), the rows of every point so far in point order,
//! the rows of a resumed file merged in, and how it ends: complete (the
//! scaling columns filled, the file rewritten with them if it streamed
//! without) or partial (a last `# partial:` line).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::Path;

use engine::sweep::Sweep;
use engine::sweep::run::{Control, PointRows, RunError, RunOptions, points_of, run_streamed};
use engine::sweep::scaling;
use engine::sweep::shard::SweepLine;
use engine::sweep::status::Status;
use engine::sweep::table::{self, Table};
use engine::tuning::AlgoFilter;

use super::{SweepArgs, progress_bar};
use crate::exit::ExitStatus;
use crate::interrupt::{Interrupt, Signal};
use crate::output::{OutputError, OutputFile, Stdout};

/// Where the CSV goes.
pub enum Sink {
    /// `--csv FILE`.
    File(OutputFile),
    /// Stdout.
    Stdout(Stdout),
}

impl Sink {
    /// Writes with `write`; an error names the file (or stdout).
    fn put(
        &mut self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), SinkError> {
        match self {
            Sink::File(f) => write(f)
                .and_then(|()| f.flush())
                .map_err(|e| SinkError::File(f.error(e))),
            Sink::Stdout(s) => write(s).and_then(|()| s.flush()).map_err(SinkError::Stdout),
        }
    }

    /// Whether the CSV can be written again from the start at the end.
    fn can_rewind(&self) -> bool {
        matches!(self, Sink::File(f) if f.can_rewind())
    }
}

/// A failed write of the CSV.
enum SinkError {
    /// To the file.
    File(OutputError),
    /// To stdout (not a closed reader).
    Stdout(io::Error),
}

/// The sweep's CSV as it is written: the rows so far, where they go, and
/// the rows of a resumed file still to be placed.
pub struct CsvWriter {
    sink: Sink,
    line: SweepLine,
    table: Table,
    /// Rows of the resumed file, by point, not yet placed in the table.
    earlier: BTreeMap<usize, Vec<Vec<String>>>,
    /// The points whose rows come from the resumed file.
    resumed: BTreeSet<usize>,
    /// Whether rows are written as points finish (else all at the end).
    streams: bool,
    /// The failed points run now, as `status: message`.
    failures: Vec<String>,
}

impl CsvWriter {
    /// A CSV on `sink` with its `# sweep` line and header, and the rows
    /// of a resumed file by point.
    pub fn new(
        sink: Sink,
        line: SweepLine,
        header: Vec<String>,
        earlier: BTreeMap<usize, Vec<Vec<String>>>,
    ) -> CsvWriter {
        let table = Table {
            header,
            rows: Vec::new(),
        };
        // Rows depend on later points only through the scaling columns of a
        // whole sweep with a rank-count axis: then the file is rewritten at
        // the end, which stdout or a device cannot be.
        let later_rows_matter = line.shard.is_none() && table.rank_axis().is_some();
        let streams = !later_rows_matter || sink.can_rewind();
        CsvWriter {
            sink,
            line,
            table,
            resumed: earlier.keys().copied().collect(),
            earlier,
            streams,
            failures: Vec::new(),
        }
    }

    /// Runs the sweep, writing as it goes; ends the CSV and picks the
    /// exit status.
    pub fn run(
        mut self,
        sweep: &Sweep,
        filter: &AlgoFilter,
        options: RunOptions,
        progress: bool,
        args: &SweepArgs,
    ) -> io::Result<ExitStatus> {
        let skip = self.resumed.clone();
        let to_run = points_of(sweep, options.shard)
            .iter()
            .filter(|p| !skip.contains(p))
            .count();
        if self.streams
            && let Err(e) = self.write_head()
        {
            return self.fail(e);
        }
        let interrupt = Interrupt::catch();
        let bar = progress.then(|| progress_bar(to_run));
        let mut write_error = None;
        let control = Control {
            skip: Some(&skip),
            stop: Some(interrupt.flag()),
        };
        let outcome = run_streamed(sweep, filter, options, control, &mut |point| {
            if let Some(bar) = &bar {
                bar.inc(1);
            }
            match self.add_point(point) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    write_error = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(bar) = bar {
            bar.finish();
        }
        let complete = match outcome {
            Ok(complete) => complete,
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(match e {
                    RunError::Invalid(_) => ExitStatus::InvalidInput,
                    RunError::Threads(_) => ExitStatus::ToolFailed,
                });
            }
        };
        if let Some(e) = write_error {
            return self.fail(e);
        }
        // Points of the resumed file after the last one run.
        let rest: Vec<usize> = self.earlier.keys().copied().collect();
        for point in rest {
            if let Err(e) = self.place_earlier(point) {
                return self.fail(e);
            }
        }
        match (complete, interrupt.received()) {
            (true, _) => self.end_complete(&args.scenario),
            (false, Some(signal)) => self.end_partial(signal, &args.scenario),
            (false, None) => {
                // Only a signal or a failed write (handled above) stops a
                // sweep early; keep the old file rather than guess.
                crate::report!(
                    "error: {}: the sweep stopped early",
                    args.scenario.display()
                );
                Ok(ExitStatus::ToolFailed)
            }
        }
    }

    /// Writes the `# sweep` line and the header.
    fn write_head(&mut self) -> Result<(), SinkError> {
        let (line, header) = (self.line, &self.table.header);
        self.sink.put(|w| table::write_head(w, &line, header))
    }

    /// Adds a finished point's rows (after any earlier point of the
    /// resumed file before it).
    fn add_point(&mut self, point: PointRows) -> Result<(), SinkError> {
        let before: Vec<usize> = self.earlier.range(..point.point).map(|(&p, _)| p).collect();
        for p in before {
            self.place_earlier(p)?;
        }
        self.failures.extend(
            point
                .failures
                .into_iter()
                .map(|f| format!("{}: {}", f.status, f.message)),
        );
        self.add_rows(point.rows)
    }

    /// Moves point `p` of the resumed file into the table.
    fn place_earlier(&mut self, p: usize) -> Result<(), SinkError> {
        let rows = self.earlier.remove(&p).unwrap_or_default();
        self.add_rows(rows)
    }

    /// Appends `rows` to the table, and to the CSV if it streams.
    fn add_rows(&mut self, rows: Vec<Vec<String>>) -> Result<(), SinkError> {
        if self.streams {
            self.sink.put(|w| table::write_rows(w, &rows))?;
        }
        self.table.rows.extend(rows);
        Ok(())
    }

    /// Ends a sweep that ran every point: the scaling columns filled,
    /// the CSV complete; the exit status is the worst row's.
    fn end_complete(mut self, scenario: &Path) -> io::Result<ExitStatus> {
        let rewrite = self.line.shard.is_none() && self.table.rank_axis().is_some();
        if self.line.shard.is_none() {
            scaling::fill(&mut self.table);
        }
        let finished = if !self.streams {
            self.write_all()
        } else if rewrite {
            match &mut self.sink {
                Sink::File(f) => f.rewind().map_err(SinkError::File),
                Sink::Stdout(_) => Ok(()),
            }
            .and_then(|()| self.write_all())
        } else {
            Ok(())
        };
        if let Err(e) = finished {
            return self.fail(e);
        }
        for message in &self.failures {
            crate::report!("error: {}: {message}", scenario.display());
        }
        self.report_earlier_failures(scenario);
        let worst = self.table.worst();
        Ok(self.close().unwrap_or(ExitStatus::of_sweep(worst)))
    }

    /// Names the failed points that came from the resumed file.
    fn report_earlier_failures(&self, scenario: &Path) {
        let Some(status) = self.table.column("status") else {
            return;
        };
        let mut named = BTreeSet::new();
        for row in &self.table.rows {
            let failed = Status::parse(&row[status]).is_some_and(|s| s != Status::Ok);
            let point = &row[0];
            let resumed = point.parse().is_ok_and(|p| self.resumed.contains(&p));
            if failed && resumed && named.insert(point.clone()) {
                crate::report!(
                    "error: {}: {}: point {point} (from the resumed file; its row says more)",
                    scenario.display(),
                    row[status]
                );
            }
        }
    }

    /// Ends a sweep a signal stopped: the points done, then the
    /// `# partial:` line; the old file left as it was if no point is done.
    /// Exit 130 or 143.
    fn end_partial(mut self, signal: Signal, scenario: &Path) -> io::Result<ExitStatus> {
        let done = self
            .table
            .rows
            .iter()
            .map(|r| r[0].as_str())
            .collect::<BTreeSet<_>>()
            .len();
        let total = points_in(&self.line);
        let note = format!(
            "interrupted by {} with {done} of {total} points done; `sim sweep --resume` runs the rest",
            signal.name()
        );
        let what = match &self.sink {
            Sink::File(f) if done == 0 => {
                format!("{} is left as it was", f.path().display())
            }
            Sink::File(f) => format!(
                "{} ends marked partial: run again with --resume for the rest",
                f.path().display()
            ),
            Sink::Stdout(_) => "stdout ends marked partial".to_string(),
        };
        crate::report!(
            "error: {}: interrupted by {} with {done} of {total} points done; {what}",
            scenario.display(),
            signal.name()
        );
        if done == 0 && matches!(self.sink, Sink::File(_)) {
            return Ok(signal.status());
        }
        let written = if self.streams {
            Ok(())
        } else {
            self.write_all()
        }
        .and_then(|()| self.sink.put(|w| table::write_partial(w, &note)));
        if let Err(e) = written {
            return self.fail(e);
        }
        Ok(self.close().unwrap_or(signal.status()))
    }

    /// Writes the whole CSV: line, header, every row.
    fn write_all(&mut self) -> Result<(), SinkError> {
        let (line, table) = (self.line, &self.table);
        self.sink.put(|w| table.write(w, &line))
    }

    /// Commits the file; `Some(ToolFailed)` if it cannot be (reported).
    fn close(self) -> Option<ExitStatus> {
        let Sink::File(f) = self.sink else {
            return None;
        };
        f.commit().err().map(|e| {
            crate::report!("error: {e}");
            ExitStatus::ToolFailed
        })
    }

    /// Reports a failed write: the file is dropped (the old one stays).
    fn fail(self, e: SinkError) -> io::Result<ExitStatus> {
        match e {
            SinkError::File(e) => {
                crate::report!("error: {e}");
                Ok(ExitStatus::ToolFailed)
            }
            SinkError::Stdout(e) => Err(e),
        }
    }
}

/// How many points a file with `line` holds when complete.
fn points_in(line: &SweepLine) -> usize {
    match line.shard {
        None => line.points,
        Some(s) => (0..line.points).filter(|&p| s.has(p)).count(),
    }
}
