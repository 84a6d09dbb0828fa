//! `sim calibrate`: microbenchmarks on a real fabric, the simulator's
//! parameters fitted to them, and a calibration file a scenario includes
//! (`[calibration] file = "..."`, see `engine::calibration`).
//!
//! Every rank of the job runs the command (under `sim launch`, srun,
//! torchrun or mpirun, like `sim bench`); rank 0 fits, runs the same
//! probes on the fitted simulator for the residuals, prints both and
//! writes the file.
//!
//! - [`probe`]: the microbenchmarks, over any fabric.
//! - [`fit`](mod@fit): the fit and its residuals.
//! - [`sharing`]: the rate all ranks share, when they share a machine.
//! - [`software`]: the per-message receive and per-call software costs.
//! - [`host`]: the host facts a calibration records.
//! - [`refit`](mod@refit): the fit made again from a file's measurements.

pub mod fit;
pub mod host;
pub mod probe;
pub mod refit;
pub mod sharing;
pub mod software;

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;

use algorithms::{CollectiveError, Registry, Time};
use engine::calibration::{About, Calibration, FORMAT};
use engine::scenario::ByteSize;
use realnet::Endpoint;
use realnet::call::CallId;
use realnet::connect::{RankJob, with_fabric};

use self::fit::{Sample, fit, residuals, simulate, simulated_link};
use self::probe::{CALLS, Plan, Probe, calls_start, halves, run_once, shift_round};
use crate::exit::ExitStatus;
use crate::output::{OutputFile, Stdout};
use crate::real::job::{JobArgs, JobSetup};

/// The call kind of every probe's messages (no algorithm's: a message of a
/// probe is never taken for a collective's).
pub const PROBE_CALL_KIND: u16 = 0xCA1B;

/// `sim calibrate`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Where rank 0 writes the calibration file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Measure nothing: fit again the measurements of this calibration
    /// file (with this build's fit) and write the result to --out.
    #[arg(long, value_name = "FILE")]
    pub refit: Option<PathBuf>,
    /// The largest message (and reduction) measured.
    #[arg(long, value_name = "SIZE", default_value = "4M", value_parser = ByteSize::parse)]
    pub max_bytes: ByteSize,
    /// Timed runs of each probe (the median is kept).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// Number of ranks with --fabric threads.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub ranks: Option<u16>,
    /// The fabric and the rendezvous.
    #[command(flatten)]
    pub job: JobArgs,
}

/// What every rank runs: the plan's probes, then its host identity sent
/// to rank 0.
struct ProbeJob {
    plan: Plan,
}

/// A rank's result: rank 0's samples and the number of distinct hosts.
type ProbeOutput = Result<(Vec<Sample>, usize), CollectiveError>;

impl RankJob for ProbeJob {
    type Output = ProbeOutput;

    fn run<E: Endpoint>(&self, endpoint: &E) -> ProbeOutput {
        let mut seq = 0;
        let mut call = |e: &E| {
            seq += 1;
            e.begin_call(CallId {
                seq,
                kind: PROBE_CALL_KIND,
            })
        };
        let mut samples = Vec::new();
        for &probe in &self.plan.probes {
            let mut times = Vec::new();
            for run in 0..self.plan.warmup + self.plan.reps {
                call(endpoint)?;
                let Time(t) = match probe {
                    Probe::Calls { bytes } => {
                        // Each round its own call, as a collective's calls.
                        let buf = &mut halves(bytes, false);
                        let Time(start) = endpoint.block_on(calls_start(endpoint, false))?;
                        for round in 0..CALLS {
                            call(endpoint)?;
                            endpoint.block_on(shift_round(endpoint, buf, round))?;
                        }
                        Time(endpoint.now().0.saturating_sub(start) / u64::from(CALLS))
                    }
                    _ => endpoint.block_on(run_once(endpoint, probe, false))?,
                };
                if run >= self.plan.warmup {
                    times.push(t as f64);
                }
            }
            samples.push(Sample {
                probe,
                time_ps: fit::median(&mut times) as u64,
            });
        }
        call(endpoint)?;
        let hosts = endpoint.block_on(host::count_hosts(endpoint))?;
        endpoint.finish()?;
        Ok((samples, hosts))
    }
}

/// Runs `sim calibrate`.
pub fn calibrate(
    args: &CalibrateArgs,
    command: &str,
    registry: &Registry,
) -> io::Result<ExitStatus> {
    if let Some(path) = &args.refit {
        return refit::refit(path, &args.out, command);
    }
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
    if args.max_bytes.0 < 1024 {
        return input_error(format!(
            "--max-bytes {} is too small: the fit needs message sizes from 8 B to at least 1K",
            args.max_bytes.0
        ));
    }
    if world_size < 2 {
        return input_error(
            "calibration needs at least 2 ranks (3 or more also measure concurrent flows)".into(),
        );
    }
    let ranks_here = if kind.in_process() { world_size } else { 1 };
    if let Err(e) = realnet::memory::check_memory(args.max_bytes.0.saturating_mul(2), ranks_here) {
        return input_error(e);
    }
    let out = match (env.rank == 0).then(|| OutputFile::create(&args.out, "calibration")) {
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
        None => None,
    };
    let mut plan = Plan::standard(args.max_bytes.0, world_size);
    plan.reps = args.reps;
    let job = ProbeJob { plan };
    let interface = args.job.interface.as_deref();
    let outputs = match with_fabric(kind, &env, world_size, interface, (command, registry), &job) {
        Ok(o) => o,
        Err(e) => {
            crate::report!("error: rank {}: {}", env.rank, e.message);
            return Ok(ExitStatus::of_setup(e.failure));
        }
    };
    let mut first = None;
    for (i, o) in outputs.into_iter().enumerate() {
        match o {
            Ok(done) => {
                first.get_or_insert(done);
            }
            Err(e) => {
                crate::report!("error: rank {}: calibration: {e}", env.rank + i);
                return Ok(ExitStatus::of_collective_error(&e));
            }
        }
    }
    let (Some(out), Some((samples, hosts))) = (out, first) else {
        return Ok(ExitStatus::Success);
    };
    let host = host::facts(kind, interface, hosts);
    let about = About {
        format: FORMAT,
        fabric: kind.name().to_string(),
        ranks: world_size,
        command: command.to_string(),
    };
    write_calibration(out, about, host, &samples, world_size)
}

/// Fits `samples`, prints the table and writes the file.
fn write_calibration(
    out: OutputFile,
    about: About,
    host: engine::calibration::HostFacts,
    samples: &[Sample],
    world_size: usize,
) -> io::Result<ExitStatus> {
    let calibration = match fitted(about, host, samples, world_size) {
        Ok(c) => c,
        Err(e) => {
            crate::report!("error: calibration: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    };
    write_fitted(out, &calibration)
}

/// Prints `calibration`'s summary and writes it to `out`.
fn write_fitted(mut out: OutputFile, calibration: &Calibration) -> io::Result<ExitStatus> {
    let mut stdout = Stdout::new();
    let _ = stdout.write_all(summary(calibration).as_bytes());
    let written = out
        .write_all(calibration.to_toml().as_bytes())
        .map_err(|e| out.error(e))
        .and_then(|()| out.commit());
    if let Err(e) = written {
        crate::report!("error: {e}");
        return Ok(ExitStatus::ToolFailed);
    }
    Ok(ExitStatus::Success)
}

/// The calibration of `samples`: the fit, and the probes run on the
/// fitted simulator for the residuals.
pub fn fitted(
    about: About,
    host: engine::calibration::HostFacts,
    samples: &[Sample],
    world_size: usize,
) -> Result<Calibration, String> {
    let model = fit(samples, world_size).map_err(|e| e.to_string())?;
    let link = simulated_link(&model)?;
    let probes: Vec<Probe> = samples.iter().map(|s| s.probe).collect();
    let reduce = |d: algorithms::DType| model.reduce_gb_per_s.get(d.name()).map(|g| g * 1e9);
    let simulated = simulate(&probes, world_size, link, model.call_overhead_ps(), reduce)?;
    let (measurements, fit) = residuals(samples, &simulated, world_size);
    Ok(Calibration {
        calibration: about,
        host,
        model,
        fit,
        measurements,
    })
}

/// What `sim calibrate` prints: the fitted parameters and each
/// measurement beside its fitted time.
pub fn summary(c: &Calibration) -> String {
    let m = &c.model;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# sim calibrate on {} ({} ranks, {} host(s), {} cores, {} NUMA node(s), {})",
        c.calibration.fabric,
        c.calibration.ranks,
        c.host.hosts,
        c.host.cores,
        c.host.numa_nodes,
        c.host.interface
    );
    let _ = writeln!(
        s,
        "# fitted: latency {:.3} us, bandwidth {:.3} GB/s per pair, overhead {:.3} us per message \
         sent and {:.3} us per message received, {:.3} us per call, injection {}, shared {}",
        m.latency_us,
        m.bandwidth_gb_per_s,
        m.overhead_us,
        m.receive_overhead_us,
        m.call_overhead_us,
        m.injection_gb_per_s
            .map_or("unlimited".to_string(), |i| format!("{i:.3} GB/s per rank")),
        m.shared_gb_per_s.map_or("nothing".to_string(), |s| format!(
            "{s:.3} GB/s by all ranks"
        ))
    );
    let rates: Vec<String> = m
        .reduce_gb_per_s
        .iter()
        .map(|(d, r)| format!("{d} {r:.2}"))
        .collect();
    let _ = writeln!(s, "# reduction GB/s: {}", rates.join(", "));
    let _ = writeln!(
        s,
        "{:>9} {:>10} {:>5} {:>5} {:>6} {:>12} {:>12} {:>9}",
        "probe", "bytes", "msgs", "peers", "dtype", "measured_us", "fitted_us", "resid_%"
    );
    for r in &c.measurements {
        let _ = writeln!(
            s,
            "{:>9} {:>10} {:>5} {:>5} {:>6} {:>12.3} {:>12.3} {:>9.2}",
            r.probe,
            r.bytes,
            r.messages,
            r.peers,
            r.dtype.as_deref().unwrap_or("-"),
            r.measured_us,
            r.fitted_us,
            r.residual_pct
        );
    }
    let _ = writeln!(
        s,
        "# residuals: median |{:.2}|%, worst |{:.2}|%",
        c.fit.median_abs_residual_pct, c.fit.worst_abs_residual_pct
    );
    s
}
