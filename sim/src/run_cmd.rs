//! `sim run SCENARIO` on the simulator: the nccl-tests style table on
//! stdout as the study goes, the CSV, links CSV, links timeline and Chrome
//! trace files, the `#wrong` summary, the report of a point that did not
//! complete, and the exit status.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use algorithms::{CollectiveError, Registry};
use engine::DeadlockReport;
use engine::link_report::{LinkCsv, LinkTimelineCsv, busiest, trouble_lines};
use engine::network::NetworkConfig;
use engine::report::{table_header, table_row, write_csv};
use engine::scenario::{CollectiveSpec, Scenario};
use engine::study::{Detail, Failure, Options, Point, Progress, Row, run_scenario};
use engine::trace::{ChromeTraceWriter, TRACE_EVENTS_MAX, TRACE_SPANS_MAX, Written};
use engine::tuning::AlgoFilter;
use topologies::Topology;

use crate::exit::ExitStatus;

/// The files `sim run` writes besides stdout.
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
}

/// A timeline bin in microseconds: from 1 ps to 1 s.
pub fn parse_bin_us(text: &str) -> Result<f64, String> {
    let us: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of microseconds"))?;
    if !(1e-6..=1e6).contains(&us) {
        return Err(format!(
            "the timeline bin must be between 1e-6 us (1 ps) and 1e6 us (1 s), got {text}"
        ));
    }
    Ok(us)
}

/// Creates an output file, or says why it cannot be.
fn create(path: &Path, what: &str) -> Result<BufWriter<File>, ExitStatus> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        eprintln!("error: {}: cannot write {what}: {e}", path.display());
        ExitStatus::ToolFailed
    })
}

/// Opens an optional output file and starts its writer with `start`:
/// `Ok(Ok(None))` without a path, `Ok(Err(code))` if the file cannot be
/// created (already reported), `Err` if starting the writer fails.
fn open_output<T>(
    path: &Option<PathBuf>,
    what: &str,
    start: impl FnOnce(BufWriter<File>) -> io::Result<T>,
) -> io::Result<Result<Option<T>, ExitStatus>> {
    let Some(path) = path else {
        return Ok(Ok(None));
    };
    match create(path, what) {
        Ok(file) => start(file).map(|w| Ok(Some(w))),
        Err(code) => Ok(Err(code)),
    }
}

/// The busiest links of a run, as one comment line.
fn busiest_line(row: &Row, detail: &Detail, topology: &Topology) -> Option<String> {
    let links = busiest(detail, topology, 3);
    if links.is_empty() {
        return None;
    }
    let list: Vec<String> = links
        .iter()
        .map(|&(l, u)| format!("{} {:.1}%", topology.link_name(l), u * 100.0))
        .collect();
    Some(format!(
        "# busiest links at {} B (average utilisation over the run): {}\n",
        row.size_bytes,
        list.join(", ")
    ))
}

/// Runs `sim run SCENARIO` on the simulator with the algorithms of
/// `registry`; returns the exit status (an error is stdout's).
pub fn run(path: &Path, registry: &Registry, outputs: &Outputs) -> io::Result<ExitStatus> {
    let scenario = match Scenario::load(path, registry) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let mut nccl_env = Vec::new();
    let scenario = match scenario.with_nccl(|c| {
        nccl_env = c.apply_env(|v| std::env::var(v).ok())?;
        Ok(())
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let filter = match std::env::var("NCCL_ALGO") {
        Ok(value) => match AlgoFilter::parse(&value, registry) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitStatus::InvalidInput);
            }
        },
        Err(_) => AlgoFilter::default(),
    };
    // Open every output before the (possibly long) run, so a bad path fails
    // at once.
    let csv_file = match outputs.csv.as_deref().map(|p| create(p, "CSV")).transpose() {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let topology = match &scenario.network {
        NetworkConfig::Topology(t) => Some(Arc::clone(&t.topology)),
        NetworkConfig::Ideal(_) => None,
    };
    let mut links_csv = match open_output(&outputs.links_csv, "links CSV", LinkCsv::new)? {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    let mut trace = match open_output(&outputs.trace, "trace", ChromeTraceWriter::new)? {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    let mut timeline_csv = match open_output(
        &outputs.links_timeline,
        "links timeline",
        LinkTimelineCsv::new,
    )? {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    let options = Options {
        trace: trace.is_some(),
        timeline_bin_ps: timeline_csv.as_ref().map(|_| outputs.timeline_bin_ps),
    };
    let mut section = 0;
    let mut out = io::stdout().lock();
    writeln!(out, "# sim run {}", path.display())?;
    writeln!(out, "# {scenario}")?;
    for note in &scenario.link_fault_notes {
        writeln!(out, "# {note}")?;
    }
    for note in &scenario.network_notes {
        writeln!(out, "# {note}")?;
    }
    for fault in &scenario.faults {
        writeln!(out, "# fault: {fault}")?;
    }
    if scenario.has_sweep {
        writeln!(out, "# [sweep] ignored by sim run: use sim sweep")?;
    }
    if let Some(ps) = scenario.call_timeout_ps {
        writeln!(out, "# collective watchdog: {}", algorithms::Time(ps))?;
    }
    writeln!(out, "# {}", scenario.tuner_note())?;
    if let Some(value) = &filter.source {
        writeln!(out, "# NCCL_ALGO={value} restricts the tuner")?;
    }
    for setting in &nccl_env {
        writeln!(out, "# {setting} (from the environment)")?;
    }
    out.flush()?;
    let baseline = if scenario.compare_without_link_faults {
        writeln!(
            out,
            "# each point also runs without the link faults (compare_without_link_faults)"
        )?;
        out.flush()?;
        engine::study::healthy_rows(&scenario, &filter)
    } else {
        BTreeMap::new()
    };
    let mut pending_summary: Option<String> = None;
    // A failure to write stdout stops quietly (a closed pipe) or exits 1;
    // a failure to write an output file is reported naming the file.
    let mut stdout_error = None;
    let mut file_error: Option<String> = None;
    let mut budget_noted = false;
    let result = run_scenario(&scenario, &filter, options, |progress| {
        let text = match progress {
            Progress::Section(index) => {
                section = index;
                let what = describe(&scenario.collectives[index]);
                let summary = pending_summary.take().unwrap_or_default();
                format!("{summary}#\n# {what}\n{}", table_header())
            }
            Progress::Row(point, row, detail) => {
                if let Some(t) = &topology {
                    pending_summary = busiest_line(row, detail, t);
                }
                let files = PointFiles {
                    outputs,
                    links_csv: &mut links_csv,
                    timeline: &mut timeline_csv,
                    trace: &mut trace,
                    budget_noted: &mut budget_noted,
                };
                let compared = baseline
                    .get(&(section, row.size_bytes))
                    .map(|healthy| engine::report::comparison_line(row, healthy))
                    .unwrap_or_default();
                let troubles = topology
                    .as_deref()
                    .map(|t| trouble_lines(row.size_bytes, detail, t))
                    .unwrap_or_default();
                match files.write(section, point, detail, topology.as_deref()) {
                    Ok(note) => format!("{}{compared}{troubles}{note}", table_row(row)),
                    Err(message) => {
                        file_error = Some(message);
                        return ControlFlow::Break(());
                    }
                }
            }
            Progress::Failed(point, detail) => {
                let files = PointFiles {
                    outputs,
                    links_csv: &mut links_csv,
                    timeline: &mut timeline_csv,
                    trace: &mut trace,
                    budget_noted: &mut budget_noted,
                };
                // The study stops after a failure anyway: keep going to
                // print its report even if the files cannot be written.
                let troubles = topology
                    .as_deref()
                    .map(|t| trouble_lines(point.size_bytes, detail, t))
                    .unwrap_or_default();
                let note = files
                    .write(section, point, detail, topology.as_deref())
                    .unwrap_or_else(|message| {
                        file_error = Some(message);
                        String::new()
                    });
                format!("{troubles}{note}")
            }
        };
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                stdout_error = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    // Whatever happened, close the trace so that it is valid JSON.
    if let (Some(writer), Some(p)) = (trace, outputs.trace.as_deref())
        && let Err(e) = writer.finish()
        && file_error.is_none()
    {
        file_error = Some(format!("{}: cannot write trace: {e}", p.display()));
    }
    if let Some(e) = stdout_error {
        return Err(e);
    }
    if let Some(summary) = pending_summary {
        out.write_all(summary.as_bytes())?;
    }
    if let Some(message) = &file_error {
        eprintln!("error: {message}");
        if result.is_ok() {
            return Ok(ExitStatus::ToolFailed);
        }
    }
    let rows = match result {
        Ok(rows) => rows,
        Err(failed) => {
            let (point, failure) = *failed;
            return report_failure(&mut out, path, &scenario, &point, failure);
        }
    };
    if let (Some(f), Some(csv_path)) = (csv_file, outputs.csv.as_deref())
        && let Err(e) = write_csv(f, &rows)
    {
        eprintln!("error: {}: cannot write CSV: {e}", csv_path.display());
        return Ok(ExitStatus::ToolFailed);
    }
    summarise(&mut out, path, &scenario, &rows)
}

/// The per-point output files of `sim run`.
struct PointFiles<'a> {
    outputs: &'a Outputs,
    links_csv: &'a mut Option<LinkCsv<BufWriter<File>>>,
    timeline: &'a mut Option<LinkTimelineCsv<BufWriter<File>>>,
    trace: &'a mut Option<ChromeTraceWriter<BufWriter<File>>>,
    /// Whether the table already says the trace reached its size limit.
    budget_noted: &'a mut bool,
}

impl PointFiles<'_> {
    /// Writes one point's link rows and trace, if asked for; returns
    /// comment lines for the table (a truncated or untraced run), or an
    /// error naming the file that could not be written.
    fn write(
        self,
        section: usize,
        point: &Point,
        detail: &Detail,
        topology: Option<&Topology>,
    ) -> Result<String, String> {
        let named = |path: &Option<PathBuf>, what: &str, e: io::Error| {
            let path = path
                .as_deref()
                .map_or(String::new(), |p| p.display().to_string());
            format!("{path}: cannot write {what}: {e}")
        };
        if let (Some(w), Some(t)) = (self.links_csv.as_mut(), topology) {
            w.write_point(section, point, detail, t)
                .map_err(|e| named(&self.outputs.links_csv, "links CSV", e))?;
        }
        let mut note = String::new();
        if let (Some(w), Some(t)) = (self.timeline.as_mut(), topology) {
            let truncated = w
                .write_point(section, point, detail, t)
                .map_err(|e| named(&self.outputs.links_timeline, "links timeline", e))?;
            if truncated {
                note += &format!(
                    "# the links timeline of {} B is truncated at {} (link, bin) entries: use a wider --timeline-bin-us\n",
                    point.size_bytes,
                    engine::network::timeline::TIMELINE_ENTRIES_MAX
                );
            }
        }
        if let (Some(w), Some(log)) = (self.trace.as_mut(), &detail.trace) {
            let label = format!(
                "{} {} {} B",
                point.collective, detail.algorithm, point.size_bytes
            );
            let written = w
                .write_run(&label, detail.ranks, log, topology)
                .map_err(|e| named(&self.outputs.trace, "trace", e))?;
            if written == Written::OverBudget && !*self.budget_noted {
                *self.budget_noted = true;
                note += &format!(
                    "# the trace reached {TRACE_EVENTS_MAX} events: later runs are listed in it \
                     but not traced; trace fewer sizes or iterations\n"
                );
            } else if written == Written::Traced && log.truncated {
                note += &format!(
                    "# the trace of {label} is truncated: it stopped recording at its limits \
                     ({TRACE_SPANS_MAX} spans, {} link samples); trace fewer sizes or iterations\n",
                    engine::network::LINK_SAMPLES_MAX
                );
            }
        }
        Ok(note)
    }
}

/// One line describing a scenario's collective entry.
fn describe(c: &CollectiveSpec) -> String {
    let phantom = if c.phantom { ", phantom payloads" } else { "" };
    format!("{}{phantom}", c.describe())
}

/// Prints the `#wrong` summary line and picks the exit status.
fn summarise(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    rows: &[Row],
) -> io::Result<ExitStatus> {
    let wrong: u64 = rows.iter().filter_map(|r| r.wrong).sum();
    let verdict = if wrong == 0 { "OK" } else { "FAILED" };
    writeln!(out, "# Out of bounds values : {wrong} {verdict}")?;
    out.flush()?;
    if wrong > 0 {
        eprintln!(
            "error: {}: {wrong} wrong element(s) (seed {})",
            path.display(),
            scenario.seed
        );
        return Ok(ExitStatus::WrongResult);
    }
    Ok(ExitStatus::Success)
}

/// Prints why a point did not complete (the report to stdout, one line
/// naming the file to stderr) and picks the exit status.
fn report_failure(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    point: &Point,
    failure: Failure,
) -> io::Result<ExitStatus> {
    let status = ExitStatus::of_failure(&failure);
    let at = format!("{} at {} bytes", point.collective, point.size_bytes);
    let file = path.display();
    writeln!(out, "# {at} did not complete")?;
    let stalled = |out: &mut dyn Write, stalled: Option<DeadlockReport>| -> io::Result<()> {
        if let Some(report) = stalled {
            writeln!(out, "the other ranks were then left waiting:")?;
            write!(out, "{report}")?;
        }
        Ok(())
    };
    match failure {
        Failure::WatchdogTimeout(report) => {
            write!(out, "{report}")?;
            eprintln!(
                "error: {file}: a collective timed out ({at}, seed {})",
                scenario.seed
            );
        }
        Failure::Deadlock(report) => {
            write!(out, "{report}")?;
            eprintln!(
                "error: {file}: the simulated system deadlocked ({at}, seed {})",
                scenario.seed
            );
        }
        Failure::TransportTimeout {
            error, stalled: s, ..
        } => {
            // Fabric errors name their rank already.
            writeln!(out, "failed: {error}")?;
            stalled(out, s)?;
            eprintln!("error: {file}: a transport timed out ({at}): {error}");
        }
        Failure::RankError {
            rank,
            error,
            stalled: s,
        } => {
            let error = match error {
                CollectiveError::Fabric(e) => e.to_string(),
                other => format!("rank {rank}: {other}"),
            };
            writeln!(out, "failed: {error}")?;
            stalled(out, s)?;
            eprintln!("error: {file}: a rank failed ({at}): {error}");
        }
        Failure::Crashed {
            rank,
            at: when,
            stalled: s,
        } => {
            writeln!(
                out,
                "failed: rank {rank} crashed at {when} (scheduled fault)"
            )?;
            stalled(out, s)?;
            eprintln!("error: {file}: rank {rank} crashed at {when} ({at})");
        }
        Failure::OutOfTime => eprintln!("error: {}", scenario.out_of_time_message(&at)),
    }
    out.flush()?;
    Ok(status)
}
