//! The files `sim run` writes besides stdout, as the study goes: the rows
//! (`--csv`), per-link counters (`--links-csv`), link traffic per time bin
//! (`--links-timeline`, capped) and the Chrome trace (`--trace`, capped).
//! Each is an [`OutputFile`]: written beside its destination and renamed
//! onto it by [`RunFiles::finish`], complete or marked partial (a last
//! `# partial: why` line in a CSV, `"otherData": {"partial": why}` in the
//! trace), or dropped, leaving whatever was there before.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use engine::link_report::{BinTooFine, LinkCsv, LinkTimelineCsv, TimelineWritten};
use engine::report::{CSV_HEADER, csv_record};
use engine::study::{Detail, Point, Row};
use engine::sweep::table::PARTIAL_PREFIX;
use engine::trace::{ChromeTraceWriter, TRACE_SPANS_MAX, Written};
use topologies::Topology;

use crate::output::{Named, OutputError, OutputFile};

/// The files `sim run` writes besides stdout, and their limits.
pub struct Outputs {
    /// `--csv`: the rows.
    pub csv: Option<PathBuf>,
    /// `--links-csv`: per-link counters.
    pub links_csv: Option<PathBuf>,
    /// `--trace`: the Chrome trace.
    pub trace: Option<PathBuf>,
    /// `--links-timeline`: link traffic per time bin.
    pub links_timeline: Option<PathBuf>,
    /// The timeline's bin, in ps.
    pub timeline_bin_ps: u64,
    /// `--timeline-rows-max`: the most rows of the timeline file.
    pub timeline_rows_max: u64,
    /// `--trace-events-max`: the most events of the trace file.
    pub trace_events_max: u64,
}

impl Outputs {
    /// The output files asked for, named by their flags.
    pub fn named(&self) -> Vec<Named<'_>> {
        [
            ("--csv", &self.csv),
            ("--links-csv", &self.links_csv),
            ("--trace", &self.trace),
            ("--links-timeline", &self.links_timeline),
        ]
        .into_iter()
        .filter_map(|(name, path)| path.as_deref().map(|path| Named { name, path }))
        .collect()
    }
}

/// How the files end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every row the study produced is in them.
    Complete,
    /// The study stopped early, for this reason.
    Partial(String),
    /// Dropped: whatever was at their paths stays.
    Abandon,
}

/// Why a point's files could not be written.
pub enum PointError {
    /// A file could not be written (it is dropped).
    Write(OutputError),
    /// The timeline's bin is too fine for the point's run.
    BinTooFine(BinTooFine),
}

/// The files of one `sim run`, open.
pub struct RunFiles {
    csv: Option<csv::Writer<OutputFile>>,
    links: Option<LinkCsv<OutputFile>>,
    timeline: Option<LinkTimelineCsv<OutputFile>>,
    trace: Option<ChromeTraceWriter<OutputFile>>,
    /// The first run the timeline left out at its cap.
    timeline_capped_at: Option<String>,
    /// Whether the table already says the trace reached its cap.
    trace_noted: bool,
    /// Points written (rows and failed points).
    points: usize,
}

/// A started writer, or the error naming its file.
fn start<T>(
    path: &Option<PathBuf>,
    what: &'static str,
    begin: impl FnOnce(OutputFile) -> std::io::Result<T>,
) -> Result<Option<T>, OutputError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let file = OutputFile::create(path, what)?;
    let fail = |e| OutputError {
        path: path.display().to_string(),
        what,
        source: e,
    };
    begin(file).map(Some).map_err(fail)
}

impl RunFiles {
    /// Opens every file asked for (before the run, so a bad path fails at
    /// once) and writes their headers.
    pub fn open(outputs: &Outputs) -> Result<RunFiles, OutputError> {
        let csv = start(&outputs.csv, "CSV", |f| {
            let mut w = csv::Writer::from_writer(f);
            w.write_record(CSV_HEADER)?;
            Ok(w)
        })?;
        let links = start(&outputs.links_csv, "links CSV", LinkCsv::new)?;
        let rows_max = outputs.timeline_rows_max;
        let timeline = start(&outputs.links_timeline, "links timeline", |f| {
            LinkTimelineCsv::with_cap(f, rows_max)
        })?;
        let events_max = outputs.trace_events_max;
        let trace = start(&outputs.trace, "trace", |f| {
            ChromeTraceWriter::with_budget(f, events_max)
        })?;
        Ok(RunFiles {
            csv,
            links,
            timeline,
            trace,
            timeline_capped_at: None,
            trace_noted: false,
            points: 0,
        })
    }

    /// Whether a trace is asked for.
    pub fn traces(&self) -> bool {
        self.trace.is_some()
    }

    /// Whether a timeline is asked for.
    pub fn records_timeline(&self) -> bool {
        self.timeline.is_some()
    }

    /// How many points the files hold.
    pub fn points(&self) -> usize {
        self.points
    }

    /// The paths of the files still open.
    pub fn paths(&self) -> Vec<&Path> {
        let mut paths = Vec::new();
        paths.extend(self.csv.as_ref().map(|w| w.get_ref().path()));
        paths.extend(self.links.as_ref().map(|w| w.get_ref().path()));
        paths.extend(self.timeline.as_ref().map(|w| w.get_ref().path()));
        paths.extend(self.trace.as_ref().map(|w| w.get_ref().path()));
        paths
    }

    /// Writes a row to `--csv`.
    pub fn write_row(&mut self, row: &Row) -> Result<(), OutputError> {
        let Some(w) = &mut self.csv else {
            return Ok(());
        };
        let written = w
            .write_record(csv_record(row))
            .map_err(io::Error::from)
            .and_then(|()| w.flush());
        if let Err(e) = written {
            let err = w.get_ref().error(e);
            self.csv = None;
            return Err(err);
        }
        Ok(())
    }

    /// Writes one point's link rows, timeline and trace, if asked for;
    /// returns comment lines for the table (a truncated or capped file).
    pub fn write_point(
        &mut self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: Option<&Topology>,
    ) -> Result<String, PointError> {
        self.points += 1;
        let Some(t) = topology else {
            return self
                .write_trace(point, detail, None)
                .map_err(PointError::Write);
        };
        if let Some(w) = &mut self.links
            && let Err(e) = w.write_point(section, point, detail, t)
        {
            let err = w.get_ref().error(e);
            self.links = None;
            return Err(PointError::Write(err));
        }
        let mut note = self.write_timeline(section, point, detail, t)?;
        note += &self
            .write_trace(point, detail, Some(t))
            .map_err(PointError::Write)?;
        Ok(note)
    }

    /// The timeline part of [`RunFiles::write_point`].
    fn write_timeline(
        &mut self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: &Topology,
    ) -> Result<String, PointError> {
        let Some(w) = &mut self.timeline else {
            return Ok(String::new());
        };
        w.check_bin(detail).map_err(PointError::BinTooFine)?;
        let written = match w.write_point(section, point, detail, topology) {
            Ok(written) => written,
            Err(e) => {
                let err = w.get_ref().error(e);
                self.timeline = None;
                return Err(PointError::Write(err));
            }
        };
        Ok(match written {
            TimelineWritten::Written { truncated: true } => format!(
                "# the links timeline of {} B is truncated at {} (link, bin) entries: use a wider --timeline-bin-us\n",
                point.size_bytes,
                engine::network::timeline::TIMELINE_ENTRIES_MAX
            ),
            TimelineWritten::OverCap if self.timeline_capped_at.is_none() => {
                let label = format!("{} at {} B", point.collective, point.size_bytes);
                let text = format!(
                    "# the links timeline reached its cap of {} rows: {label} and later runs are \
                     not in it; raise the cap with --timeline-rows-max (at most {}) or use a wider \
                     --timeline-bin-us\n",
                    w.rows_max(),
                    engine::network::timeline::TIMELINE_ENTRIES_MAX
                );
                self.timeline_capped_at = Some(label);
                text
            }
            _ => String::new(),
        })
    }

    /// The trace part of [`RunFiles::write_point`].
    fn write_trace(
        &mut self,
        point: &Point,
        detail: &Detail,
        topology: Option<&Topology>,
    ) -> Result<String, OutputError> {
        let (Some(w), Some(log)) = (&mut self.trace, &detail.trace) else {
            return Ok(String::new());
        };
        let label = format!(
            "{} {} {} B",
            point.collective, detail.algorithm, point.size_bytes
        );
        let written = match w.write_run(&label, detail.ranks, log, topology) {
            Ok(written) => written,
            Err(e) => {
                let err = w.get_ref().error(e);
                self.trace = None;
                return Err(err);
            }
        };
        let mut note = String::new();
        if written == Written::OverBudget && !self.trace_noted {
            self.trace_noted = true;
            note += &format!(
                "# the trace reached its cap of {} events: later runs are listed in it but not \
                 traced; raise the cap with --trace-events-max, or trace fewer sizes or iterations\n",
                w.events_max()
            );
        } else if written == Written::Traced && log.truncated {
            note += &format!(
                "# the trace of {label} is truncated: it stopped recording at its limits \
                 ({TRACE_SPANS_MAX} spans, {} link samples); trace fewer sizes or iterations\n",
                engine::network::LINK_SAMPLES_MAX
            );
        }
        Ok(note)
    }

    /// Ends every file as `ending` says; returns the first file that could
    /// not be finished (the others are finished all the same).
    pub fn finish(self, ending: &Ending) -> Result<(), OutputError> {
        let partial = match ending {
            Ending::Abandon => return Ok(()),
            Ending::Complete => None,
            Ending::Partial(note) => Some(note.as_str()),
        };
        let mut first_error = None;
        let mut keep = |result: Result<(), OutputError>| {
            if let Err(e) = result
                && first_error.is_none()
            {
                first_error = Some(e);
            }
        };
        if let Some(mut w) = self.csv {
            keep(match w.flush() {
                Err(e) => Err(w.get_ref().error(e)),
                Ok(()) => w
                    .into_inner()
                    .map_err(|e| unnamed("CSV", e.error()))
                    .and_then(|f| close_csv(f, partial, None)),
            });
        }
        if let Some(mut w) = self.links {
            keep(match w.flush() {
                Err(e) => Err(w.get_ref().error(e)),
                Ok(()) => w
                    .into_inner()
                    .map_err(|e| unnamed("links CSV", &e))
                    .and_then(|f| close_csv(f, partial, None)),
            });
        }
        if let Some(mut w) = self.timeline {
            let capped = self.timeline_capped_at.map(|label| {
                format!(
                    "# capped: the file reached its cap of {} rows; {label} and later runs are not in it",
                    w.rows_max()
                )
            });
            keep(match w.flush() {
                Err(e) => Err(w.get_ref().error(e)),
                Ok(()) => w
                    .into_inner()
                    .map_err(|e| unnamed("links timeline", &e))
                    .and_then(|f| close_csv(f, partial, capped)),
            });
        }
        if let Some(mut w) = self.trace {
            keep(match w.close(partial) {
                Err(e) => Err(w.get_ref().error(e)),
                Ok(()) => w.into_inner().commit(),
            });
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// An error of a writer that failed while giving its file back, after a
/// flush that succeeded (so never in practice): the file is gone with it.
fn unnamed(what: &'static str, e: &std::io::Error) -> OutputError {
    OutputError {
        path: format!("the {what} file"),
        what,
        source: std::io::Error::new(e.kind(), e.to_string()),
    }
}

/// Ends a CSV file with its `capped` line and, for a partial one, the
/// `# partial:` line, and commits it.
fn close_csv(
    mut file: OutputFile,
    partial: Option<&str>,
    capped: Option<String>,
) -> Result<(), OutputError> {
    let mut tail = capped.map(|c| c + "\n").unwrap_or_default();
    if let Some(note) = partial {
        tail += &format!("{PARTIAL_PREFIX}{note}\n");
    }
    file.write_all(tail.as_bytes()).map_err(|e| file.error(e))?;
    file.commit()
}
