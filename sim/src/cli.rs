//! The command line itself: the clap definitions of every subcommand and
//! [`run`], which parses the arguments and hands each subcommand to its
//! module with the registry of algorithms it should know.
// clap's help text is these doc comments; the TOML table names in them
// (`[[fault]]`) are not links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use algorithms::Registry;
use clap::{Parser, Subcommand};
use engine::scenario::ByteSize;
use realnet::connect::FabricKind;

use crate::bench_engine_cmd::{AlgorithmArg, NetworkArg, SymmetryArg, bench_engine};
use crate::exit::ExitStatus;
use crate::real::bench_cmd::BenchArgs;
use crate::real::job::JobArgs;
use crate::real::launch_cmd::LaunchArgs;
use crate::run_cmd::Outputs;
use crate::sweep_cmd;

/// The largest `--trace-events-max`: about 8 GB of JSON.
const TRACE_EVENTS_LIMIT: u64 = 1 << 26;

/// The `sim` command line.
#[derive(Parser)]
#[command(
    name = "sim",
    version,
    about = "Simulate collective communication on modelled clusters"
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
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
        /// The time bin of --links-timeline, in microseconds (a bin too
        /// fine for a run's length, whose bins per link alone exceed
        /// --timeline-rows-max, is refused).
        #[arg(long, value_name = "US", default_value_t = 10.0, value_parser = crate::run_cmd::parse_bin_us)]
        timeline_bin_us: f64,
        /// The most rows of the --links-timeline file; the run that would
        /// pass it and later ones are left out, and the table says so.
        #[arg(long, value_name = "ROWS", default_value_t = engine::link_report::TIMELINE_ROWS_MAX,
              value_parser = clap::value_parser!(u64).range(1..=engine::network::timeline::TIMELINE_ENTRIES_MAX as u64))]
        timeline_rows_max: u64,
        /// The most events of the --trace file; later runs are listed in it
        /// but not traced, and the table says so.
        #[arg(long, value_name = "EVENTS", default_value_t = engine::trace::TRACE_EVENTS_MAX,
              value_parser = clap::value_parser!(u64).range(1..=TRACE_EVENTS_LIMIT))]
        trace_events_max: u64,
        /// Run the scenario's collectives on a real fabric instead of the
        /// simulator (threads: the scenario's ranks as threads of this
        /// process; shm, tcp: under a launcher such as `sim launch`). The
        /// modelled network is not used; [[fault]] and [[inject]] are refused.
        #[arg(long, value_parser = crate::real::fabric_parser(), conflicts_with_all = ["links_csv", "trace", "links_timeline"])]
        fabric: Option<FabricKind>,
        /// With --fabric: where rank 0 runs the rendezvous, instead of
        /// MASTER_ADDR:MASTER_PORT.
        #[arg(long, value_name = "HOST:PORT", requires = "fabric")]
        rendezvous: Option<String>,
        /// With --fabric: how long a rank waits for a silent peer (default:
        /// REALNET_TIMEOUT_MS, else 30 s).
        #[arg(long, value_name = "S", requires = "fabric", value_parser = crate::real::job::parse_seconds)]
        timeout_s: Option<f64>,
        /// With --fabric tcp: the address or interface name to listen on
        /// and advertise (default: loopback).
        #[arg(long, value_name = "IP|NAME", requires = "fabric")]
        interface: Option<String>,
    },
    /// Benchmark a collective on a real fabric, nccl-tests style: the same
    /// columns as `sim run` (rank 0 prints them).
    Bench(Box<BenchArgs>),
    /// Measure a real fabric's microbenchmarks (latency, bandwidth,
    /// concurrent flows, reduction rates) and write the simulator's
    /// parameters fitted to them as a calibration file a scenario includes
    /// (see the README's "Validate against your cluster").
    Calibrate(Box<crate::calibrate::CalibrateArgs>),
    /// Run a calibrated scenario on the simulator and on the real fabric
    /// and print both side by side with the error per row.
    Validate(Box<crate::validate_cmd::ValidateArgs>),
    /// Model-check a check scenario: explore message orders, buffering,
    /// parameters and faults; print a replayable counterexample.
    Check(Box<crate::check_cmd::CheckArgs>),
    /// Benchmark the model checker: exhaustive checks of the ring on 4
    /// ranks, tag_reuse_fixed and the catalogue, with schedules, states,
    /// memory, wall time and the reduction factor against naive
    /// enumeration.
    CheckBench {
        /// Which points.
        #[arg(long, value_enum, default_value = "all")]
        suite: crate::check_bench_cmd::Suite,
        /// Schedules per point before its search stops (then reported as
        /// not verified, with the fraction explored).
        #[arg(long, default_value_t = 1_000_000)]
        max_schedules: u64,
        /// Naive schedules counted exactly per point before estimating.
        #[arg(long, default_value_t = 2_000)]
        naive_cap: u64,
    },
    /// Re-run a counterexample saved by `sim check`, exactly.
    Replay(crate::check_cmd::ReplayArgs),
    /// Start N local processes of this program as the ranks of one job
    /// (torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
    Launch(LaunchArgs),
    /// Run a scenario's [sweep]: every point of its axes, in parallel, as
    /// CSV rows streamed as points finish (see the README's "Sweeps").
    Sweep(crate::sweep_cmd::SweepArgs),
    /// Compare nccl-tests output measured on a cluster with the
    /// simulator's prediction on a scenario of it: error per row, median
    /// |error| per collective (see the README's "Compare with your
    /// measurements").
    Compare(crate::compare_cmd::CompareArgs),
    /// Join the shard CSVs of `sim sweep --shard` into the CSV one run writes.
    Merge {
        /// The merged CSV to write.
        out: PathBuf,
        /// The shard CSVs.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
    /// List the algorithms this program knows (the catalogue and any a
    /// user's program registered): collective, algorithm, cost formula.
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
        network: NetworkArg,
        /// The allreduce: the flat ring, or hierarchical (8 ranks per node).
        #[arg(long, value_enum, default_value = "ring")]
        algorithm: AlgorithmArg,
        /// The fat-tree's rotation by one node: not used (ECMP hashes each
        /// flow), symmetric routes on every rank, or a folded run that
        /// simulates the first node's ranks only.
        #[arg(long, value_enum, default_value = "none")]
        symmetry: SymmetryArg,
    },
}

/// Runs the `sim` command line on `args` (the program name first, as
/// `std::env::args_os` gives them) with the algorithms of `registry`, and
/// returns the exit status. `--help`, `--version` and invalid arguments
/// are handled as clap does (printed, exit status 0 or 2).
pub fn run<I, T>(args: I, registry: &Registry) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // Under a launcher, whatever the subcommand, no rank outlives it.
    realnet::launcher::watch_launcher();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help to stdout: a closed reader must not make
            // it fail (its error is ignored like a closed stderr's).
            let _ = e.print();
            return if e.use_stderr() {
                ExitStatus::InvalidInput.into()
            } else {
                ExitStatus::Success.into()
            };
        }
    };
    match dispatch(cli.command, registry) {
        Ok(code) => ExitCode::from(code),
        // A closed reader never gets here (see `output::Stdout`): this is
        // another failure to write stdout, a full disk say.
        Err(e) => {
            crate::report!("error: stdout: cannot write: {e}");
            ExitStatus::ToolFailed.into()
        }
    }
}

/// Runs one subcommand; returns its exit status (an [`ExitStatus`], or for
/// `sim launch` its first failed rank's); an error is stdout's.
fn dispatch(command: Command, registry: &Registry) -> io::Result<u8> {
    if let Command::Launch(args) = &command {
        return crate::real::launch_cmd::launch(args);
    }
    let status = match command {
        Command::Run {
            scenario,
            csv,
            fabric: Some(kind),
            rendezvous,
            timeout_s,
            interface,
            ..
        } => crate::real::run_cmd::run_real(
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
            timeline_rows_max,
            trace_events_max,
            fabric: None,
            ..
        } => crate::run_cmd::run(
            &scenario,
            registry,
            &Outputs {
                csv,
                links_csv,
                trace,
                links_timeline,
                timeline_bin_ps: (timeline_bin_us * 1e6).round() as u64,
                timeline_rows_max,
                trace_events_max,
            },
        ),
        Command::Sweep(args) => match args.print_point {
            Some(point) => sweep_cmd::print_point(&args.scenario, point, registry),
            None => {
                let progress = !args.quiet && io::stderr().is_terminal();
                sweep_cmd::sweep(&args, progress, registry)
            }
        },
        Command::Merge { out, shards } => sweep_cmd::merge(&out, &shards),
        Command::Compare(args) => crate::compare_cmd::compare(&args, registry),
        Command::Algorithms => list_algorithms(registry),
        Command::BenchEngine {
            ranks,
            bytes,
            chunk,
            repeat,
            network,
            algorithm,
            symmetry,
        } => bench_engine(
            ranks as usize,
            bytes,
            chunk,
            repeat,
            (network.into(), algorithm.into(), symmetry.into()),
        ),
        Command::Bench(args) => crate::real::bench_cmd::bench(&args, &command_line(), registry),
        Command::Calibrate(args) => crate::calibrate::calibrate(&args, &command_line(), registry),
        Command::Validate(args) => crate::validate_cmd::validate(&args, &command_line(), registry),
        Command::Launch(_) => unreachable!("handled above"),
        Command::CheckBench {
            suite,
            max_schedules,
            naive_cap,
        } => crate::check_bench_cmd::check_bench(suite, max_schedules, naive_cap, registry),
        Command::Check(args) => crate::check_cmd::check_command(&args, registry),
        Command::Replay(args) => crate::check_cmd::replay_command(&args, registry),
    };
    status.map(ExitStatus::code)
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
    const PER_RANK: [&str; 9] = [
        "--csv",
        "--out",
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

/// Prints the registry, one algorithm per line.
fn list_algorithms(registry: &Registry) -> io::Result<ExitStatus> {
    let mut out = crate::output::Stdout::new();
    writeln!(
        out,
        "# collective       algorithm            cost (alpha-beta-gamma; n bytes, N ranks)"
    )?;
    for a in registry.iter() {
        let formula = match a.facts().formula() {
            Some(f) => f,
            None if a.facts().runs_nccl_channels() => {
                "(NCCL's tuning model picks it on a topology, with its protocol and channels)"
            }
            None => "(no cost formula: the tuner never picks it)",
        };
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
    Ok(ExitStatus::Success)
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
