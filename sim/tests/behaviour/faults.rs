//! Scheduled faults of ranks (stragglers, crashes) and the collective
//! watchdog: their effect on times and results, and their reports.

use std::ops::ControlFlow;
use std::path::Path;

use engine::scenario::{Scenario, ScenarioError};
use engine::study::{Options, Row, run_scenario};
use engine::tuning::AlgoFilter;

use crate::support::{sim, temp_dir};

/// An ideal-links ring allreduce on `ranks` ranks of `size`, plus `extra`
/// lines (faults, a timeout).
fn scenario(ranks: usize, size: &str, extra: &str) -> String {
    format!(
        "world_size = {ranks}\nseed = 9\n{extra}\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 10.0\n\
         [compute]\nreduce_gb_per_s = 1.0\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\ndtype = \"int32\"\n\
         min_bytes = \"{size}\"\nmax_bytes = \"{size}\"\niters = 2\nwarmup = 1\n"
    )
}

fn rows(text: &str) -> Vec<Row> {
    let s = Scenario::parse(
        Path::new("faults.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    run_scenario(&s, &AlgoFilter::default(), Options::default(), |_| {
        ControlFlow::Continue(())
    })
    .unwrap_or_else(|f| panic!("{:?}", f.1))
}

fn run(name: &str, text: &str) -> (Option<i32>, String, String) {
    let dir = temp_dir(name);
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_late_rank_delays_a_ring_allreduce_by_exactly_its_delay() {
    // Every ring step waits on the previous rank, so a rank that starts
    // late shifts the whole ring by its delay; results stay right.
    let base = rows(&scenario(4, "64K", ""));
    let late = rows(&scenario(
        4,
        "64K",
        "[[fault]]\nkind = \"straggler\"\nrank = 2\ndelay_us = 37.5\n",
    ));
    assert_eq!(late[0].time_ps, base[0].time_ps + 37_500_000);
    assert_eq!(late[0].wrong, Some(0));
}

#[test]
fn a_slow_reducer_adds_its_extra_reduction_time() {
    // Two ranks, one chunk: each reduces half the buffer (32 KiB) once, and
    // the other rank then waits for that reduced half. At 1 GB/s reducing
    // 32 KiB takes 32.768 us; four times slower takes 131.072 us.
    let base = rows(&scenario(2, "64K", ""));
    let slow = rows(&scenario(
        2,
        "64K",
        "[[fault]]\nkind = \"straggler\"\nrank = 1\ncompute_slowdown = 4.0\n",
    ));
    assert_eq!(slow[0].time_ps, base[0].time_ps + 98_304_000);
    assert_eq!(slow[0].wrong, Some(0));
}

#[test]
fn a_crash_stops_the_rank_and_the_others_are_reported_waiting_for_it() {
    let text = scenario(
        4,
        "1M",
        "[[fault]]\nkind = \"crash\"\nrank = 2\nat_us = 5\n",
    );
    let (code, stdout, stderr) = run("crash", &text);
    assert_eq!(code, Some(5), "{stdout}{stderr}");
    assert!(
        stdout.contains("failed: rank 2 crashed at 5.000 us (scheduled fault)"),
        "{stdout}"
    );
    assert!(stdout.contains("rank 2 crashed at 5.000 us"), "{stdout}");
    assert!(stdout.contains("rank 3 waits for rank 2"), "{stdout}");
    assert!(stdout.contains("(rank crashed)"), "{stdout}");
    assert!(stderr.contains("rank 2 crashed at 5.000 us"), "{stderr}");
}

#[test]
fn faults_appear_in_the_trace() {
    let text = scenario(
        4,
        "1M",
        "[[fault]]\nkind = \"straggler\"\nrank = 1\ndelay_us = 3\n\
         [[fault]]\nkind = \"crash\"\nrank = 2\nat_us = 5\n",
    );
    let dir = temp_dir("fault-trace");
    let (path, trace) = (dir.join("s.toml"), dir.join("t.json"));
    std::fs::write(&path, text).unwrap();
    let out = sim(&[
        "run",
        path.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(5));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let slices: Vec<&serde_json::Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    let delay = slices
        .iter()
        .find(|e| e["name"] == "straggler delay")
        .unwrap();
    assert_eq!(
        (delay["ts"].as_f64(), delay["dur"].as_f64()),
        (Some(0.0), Some(3.0))
    );
    let crash = slices.iter().find(|e| e["name"] == "crash").unwrap();
    assert_eq!(crash["ts"].as_f64(), Some(5.0));
    // On one of rank 2's lanes (16 per rank).
    assert_eq!(crash["tid"].as_u64().map(|t| t / 16), Some(2));
}

#[test]
fn a_crash_after_the_work_is_done_changes_nothing() {
    let base = rows(&scenario(4, "4K", ""));
    let late = rows(&scenario(
        4,
        "4K",
        "[[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 1000000\n",
    ));
    assert_eq!(base, late);
}

#[test]
fn the_watchdog_reports_a_call_that_outlives_it() {
    // The straggler arrives 500 us late to a call the watchdog allows
    // 200 us: the run stops at start + 200 us, exit 6, naming who waits.
    let text = scenario(
        4,
        "4K",
        "timeout_ms = 0.2\n[[fault]]\nkind = \"straggler\"\nrank = 1\ndelay_us = 500\n",
    );
    let (code, stdout, stderr) = run("watchdog", &text);
    assert_eq!(code, Some(6), "{stdout}{stderr}");
    assert!(
        stdout.contains("collective timeout at 200.000 us: the call that started at 0.000 us has not finished within 200.000 us"),
        "{stdout}"
    );
    assert!(stdout.contains("rank 2 waits for rank 1"), "{stdout}");
    assert!(stderr.contains("a collective timed out"), "{stderr}");
    // Within the limit, the same straggler only slows the calls.
    let text = scenario(
        4,
        "4K",
        "timeout_ms = 1.0\n[[fault]]\nkind = \"straggler\"\nrank = 1\ndelay_us = 500\n",
    );
    let (code, stdout, _) = run("watchdog-ok", &text);
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn a_true_deadlock_is_still_a_deadlock_with_a_watchdog() {
    let text = scenario(
        4,
        "4K",
        "timeout_ms = 1000\n[[inject]]\nkind = \"extra_recv\"\nrank = 1\nfrom = 3\n",
    );
    let (code, stdout, _) = run("watchdog-deadlock", &text);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("deadlock at"), "{stdout}");
}

#[test]
fn fault_mistakes_are_located() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "[[fault]]\nkind = \"meteor\"\nrank = 1\n",
            4,
            8,
            "unknown fault kind `meteor`",
        ),
        (
            "[[fault]]\nkind = \"crash\"\nrank = 1\n",
            3,
            1,
            "a crash needs at_us",
        ),
        (
            "[[fault]]\nkind = \"straggler\"\nrank = 1\n",
            3,
            1,
            "a straggler needs delay_us",
        ),
        (
            "[[fault]]\nkind = \"crash\"\nrank = 9\nat_us = 1\n",
            5,
            8,
            "rank must be between 0 and 3",
        ),
        (
            "[[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 1\ndelay_us = 2\n",
            4,
            8,
            "`delay_us` does not apply to a crash fault",
        ),
        (
            "[[fault]]\nkind = \"straggler\"\nrank = 1\ncompute_slowdown = 0.5\n",
            6,
            20,
            "compute_slowdown must be between 1 and 1e6",
        ),
        (
            "timeout_ms = -1\n",
            3,
            14,
            "timeout_ms must be a positive number",
        ),
    ];
    for (extra, line, column, needle) in cases {
        let text = scenario(4, "4K", extra);
        match Scenario::parse(Path::new("f.toml"), &text, &algorithms::Registry::builtin()) {
            Err(ScenarioError::Invalid {
                line: l,
                column: c,
                message,
                ..
            }) => {
                assert!(message.contains(needle), "{message} lacks {needle}");
                assert_eq!((l, c), (*line, *column), "{message}");
            }
            other => panic!("{extra}: {other:?}"),
        }
    }
}

#[test]
fn a_crash_at_time_zero_stops_the_rank_before_it_sends_anything() {
    let text = scenario(
        4,
        "1M",
        "[[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 0\n",
    );
    let (code, stdout, _) = run("crash0", &text);
    assert_eq!(code, Some(5), "{stdout}");
    // It never reached the synchronisation that starts the first call, so
    // the others wait there: nothing was sent.
    assert!(stdout.contains("rank 1 crashed at 0.000 us"), "{stdout}");
    assert!(
        stdout.contains("rank 2 waits for the other ranks at the synchronisation before a call"),
        "{stdout}"
    );
    assert!(stdout.contains("deadlock at 0.000 us"), "{stdout}");
}

#[test]
fn a_rank_that_crashes_at_the_synchronisation_leaves_the_others_waiting_there() {
    // Rank 3 starts every call 10 us late, so rank 0 finishes the warm-up
    // call's share it can and waits; it crashes at 3 us. The others are then
    // seen waiting for it (its sync place is given up).
    let text = scenario(
        4,
        "4K",
        "[[fault]]\nkind = \"crash\"\nrank = 0\nat_us = 3\n\
         [[fault]]\nkind = \"straggler\"\nrank = 3\ndelay_us = 10\n",
    );
    let (code, stdout, _) = run("crash-sync", &text);
    assert_eq!(code, Some(5), "{stdout}");
    assert!(stdout.contains("rank 0 crashed at 3.000 us"), "{stdout}");
}
