//! `sim validate SCENARIO --fabric KIND`: a calibrated scenario's
//! collectives, sizes and algorithms on the real fabric and on the
//! simulator (with the scenario's `[calibration]`), one table side by
//! side: measured and simulated time and bus bandwidth, the error of each
//! row, and the median and worst |error| per collective; `--csv` writes
//! the same rows.
//!
//! The measured time of a row is the median call's (the largest of the
//! ranks' medians), as the calibration keeps the median run of each probe:
//! the mean of the timed calls (nccl-tests' figure, printed beside it)
//! counts every call the host descheduled for a time slice, which the
//! simulator does not model.
//!
//! The real run is `sim run --fabric`'s (the same algorithm at every
//! size: the named one, or the tuner's under the calibrated links); rank
//! 0 then simulates. A calibration taken on another fabric, or on a host
//! of another shape (cores, NUMA nodes, MTU), is refused before anything
//! runs, naming the difference (exit 2), as is an entry with
//! `extrapolate_above` (its sizes above it would not be simulated).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use algorithms::Registry;
use engine::scenario::Scenario;
use engine::study::{self, Row};
use engine::tuning::AlgoFilter;
use realnet::bench::{BenchOptions, BenchRow};
use realnet::connect::{FabricKind, with_fabric};

use crate::calibrate::fit::{median, percent_error};
use crate::calibrate::host::this_host;
use crate::exit::ExitStatus;
use crate::output::{Named, OutputFile, Stdout, check_paths};
use crate::real::bench_cmd::{Section, SectionsJob};
use crate::real::job::{JobArgs, JobSetup};
use crate::real::run_cmd::{options, refuse_simulated_programs};
use crate::real::table::to_median_row;

/// `sim validate`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct ValidateArgs {
    /// The scenario, with a `[calibration] file`.
    pub scenario: PathBuf,
    /// Also write the side-by-side rows as CSV (rank 0).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The fabric and the rendezvous.
    #[command(flatten)]
    pub job: JobArgs,
}

/// One row of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// The collective.
    pub collective: &'static str,
    /// The algorithm both ran (`auto:NAME` when the tuner chose it).
    pub algorithm: String,
    /// The buffer size.
    pub size_bytes: u64,
    /// Measured time per call, us: the median call's (see
    /// [`BenchRow::median_time_ps`]).
    pub measured_us: f64,
    /// The mean of the timed calls, us (nccl-tests' figure), for the
    /// spread: far above the median when the host descheduled some calls.
    pub measured_mean_us: f64,
    /// Measured bus bandwidth, GB/s.
    pub measured_busbw: f64,
    /// Simulated time per call, us.
    pub simulated_us: f64,
    /// Simulated bus bandwidth, GB/s.
    pub simulated_busbw: f64,
    /// `(simulated - measured) / measured`, percent.
    pub error_pct: f64,
}

/// Runs `sim validate`.
pub fn validate(args: &ValidateArgs, command: &str, registry: &Registry) -> io::Result<ExitStatus> {
    realnet::launcher::watch_launcher();
    let input_error = |message: String| {
        crate::report!("error: {message}");
        Ok(ExitStatus::InvalidInput)
    };
    let path = &args.scenario;
    let scenario = match Scenario::load(path, registry) {
        Ok(s) => s,
        Err(e) => return input_error(e.to_string()),
    };
    let JobSetup {
        env,
        kind,
        world_size,
    } = match args.job.setup(None) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    if let Err(e) = check_calibration(&scenario, kind, args.job.interface.as_deref()) {
        return input_error(format!("{}: {e}", path.display()));
    }
    if let Err(e) = refuse_simulated_programs(&scenario) {
        return input_error(format!("{}: {e}", path.display()));
    }
    if let Some(spec) = scenario
        .collectives
        .iter()
        .find(|s| s.extrapolate_above.is_some())
    {
        return input_error(format!(
            "{}: [[collective]] {} has extrapolate_above: sim validate sets every size's \
             simulation beside its measurement, and a size drawn on a line is not simulated; \
             drop extrapolate_above to validate",
            path.display(),
            spec.kind
        ));
    }
    let world_size = if kind.in_process() {
        scenario.world_size
    } else {
        world_size
    };
    if let Some(spec) = scenario
        .collectives
        .iter()
        .find(|s| s.world_size != world_size)
    {
        return input_error(format!(
            "{}: [[collective]] {} runs on {} ranks but this job has {world_size}; launch {} ranks",
            path.display(),
            spec.kind,
            spec.world_size,
            spec.world_size
        ));
    }
    for spec in &scenario.collectives {
        let ranks_here = if kind.in_process() { world_size } else { 1 };
        if let Err(e) = realnet::memory::check_memory(spec.max_bytes, ranks_here) {
            return input_error(format!(
                "{}: {} at {} bytes: {e}",
                path.display(),
                spec.kind,
                spec.max_bytes
            ));
        }
    }
    let csv = match (&args.csv, env.rank == 0) {
        (Some(p), true) => {
            let input = Named {
                name: "the scenario",
                path,
            };
            let output = Named {
                name: "--csv",
                path: p,
            };
            if let Err(e) = check_paths(&[input], &[output]) {
                return input_error(e);
            }
            match OutputFile::create(p, "CSV") {
                Ok(f) => Some(f),
                Err(e) => {
                    crate::report!("error: {e}");
                    return Ok(ExitStatus::ToolFailed);
                }
            }
        }
        _ => None,
    };
    let filter = match AlgoFilter::from_env(|v| std::env::var(v).ok(), registry) {
        Ok(f) => f,
        Err(e) => return input_error(e),
    };
    let sections: Vec<Section> = scenario
        .collectives
        .iter()
        .map(|spec| Section {
            header: format!("#\n# measured on {kind}: {}\n", spec.describe()),
            options: BenchOptions {
                time_each_call: true,
                ..options(&scenario, spec, &filter)
            },
        })
        .collect();
    // The median call, as the calibration's probes keep the median run:
    // on a shared host one descheduled call moves a mean of microsecond
    // calls many times over (see `realnet::bench`).
    let job = SectionsJob {
        sections,
        median: true,
    };
    let interface = args.job.interface.as_deref();
    let outputs = match with_fabric(kind, &env, world_size, interface, (command, registry), &job) {
        Ok(o) => o,
        Err(e) => {
            crate::report!("error: rank {}: {}", env.rank, e.message);
            return Ok(ExitStatus::of_setup(e.failure));
        }
    };
    if let Some((status, _)) = outputs.iter().find(|(s, _)| *s != ExitStatus::Success) {
        return Ok(*status);
    }
    let Some((_, measured)) = outputs.into_iter().next() else {
        return Ok(ExitStatus::Success);
    };
    if env.rank != 0 {
        return Ok(ExitStatus::Success);
    }
    let simulated = match study::run_scenario(&scenario, &filter, study::Options::default(), |_| {
        ControlFlow::Continue(())
    }) {
        Ok(rows) => rows,
        Err(failed) => {
            let (point, failure) = *failed;
            crate::report!(
                "error: the simulator did not complete {} at {} bytes: {failure:?}",
                point.collective,
                point.size_bytes
            );
            return Ok(ExitStatus::of_failure(&failure));
        }
    };
    let rows = match compare(&measured, &simulated) {
        Ok(rows) => rows,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    };
    let mut out = Stdout::new();
    let _ = out.write_all(table(&scenario, kind, &rows).as_bytes());
    if let Some(mut file) = csv {
        let written = file
            .write_all(csv_text(&rows).as_bytes())
            .map_err(|e| file.error(e))
            .and_then(|()| file.commit());
        if let Err(e) = written {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    }
    Ok(ExitStatus::Success)
}

/// Refuses a scenario without a calibration, or whose calibration was
/// taken on another fabric or host shape, naming the difference.
pub fn check_calibration(
    scenario: &Scenario,
    kind: FabricKind,
    interface: Option<&str>,
) -> Result<(), String> {
    let Some(loaded) = &scenario.calibration else {
        return Err(
            "the scenario has no [calibration] file to validate; run `sim calibrate --out FILE` \
             on the fabric and add [calibration] file = \"FILE\""
                .into(),
        );
    };
    let c = &loaded.calibration;
    let at = loaded.path.display();
    if c.calibration.fabric != kind.name() {
        return Err(format!(
            "calibration {at} was taken on the {} fabric, not {kind}; calibrate {kind} with \
             `sim calibrate --fabric {kind}`",
            c.calibration.fabric
        ));
    }
    let differences = c.host.differences(&this_host(kind, interface));
    if !differences.is_empty() {
        return Err(format!(
            "calibration {at} was taken on a host of another shape ({}); calibrate on this host",
            differences.join("; ")
        ));
    }
    Ok(())
}

/// The measured and simulated rows side by side (the two runs have the
/// same entries and sizes in the same order): the median measured call
/// against the simulated one.
pub fn compare(measured: &[BenchRow], simulated: &[Row]) -> Result<Vec<Compared>, String> {
    if measured.len() != simulated.len() {
        return Err(format!(
            "the real run gave {} rows and the simulator {}",
            measured.len(),
            simulated.len()
        ));
    }
    measured
        .iter()
        .zip(simulated)
        .map(|(real, s)| {
            let m = &to_median_row(real);
            if (m.collective, m.size_bytes) != (s.collective, s.size_bytes) {
                return Err(format!(
                    "rows out of step: measured {} at {} B, simulated {} at {} B",
                    m.collective, m.size_bytes, s.collective, s.size_bytes
                ));
            }
            let measured_us = m.time_ps as f64 / 1e6;
            let simulated_us = s.time_ps as f64 / 1e6;
            Ok(Compared {
                collective: m.collective,
                algorithm: algorithm_label(m, s),
                size_bytes: m.size_bytes,
                measured_us,
                measured_mean_us: real.time_ps as f64 / 1e6,
                measured_busbw: m.busbw_gb_per_s,
                simulated_us,
                simulated_busbw: s.busbw_gb_per_s,
                error_pct: percent_error(simulated_us, measured_us),
            })
        })
        .collect()
}

/// The algorithm of a row: its name, `auto:NAME` when the tuner chose it,
/// and both names (measured|simulated) should the two runs differ.
fn algorithm_label(m: &Row, s: &Row) -> String {
    let name = if m.algorithm == s.algorithm {
        m.algorithm.clone()
    } else {
        format!("{}|{}", m.algorithm, s.algorithm)
    };
    if m.tuned {
        format!("auto:{name}")
    } else {
        name
    }
}

/// The median and worst |error| of each collective, in order of first
/// appearance.
pub fn error_summary(rows: &[Compared]) -> Vec<(&'static str, f64, f64)> {
    let mut names: Vec<&'static str> = Vec::new();
    for r in rows {
        if !names.contains(&r.collective) {
            names.push(r.collective);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mut abs: Vec<f64> = rows
                .iter()
                .filter(|r| r.collective == name)
                .map(|r| r.error_pct.abs())
                .collect();
            let worst = abs.iter().copied().fold(0.0, f64::max);
            (name, median(&mut abs), worst)
        })
        .collect()
}

/// One algorithm at one size timed twice in this run (a collective listed
/// twice, or the tuner's pick beside the named row of the algorithm it
/// picked): how many such repeats there are and the median and worst
/// |difference| of their measured times, in percent of the faster. That is
/// the measurement's own spread: an error below it is within what the host
/// repeats to. `None` without repeats.
pub fn measured_twice(rows: &[Compared]) -> Option<(usize, f64, f64)> {
    let mut first: Vec<(&str, &str, u64, f64)> = Vec::new();
    let mut diffs: Vec<f64> = Vec::new();
    for r in rows {
        let name = r.algorithm.strip_prefix("auto:").unwrap_or(&r.algorithm);
        if name.contains('|') {
            // The real fabric and the simulator chose differently.
            continue;
        }
        let earlier = first
            .iter()
            .find(|f| f.0 == r.collective && f.1 == name && f.2 == r.size_bytes);
        match earlier {
            Some(f) => {
                let faster = r.measured_us.min(f.3);
                if faster > 0.0 {
                    diffs.push((r.measured_us - f.3).abs() / faster * 100.0);
                }
            }
            None => first.push((r.collective, name, r.size_bytes, r.measured_us)),
        }
    }
    if diffs.is_empty() {
        return None;
    }
    let worst = diffs.iter().copied().fold(0.0, f64::max);
    Some((diffs.len(), median(&mut diffs), worst))
}

/// The side-by-side table and its summary lines.
pub fn table(scenario: &Scenario, kind: FabricKind, rows: &[Compared]) -> String {
    let mut s = String::new();
    let calibration = scenario
        .calibration
        .as_ref()
        .map_or(String::new(), |c| c.path.display().to_string());
    let _ = writeln!(
        s,
        "#\n# sim validate {}: the {kind} fabric beside the simulator calibrated by {calibration}",
        scenario.path.display()
    );
    let _ = writeln!(
        s,
        "{:>12} {:>24} {:>12} {:>13} {:>11} {:>11} {:>13} {:>11} {:>8}",
        "collective",
        "algorithm",
        "size_bytes",
        "measured_us",
        "mean_us",
        "meas_busbw",
        "simulated_us",
        "sim_busbw",
        "error_%"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>12} {:>24} {:>12} {:>13.2} {:>11.2} {:>11.3} {:>13.2} {:>11.3} {:>8.1}",
            r.collective,
            r.algorithm,
            r.size_bytes,
            r.measured_us,
            r.measured_mean_us,
            r.measured_busbw,
            r.simulated_us,
            r.simulated_busbw,
            r.error_pct
        );
    }
    for (name, median, worst) in error_summary(rows) {
        let _ = writeln!(
            s,
            "# {name}: median |error| {median:.1}%, worst |error| {worst:.1}%"
        );
    }
    if let Some(line) = measured_twice_line(rows) {
        s.push_str(&line);
    }
    s
}

/// The summary line of [`measured_twice`], if anything was timed twice.
fn measured_twice_line(rows: &[Compared]) -> Option<String> {
    let (pairs, median, worst) = measured_twice(rows)?;
    Some(format!(
        "# measured twice ({pairs} times one algorithm at one size): median |difference| \
         {median:.1}%, worst {worst:.1}%; errors below that are within the measurement's own spread\n"
    ))
}

/// The rows as CSV.
pub fn csv_text(rows: &[Compared]) -> String {
    let mut s = String::from(
        "collective,algorithm,size_bytes,measured_us,measured_busbw_gb_per_s,simulated_us,\
         simulated_busbw_gb_per_s,error_pct,measured_mean_us\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{:.3},{:.4},{:.3},{:.4},{:.2},{:.3}",
            r.collective,
            r.algorithm,
            r.size_bytes,
            r.measured_us,
            r.measured_busbw,
            r.simulated_us,
            r.simulated_busbw,
            r.error_pct,
            r.measured_mean_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        collective: &'static str,
        algorithm: &str,
        size_bytes: u64,
        measured_us: f64,
    ) -> Compared {
        Compared {
            collective,
            algorithm: algorithm.to_string(),
            size_bytes,
            measured_us,
            measured_mean_us: measured_us,
            measured_busbw: 1.0,
            simulated_us: 10.0,
            simulated_busbw: 1.0,
            error_pct: (10.0 - measured_us) / measured_us * 100.0,
        }
    }

    #[test]
    fn repeats_are_the_tuners_pick_beside_its_named_row_and_rows_listed_twice() {
        let rows = [
            row("allreduce", "ring", 8, 10.0),
            row("allreduce", "recursive_doubling", 8, 4.0),
            row("allreduce", "auto:recursive_doubling", 8, 5.0),
            row("allreduce", "ring", 8, 12.0),
            row("allreduce", "ring", 32, 20.0),
            row("allgather", "ring", 8, 40.0),
            row("allreduce", "auto:ring|tree", 32, 1.0),
        ];
        // 4 -> 5 (25%), 10 -> 12 (20%); the allgather, the other size and
        // the split choice repeat nothing. The median of two is the lower
        // one, as everywhere in the calibration.
        let (pairs, median, worst) = measured_twice(&rows).unwrap();
        assert_eq!(pairs, 2);
        assert!((median - 20.0).abs() < 1e-9, "{median}");
        assert!((worst - 25.0).abs() < 1e-9, "{worst}");
        assert!(measured_twice(&rows[..3]).is_some());
        assert_eq!(measured_twice(&rows[..2]), None);
        assert_eq!(
            measured_twice_line(&rows).unwrap(),
            "# measured twice (2 times one algorithm at one size): median |difference| 20.0%, \
             worst 25.0%; errors below that are within the measurement's own spread\n"
        );
        assert_eq!(measured_twice_line(&rows[..2]), None);
    }
}
