//! The check as people read it: the report of a search
//! ([`print_report`]), a counterexample's numbered choices and final state
//! ([`print_counterexample`]), a choice named by its call and phase
//! ([`describe_choice`]).

use std::io::{self, Write};

use crate::explore::SearchStats;
use crate::program::Program;
use crate::properties::describe_tag;
use crate::run::PointReport;
use crate::run::{CheckReport, Counterexample};
use crate::spec::{Search, Verdict};
use crate::world::Choice;

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
    let sampled = program.search != Search::Exhaustive;
    let cut_short = |p: &PointReport| sampled || !p.stats.complete();
    let coverage = |p: &PointReport| match sampled {
        true => format!(
            "{} sampled schedule(s), {}; fraction explored unknown",
            p.stats.schedules,
            match program.search {
                Search::Pct { .. } => "PCT",
                _ => "random walks",
            }
        ),
        false => coverage(&p.stats),
    };
    for p in &report.points {
        let what = match p.violation {
            Some(v) => format!("{v}"),
            None if !cut_short(p) => "ok".into(),
            None => format!("no violation within bounds ({})", coverage(p)),
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
    if report.verdict == Verdict::Verified && !report.complete {
        // Never "verified" for a search cut short.
        let cut: Vec<String> = report
            .points
            .iter()
            .filter(|p| cut_short(p))
            .map(|p| format!("{}: {}", p.point, coverage(p)))
            .collect();
        writeln!(
            out,
            "verdict: no violation within bounds, not verified ({} of {} point(s) not searched exhaustively){expected}",
            cut.len(),
            report.points.len()
        )?;
        for line in cut {
            writeln!(out, "  {line}")?;
        }
    } else {
        writeln!(out, "verdict: {}{expected}", report.verdict)?;
        if report.verdict == Verdict::Verified {
            // Every reduction some point's search used.
            let used = report
                .points
                .iter()
                .fold(SearchStats::default(), |mut all, p| {
                    all.calls_independent |= p.stats.calls_independent;
                    all.calls_fallback |= p.stats.calls_fallback;
                    all.branches_independent |= p.stats.branches_independent;
                    all.branches_fallback |= p.stats.branches_fallback;
                    if let Some(before) = p.stats.stateful_after {
                        *all.stateful_after.get_or_insert(0) += before;
                        all.states += p.stats.states;
                        all.revisits += p.stats.revisits;
                    }
                    all
                });
            let reductions = crate::explore::reductions(&used);
            writeln!(
                out,
                "coverage: every schedule of every point, up to equivalence; reductions: {reductions}"
            )?;
        }
    }
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

/// What a search cut short covered: the bounds it hit and the fraction
/// explored, estimated where it can be.
pub fn coverage(stats: &SearchStats) -> String {
    let bounds = stats.bounds_hit();
    let hit = if bounds.is_empty() {
        "sampled schedules".to_string()
    } else {
        format!("hit {}", bounds.join(" and "))
    };
    let explored = match stats.explored_ppm {
        Some(ppm) if stats.depth_cut == 0 && !stats.delay_pruned => format!(
            "an estimated {:.2}% of the reduced search explored",
            f64::from(ppm) / 1e4
        ),
        _ => "fraction explored unknown".to_string(),
    };
    format!("{hit}; {explored}")
}

/// A choice as the report prints it: with the call (and phase) its tag
/// belongs to.
pub fn describe_choice(program: &Program, choice: Choice) -> String {
    let key = match choice {
        Choice::Deliver(k) | Choice::Drop(k) | Choice::Timeout(k) => Some(k),
        _ => None,
    };
    match (key, choice) {
        // The file spells the raw tag; people read the call and phase.
        (Some(k), _) => choice
            .to_string()
            .replace(&format!("tag {}", k.tag), &describe_tag(program, k.tag)),
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
