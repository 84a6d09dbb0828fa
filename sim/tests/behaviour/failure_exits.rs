//! Each way a simulated run can fail has its own exit status and says what
//! happened; no scenario value makes `sim` panic.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use engine::scenario::Scenario;
use engine::study::run_scenario;
use proptest::prelude::*;

use crate::support::{repo_root, sim, temp_dir};

const BASE: &str = "world_size = 4\nseed = 5\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
[[collective]]\nkind = \"allreduce\"\nmin_bytes = 1024\nmax_bytes = 1024\ndtype = \"int32\"\niters = 2\nwarmup = 1\n";

/// Writes `text` as a scenario and runs `sim run` on it.
fn run_text(name: &str, text: &str) -> (Option<i32>, String, String) {
    let dir = temp_dir(name);
    let path = dir.join(format!("{name}.toml"));
    fs::write(&path, text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_corrupted_result_is_counted_and_exits_4() {
    let text = format!("{BASE}[[inject]]\nkind = \"corrupt_result\"\nrank = 2\n");
    let (code, stdout, stderr) = run_text("corrupt", &text);
    assert_eq!(code, Some(4), "{stdout}{stderr}");
    // One element of one rank's 256 is off by one.
    assert!(stdout.contains("int32    sum    -1"), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("       1  ")), "{stdout}");
    assert!(
        stdout.contains("# Out of bounds values : 1 FAILED"),
        "{stdout}"
    );
    assert!(stderr.contains("1 wrong element(s) (seed 5)"), "{stderr}");
}

#[test]
fn ranks_that_disagree_on_the_size_fail_with_exit_5_naming_the_rank() {
    let text = format!("{BASE}[[inject]]\nkind = \"count_mismatch\"\nrank = 1\n");
    let (code, stdout, stderr) = run_text("mismatch", &text);
    assert_eq!(code, Some(5), "{stdout}{stderr}");
    assert!(stdout.contains("failed: rank "), "{stdout}");
    assert!(stdout.contains("expected"), "{stdout}");
    assert!(
        stderr.contains("failed (allreduce at 1024 bytes)"),
        "{stderr}"
    );
}

#[test]
fn virtual_time_past_its_end_is_an_input_error() {
    let text = BASE
        .replace("bandwidth_gb_per_s = 25.0", "bandwidth_gb_per_s = 1e-9")
        .replace(
            "min_bytes = 1024\nmax_bytes = 1024",
            "min_bytes = \"1G\"\nmax_bytes = \"1G\"\nphantom = true",
        );
    let (code, stdout, stderr) = run_text("out_of_time", &text);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    // One 1 GiB buffer alone would take 34 years: refused before the run,
    // at the value (a run that passes the end names the value too:
    // special_inputs.rs).
    assert!(
        stderr.contains("out_of_time.toml:5:22: bandwidth_gb_per_s = 1e-9 is unrealistic"),
        "{stderr}"
    );
    assert!(
        stderr.contains("virtual time ends after 2^64 ps"),
        "{stderr}"
    );
}

#[test]
fn an_unwritable_stdout_exits_1_and_a_closed_pipe_stops_quietly() {
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["run", "scenarios/ring_64_phantom.toml"])
        .current_dir(repo_root())
        .stdout(full)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));

    let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "bench-engine",
            "--ranks",
            "8",
            "--bytes",
            "1M",
            "--repeat",
            "50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn extreme_values_never_panic() {
    let cases = [
        // A chunk far beyond the buffer, on one-byte elements.
        BASE.replace(
            "dtype = \"int32\"",
            "dtype = \"uint8\"\nchunk_bytes = \"18446744073709551615\"",
        ),
        BASE.replace(
            "dtype = \"int32\"",
            "dtype = \"uint8\"\nchunk_bytes = 1\nslots = 65536",
        ),
        BASE.replace("latency_us = 1.0", "latency_us = 0"),
        BASE.replace("bandwidth_gb_per_s = 25.0", "bandwidth_gb_per_s = 1e300"),
        BASE.replace("world_size = 4", "world_size = 1"),
        BASE.replace(
            "min_bytes = 1024\nmax_bytes = 1024",
            "min_bytes = 0\nmax_bytes = 3",
        ),
        BASE.replace("max_bytes = 1024", "max_bytes = \"1000G\""),
        BASE.replace("world_size = 4", "world_size = 1048576"),
    ];
    for text in cases {
        let (code, stdout, stderr) = run_text("extreme", &text);
        assert!(
            matches!(code, Some(0 | 2)),
            "exit {code:?} for:\n{text}\n{stdout}{stderr}"
        );
        if code == Some(2) {
            assert!(stderr.starts_with("error: "), "{stderr}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random small scenarios run to completion with every element right.
    #[test]
    fn random_small_scenarios_complete_correctly(
        world_size in 1usize..=9,
        min_bytes in 0u64..=64,
        spread in 1u64..=512,
        step_factor in 2u64..=5,
        chunk_bytes in prop_oneof![1u64..=64, Just(u64::MAX)],
        slots in 1usize..=9,
        dtype in prop::sample::select(vec!["float", "double", "int32", "int64", "uint8"]),
        op in prop::sample::select(vec!["sum", "prod", "min", "max"]),
        warmup in 0u32..=2,
        seed in any::<u64>(),
    ) {
        let text = format!(
            "world_size = {world_size}\nseed = {seed}\n[links]\nlatency_us = 0.5\nbandwidth_gb_per_s = 10\n\
             [compute]\nreduce_gb_per_s = 40\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = {min_bytes}\n\
             max_bytes = {}\nstep_factor = {step_factor}\ndtype = \"{dtype}\"\nop = \"{op}\"\n\
             iters = 1\nwarmup = {warmup}\nchunk_bytes = \"{chunk_bytes}\"\nslots = {slots}\n",
            min_bytes * spread
        );
        let scenario = Scenario::parse(Path::new("random.toml"), &text, &algorithms::Registry::builtin()).unwrap();
        let filter = engine::tuning::AlgoFilter::default();
        let rows = run_scenario(&scenario, &filter, engine::study::Options::default(), |_| std::ops::ControlFlow::Continue(())).unwrap();
        prop_assert!(!rows.is_empty());
        for row in rows {
            prop_assert_eq!(row.wrong, Some(0), "{:?}", row);
        }
    }
}
