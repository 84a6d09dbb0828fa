//! `sim run SCENARIO --fabric threads`: a scenario's collectives on thread
//! ranks, in the simulator's columns, with the same algorithms.

use super::real_support::{sim_env, text, write};
use super::support::temp_dir;

const SCENARIO: &str = r#"
name = "real_small"
world_size = 3
seed = 7
timeout_ms = 1000

[links]
latency_us = 5
bandwidth_gb_per_s = 10

[[collective]]
kind = "allreduce"
algorithm = "ring"
min_bytes = 64
max_bytes = "1K"
step_factor = 4
iters = 2
warmup = 1
chunk_bytes = 128

[[collective]]
kind = "broadcast"
root = 2
min_bytes = 8
max_bytes = "64K"
step_factor = 64
iters = 2
warmup = 0
"#;

/// The (size, algorithm) of every table row of `stdout`.
fn rows(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols[0].to_string(), cols[9].to_string())
        })
        .collect()
}

#[test]
fn a_scenario_runs_on_threads_with_the_simulators_algorithms() {
    let dir = temp_dir("real-run");
    let path = dir.join("small.toml");
    write(&path, SCENARIO);
    let csv = dir.join("real.csv");
    let path = path.to_str().unwrap();
    let real = sim_env(
        &[
            "run",
            path,
            "--fabric",
            "threads",
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = text(&real.stdout);
    assert!(real.status.success(), "{stdout}\n{}", text(&real.stderr));
    assert!(
        stdout.contains("# not applied: the modelled network"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# not applied: the collective watchdog"),
        "{stdout}"
    );
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    let simulated = sim_env(&["run", path], &[]);
    assert!(simulated.status.success());
    let want = rows(&text(&simulated.stdout));
    assert_eq!(
        rows(&stdout),
        want,
        "same sizes and algorithms (tuned ones marked *)"
    );
    assert_eq!(want.len(), 3 + 3);
    let csv = std::fs::read_to_string(csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
}

#[test]
fn faults_and_injects_are_refused_and_simulator_only_flags_conflict() {
    let dir = temp_dir("real-run-refused");
    let path = dir.join("fault.toml");
    write(
        &path,
        &format!("{SCENARIO}\n[[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 5\n"),
    );
    let path = path.to_str().unwrap();
    let out = sim_env(&["run", path, "--fabric", "threads"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("1 [[fault]] entry"),
        "{}",
        text(&out.stderr)
    );
    for args in [
        &["run", path, "--fabric", "threads", "--trace", "t.json"][..],
        &["run", path, "--rendezvous", "127.0.0.1:1"][..],
    ] {
        let out = sim_env(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_phantom_scenario_too_large_for_real_data_is_refused() {
    // Phantom payloads pass the simulator's memory limit; on a real
    // fabric they become real data, so the limit applies again.
    let dir = temp_dir("real-run-phantom");
    let path = dir.join("phantom.toml");
    write(
        &path,
        r#"
name = "phantom_huge"
world_size = 2
[links]
latency_us = 5
bandwidth_gb_per_s = 10
[[collective]]
kind = "allreduce"
algorithm = "ring"
min_bytes = "4096G"
max_bytes = "4096G"
chunk_bytes = "1G"
iters = 1
warmup = 0
phantom = true
"#,
    );
    let path = path.to_str().unwrap();
    assert!(
        sim_env(&["run", path], &[]).status.success(),
        "the simulator runs it with phantom payloads"
    );
    let out = sim_env(&["run", path, "--fabric", "threads"], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("memory"), "{stderr}");
}

#[test]
fn extrapolate_above_is_not_applied_on_a_fabric_and_the_header_does_not_claim_it() {
    let dir = temp_dir("real-run-extrapolate");
    let path = dir.join("lined.toml");
    write(
        &path,
        "world_size = 3\n[links]\nlatency_us = 5\nbandwidth_gb_per_s = 10\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 64\n\
         max_bytes = \"1K\"\nstep_factor = 4\niters = 2\nwarmup = 1\nchunk_bytes = 128\n\
         extrapolate_above = 256\n",
    );
    let out = sim_env(&["run", path.to_str().unwrap(), "--fabric", "threads"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("# not applied: extrapolate_above (the fabric runs every size)"),
        "{stdout}"
    );
    assert!(!stdout.contains("extrapolated from"), "{stdout}");
    assert_eq!(
        rows(&stdout).len(),
        3,
        "64, 256 and 1024 B all run: {stdout}"
    );
}
