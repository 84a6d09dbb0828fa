//! The `sim` command: run scenarios in the simulator.
//!
//! Exit status: 0 success; 1 an I/O error (e.g. the CSV cannot be written);
//! 2 invalid input (command line or scenario); 3 the simulated system
//! deadlocked; 4 a collective produced wrong results; 5 a rank's collective
//! failed with an error.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sim::report::{table_header, table_row, write_csv};
use sim::scenario::{ByteSize, Scenario};
use sim::study::{Failure, run_scenario};

/// mimalloc keeps freed pages for reuse; with the system allocator, the
/// simulator's stream of large, short-lived message buffers is returned to
/// the kernel and faulted in again, which dominated wall time on real-data
/// runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status for an I/O failure of the tool itself.
const EXIT_IO: u8 = 1;
/// Exit status for invalid input.
const EXIT_INPUT: u8 = 2;
/// Exit status when the simulated system deadlocked.
const EXIT_DEADLOCK: u8 = 3;
/// Exit status when a collective's result was wrong.
const EXIT_WRONG: u8 = 4;
/// Exit status when a rank's collective returned an error.
const EXIT_RANK_ERROR: u8 = 5;

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
    },
    /// Benchmark the engine: a phantom ring allreduce, events per second.
    BenchEngine {
        /// Number of ranks.
        #[arg(long, default_value_t = 256)]
        ranks: usize,
        /// Message size (e.g. 64M).
        #[arg(long, default_value = "64M", value_parser = ByteSize::parse)]
        bytes: ByteSize,
        /// Pipeline chunk size.
        #[arg(long, default_value = "512K", value_parser = ByteSize::parse)]
        chunk: ByteSize,
        /// Repetitions.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { scenario, csv } => run(scenario, csv),
        Command::BenchEngine {
            ranks,
            bytes,
            chunk,
            repeat,
        } => bench(ranks, bytes, chunk, repeat),
    }
}

fn run(path: PathBuf, csv: Option<PathBuf>) -> ExitCode {
    let scenario = match Scenario::load(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_INPUT);
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, "# sim run {}", path.display());
    let _ = writeln!(out, "# {scenario}");
    for c in &scenario.collectives {
        let _ = writeln!(
            out,
            "# {} {} {} {}: {}..{} bytes x{}, chunk {} bytes, {} slots, {} warm-up + {} timed iterations{}",
            c.kind.name(),
            c.algorithm.name(),
            c.dtype,
            c.op,
            c.min_bytes,
            c.max_bytes,
            c.step_factor,
            c.chunk_bytes,
            c.slots,
            c.warmup,
            c.iters,
            if c.phantom { ", phantom payloads" } else { "" }
        );
    }
    let _ = write!(out, "#\n{}", table_header());
    let result = run_scenario(&scenario, |row| {
        let _ = out.write_all(table_row(row).as_bytes());
        let _ = out.flush();
    });
    let (rows, failure) = match result {
        Ok(rows) => (rows, None),
        Err((point, failure)) => (Vec::new(), Some((point, failure))),
    };
    if let Some((point, failure)) = failure {
        let _ = writeln!(
            out,
            "# {} at {} bytes did not complete",
            point.collective, point.size_bytes
        );
        return match failure {
            Failure::Deadlock(report) => {
                let _ = write!(out, "{report}");
                eprintln!(
                    "error: {}: the simulated system deadlocked ({} at {} bytes, seed {})",
                    path.display(),
                    point.collective,
                    point.size_bytes,
                    scenario.seed
                );
                ExitCode::from(EXIT_DEADLOCK)
            }
            Failure::RankError { rank, error } => {
                eprintln!("error: {}: rank {rank} failed: {error}", path.display());
                ExitCode::from(EXIT_RANK_ERROR)
            }
        };
    }
    if let Some(csv_path) = csv {
        let written = File::create(&csv_path).and_then(|f| write_csv(BufWriter::new(f), &rows));
        if let Err(e) = written {
            eprintln!("error: {}: cannot write CSV: {e}", csv_path.display());
            return ExitCode::from(EXIT_IO);
        }
    }
    let wrong: u64 = rows.iter().filter_map(|r| r.wrong).sum();
    let _ = writeln!(
        out,
        "# Out of bounds values : {wrong} {}",
        if wrong == 0 { "OK" } else { "FAILED" }
    );
    if wrong > 0 {
        eprintln!(
            "error: {}: {wrong} wrong element(s) (seed {})",
            path.display(),
            scenario.seed
        );
        return ExitCode::from(EXIT_WRONG);
    }
    ExitCode::SUCCESS
}

fn bench(ranks: usize, bytes: ByteSize, chunk: ByteSize, repeat: u32) -> ExitCode {
    if ranks == 0 || chunk.0 == 0 || repeat == 0 {
        eprintln!("error: --ranks, --chunk and --repeat must be at least 1");
        return ExitCode::from(EXIT_INPUT);
    }
    println!(
        "# ring allreduce, phantom float payload, {ranks} ranks, {} bytes, chunk {} bytes",
        bytes.0, chunk.0
    );
    println!(
        "{:>4} {:>12} {:>12} {:>14} {:>14}",
        "rep", "wall (s)", "events", "events/s", "simulated (us)"
    );
    for rep in 0..repeat {
        let r = sim::bench::ring_allreduce_phantom(ranks, bytes.0, chunk.0);
        println!(
            "{:>4} {:>12.4} {:>12} {:>14.0} {:>14.3}",
            rep,
            r.wall_s,
            r.stats.events,
            r.stats.events as f64 / r.wall_s,
            r.simulated_ps as f64 / 1e6
        );
    }
    ExitCode::SUCCESS
}
