//! `sim bench`: nccl-tests on a real fabric, printing `sim run`'s columns.
//!
//! Every rank of the job runs the same command (a launcher starts them:
//! `sim launch`, srun, mpirun, torchrun); rank 0 prints the table and
//! writes the CSV. With `--fabric threads` the ranks are threads of one
//! process and no launcher is needed.

use std::io::{self, Write};
use std::path::PathBuf;

use algorithms::{Collective, CollectiveError, DType, Params, ReduceOp, Registry};
use engine::report::{table_header, table_row, write_csv};
use engine::scenario::ByteSize;
use engine::study::Row;
use engine::tuning::AlgoFilter;
use realnet::Endpoint;
use realnet::bench::{AlgorithmChoice, BenchOptions, BenchRow, run_bench};
use realnet::connect::{FabricKind, RankJob, with_fabric};
use realnet::launch::RankEnv;
use realnet::memory::check_memory;

use super::job::{JobArgs, JobSetup};
use super::table::{footer, to_median_row, to_row};
use crate::exit::ExitStatus;
use crate::output::{OutputFile, Stdout};

/// `sim bench`'s flags, nccl-tests' where it has them.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Smallest size (nccl-tests -b), e.g. 8, 64K, 32M.
    #[arg(short = 'b', long = "minbytes", value_name = "SIZE", default_value = "32M", value_parser = ByteSize::parse)]
    pub min_bytes: ByteSize,
    /// Largest size (-e).
    #[arg(short = 'e', long = "maxbytes", value_name = "SIZE", default_value = "32M", value_parser = ByteSize::parse)]
    pub max_bytes: ByteSize,
    /// Multiply the size by this each step (-f).
    #[arg(short = 'f', long = "stepfactor", value_name = "F", default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    pub step_factor: u64,
    /// Timed iterations per size (-n).
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub iters: u32,
    /// Untimed warm-up iterations per size (-w).
    #[arg(short = 'w', long = "warmup", value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub warmup: u32,
    /// Check results (-c 1) or not (-c 0).
    #[arg(short = 'c', long = "check", value_name = "0|1", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub check: u8,
    /// The collective.
    #[arg(long, value_name = "NAME", default_value = "allreduce", value_parser = parse_collective)]
    pub collective: Collective,
    /// The algorithm, or auto for the tuner (restricted by NCCL_ALGO).
    #[arg(long, value_name = "NAME|auto", default_value = "auto", value_parser = parse_algorithm)]
    pub algorithm: AlgorithmArg,
    /// The reduction: sum, prod, min, max, avg (-o).
    #[arg(short = 'o', long, value_name = "OP", default_value = "sum", value_parser = parse_op)]
    pub op: ReduceOp,
    /// The element type: float, double, int32, int64, uint8 (-d).
    #[arg(short = 'd', long, value_name = "TYPE", default_value = "float", value_parser = parse_dtype)]
    pub dtype: DType,
    /// The root of rooted collectives (-r).
    #[arg(short = 'r', long, value_name = "RANK", default_value_t = 0)]
    pub root: usize,
    /// Pipeline chunk of a named algorithm (the tuner picks its own).
    #[arg(long, value_name = "SIZE", default_value = "512K", value_parser = ByteSize::parse)]
    pub chunk: ByteSize,
    /// Chunks in flight per connection.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub slots: u16,
    /// Ranks per node, for the hierarchical allreduce.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub ranks_per_node: u32,
    /// Number of ranks with --fabric threads (a launcher sets the world
    /// size of the other fabrics).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub ranks: Option<u16>,
    /// Also write the rows as CSV to this file (rank 0).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The fabric and the rendezvous.
    #[command(flatten)]
    pub job: JobArgs,
}

/// A named algorithm (resolved in the registry once the collective is
/// known) or the tuner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgorithmArg(pub Option<String>);

fn parse_algorithm(text: &str) -> Result<AlgorithmArg, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(AlgorithmArg(None));
    }
    Ok(AlgorithmArg(Some(text.to_string())))
}

fn parse_collective(text: &str) -> Result<Collective, String> {
    text.parse()
}

fn parse_op(text: &str) -> Result<ReduceOp, String> {
    text.parse()
}

fn parse_dtype(text: &str) -> Result<DType, String> {
    text.parse()
}

/// Runs `sim bench` with the algorithms of `registry`.
pub fn bench(args: &BenchArgs, command: &str, registry: &Registry) -> io::Result<ExitStatus> {
    realnet::launcher::watch_launcher();
    let input_error = |message: String| {
        crate::report!("error: {message}");
        Ok(ExitStatus::InvalidInput)
    };
    let JobSetup {
        env,
        kind,
        world_size,
    } = match args.job.setup(args.ranks) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    let filter = match AlgoFilter::from_env(|v| std::env::var(v).ok(), registry) {
        Ok(f) => f,
        Err(e) => return input_error(e),
    };
    let algorithm = match &args.algorithm.0 {
        Some(name) => match registry.find(args.collective, name) {
            Ok(a) => AlgorithmChoice::Fixed(a),
            Err(e) => return input_error(e.to_string()),
        },
        None => AlgorithmChoice::Tuned {
            model: kind.tuner_model(),
            allowed: filter.allowed(registry.of(args.collective)),
            fallback: registry.of(args.collective).cloned().collect(),
        },
    };
    let options = BenchOptions {
        collective: args.collective,
        algorithm,
        op: args.op,
        dtype: args.dtype,
        min_bytes: args.min_bytes.0,
        max_bytes: args.max_bytes.0,
        step_factor: args.step_factor,
        iters: args.iters,
        warmup: args.warmup,
        check: args.check == 1,
        time_each_call: false,
        params: Params {
            chunk_bytes: args.chunk.0,
            slots: usize::from(args.slots),
            root: args.root,
            ranks_per_node: args.ranks_per_node as usize,
            ..Params::default()
        },
    };
    if let Err(e) = options.validate(world_size) {
        return input_error(e);
    }
    let ranks_here = if kind.in_process() { world_size } else { 1 };
    if let Err(e) = check_memory(options.max_bytes, ranks_here) {
        return input_error(e);
    }
    let prints = env.rank == 0;
    let csv = match (&args.csv, prints) {
        (Some(path), true) => match OutputFile::create(path, "CSV") {
            Ok(f) => Some(f),
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(ExitStatus::ToolFailed);
            }
        },
        _ => None,
    };
    let algorithm = match &options.algorithm {
        AlgorithmChoice::Fixed(a) => a.name().to_string(),
        AlgorithmChoice::Tuned { .. } => {
            let m = kind.tuner_model();
            let restricted = filter
                .source
                .as_ref()
                .map_or(String::new(), |v| format!(", NCCL_ALGO={v}"));
            format!(
                "auto (tuner, assuming {} us and {} GB/s per link{restricted})",
                m.latency_ps as f64 / 1e6,
                m.bandwidth_bytes_per_s / 1e9
            )
        }
    };
    let header = format!(
        "# sim bench on {kind}: {}\n# {} {}{}, {}..{} bytes x{}, algorithm {algorithm}, {} warm-up + {} timed iterations, check {}\n\
         # time: per call, the slowest rank's mean over the timed calls\n",
        if kind.in_process() {
            format!("{world_size} thread ranks")
        } else {
            env.describe()
        },
        args.collective,
        args.dtype,
        if args.collective.reduces() {
            format!(" {}", args.op)
        } else {
            String::new()
        },
        args.min_bytes.0,
        args.max_bytes.0,
        args.step_factor,
        args.warmup,
        args.iters,
        if args.check == 1 { "on" } else { "off" }
    );
    let job = SectionsJob {
        sections: vec![Section { header, options }],
        median: false,
    };
    let outcome = run_job(
        kind,
        &env,
        world_size,
        args.job.interface.as_deref(),
        (command, registry),
        &job,
        csv,
    );
    Ok(outcome)
}

/// One table of a job: its comment lines and what to run.
pub struct Section {
    /// Comment lines printed before the table header (each ending in a newline).
    pub header: String,
    /// What to benchmark.
    pub options: BenchOptions,
}

/// What every rank runs: each section in turn, on one endpoint, calls
/// numbered across sections; rank 0 prints the tables.
pub struct SectionsJob {
    /// The tables, in order.
    pub sections: Vec<Section>,
    /// Whether a row's time is the median call's
    /// ([`to_median_row`]) rather than the mean, nccl-tests' figure.
    pub median: bool,
}

impl RankJob for SectionsJob {
    /// The rank's exit status so far and the rows it completed.
    type Output = (ExitStatus, Vec<BenchRow>);

    fn run<E: Endpoint>(&self, endpoint: &E) -> (ExitStatus, Vec<BenchRow>) {
        let rank = endpoint.rank();
        let say = |text: &str| {
            if rank == 0 {
                print(text);
            }
        };
        let mut seq = 1;
        let mut rows = Vec::new();
        for s in &self.sections {
            say(&format!("{}{}", s.header, table_header()));
            let row_of = if self.median { to_median_row } else { to_row };
            match run_bench(endpoint, &s.options, seq, |row| {
                say(&table_row(&row_of(row)))
            }) {
                Ok((done, next)) => {
                    rows.extend(done);
                    seq = next;
                }
                Err(e) => {
                    say(&format!(
                        "# {} at {} bytes did not complete\n",
                        e.during, e.size_bytes
                    ));
                    crate::report!("error: rank {rank}: {e}");
                    return (ExitStatus::of_collective_error(&e.error), rows);
                }
            }
        }
        if let Err(e) = endpoint.finish() {
            crate::report!("error: rank {rank}: finishing: {e}");
            return (
                ExitStatus::of_collective_error(&CollectiveError::Fabric(e)),
                rows,
            );
        }
        (ExitStatus::Success, rows)
    }
}

/// Writes to stdout; a rank's table is not worth stopping a job for, so
/// a write error is ignored (a closed reader always is).
fn print(text: &str) {
    let mut out = Stdout::new();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Connects and runs `job`; this process's rank 0 (if it has it) prints
/// the footer and writes `csv`. Returns the exit status: the first failed
/// rank's (in rank order), else [`ExitStatus::WrongResult`] if any
/// element was wrong.
pub fn run_job(
    kind: FabricKind,
    env: &RankEnv,
    world_size: usize,
    interface: Option<&str>,
    (command, registry): (&str, &Registry),
    job: &SectionsJob,
    csv: Option<OutputFile>,
) -> ExitStatus {
    let outputs = match with_fabric(kind, env, world_size, interface, (command, registry), job) {
        Ok(outputs) => outputs,
        Err(e) => {
            crate::report!("error: rank {}: {}", env.rank, e.message);
            return ExitStatus::of_setup(e.failure);
        }
    };
    let failed = outputs
        .iter()
        .map(|(status, _)| *status)
        .find(|&s| s != ExitStatus::Success);
    let Some((_, rows)) = outputs.into_iter().next() else {
        return ExitStatus::Success;
    };
    let rows: Vec<Row> = rows.iter().map(to_row).collect();
    if env.rank != 0 {
        return failed.unwrap_or(ExitStatus::Success);
    }
    if let Some(status) = failed {
        return status;
    }
    print(&footer(&rows));
    if let Some(mut file) = csv {
        let written = write_csv(&mut file, &rows)
            .map_err(|e| file.error(e))
            .and_then(|()| file.commit());
        if let Err(e) = written {
            crate::report!("error: {e}");
            return ExitStatus::ToolFailed;
        }
    }
    let wrong: u64 = rows.iter().filter_map(|r| r.wrong).sum();
    if wrong > 0 {
        crate::report!("error: {wrong} wrong element(s) over all ranks");
        return ExitStatus::WrongResult;
    }
    ExitStatus::Success
}
