//! A verdict's exit status survives a closed stdout (a pipe whose reader
//! went away: `sim run s.toml | head`), so `set -o pipefail` still sees a
//! failing check; and a stderr that cannot be written (closed, full) never
//! makes `sim` panic.

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{repo_root, sim, temp_dir, wait_guarded};

/// `sim` with `args`, its stdout a pipe closed before it writes and its
/// stderr as `stderr`; returns the exit code.
fn with_stdout_closed(args: &[&str], stderr: Stdio) -> Option<i32> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .current_dir(repo_root())
        .env_remove("NCCL_ALGO")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    wait_guarded(&mut child, Duration::from_secs(120)).code()
}

/// A sweep of two points whose second crashes (exit 5).
const CRASHING_SWEEP: &str = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
    [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"1K\"\nmax_bytes = \"4K\"\n\
    step_factor = 4\nphantom = true\niters = 2\nwarmup = 1\n\
    [[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 20\n\
    [sweep]\nworld_size = [2, 8]\n";

#[test]
fn the_verdict_decides_the_exit_status_when_stdout_is_closed() {
    let dir = temp_dir("closed-stdout");
    let cex = dir.join("mismatched.cex.toml");
    let saved = sim(&[
        "check",
        "scenarios/check/mismatched_order.toml",
        "--save",
        cex.to_str().unwrap(),
    ]);
    assert_eq!(saved.status.code(), Some(3), "{saved:?}");
    let sweep = dir.join("sweep.toml");
    fs::write(&sweep, CRASHING_SWEEP).unwrap();
    // A check that passes in one schedule.
    let passing = dir.join("ring2.toml");
    fs::write(
        &passing,
        "[[call]]\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n[params]\nworld_size = 2\ncount = 2\n",
    )
    .unwrap();
    let cases: [(&[&str], i32); 5] = [
        (&["run", "scenarios/deadlock_extra_recv.toml"], 3),
        (
            &[
                "check",
                "scenarios/check/mismatched_order.toml",
                "--no-save",
            ],
            3,
        ),
        (&["check", passing.to_str().unwrap(), "--no-save"], 0),
        (&["replay", cex.to_str().unwrap()], 3),
        (&["sweep", sweep.to_str().unwrap(), "--quiet"], 5),
    ];
    for (args, expected) in cases {
        assert_eq!(
            with_stdout_closed(args, Stdio::null()),
            Some(expected),
            "sim {}",
            args.join(" ")
        );
    }
}

#[test]
fn a_stderr_that_cannot_be_written_changes_nothing() {
    for stderr in ["/dev/full", "closed"] {
        let stdio = if stderr == "closed" {
            // A pipe whose reader is gone at once.
            let mut child = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
            let pipe = child.stdin.take().unwrap();
            child.wait().unwrap();
            Stdio::from(pipe)
        } else {
            Stdio::from(fs::OpenOptions::new().write(true).open(stderr).unwrap())
        };
        // The deadlock's error line goes to stderr, and fails there.
        assert_eq!(
            with_stdout_closed(&["run", "scenarios/deadlock_extra_recv.toml"], stdio),
            Some(3),
            "stderr {stderr}"
        );
    }
}
