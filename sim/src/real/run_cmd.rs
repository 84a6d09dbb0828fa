//! `sim run SCENARIO --fabric KIND`: a scenario's collectives, sizes and
//! algorithms on a real fabric instead of the simulator, in the same
//! columns.
//!
//! What carries over: every `[[collective]]` entry (kind, algorithm or the
//! tuner, sizes, dtype, op, root, chunk, slots, ranks per node, warm-up and
//! timed iterations, check); with no algorithm named, the tuner decides
//! under the scenario's links and `NCCL_ALGO`, exactly as the simulator's
//! run does, so that both runs use the same algorithm at every size.
//!
//! What does not, and how it is treated (the rule: the modelled network is
//! replaced by the real one and noted; what changes the ranks' programs is
//! refused):
//! - `[links]`, topologies, `[[link_fault]]`, `[rdma]`, `[pfc]`, `[compute]`
//!   and `timeout_ms` model the network and hardware: ignored with a note
//!   (the real fabric and its peer timeout take their place);
//! - `seed` and `phantom`: the inputs are computed per rank (never drawn,
//!   never phantom), noted;
//! - `[sweep]` is ignored as `sim run` ignores it;
//! - `[[fault]]` and `[[inject]]` (crashes, stragglers, programming
//!   mistakes) only the simulator can schedule: refused (exit 2).

use std::io::{self, Write};
use std::path::Path;

use algorithms::{Params, Registry};
use engine::scenario::{CollectiveSpec, Scenario};
use engine::study::cost_model;
use engine::tuning::AlgoFilter;
use realnet::bench::{AlgorithmChoice, BenchOptions};
use realnet::connect::FabricKind;
use realnet::launch::RankEnv;
use realnet::memory::check_memory;

use super::bench_cmd::{Section, SectionsJob, run_job};
use super::job::JobArgs;
use crate::exit::ExitStatus;
use crate::output::{Named, OutputFile, Stdout, check_paths};

/// Runs `path` on `kind` (the flags of `sim run` that apply: `--csv`).
pub fn run_real(
    path: &Path,
    kind: FabricKind,
    job_args: &JobArgs,
    csv: Option<&Path>,
    (command, registry): (&str, &Registry),
) -> io::Result<ExitStatus> {
    realnet::launcher::watch_launcher();
    let input_error = |message: String| {
        crate::report!("error: {message}");
        Ok(ExitStatus::InvalidInput)
    };
    let scenario = match Scenario::load(path, registry) {
        Ok(s) => s,
        Err(e) => return input_error(e.to_string()),
    };
    let env = match job_args.rank_env() {
        Ok(env) => env,
        Err(e) => return input_error(e),
    };
    let filter = match AlgoFilter::from_env(|v| std::env::var(v).ok(), registry) {
        Ok(f) => f,
        Err(e) => return input_error(e),
    };
    if let Err(e) = refuse_simulated_programs(&scenario) {
        return input_error(format!("{}: {e}", path.display()));
    }
    for (i, spec) in scenario.collectives.iter().enumerate() {
        // Phantom entries pass the simulator's memory limit; here they
        // carry real data.
        let ranks_here = if kind.in_process() {
            spec.world_size
        } else {
            1
        };
        if let Err(e) = check_memory(spec.max_bytes, ranks_here) {
            return input_error(format!(
                "{}: [[collective]] #{} ({}) at max_bytes = {}: {e}",
                path.display(),
                i + 1,
                spec.kind,
                spec.max_bytes
            ));
        }
    }
    if !kind.in_process() {
        for (i, spec) in scenario.collectives.iter().enumerate() {
            if spec.world_size != env.world_size {
                return input_error(format!(
                    "{}: [[collective]] #{} ({}) runs on {} ranks but this job has {} ({}); \
                     launch {} ranks or change world_size",
                    path.display(),
                    i + 1,
                    spec.kind,
                    spec.world_size,
                    env.world_size,
                    env.describe(),
                    spec.world_size
                ));
            }
        }
    }
    if let Some(p) = csv {
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
    }
    let csv = match (csv, env.rank == 0) {
        (Some(p), true) => match OutputFile::create(p, "CSV") {
            Ok(f) => Some(f),
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(ExitStatus::ToolFailed);
            }
        },
        _ => None,
    };
    if env.rank == 0 {
        let mut notes = vec![
            format!("# sim run {} on the {kind} fabric", path.display()),
            format!("# {scenario}"),
        ];
        notes.extend(
            not_applied(&scenario, kind)
                .into_iter()
                .map(|n| format!("# {n}")),
        );
        notes.extend(filter.header_note());
        // A closed reader is tolerated; another failure to print the notes
        // is left to the table's own writes to meet.
        let _ = writeln!(Stdout::new(), "{}", notes.join("\n"));
    }
    let sections: Vec<Section> = scenario
        .collectives
        .iter()
        .map(|spec| Section {
            // Every size runs on the fabric: no line drawn.
            header: format!(
                "#\n# {}\n",
                CollectiveSpec {
                    extrapolate_above: None,
                    ..spec.clone()
                }
                .describe()
            ),
            options: options(&scenario, spec, &filter),
        })
        .collect();
    let status = if kind.in_process() {
        // Thread ranks, as many as each entry's world size.
        run_threads_by_entry(&scenario, sections, &env, command, csv)
    } else {
        run_job(
            kind,
            &env,
            env.world_size,
            job_args.interface.as_deref(),
            (command, registry),
            &SectionsJob {
                sections,
                median: false,
            },
            csv,
        )
    };
    Ok(status)
}

/// Thread ranks: one group for all entries when they share a world size,
/// else a group (and a footer) per entry.
fn run_threads_by_entry(
    scenario: &Scenario,
    sections: Vec<Section>,
    env: &RankEnv,
    command: &str,
    csv: Option<OutputFile>,
) -> ExitStatus {
    let sizes: Vec<usize> = scenario.collectives.iter().map(|s| s.world_size).collect();
    if sizes.windows(2).all(|w| w[0] == w[1]) {
        let n = sizes.first().copied().unwrap_or(1);
        return run_job(
            FabricKind::Threads,
            env,
            n,
            None,
            (command, &scenario.registry),
            &SectionsJob {
                sections,
                median: false,
            },
            csv,
        );
    }
    // Several world sizes: one table and footer per entry; one CSV would
    // need their rows joined, so --csv is refused here, before any entry runs.
    if csv.is_some() {
        crate::report!(
            "error: --csv with --fabric threads needs every [[collective]] on the same world size"
        );
        return ExitStatus::InvalidInput;
    }
    let mut first_failure = ExitStatus::Success;
    for (section, n) in sections.into_iter().zip(sizes) {
        let job = SectionsJob {
            sections: vec![section],
            median: false,
        };
        let status = run_job(
            FabricKind::Threads,
            env,
            n,
            None,
            (command, &scenario.registry),
            &job,
            None,
        );
        if first_failure == ExitStatus::Success {
            first_failure = status;
        }
    }
    first_failure
}

/// `[[fault]]` and `[[inject]]` change what the ranks do; only the
/// simulator can schedule them.
pub(crate) fn refuse_simulated_programs(scenario: &Scenario) -> Result<(), String> {
    if !scenario.faults.is_empty() {
        return Err(format!(
            "{} [[fault]] entr{} (crashes, stragglers) can only be scheduled by the simulator; \
             remove them to run on a real fabric",
            scenario.faults.len(),
            if scenario.faults.len() == 1 {
                "y"
            } else {
                "ies"
            }
        ));
    }
    if !scenario.injects.is_empty() {
        return Err(format!(
            "{} [[inject]] entr{} (programming mistakes) can only be injected by the simulator; \
             remove them to run on a real fabric",
            scenario.injects.len(),
            if scenario.injects.len() == 1 {
                "y"
            } else {
                "ies"
            }
        ));
    }
    Ok(())
}

/// One line per scenario feature that does not apply on a real fabric.
pub fn not_applied(scenario: &Scenario, kind: FabricKind) -> Vec<String> {
    let mut notes = vec![format!(
        "not applied: the modelled network ({}); the {kind} fabric is the network",
        scenario.network_description
    )];
    for n in scenario
        .link_fault_notes
        .iter()
        .chain(&scenario.network_notes)
    {
        notes.push(format!("not applied (network model): {n}"));
    }
    if scenario.reduce_bytes_per_s.is_some() {
        notes.push("not applied: [compute] (reductions run at the CPU's speed)".into());
    }
    if let Some(ps) = scenario.call_timeout_ps {
        notes.push(format!(
            "not applied: the collective watchdog ({}); the fabric's peer timeout applies",
            algorithms::Time(ps)
        ));
    }
    notes.push(format!(
        "not applied: seed {} (inputs are computed per rank so every rank can check its result)",
        scenario.seed
    ));
    if scenario.collectives.iter().any(|c| c.phantom) {
        notes.push("not applied: phantom payloads (real fabrics move real data)".into());
    }
    if scenario
        .collectives
        .iter()
        .any(|c| c.extrapolate_above.is_some())
    {
        notes.push("not applied: extrapolate_above (the fabric runs every size)".into());
    }
    if scenario.has_sweep {
        notes.push("[sweep] ignored by sim run: use sim sweep".into());
    }
    notes
}

/// The benchmark of one `[[collective]]` entry: the simulator's choice
/// of algorithm (the entry's, or the tuner's under the scenario's links).
pub(crate) fn options(
    scenario: &Scenario,
    spec: &CollectiveSpec,
    filter: &AlgoFilter,
) -> BenchOptions {
    BenchOptions {
        collective: spec.kind,
        algorithm: match &spec.algorithm {
            Some(a) => AlgorithmChoice::Fixed(a.clone()),
            None => AlgorithmChoice::Tuned {
                model: cost_model(scenario),
                allowed: filter.allowed(scenario.registry.of(spec.kind)),
                fallback: scenario.registry.of(spec.kind).cloned().collect(),
            },
        },
        op: spec.op,
        dtype: spec.dtype,
        min_bytes: spec.min_bytes,
        max_bytes: spec.max_bytes,
        step_factor: spec.step_factor,
        iters: spec.iters,
        warmup: spec.warmup,
        check: spec.check,
        time_each_call: false,
        params: Params {
            chunk_bytes: spec.chunk_bytes,
            slots: spec.slots,
            root: spec.root,
            ranks_per_node: spec.ranks_per_node,
            ..Params::default()
        },
    }
}
