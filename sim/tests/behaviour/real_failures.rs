//! A rank killed in the middle of an allreduce on a multi-process fabric:
//! the others report it by rank, exit non-zero and do not hang.
//!
//! These need the tcp and shm fabrics (`realnet::tcp`, `realnet::shm`)
//! wired into `sim::real::fabric::with_fabric`; until then they are
//! ignored. Run them with `cargo test -p sim -- --ignored killed`.

use std::time::Duration;

use super::real_support::{alive, free_port, kill9, rank_pid, spawn, text, wait_within};

/// The ranks, started by the test with the rank environment, run a long
/// 64 MiB allreduce; rank 1 is killed mid-run; ranks 0 and 2 must exit
/// non-zero within the timeout, naming rank 1.
fn killed_rank_is_reported_by_the_others(fabric: &str) {
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
    kill9(one.id());
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
#[ignore = "needs realnet::tcp wired into sim::real::fabric::with_fabric"]
fn killed_rank_on_tcp_is_reported_by_the_others() {
    killed_rank_is_reported_by_the_others("tcp");
}

#[test]
#[ignore = "needs realnet::shm wired into sim::real::fabric::with_fabric"]
fn killed_rank_on_shm_is_reported_by_the_others() {
    killed_rank_is_reported_by_the_others("shm");
}

/// The same through `sim launch`: the launcher names the killed rank and
/// the survivors' reports reach its stderr, prefixed with their ranks.
#[test]
#[ignore = "needs realnet::tcp wired into sim::real::fabric::with_fabric"]
fn killed_rank_under_launch_on_tcp() {
    let launcher = spawn(
        &[
            "launch",
            "-n",
            "3",
            "--fabric",
            "tcp",
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
    let pids: Vec<u32> = (0..3).map(|r| rank_pid(launcher.id(), r)).collect();
    std::thread::sleep(Duration::from_secs(3));
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
