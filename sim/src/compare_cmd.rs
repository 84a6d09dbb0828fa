//! `sim compare NCCL_TESTS_LOG SCENARIO [--csv FILE]`: a cluster's own
//! nccl-tests measurements beside the simulator's prediction for the same
//! collectives, sizes, types and operators on SCENARIO (the tuner's
//! algorithm, as for `algorithm = "auto"`), with the error of each row and
//! the median |error| of each collective and of the whole log
//! ([`engine::nccl_tests`] does the work). A log or scenario that cannot be
//! read, or whose world size differs from the scenario's, is invalid input
//! (exit status 2, naming the file and line); rows the simulator cannot run
//! or that do not complete are reported as such, and the command still
//! succeeds.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use algorithms::Registry;
use engine::nccl_tests::compare::{Comparison, Errors, write_csv};
use engine::nccl_tests::predict::Predictor;
use engine::nccl_tests::{self, Test};
use engine::tuning::AlgoFilter;

use crate::exit::ExitStatus;
use crate::output::{Named, OutputFile, check_paths};

/// `sim compare`'s arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct CompareArgs {
    /// The output of nccl-tests (all_reduce_perf, all_gather_perf, ...;
    /// several runs may be concatenated), or `-` for stdin.
    #[arg(value_name = "NCCL_TESTS_LOG")]
    pub log: PathBuf,
    /// The scenario of the cluster the log was measured on (its
    /// `[[collective]]` entries are not run).
    pub scenario: PathBuf,
    /// Also write one row per (collective, size, placement) as CSV to this
    /// file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The collective of tables the log does not name (no `# Collective
    /// test starting` line or `*_perf` command line before them):
    /// all_reduce, all_gather, reduce_scatter, broadcast, reduce,
    /// alltoall, gather, scatter, sendrecv (or the simulator's names).
    #[arg(long, value_name = "NAME", value_parser = parse_test)]
    pub collective: Option<Test>,
}

/// A `--collective` value.
fn parse_test(name: &str) -> Result<Test, String> {
    Test::from_name(name).ok_or_else(|| {
        format!(
            "unknown collective `{name}`; nccl-tests' are all_reduce, all_gather, reduce_scatter, \
             broadcast, reduce, alltoall, gather, scatter, sendrecv"
        )
    })
}

/// Runs `sim compare` with the algorithms of `registry`; returns the exit
/// status (an error is stdout's).
pub fn compare(args: &CompareArgs, registry: &Registry) -> io::Result<ExitStatus> {
    let log = if args.log == Path::new("-") {
        "<stdin>".to_string()
    } else {
        args.log.display().to_string()
    };
    let text = match nccl_tests::read_log(&args.log) {
        Ok(text) => text,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let tables = match nccl_tests::parse(&text, args.collective) {
        Ok(tables) => tables,
        Err(e) => {
            let sep = if e.line().is_some() { ":" } else { ": " };
            crate::report!("error: {log}{sep}{e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    let predictor = match Predictor::load(&args.scenario, registry) {
        Ok(p) => p,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    for table in tables
        .iter()
        .filter(|t| matches!(t.test, Test::Collective(_)))
    {
        if let Some(why) = predictor.world_mismatch(table) {
            crate::report!("error: {log}:{}: {why}", table.line);
            return Ok(ExitStatus::InvalidInput);
        }
    }
    let filter = match AlgoFilter::from_env(|v| std::env::var(v).ok(), registry) {
        Ok(f) => f,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    };
    if let Some(csv) = &args.csv {
        let mut inputs = vec![Named {
            name: "the scenario",
            path: &args.scenario,
        }];
        if args.log != Path::new("-") {
            inputs.push(Named {
                name: "the log",
                path: &args.log,
            });
        }
        let output = Named {
            name: "--csv",
            path: csv,
        };
        if let Err(e) = check_paths(&inputs, &[output]) {
            crate::report!("error: {e}");
            return Ok(ExitStatus::InvalidInput);
        }
    }
    // Open the CSV before the runs, so a bad path fails at once.
    let csv = match args
        .csv
        .as_deref()
        .map(|p| OutputFile::create(p, "CSV"))
        .transpose()
    {
        Ok(file) => file,
        Err(e) => {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    };
    let mut out = crate::output::Stdout::new();
    writeln!(out, "# sim compare {log} {}", args.scenario.display())?;
    writeln!(out, "# {}", predictor.world())?;
    writeln!(
        out,
        "# measured (nccl-tests) against predicted (the tuner's algorithm, in place, phantom \
         payloads); error % = (predicted - measured) / measured x 100"
    )?;
    if let Some(note) = filter.header_note() {
        writeln!(out, "{note}")?;
    }
    let mut comparisons = Vec::new();
    let mut all = Errors::default();
    for table in &tables {
        let prediction = predictor.predict(table, &filter);
        let comparison = Comparison::new(table, prediction);
        if table.world.is_none() {
            writeln!(
                out,
                "#\n# note: the log does not say how many ranks ran the table at line {}; \
                 the scenario's {} assumed",
                table.line,
                predictor.world().world_size
            )?;
        }
        out.write_all(comparison.text(&log).as_bytes())?;
        out.flush()?;
        all.merge(&comparison.errors());
        comparisons.push(comparison);
    }
    if comparisons.len() > 1 {
        out.write_all(b"#\n")?;
        out.write_all(all.median_line(" (all collectives)").as_bytes())?;
    }
    if let Some(mut file) = csv {
        let written = write_csv(&mut file, &comparisons)
            .map_err(|e| file.error(e))
            .and_then(|()| file.commit());
        if let Err(e) = written {
            crate::report!("error: {e}");
            return Ok(ExitStatus::ToolFailed);
        }
    }
    Ok(ExitStatus::Success)
}
