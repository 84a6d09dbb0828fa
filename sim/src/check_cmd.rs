//! `sim check` and `sim replay`: the command lines, the counterexample
//! file and the exit status, around the `checker` crate (which searches,
//! prints reports and replays).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use algorithms::Registry;
use checker::cex::{CexFile, buffering_name, parse_buffering};
use checker::program::Program;
use checker::replay::replay_file;
use checker::report::{describe_choice, print_counterexample, print_report};
use checker::run::{CheckReport, Options, check, min_buffering};
use checker::spec::{Buffering, Search, Verdict};
use checker::trace::write_trace;
use clap::Args;

use crate::exit::ExitStatus;
use crate::output::{Named, OutputFile, Stdout, check_paths};

/// `sim check`'s options.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The check scenario (TOML; see scenarios/check/).
    pub scenario: PathBuf,
    /// Run N seeded random schedules per point instead of the exhaustive search.
    #[arg(long, value_name = "N", conflicts_with = "pct")]
    pub random: Option<u64>,
    /// Run N PCT schedules per point (random priorities, --depth - 1 change points).
    #[arg(long, value_name = "N")]
    pub pct: Option<u64>,
    /// The bug depth PCT targets.
    #[arg(long, value_name = "D", default_value_t = 3, requires = "pct")]
    pub depth: usize,
    /// The seed of --random and --pct.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Most schedules per point (overrides the scenario).
    #[arg(long, value_name = "N")]
    pub max_schedules: Option<u64>,
    /// Most steps per schedule (overrides the scenario).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// Most deviations from the default schedule (overrides the scenario).
    #[arg(long, value_name = "N")]
    pub delay_bound: Option<usize>,
    /// Send buffering for every point: eager:K, rendezvous or unbounded
    /// (overrides the scenario's axis).
    #[arg(long, value_name = "MODE", value_parser = parse_buffering)]
    pub buffering: Option<Buffering>,
    /// Find the fewest eager slots per connection with which the check
    /// passes (trying 0, 1, ... up to --max-slots).
    #[arg(long)]
    pub min_buffering: bool,
    /// The largest capacity --min-buffering tries.
    #[arg(long, value_name = "K", default_value_t = 16)]
    pub max_slots: usize,
    /// Also run the naive search (every interleaving, up to
    /// --max-schedules) to count what the reduction pruned (small points
    /// get a naive count of up to 5000 schedules anyway).
    #[arg(long)]
    pub compare_naive: bool,
    /// Report the first counterexample found without shrinking it.
    #[arg(long)]
    pub no_shrink: bool,
    /// Where to save the counterexample (default: NAME.cex.toml here).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Do not save the counterexample.
    #[arg(long, conflicts_with = "save")]
    pub no_save: bool,
}

/// `sim replay`'s options.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// A counterexample file written by `sim check`.
    pub file: PathBuf,
    /// Write a Chrome trace (JSON) of the schedule to this file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// The check scenario at `path`, with the command line's overrides.
fn load_program(
    path: &Path,
    args: Option<&CheckArgs>,
    registry: &Registry,
) -> Result<Program, String> {
    let mut program = checker::scenario::load(path, registry).map_err(|e| e.to_string())?;
    if let Some(args) = args {
        if let Some(n) = args.random {
            program.search = Search::Random {
                schedules: n,
                seed: args.seed,
            };
        }
        if let Some(n) = args.pct {
            program.search = Search::Pct {
                schedules: n,
                seed: args.seed,
                depth: args.depth.max(1),
            };
        }
        if let Some(n) = args.max_schedules {
            program.bounds.max_schedules = n.max(1);
        }
        if let Some(n) = args.max_depth {
            program.bounds.max_depth = n.max(1);
        }
        if args.delay_bound.is_some() {
            program.bounds.delay_bound = args.delay_bound;
        }
        if let Some(b) = args.buffering {
            program.axes.buffering = vec![b];
        }
    }
    Ok(program)
}

/// Runs `sim check` with the algorithms of `registry` (and the
/// demonstration algorithms); returns the exit status.
pub fn check_command(args: &CheckArgs, registry: &Registry) -> io::Result<ExitStatus> {
    let program = match load_program(&args.scenario, Some(args), registry) {
        Ok(p) => p,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    if !args.no_save {
        let save = save_path(&program, args);
        let input = Named {
            name: "the check scenario",
            path: &args.scenario,
        };
        let output = Named {
            name: "the counterexample file",
            path: &save,
        };
        if let Err(e) = check_paths(&[input], &[output]) {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    }
    let options = Options {
        compare_naive: args.compare_naive,
        no_shrink: args.no_shrink,
    };
    let mut out = Stdout::new();
    if args.min_buffering {
        return min_buffering_command(&program, args, options, &mut out);
    }
    let program = Rc::new(program);
    let report = match check(&program, options) {
        Ok(r) => r,
        Err(e) => {
            crate::report!("error: {}: {e}", args.scenario.display());
            return Ok(ExitStatus::InvalidInput);
        }
    };
    print_report(&program, &report, &mut out)?;
    if let Err(e) = save_counterexample(&program, &report, args, &mut out)? {
        crate::report!("error: {e}");
        return Ok(ExitStatus::ToolFailed);
    }
    Ok(ExitStatus::of_verdict(report.verdict))
}

/// Where `sim check` saves its counterexample: `--save`, else
/// `NAME.cex.toml` here.
fn save_path(program: &Program, args: &CheckArgs) -> PathBuf {
    args.save
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.cex.toml", program.name)))
}

/// `sim check --min-buffering`: the fewest eager slots with which the
/// check passes.
fn min_buffering_command(
    program: &Program,
    args: &CheckArgs,
    options: Options,
    out: &mut impl Write,
) -> io::Result<ExitStatus> {
    let (found, reports) = match min_buffering(program, args.max_slots, options) {
        Ok(r) => r,
        Err(e) => {
            crate::report!("error: {}: {e}", args.scenario.display());
            return Ok(ExitStatus::InvalidInput);
        }
    };
    writeln!(
        out,
        "check {}: smallest send buffering that completes",
        program.name
    )?;
    for (slots, report) in &reports {
        let mode = buffering_name(Buffering::Eager(*slots));
        writeln!(
            out,
            "  {mode:<12} {} ({} schedules)",
            report.verdict, report.schedules
        )?;
    }
    match found {
        Some(k) => {
            writeln!(out, "minimum: {k} eager slot(s) per connection")?;
            if let Some((below, report)) = reports.iter().rev().nth(1) {
                writeln!(
                    out,
                    "below it ({}):",
                    buffering_name(Buffering::Eager(*below))
                )?;
                if let Some(cex) = &report.counterexample {
                    print_counterexample(program, cex, out)?;
                }
            }
            Ok(ExitStatus::Success)
        }
        None => {
            writeln!(
                out,
                "no capacity up to {} slot(s) completes",
                args.max_slots
            )?;
            let last = reports
                .last()
                .map(|(_, r)| r.verdict)
                .unwrap_or(Verdict::Deadlock);
            Ok(ExitStatus::of_verdict(last))
        }
    }
}

/// Saves the report's counterexample (unless `--no-save`) and says where
/// on `out`; the inner error is the file's, the outer stdout's.
fn save_counterexample(
    program: &Program,
    report: &CheckReport,
    args: &CheckArgs,
    out: &mut impl Write,
) -> io::Result<Result<(), String>> {
    let Some(cex) = &report.counterexample else {
        return Ok(Ok(()));
    };
    if args.no_save {
        return Ok(Ok(()));
    }
    let path = save_path(program, args);
    let file = CexFile::new(
        &args.scenario,
        cex.violation.verdict,
        &cex.violation.summary,
        cex.point,
        &cex.choices,
    );
    let saved = file
        .text(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            let mut f = OutputFile::create(&path, "counterexample").map_err(|e| e.to_string())?;
            f.write_all(text.as_bytes())
                .map_err(|e| f.error(e))
                .and_then(|()| f.commit())
                .map_err(|e| e.to_string())
        });
    if let Err(e) = saved {
        return Ok(Err(e));
    }
    writeln!(
        out,
        "saved: {} (re-run it: sim replay {})",
        path.display(),
        path.display()
    )?;
    Ok(Ok(()))
}

/// Runs `sim replay` with the algorithms of `registry` (and the
/// demonstration algorithms); returns the exit status: the verdict's, or
/// 1 when the replay finds another verdict than the file's.
pub fn replay_command(args: &ReplayArgs, registry: &Registry) -> io::Result<ExitStatus> {
    if let Some(trace) = &args.trace {
        // The file and the check scenario it names are inputs.
        let scenario = CexFile::load(&args.file).ok().map(|f| f.scenario);
        let mut inputs = vec![Named {
            name: "the counterexample file",
            path: &args.file,
        }];
        inputs.extend(scenario.as_deref().map(|path| Named {
            name: "its check scenario",
            path,
        }));
        let output = Named {
            name: "--trace",
            path: trace,
        };
        if let Err(e) = check_paths(&inputs, &[output]) {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    }
    let mut out = Stdout::new();
    let replayed = match replay_file(&args.file, registry) {
        Ok(r) => r,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    writeln!(
        out,
        "replay {} at {}, {} step(s)",
        replayed.program.name,
        replayed.point,
        replayed.choices.len()
    )?;
    for (i, &c) in replayed.choices.iter().enumerate() {
        writeln!(
            out,
            "  {:>3}. {}",
            i + 1,
            describe_choice(&replayed.program, c)
        )?;
    }
    writeln!(out, "at the end:")?;
    for line in &replayed.state {
        writeln!(out, "  {line}")?;
    }
    let mut trace_error = None;
    if let Some(path) = &args.trace {
        let written = OutputFile::create(path, "trace").and_then(|mut f| {
            write_trace(&replayed.exec, &replayed.state, &mut f).map_err(|e| f.error(e))?;
            f.commit()
        });
        match written {
            Ok(()) => writeln!(out, "trace: {}", path.display())?,
            Err(e) => trace_error = Some(e),
        }
    }
    match &replayed.violation {
        Some(v) => {
            writeln!(out, "{}: {}", v.verdict, v.summary)?;
            for line in &v.details {
                writeln!(out, "  {line}")?;
            }
        }
        None => writeln!(out, "verified: no property fails on this schedule")?,
    }
    if let Some(e) = trace_error {
        crate::report!("error: {e}");
        return Ok(ExitStatus::ToolFailed);
    }
    let found = replayed.found();
    if found != replayed.saved {
        writeln!(
            out,
            "the file says {}, the replay found {found}",
            replayed.saved
        )?;
        return Ok(ExitStatus::ToolFailed);
    }
    Ok(ExitStatus::of_verdict(found))
}
