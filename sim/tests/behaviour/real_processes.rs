//! Multi-process fabrics (tcp, shm) under the launchers: a benchmark that
//! checks clean, ranks that disagree on the command, and a rank killed in
//! the middle of an allreduce (the others report it by rank, exit non-zero
//! and do not hang).
//!

use std::time::Duration;

use super::real_support::sim_env;

use super::real_support::{
    alive, free_port, kill9, rank_pid, signal, spawn, text, wait_for_table, wait_within,
};

/// The ranks, started by the test with the rank environment, run a long
/// 64 MiB allreduce; rank 1 is killed mid-run; ranks 0 and 2 must exit
/// non-zero within the timeout, naming rank 1. With `freeze`, rank 0 is
/// stopped (SIGSTOP) from just before the kill for that long, as a rank
/// starved of CPU on a loaded host: it reads nothing while rank 2 fails,
/// so it names rank 1 only if rank 2's farewell waited for it to read.
fn killed_rank_is_reported_by_the_others(fabric: &str, freeze: Option<Duration>) {
    let port = free_port().to_string();
    let timeout_ms = "5000";
    let ranks: Vec<_> = (0..3)
        .map(|r| {
            let rank = r.to_string();
            spawn(
                &[
                    "bench", "--fabric", fabric, "-b", "64M", "-e", "64M", "-n", "50", "-w", "1",
                ],
                &[
                    ("RANK", rank.as_str()),
                    ("WORLD_SIZE", "3"),
                    ("MASTER_ADDR", "127.0.0.1"),
                    ("MASTER_PORT", port.as_str()),
                    ("REALNET_JOB_ID", "4242"),
                    ("REALNET_TOKEN", "killed-rank-test"),
                    ("REALNET_TIMEOUT_MS", timeout_ms),
                ],
            )
        })
        .collect();
    // Let them connect and start the timed calls.
    std::thread::sleep(Duration::from_secs(3));
    let mut ranks = ranks.into_iter();
    let (zero, one, two) = (
        ranks.next().unwrap(),
        ranks.next().unwrap(),
        ranks.next().unwrap(),
    );
    if freeze.is_some() {
        signal(zero.id(), "STOP");
        std::thread::sleep(Duration::from_millis(100));
    }
    kill9(one.id());
    if let Some(freeze) = freeze {
        std::thread::sleep(freeze);
        signal(zero.id(), "CONT");
    }
    let _ = wait_within(one, Duration::from_secs(5), "the killed rank");
    // The timeout plus a margin for a debug build's slow copies.
    let limit = Duration::from_secs(20);
    for (r, child) in [(0, zero), (2, two)] {
        let out = wait_within(child, limit, &format!("rank {r}"));
        let stderr = text(&out.stderr);
        assert!(
            !out.status.success(),
            "rank {r} exited 0 after its peer died: {stderr}"
        );
        assert!(
            stderr.contains("rank 1") || stderr.contains("peer 1"),
            "rank {r} does not name rank 1: {stderr}"
        );
    }
}

#[test]
fn killed_rank_on_tcp_is_reported_by_the_others() {
    killed_rank_is_reported_by_the_others("tcp", None);
}

#[test]
fn a_survivor_frozen_while_the_others_failed_still_names_the_killed_rank_on_tcp() {
    killed_rank_is_reported_by_the_others("tcp", Some(Duration::from_millis(1200)));
}

#[test]
fn killed_rank_on_shm_is_reported_by_the_others() {
    killed_rank_is_reported_by_the_others("shm", None);
}

/// The same through `sim launch`: the launcher names the killed rank and
/// the survivors' reports reach its stderr, prefixed with their ranks.
fn killed_rank_under_launch(fabric: &str) {
    let launcher = spawn(
        &[
            "launch",
            "-n",
            "3",
            "--fabric",
            fabric,
            "--grace-s",
            "15",
            "--",
            "bench",
            "-b",
            "64M",
            "-e",
            "64M",
            "-n",
            "50",
            "--timeout-s",
            "5",
        ],
        &[],
    );
    let mut launcher = launcher;
    let pids: Vec<u32> = (0..3).map(|r| rank_pid(launcher.id(), r)).collect();
    wait_for_table(&mut launcher);
    std::thread::sleep(Duration::from_millis(500));
    kill9(pids[1]);
    let out = wait_within(launcher, Duration::from_secs(30), "sim launch");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(
        stderr.contains("sim launch: rank 1 was killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    for r in [0, 2] {
        assert!(
            stderr.contains(&format!("sim launch: rank {r} exited with status")),
            "rank {r} did not exit on its own within the grace period: {stderr}"
        );
        let own: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("[rank {r}]")))
            .collect();
        assert!(
            own.iter()
                .any(|l| l.contains("rank 1") || l.contains("peer 1")),
            "rank {r} does not name rank 1: {own:?}"
        );
    }
    for pid in pids {
        assert!(!alive(pid), "rank process {pid} outlived the launcher");
    }
}

#[test]
fn killed_rank_under_launch_on_tcp() {
    killed_rank_under_launch("tcp");
}

#[test]
fn killed_rank_under_launch_on_shm() {
    killed_rank_under_launch("shm");
}

#[test]
fn launched_benchmarks_check_clean_on_tcp_and_shm() {
    for fabric in ["tcp", "shm"] {
        for n in ["2", "3"] {
            let out = sim_env(
                &[
                    "launch",
                    "-n",
                    n,
                    "--fabric",
                    fabric,
                    "--",
                    "bench",
                    "-b",
                    "8",
                    "-e",
                    "64K",
                    "-f",
                    "32",
                    "-n",
                    "2",
                    "-w",
                    "1",
                    "--timeout-s",
                    "20",
                ],
                &[],
            );
            let stdout = text(&out.stdout);
            assert!(
                out.status.success(),
                "{fabric} x{n}: {stdout}\n{}",
                text(&out.stderr)
            );
            assert!(
                stdout.starts_with(&format!("# sim bench on {fabric}: rank 0 of {n} (torchrun")),
                "{stdout}"
            );
            assert_eq!(
                stdout.lines().filter(|l| !l.starts_with('#')).count(),
                3,
                "{stdout}"
            );
            assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
        }
    }
}

#[test]
fn ranks_started_with_different_commands_refuse_to_run() {
    let port = free_port().to_string();
    let ranks: Vec<_> = ["1K", "2K"]
        .iter()
        .enumerate()
        .map(|(r, max)| {
            let rank = r.to_string();
            spawn(
                &["bench", "--fabric", "tcp", "-b", "8", "-e", max],
                &[
                    ("RANK", rank.as_str()),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "127.0.0.1"),
                    ("MASTER_PORT", port.as_str()),
                    ("REALNET_JOB_ID", "7"),
                    ("REALNET_TOKEN", "same"),
                ],
            )
        })
        .collect();
    for (r, child) in ranks.into_iter().enumerate() {
        let out = wait_within(child, Duration::from_secs(30), &format!("rank {r}"));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("every rank must run the same command"),
            "{stderr}"
        );
    }
}

#[test]
fn ranks_on_different_fabrics_refuse_to_run_and_say_so() {
    // One rank names its fabric with --fabric, the other through
    // REALNET_FABRIC: both say shm in the first pair, so they run; the
    // second pair differs, which is refused before either fabric connects.
    for (fabrics, agree) in [(["shm", "shm"], true), (["shm", "tcp"], false)] {
        let port = free_port().to_string();
        let ranks: Vec<_> = fabrics
            .iter()
            .enumerate()
            .map(|(r, fabric)| {
                let rank = r.to_string();
                let mut args = vec!["bench", "-b", "8", "-e", "64", "-n", "1", "-w", "0"];
                let mut env = vec![
                    ("RANK", rank.clone()),
                    ("WORLD_SIZE", "2".to_string()),
                    ("MASTER_ADDR", "127.0.0.1".to_string()),
                    ("MASTER_PORT", port.clone()),
                    ("REALNET_JOB_ID", "9".to_string()),
                    ("REALNET_TOKEN", "same".to_string()),
                ];
                if r == 0 {
                    args.extend_from_slice(&["--fabric", fabric]);
                } else {
                    env.push(("REALNET_FABRIC", fabric.to_string()));
                }
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                spawn(&args, &env)
            })
            .collect();
        for (r, child) in ranks.into_iter().enumerate() {
            let out = wait_within(child, Duration::from_secs(30), &format!("rank {r}"));
            let stderr = text(&out.stderr);
            if agree {
                assert!(out.status.success(), "{fabrics:?} rank {r}: {stderr}");
            } else {
                assert_eq!(out.status.code(), Some(2), "{fabrics:?} rank {r}: {stderr}");
                assert!(stderr.contains("--fabric tcp"), "rank {r}: {stderr}");
                assert!(stderr.contains("--fabric shm"), "rank {r}: {stderr}");
            }
        }
    }
}
