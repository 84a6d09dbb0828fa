//! `sim check` and `sim replay`: the command lines, the printed report, the
//! counterexample file and the exit status.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use algorithms::Registry;
use clap::Args;

use super::cex::{CexFile, buffering_name, parse_buffering};
use super::explore::{self, SearchError, Target};
use super::program::Program;
use super::properties::{Baseline, describe_tag, describe_waits, evaluate};
use super::run::{CheckReport, Counterexample, Options, check, min_buffering};
use super::spec::{Buffering, Search, Verdict};
use super::trace::write_trace;
use super::world::{Choice, RankStatus};

/// Exit status: the tool failed (an output could not be written).
pub const EXIT_IO: u8 = 1;
/// Exit status: invalid input.
pub const EXIT_INPUT: u8 = 2;
/// Exit status: a deadlock was found.
pub const EXIT_DEADLOCK: u8 = 3;
/// Exit status: another property was violated.
pub const EXIT_VIOLATION: u8 = 4;
/// Exit status: a rank failed with an error though no fault struck.
pub const EXIT_ERROR: u8 = 5;

/// The exit status for a verdict.
pub fn exit_status(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Verified => 0,
        Verdict::Deadlock => EXIT_DEADLOCK,
        Verdict::Error => EXIT_ERROR,
        _ => EXIT_VIOLATION,
    }
}

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

fn load_program(
    path: &Path,
    args: Option<&CheckArgs>,
    registry: &Registry,
) -> Result<Program, String> {
    let mut program = super::scenario::load(path, registry).map_err(|e| e.to_string())?;
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
pub fn check_command(args: &CheckArgs, registry: &Registry) -> io::Result<u8> {
    let program = match load_program(&args.scenario, Some(args), registry) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INPUT);
        }
    };
    let options = Options {
        compare_naive: args.compare_naive,
        no_shrink: args.no_shrink,
    };
    let mut out = io::stdout().lock();
    if args.min_buffering {
        return min_buffering_command(&program, args, options, &mut out);
    }
    let program = Rc::new(program);
    let report = match check(&program, options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}: {e}", args.scenario.display());
            return Ok(EXIT_INPUT);
        }
    };
    print_report(&program, &report, &mut out)?;
    save_counterexample(&program, &report, args, &mut out)?;
    Ok(exit_status(report.verdict))
}

fn min_buffering_command(
    program: &Program,
    args: &CheckArgs,
    options: Options,
    out: &mut impl Write,
) -> io::Result<u8> {
    let (found, reports) = match min_buffering(program, args.max_slots, options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {}: {e}", args.scenario.display());
            return Ok(EXIT_INPUT);
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
            Ok(0)
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
            Ok(exit_status(last))
        }
    }
}

/// Prints the report: the points, the verdict, the counterexample, the
/// counts.
pub fn print_report(
    program: &Program,
    report: &CheckReport,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "check {} ({} point(s) searched)",
        program.name,
        report.points.len()
    )?;
    for note in &program.notes {
        writeln!(out, "note: {note}")?;
    }
    for p in &report.points {
        let what = match p.violation {
            Some(v) => format!("{v}"),
            None if p.stats.complete() => "ok".into(),
            None => "ok within bounds".into(),
        };
        let secs = p.wall.as_secs_f64();
        let mut line = format!(
            "  {}: {what}, {} schedule(s), {} sleep-blocked, {secs:.3} s ({:.0} schedules/s)",
            p.point,
            p.stats.schedules,
            p.stats.sleep_blocked,
            p.stats.schedules as f64 / secs.max(1e-9)
        );
        if let Some(naive) = &p.naive {
            let at_least = if naive.schedule_cap_hit { ">= " } else { "" };
            let factor = naive.schedules as f64 / (p.stats.schedules.max(1)) as f64;
            line += &format!(
                "; naive {at_least}{} ({at_least}{factor:.1}x fewer with DPOR)",
                naive.schedules
            );
        }
        writeln!(out, "{line}")?;
    }
    let expected = match program.expect {
        Some(e) if e == report.verdict => format!(" (expected {e})"),
        Some(e) => format!(" (NOT the expected {e})"),
        None => String::new(),
    };
    let scope = if report.verdict == Verdict::Verified && !report.complete {
        " within the bounds (the search was not exhaustive)"
    } else {
        ""
    };
    writeln!(out, "verdict: {}{scope}{expected}", report.verdict)?;
    if let Some(cex) = &report.counterexample {
        print_counterexample(program, cex, out)?;
    }
    writeln!(
        out,
        "explored {} schedule(s) in all (shrinking included) in {:.3} s",
        report.schedules,
        report.wall.as_secs_f64()
    )
}

/// A choice as the report prints it: with the call (and phase) its tag
/// belongs to.
pub fn describe_choice(program: &Program, choice: Choice) -> String {
    let tag = match choice {
        Choice::Deliver(k) | Choice::Drop(k) | Choice::Timeout(k) => Some(k.tag),
        _ => None,
    };
    match (tag, choice) {
        (Some(t), _) => match describe_tag(program, t).split_once(" (") {
            Some((_, rest)) => format!("{choice} ({rest}"),
            None => choice.to_string(),
        },
        (None, Choice::Start { call, .. }) => match program.calls.get(call) {
            Some(c) => format!("{choice} (`{}`)", c.id),
            None => choice.to_string(),
        },
        _ => choice.to_string(),
    }
}

/// Prints a counterexample: the violation, the numbered choices, each
/// rank's state at the end.
pub fn print_counterexample(
    program: &Program,
    cex: &Counterexample,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "{}: {}", cex.violation.verdict, cex.violation.summary)?;
    writeln!(
        out,
        "counterexample at {}, {} step(s):",
        cex.point,
        cex.choices.len()
    )?;
    for (i, choice) in cex.choices.iter().enumerate() {
        let mark = if cex.branching.get(i).copied().unwrap_or(false) {
            ""
        } else {
            "   (only choice)"
        };
        writeln!(
            out,
            "  {:>3}. {}{mark}",
            i + 1,
            describe_choice(program, *choice)
        )?;
        if cex.unavoidable_after == Some(i + 1) && i + 1 < cex.choices.len() {
            writeln!(out, "       -- from here on, every schedule fails --")?;
        }
    }
    match cex.unavoidable_after {
        Some(0) => writeln!(
            out,
            "failure is unavoidable from the start: every schedule fails"
        )?,
        Some(k) => writeln!(out, "failure became unavoidable after step {k}")?,
        None => {}
    }
    writeln!(out, "at the end:")?;
    for line in &cex.final_state {
        writeln!(out, "  {line}")?;
    }
    for line in &cex.violation.details {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

fn save_counterexample(
    program: &Program,
    report: &CheckReport,
    args: &CheckArgs,
    out: &mut impl Write,
) -> io::Result<()> {
    let Some(cex) = &report.counterexample else {
        return Ok(());
    };
    if args.no_save {
        return Ok(());
    }
    let path = args
        .save
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.cex.toml", program.name)));
    let file = CexFile::new(
        &args.scenario,
        cex.violation.verdict,
        &cex.violation.summary,
        cex.point,
        &cex.choices,
    );
    match file.save(&path) {
        Ok(()) => writeln!(
            out,
            "saved: {} (re-run it: sim replay {})",
            path.display(),
            path.display()
        ),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// Runs `sim replay` with the algorithms of `registry` (and the
/// demonstration algorithms); returns the exit status.
pub fn replay_command(args: &ReplayArgs, registry: &Registry) -> io::Result<u8> {
    let mut out = io::stdout().lock();
    let file = match CexFile::load(&args.file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INPUT);
        }
    };
    let (point, choices, verdict) = match file.decode(&args.file) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_INPUT);
        }
    };
    // The scenario path as given to `sim check`, else beside the file.
    let mut scenario = file.scenario.clone();
    if let (false, Some(dir)) = (scenario.exists(), args.file.parent()) {
        scenario = dir.join(&file.scenario);
    }
    let program = match load_program(&scenario, None, registry) {
        Ok(p) => Rc::new(p),
        Err(e) => {
            eprintln!("error: {}: scenario: {e}", args.file.display());
            return Ok(EXIT_INPUT);
        }
    };
    if point.world_size > 64 {
        eprintln!(
            "error: {}: world_size {} is too large",
            args.file.display(),
            point.world_size
        );
        return Ok(EXIT_INPUT);
    }
    let target = Target {
        program: &program,
        point,
        faults: program.faults,
        bounds: program.bounds,
    };
    let mut baseline = Baseline::default();
    if verdict == Verdict::Nondeterministic {
        // The determinism property compares with the default schedule.
        match explore::replay(&target, &[]) {
            Ok(mut exec) => {
                while let Some(&c) = exec.enabled().first() {
                    exec.apply(c);
                }
                let _ = evaluate(&program, point, &exec, false, &mut baseline);
            }
            Err(e) => {
                eprintln!("error: {}: {e}", args.file.display());
                return Ok(EXIT_INPUT);
            }
        }
    }
    let exec = match explore::replay(&target, &choices) {
        Ok(e) => e,
        Err(SearchError::Diverged { step, choice }) => {
            eprintln!(
                "error: {}: choice {} ({choice}) is not possible at that point of {}: the file does not match the scenario (edited, or the scenario or the algorithms changed since it was saved)",
                args.file.display(),
                step + 1,
                scenario.display()
            );
            return Ok(EXIT_INPUT);
        }
    };
    let violation = evaluate(&program, point, &exec, false, &mut baseline);
    writeln!(
        out,
        "replay {} at {point}, {} step(s)",
        program.name,
        choices.len()
    )?;
    for (i, &c) in choices.iter().enumerate() {
        writeln!(out, "  {:>3}. {}", i + 1, describe_choice(&program, c))?;
    }
    let world = exec.world.borrow();
    let mut state = describe_waits(&program, &world);
    for (r, rank) in world.ranks.iter().enumerate() {
        match &rank.status {
            RankStatus::Running => {}
            RankStatus::Finished(None) => state.push(format!("rank {r} finished")),
            RankStatus::Finished(Some(c)) => state.push(format!("rank {r} failed: {c}")),
            RankStatus::Crashed(c) => state.push(format!("rank {r} stopped: {c}")),
        }
    }
    drop(world);
    writeln!(out, "at the end:")?;
    for line in &state {
        writeln!(out, "  {line}")?;
    }
    if let Some(path) = &args.trace {
        let written = std::fs::File::create(path)
            .map(io::BufWriter::new)
            .and_then(|w| write_trace(&exec, &state, w));
        if let Err(e) = written {
            eprintln!("error: {}: cannot write trace: {e}", path.display());
            return Ok(EXIT_IO);
        }
        writeln!(out, "trace: {}", path.display())?;
    }
    let found = violation.as_ref().map_or(Verdict::Verified, |v| v.verdict);
    match &violation {
        Some(v) => {
            writeln!(out, "{}: {}", v.verdict, v.summary)?;
            for line in &v.details {
                writeln!(out, "  {line}")?;
            }
        }
        None => writeln!(out, "verified: no property fails on this schedule")?,
    }
    if found != verdict {
        writeln!(out, "the file says {verdict}, the replay found {found}")?;
        return Ok(EXIT_IO);
    }
    Ok(exit_status(found))
}
