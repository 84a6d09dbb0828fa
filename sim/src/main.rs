//! The `sim` command: run scenarios in the simulator.
//!
//! Exit status: 0 success; 1 the tool itself failed (e.g. an output cannot
//! be written); 2 invalid input (command line or scenario, including
//! parameters that run virtual time past its end); 3 the simulated system
//! deadlocked; 4 a collective produced wrong results; 5 a rank's collective
//! failed with an error; 6 a collective outlived the scenario's watchdog
//! (`timeout_ms`) or a rank's transport timed out (an RDMA retry budget
//! exhausted).

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::collections::BTreeMap;

use algorithms::{CollectiveError, FabricError};
use clap::{Parser, Subcommand};
use sim::bench::{BENCH_RANKS_PER_NODE, BenchAlgorithm, BenchNetwork, BenchSymmetry};
use sim::link_report::{LinkCsv, LinkTimelineCsv, busiest, trouble_lines};
use sim::network::NetworkConfig;
use sim::real::FabricKind;
use sim::real::bench_cmd::{BenchArgs, JobArgs};
use sim::real::launch_cmd::LaunchArgs;
use sim::report::{table_header, table_row, write_csv};
use sim::scenario::{ByteSize, CollectiveSpec, Scenario};
use sim::study::{Detail, Failure, Options, Point, Progress, Row, run_scenario};
use sim::sweep::command;
use sim::trace::{ChromeTraceWriter, TRACE_EVENTS_MAX, TRACE_SPANS_MAX, Written};
use sim::tuning::AlgoFilter;
use std::sync::Arc;
use topologies::Topology;

/// mimalloc keeps freed pages for reuse; with the system allocator, the
/// simulator's stream of large, short-lived message buffers is returned to
/// the kernel and faulted in again, which dominated wall time on real-data
/// runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status when the tool itself failed.
const EXIT_IO: u8 = 1;
/// Exit status for invalid input.
const EXIT_INPUT: u8 = 2;
/// Exit status when the simulated system deadlocked.
const EXIT_DEADLOCK: u8 = 3;
/// Exit status when a collective's result was wrong.
const EXIT_WRONG: u8 = 4;
/// Exit status when a rank's collective returned an error.
const EXIT_RANK_ERROR: u8 = 5;
/// Exit status when a collective outlived the scenario's watchdog or a
/// transport timed out.
const EXIT_TIMEOUT: u8 = 6;

#[derive(Parser)]
#[command(
    name = "sim",
    version,
    about = "Simulate collective communication on modelled clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario and print an nccl-tests style table.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Also write the rows as CSV to this file.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Write per-link counters (topology scenarios) as CSV to this file.
        #[arg(long, value_name = "FILE")]
        links_csv: Option<PathBuf>,
        /// Write a Chrome trace (JSON, for Perfetto) of every run to this file.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Write each link's traffic per time bin (topology scenarios) as
        /// CSV to this file: utilisation over time.
        #[arg(long, value_name = "FILE")]
        links_timeline: Option<PathBuf>,
        /// The time bin of --links-timeline, in microseconds.
        #[arg(long, value_name = "US", default_value_t = 10.0, value_parser = parse_bin_us)]
        timeline_bin_us: f64,
        /// Run the scenario's collectives on a real fabric instead of the
        /// simulator (threads: the scenario's ranks as threads of this
        /// process; shm, tcp: under a launcher such as `sim launch`). The
        /// modelled network is not used; [[fault]] and [[inject]] are refused.
        #[arg(long, value_enum, conflicts_with_all = ["links_csv", "trace", "links_timeline"])]
        fabric: Option<FabricKind>,
        /// With --fabric: where rank 0 runs the rendezvous, instead of
        /// MASTER_ADDR:MASTER_PORT.
        #[arg(long, value_name = "HOST:PORT", requires = "fabric")]
        rendezvous: Option<String>,
        /// With --fabric: how long a rank waits for a silent peer (default:
        /// REALNET_TIMEOUT_MS, else 30 s).
        #[arg(long, value_name = "S", requires = "fabric", value_parser = sim::real::bench_cmd::parse_seconds)]
        timeout_s: Option<f64>,
        /// With --fabric tcp: the address or interface name to listen on
        /// and advertise (default: loopback).
        #[arg(long, value_name = "IP|NAME", requires = "fabric")]
        interface: Option<String>,
    },
    /// Benchmark a collective on a real fabric, nccl-tests style: the same
    /// columns as `sim run` (rank 0 prints them).
    Bench(Box<BenchArgs>),
    /// Model-check a check scenario: explore message orders, buffering,
    /// parameters and faults; print a replayable counterexample.
    Check(Box<sim::check::command::CheckArgs>),
    /// Re-run a counterexample saved by `sim check`, exactly.
    Replay(sim::check::command::ReplayArgs),
    /// Start N local processes of this program as the ranks of one job
    /// (torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
    Launch(LaunchArgs),
    /// Run a scenario's [sweep]: every point of its axes, in parallel, as
    /// CSV rows (see the README's "Sweeps").
    Sweep {
        /// The scenario file (TOML) with a [sweep] table.
        scenario: PathBuf,
        /// Write the CSV to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Worker threads (default: one per core).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Run only the points whose index is I modulo N, for `sim merge`.
        #[arg(long, value_name = "I/N", value_parser = sim::sweep::shard::Shard::parse)]
        shard: Option<sim::sweep::shard::Shard>,
        /// Print the scenario file of this point (to `sim run` it alone) and exit.
        #[arg(long, value_name = "POINT", conflicts_with_all = ["csv", "shard"])]
        print_point: Option<usize>,
    },
    /// Join the shard CSVs of `sim sweep --shard` into the CSV one run writes.
    Merge {
        /// The merged CSV to write.
        out: PathBuf,
        /// The shard CSVs.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
    /// List the algorithm catalogue: collective, algorithm, cost formula.
    Algorithms,
    /// Benchmark the engine: a phantom ring allreduce, events per second.
    BenchEngine {
        /// Number of ranks.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
        ranks: u32,
        /// Message size (e.g. 64M).
        #[arg(long, default_value = "64M", value_parser = ByteSize::parse)]
        bytes: ByteSize,
        /// Pipeline chunk size (at least 4K, to keep the run short).
        #[arg(long, default_value = "512K", value_parser = ByteSize::parse)]
        chunk: ByteSize,
        /// Repetitions.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
        repeat: u32,
        /// The network: ideal links, or the fat-tree preset at packet or
        /// flow level.
        #[arg(long, value_enum, default_value = "ideal")]
        network: BenchNetwork,
        /// The allreduce: the flat ring, or hierarchical (8 ranks per node).
        #[arg(long, value_enum, default_value = "ring")]
        algorithm: BenchAlgorithm,
        /// The fat-tree's rotation by one node: not used (ECMP hashes each
        /// flow), symmetric routes on every rank, or a folded run that
        /// simulates the first node's ranks only.
        #[arg(long, value_enum, default_value = "none")]
        symmetry: BenchSymmetry,
    },
}

fn main() -> ExitCode {
    // Under `sim launch`, whatever the subcommand, no rank outlives the
    // launcher.
    sim::real::watch_launcher();
    let cli = Cli::parse();
    let registry = algorithms::Registry::builtin();
    let registry = &registry;
    let result = match cli.command {
        Command::Run {
            scenario,
            csv,
            fabric: Some(kind),
            rendezvous,
            timeout_s,
            interface,
            ..
        } => sim::real::run_cmd::run_real(
            &scenario,
            kind,
            &JobArgs {
                fabric: Some(kind),
                rendezvous,
                timeout_s,
                interface,
            },
            csv.as_deref(),
            (&command_line(), registry),
        ),
        Command::Run {
            scenario,
            csv,
            links_csv,
            trace,
            links_timeline,
            timeline_bin_us,
            fabric: None,
            ..
        } => run(
            &scenario,
            registry,
            &Outputs {
                csv,
                links_csv,
                trace,
                links_timeline,
                timeline_bin_ps: (timeline_bin_us * 1e6).round() as u64,
            },
        ),
        Command::Sweep {
            scenario,
            csv,
            threads,
            quiet,
            shard,
            print_point,
        } => match print_point {
            Some(point) => command::print_point(&scenario, point, registry).map(ExitCode::from),
            None => {
                let options = sim::sweep::run::RunOptions {
                    threads: threads.map(usize::from),
                    shard,
                    progress: !quiet && io::stderr().is_terminal(),
                };
                command::sweep(&scenario, csv.as_deref(), options, registry).map(ExitCode::from)
            }
        },
        Command::Merge { out, shards } => command::merge(&out, &shards).map(ExitCode::from),
        Command::Algorithms => list_algorithms(registry),
        Command::BenchEngine {
            ranks,
            bytes,
            chunk,
            repeat,
            network,
            algorithm,
            symmetry,
        } => bench(
            ranks as usize,
            bytes,
            chunk,
            repeat,
            (network, algorithm, symmetry),
        ),
        Command::Bench(args) => sim::real::bench_cmd::bench(&args, &command_line(), registry),
        Command::Launch(args) => sim::real::launch_cmd::launch(&args),
        Command::Check(args) => {
            sim::check::command::check_command(&args, registry).map(ExitCode::from)
        }
        Command::Replay(args) => {
            sim::check::command::replay_command(&args, registry).map(ExitCode::from)
        }
    };
    match result {
        Ok(code) => code,
        // The reader went away (e.g. `| head`): stop quietly.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write output: {e}");
            ExitCode::from(EXIT_IO)
        }
    }
}

/// This process's arguments, for checking that every rank of a job runs
/// the same collectives: options that may differ per rank (output files,
/// the rendezvous, the interface, the timeout, and the fabric flag, which
/// may also come from REALNET_FABRIC: ranks agree on the fabric as
/// resolved) are left out.
fn command_line() -> String {
    agreed_args(std::env::args().skip(1))
}

/// The arguments of `args` that every rank must share (see [`command_line`]).
fn agreed_args(args: impl Iterator<Item = String>) -> String {
    const PER_RANK: [&str; 8] = [
        "--csv",
        "--links-csv",
        "--trace",
        "--links-timeline",
        "--rendezvous",
        "--interface",
        "--timeout-s",
        "--fabric",
    ];
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let name = arg.split('=').next().unwrap_or_default();
        if PER_RANK.contains(&name) {
            skip_value = !arg.contains('=');
            continue;
        }
        kept.push(arg);
    }
    kept.join(" ")
}

/// The files `sim run` writes besides stdout.
struct Outputs {
    csv: Option<PathBuf>,
    links_csv: Option<PathBuf>,
    trace: Option<PathBuf>,
    links_timeline: Option<PathBuf>,
    timeline_bin_ps: u64,
}

/// A timeline bin in microseconds: from 1 ps to 1 s.
fn parse_bin_us(text: &str) -> Result<f64, String> {
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
fn create(path: &Path, what: &str) -> Result<BufWriter<File>, ExitCode> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        eprintln!("error: {}: cannot write {what}: {e}", path.display());
        ExitCode::from(EXIT_IO)
    })
}

/// Opens an optional output file and starts its writer with `start`:
/// `Ok(Ok(None))` without a path, `Ok(Err(code))` if the file cannot be
/// created (already reported), `Err` if starting the writer fails.
fn open_output<T>(
    path: &Option<PathBuf>,
    what: &str,
    start: impl FnOnce(BufWriter<File>) -> io::Result<T>,
) -> io::Result<Result<Option<T>, ExitCode>> {
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

fn run(path: &Path, registry: &algorithms::Registry, outputs: &Outputs) -> io::Result<ExitCode> {
    let scenario = match Scenario::load(path, registry) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INPUT));
        }
    };
    let filter = match std::env::var("NCCL_ALGO") {
        Ok(value) => match AlgoFilter::parse(&value, registry) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(EXIT_INPUT));
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
    if let Some(value) = &filter.source {
        writeln!(out, "# NCCL_ALGO={value} restricts the tuner")?;
    }
    out.flush()?;
    let baseline = if scenario.compare_without_link_faults {
        writeln!(
            out,
            "# each point also runs without the link faults (compare_without_link_faults)"
        )?;
        out.flush()?;
        sim::study::healthy_rows(&scenario, &filter)
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
                    .map(|healthy| sim::report::comparison_line(row, healthy))
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
            return Ok(ExitCode::from(EXIT_IO));
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
        return Ok(ExitCode::from(EXIT_IO));
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
                    sim::network::timeline::TIMELINE_ENTRIES_MAX
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
                    sim::network::LINK_SAMPLES_MAX
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
) -> io::Result<ExitCode> {
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
        return Ok(ExitCode::from(EXIT_WRONG));
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints why a point did not complete and picks the exit status.
fn report_failure(
    out: &mut impl Write,
    path: &Path,
    scenario: &Scenario,
    point: &Point,
    failure: Failure,
) -> io::Result<ExitCode> {
    let at = format!("{} at {} bytes", point.collective, point.size_bytes);
    writeln!(out, "# {at} did not complete")?;
    let code = match failure {
        Failure::Deadlock(report) if report.timeout.is_some() => {
            write!(out, "{report}")?;
            eprintln!(
                "error: {}: a collective timed out ({at}, seed {})",
                path.display(),
                scenario.seed
            );
            EXIT_TIMEOUT
        }
        Failure::Deadlock(report) => {
            write!(out, "{report}")?;
            eprintln!(
                "error: {}: the simulated system deadlocked ({at}, seed {})",
                path.display(),
                scenario.seed
            );
            EXIT_DEADLOCK
        }
        Failure::RankError {
            rank,
            error,
            stalled,
        } => {
            let error_kind = match &error {
                CollectiveError::Fabric(e) => Some(e.clone()),
                _ => None,
            };
            // Fabric errors name their rank already.
            let error = match error {
                CollectiveError::Fabric(e) => e.to_string(),
                other => format!("rank {rank}: {other}"),
            };
            let timeout = matches!(error_kind, Some(FabricError::Timeout { .. }));
            writeln!(out, "failed: {error}")?;
            if let Some(report) = stalled {
                writeln!(out, "the other ranks were then left waiting:")?;
                write!(out, "{report}")?;
            }
            if timeout {
                eprintln!(
                    "error: {}: a transport timed out ({at}): {error}",
                    path.display()
                );
                EXIT_TIMEOUT
            } else {
                eprintln!("error: {}: a rank failed ({at}): {error}", path.display());
                EXIT_RANK_ERROR
            }
        }
        Failure::Crashed {
            rank,
            at: when,
            stalled,
        } => {
            writeln!(
                out,
                "failed: rank {rank} crashed at {when} (scheduled fault)"
            )?;
            if let Some(report) = stalled {
                writeln!(out, "the other ranks were then left waiting:")?;
                write!(out, "{report}")?;
            }
            eprintln!(
                "error: {}: rank {rank} crashed at {when} ({at})",
                path.display()
            );
            EXIT_RANK_ERROR
        }
        Failure::OutOfTime => {
            eprintln!(
                "error: {}: virtual time passed its end (2^64 ps, about 213 days) at {at}; \
                 the link bandwidth, latency or reduction rate is unrealistic for this size",
                path.display()
            );
            EXIT_INPUT
        }
    };
    out.flush()?;
    Ok(ExitCode::from(code))
}

/// Prints the registry, one algorithm per line.
fn list_algorithms(registry: &algorithms::Registry) -> io::Result<ExitCode> {
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "# collective       algorithm            cost (alpha-beta-gamma; n bytes, N ranks)"
    )?;
    for a in registry.iter() {
        let formula = a
            .facts()
            .formula()
            .unwrap_or("(no cost formula: the tuner never picks it)");
        let mark = if a.is_builtin() { "" } else { "  [user]" };
        writeln!(
            out,
            "{:<17} {:<20} {formula}{mark}",
            a.collective().name(),
            a.name(),
        )?;
    }
    writeln!(
        out,
        "# A scenario names one with `algorithm = \"...\"`, or leaves it out (or says \"auto\") for the tuner; NCCL_ALGO restricts the tuner."
    )?;
    Ok(ExitCode::SUCCESS)
}

fn bench(
    ranks: usize,
    bytes: ByteSize,
    chunk: ByteSize,
    repeat: u32,
    (network, algorithm, symmetry): (BenchNetwork, BenchAlgorithm, BenchSymmetry),
) -> io::Result<ExitCode> {
    if chunk.0 < 4096 {
        eprintln!("error: --chunk must be at least 4K");
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    if algorithm == BenchAlgorithm::Hierarchical && !ranks.is_multiple_of(BENCH_RANKS_PER_NODE) {
        eprintln!(
            "error: the hierarchical allreduce needs a multiple of {BENCH_RANKS_PER_NODE} ranks"
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let fold = symmetry == BenchSymmetry::Fold;
    let mut messages = sim::bench::allreduce_messages(algorithm, ranks, bytes.0, chunk.0);
    if fold {
        // A folded run sends the first node's share.
        messages /= (ranks / BENCH_RANKS_PER_NODE.min(ranks)).max(1) as u64;
    }
    if messages > sim::scenario::MESSAGES_PER_POINT_MAX {
        eprintln!(
            "error: {ranks} ranks at {} bytes would send {messages} messages; use fewer ranks or a larger --chunk",
            bytes.0
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "# {} allreduce, phantom float payload, {ranks} ranks, {} bytes, chunk {} bytes, {} network{}",
        algorithm.algorithm().name(),
        bytes.0,
        chunk.0,
        match network {
            BenchNetwork::Ideal => "ideal",
            BenchNetwork::Packet => "fat-tree packet-level",
            BenchNetwork::Flow => "fat-tree flow-level",
        },
        match symmetry {
            BenchSymmetry::None => "",
            BenchSymmetry::Routes => ", symmetric routes",
            BenchSymmetry::Fold => ", folded by one node (symmetric routes)",
        }
    )?;
    writeln!(
        out,
        "{:>4} {:>12} {:>12} {:>14} {:>14}",
        "rep", "wall (s)", "events", "events/s", "simulated (us)"
    )?;
    for rep in 0..repeat {
        let r = sim::bench::bench_network(network, ranks, symmetry).and_then(|config| {
            sim::bench::allreduce_phantom(config, algorithm, ranks, bytes.0, chunk.0, fold)
        });
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(EXIT_INPUT));
            }
        };
        writeln!(
            out,
            "{:>4} {:>12.4} {:>12} {:>14.0} {:>14.3}",
            rep,
            r.wall_s,
            r.stats.events,
            r.stats.events as f64 / r.wall_s,
            r.simulated_ps as f64 / 1e6
        )?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::agreed_args;

    #[test]
    fn per_rank_options_are_left_out_of_the_agreement() {
        let args = |s: &str| {
            s.split(' ')
                .map(str::to_string)
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(
            agreed_args(args(
                "bench -b 8 --csv r1.csv --interface=eth0 --rendezvous 10.0.0.1:29500 -e 4M"
            )),
            "bench -b 8 -e 4M"
        );
        assert_ne!(
            agreed_args(args("bench -e 4M")),
            agreed_args(args("bench -e 8M"))
        );
    }
}
