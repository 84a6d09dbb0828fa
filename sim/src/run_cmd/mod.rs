//! `sim run SCENARIO` on the simulator: the nccl-tests style table on
//! stdout as the study goes, the output files written as it goes
//! ([`files`]), the `#wrong` summary or the report of a point that did not
//! complete ([`report`](mod@report)), and the exit status.
//!
//! The study stops early, between rows, on SIGINT or SIGTERM (the files
//! end marked partial; exit 130 or 143), when a file cannot be written
//! (exit 1 naming it), when stdout fails other than by a closed reader
//! (exit 1), or when the timeline's bin is too fine for a run (exit 2).

pub mod files;
pub mod report;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use algorithms::Registry;
use engine::link_report::{BinTooFine, busiest, trouble_lines};
use engine::network::NetworkConfig;
use engine::report::{table_header, table_row};
use engine::scenario::{CollectiveSpec, Scenario};
use engine::study::{Detail, Options, Progress, Row, run_scenario};
use engine::tuning::AlgoFilter;
use topologies::Topology;

use crate::exit::ExitStatus;
use crate::interrupt::{Interrupt, Signal};
use crate::output::{Named, OutputError, Stdout, check_paths};
pub use files::Outputs;
use files::{Ending, PointError, RunFiles};

/// A timeline bin in microseconds: from 1 ps to 1 s (the run length
/// checks it further: see `LinkTimelineCsv::check_bin`).
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

/// Why the study stopped before its end.
enum Stop {
    /// A signal arrived.
    Signal(Signal),
    /// An output file could not be written.
    Write(OutputError),
    /// The timeline's bin is too fine for a run.
    BinTooFine(BinTooFine),
    /// Stdout could not be written (not a closed reader).
    Stdout(io::Error),
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

/// The scenario with NCCL's environment variables applied, the tuner's
/// filter and the settings taken from the environment, or the error.
fn load(path: &Path, registry: &Registry) -> Result<(Scenario, AlgoFilter, Vec<String>), String> {
    let scenario = Scenario::load(path, registry).map_err(|e| e.to_string())?;
    let mut nccl_env = Vec::new();
    let scenario = scenario
        .with_nccl(|c| {
            nccl_env = c.apply_env(|v| std::env::var(v).ok())?;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let filter = AlgoFilter::from_env(|v| std::env::var(v).ok(), registry)?;
    Ok((scenario, filter, nccl_env))
}

/// Runs `sim run SCENARIO` on the simulator with the algorithms of
/// `registry`; returns the exit status (an error is stdout's).
pub fn run(path: &Path, registry: &Registry, outputs: &Outputs) -> io::Result<ExitStatus> {
    let (scenario, filter, nccl_env) = match load(path, registry) {
        Ok(loaded) => loaded,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let input = Named {
        name: "the scenario",
        path,
    };
    let mut inputs = vec![input];
    inputs.extend(scenario.input_files.iter().map(|path| Named {
        name: "a file the scenario reads",
        path,
    }));
    if let Err(e) = check_paths(&inputs, &outputs.named()) {
        crate::report!("error: {e}");
        return Ok(ExitStatus::InvalidInput);
    }
    // Open every output before the (possibly long) run, so a bad path fails
    // at once.
    let files = match RunFiles::open(outputs) {
        Ok(files) => files,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    };
    let mut out = Stdout::new();
    print_header(&mut out, path, &scenario, &filter, &nccl_env)?;
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
    let study = Study {
        scenario: &scenario,
        filter: &filter,
        baseline: &baseline,
        timeline_bin_ps: outputs.timeline_bin_ps,
    };
    study.run(path, files, &mut out)
}

/// Prints the table's header: the scenario, its notes and settings.
fn print_header(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    filter: &AlgoFilter,
    nccl_env: &[String],
) -> io::Result<()> {
    writeln!(out, "# sim run {}", path.display())?;
    writeln!(out, "# {scenario}")?;
    for note in scenario
        .link_fault_notes
        .iter()
        .chain(&scenario.network_notes)
    {
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
    if let Some(note) = filter.header_note() {
        writeln!(out, "{note}")?;
    }
    for setting in nccl_env {
        writeln!(out, "# {setting} (from the environment)")?;
    }
    out.flush()
}

/// One `sim run`'s study, ready to run.
struct Study<'a> {
    scenario: &'a Scenario,
    filter: &'a AlgoFilter,
    /// The rows without link faults, by (section, size).
    baseline: &'a BTreeMap<(usize, u64), Row>,
    timeline_bin_ps: u64,
}

impl Study<'_> {
    /// Runs the study, writing the table and the files as it goes; ends
    /// the files and picks the exit status.
    fn run(&self, path: &Path, mut files: RunFiles, out: &mut Stdout) -> io::Result<ExitStatus> {
        let scenario = self.scenario;
        let topology = match &scenario.network {
            NetworkConfig::Topology(t) => Some(Arc::clone(&t.topology)),
            NetworkConfig::Ideal(_) => None,
        };
        let options = Options {
            trace: files.traces(),
            timeline_bin_ps: files.records_timeline().then_some(self.timeline_bin_ps),
        };
        let interrupt = Interrupt::catch();
        let mut section = 0;
        let mut rows_written = 0;
        let mut pending_summary: Option<String> = None;
        let mut stop: Option<Stop> = None;
        let result = run_scenario(scenario, self.filter, options, |progress| {
            let text = match progress {
                Progress::Section(index) => {
                    section = index;
                    let what = describe(&scenario.collectives[index]);
                    let summary = pending_summary.take().unwrap_or_default();
                    format!("{summary}#\n# {what}\n{}", table_header())
                }
                Progress::Row(point, row, detail) => {
                    let written = files
                        .write_point(section, point, detail, topology.as_deref())
                        .and_then(|note| {
                            files.write_row(row).map_err(PointError::Write)?;
                            Ok(note)
                        });
                    let note = match written {
                        Ok(note) => note,
                        Err(e) => {
                            stop = Some(Stop::from(e));
                            return ControlFlow::Break(());
                        }
                    };
                    rows_written += 1;
                    if let Some(t) = &topology {
                        pending_summary = busiest_line(row, detail, t);
                    }
                    let compared = self
                        .baseline
                        .get(&(section, row.size_bytes))
                        .map(|healthy| engine::report::comparison_line(row, healthy))
                        .unwrap_or_default();
                    let troubles = topology
                        .as_deref()
                        .map(|t| trouble_lines(row.size_bytes, detail, t))
                        .unwrap_or_default();
                    let predicted = scenario
                        .nccl_system(row.ranks)
                        .and_then(|system| engine::report::nccl_table_line(row, system))
                        .unwrap_or_default();
                    let extrapolated = engine::report::extrapolation_line(row).unwrap_or_default();
                    format!(
                        "{}{extrapolated}{predicted}{compared}{troubles}{note}",
                        table_row(row)
                    )
                }
                Progress::Failed(point, detail) => {
                    // The study stops after a failure anyway: its report is
                    // printed even if the files cannot be written.
                    let troubles = topology
                        .as_deref()
                        .map(|t| trouble_lines(point.size_bytes, detail, t))
                        .unwrap_or_default();
                    let note = files
                        .write_point(section, point, detail, topology.as_deref())
                        .unwrap_or_else(|e| {
                            stop = Some(Stop::from(e));
                            String::new()
                        });
                    format!("{troubles}{note}")
                }
            };
            if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                stop = Some(Stop::Stdout(e));
                return ControlFlow::Break(());
            }
            match interrupt.received() {
                Some(signal) => {
                    stop = Some(Stop::Signal(signal));
                    ControlFlow::Break(())
                }
                None => ControlFlow::Continue(()),
            }
        });
        let ending = ending(&stop, files.points());
        let shown: Vec<String> = files
            .paths()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let finished = files.finish(&ending);
        if let Some(summary) = pending_summary
            && !matches!(stop, Some(Stop::Stdout(_)))
        {
            out.write_all(summary.as_bytes())?;
        }
        let status = match stop {
            None => match result {
                Ok(rows) => report::summarise(out, path, scenario, &rows)?,
                Err(failed) => {
                    let (point, failure) = *failed;
                    report::report_failure(out, path, scenario, &point, failure)?
                }
            },
            Some(Stop::Signal(signal)) => {
                let files = match (&ending, shown.is_empty()) {
                    (_, true) => String::new(),
                    (Ending::Partial(_), false) => {
                        format!("; {} marked partial", shown.join(", "))
                    }
                    _ => format!("; {} left as they were", shown.join(", ")),
                };
                crate::report!(
                    "error: {}: interrupted by {} after {rows_written} row(s){files}",
                    path.display(),
                    signal.name()
                );
                signal.status()
            }
            Some(Stop::Write(e)) => {
                crate::report!("error: {e}");
                ExitStatus::ToolFailed
            }
            Some(Stop::BinTooFine(b)) => {
                crate::report!("error: {}", bin_too_fine(&b));
                ExitStatus::InvalidInput
            }
            Some(Stop::Stdout(e)) => {
                if let Err(file) = finished {
                    crate::report!("error: {file}");
                }
                return Err(e);
            }
        };
        if let Err(e) = finished {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
        Ok(status)
    }
}

impl From<PointError> for Stop {
    fn from(e: PointError) -> Stop {
        match e {
            PointError::Write(e) => Stop::Write(e),
            PointError::BinTooFine(b) => Stop::BinTooFine(b),
        }
    }
}

/// How the files end after the study stopped (or not) with `stop`, having
/// written `points` points.
fn ending(stop: &Option<Stop>, points: usize) -> Ending {
    match stop {
        None => Ending::Complete,
        Some(Stop::BinTooFine(_)) => Ending::Abandon,
        // Nothing new: what was there before stays.
        Some(_) if points == 0 => Ending::Abandon,
        Some(Stop::Signal(s)) => {
            Ending::Partial(format!("interrupted by {} after {points} row(s)", s.name()))
        }
        Some(Stop::Write(e)) => {
            Ending::Partial(format!("stopped: {} could not be written", e.path))
        }
        Some(Stop::Stdout(_)) => {
            Ending::Partial("stopped: stdout could not be written".to_string())
        }
    }
}

/// The message for a timeline bin too fine for a run.
fn bin_too_fine(b: &BinTooFine) -> String {
    format!(
        "--timeline-bin-us {:.6} is too fine for this scenario: a run lasted {:.6} us, {} bins \
         per link, more than the links timeline's cap of {} rows; use --timeline-bin-us {:.6} or \
         wider (or raise the cap with --timeline-rows-max, at most {})",
        b.bin_ps as f64 / 1e6,
        b.run_ps as f64 / 1e6,
        b.bins_per_link,
        b.rows_max,
        b.min_bin_ps() as f64 / 1e6,
        engine::network::timeline::TIMELINE_ENTRIES_MAX
    )
}

/// One line describing a scenario's collective entry.
fn describe(c: &CollectiveSpec) -> String {
    let phantom = if c.phantom { ", phantom payloads" } else { "" };
    format!("{}{phantom}", c.describe())
}
