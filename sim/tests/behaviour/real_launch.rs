//! `sim launch`: the rank environment, output forwarding, and what happens
//! when a rank fails, is killed, or the launcher itself dies.

use std::time::Duration;

use super::real_support::{alive, kill9, now, rank_pid, sim_env, spawn, text, wait_within};

#[test]
fn only_rank_0s_stdout_is_forwarded() {
    let out = sim_env(&["launch", "-n", "3", "--", "algorithms"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let headers = stdout
        .lines()
        .filter(|l| l.starts_with("# collective"))
        .count();
    assert_eq!(headers, 1, "{stdout}");
}

#[test]
fn ranks_get_the_rank_environment_and_their_stderr_is_prefixed() {
    // Thread ranks refuse to run under a 2-process launch, naming the rank
    // and world size the launcher gave each process.
    let out = sim_env(
        &[
            "launch",
            "-n",
            "2",
            "--grace-s",
            "5",
            "--",
            "bench",
            "--fabric",
            "threads",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    for r in 0..2 {
        assert!(
            stderr.contains(&format!("[rank {r}] error: rank {r}: --fabric threads")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("rank {r} of 2 (torchrun: RANK, WORLD_SIZE), job ")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("sim launch: rank 0 exited with status 2"),
        "{stderr}"
    );
    assert!(
        stderr.contains("sim launch: rank 1 exited with status 2"),
        "{stderr}"
    );
}

#[test]
fn a_launched_bench_runs_and_inherits_the_fabric() {
    let out = sim_env(
        &[
            "launch", "-n", "1", "--fabric", "threads", "--", "bench", "--ranks", "2", "-b", "1K",
            "-e", "4K", "-n", "2", "-w", "1",
        ],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.starts_with("# sim bench on threads: 2 thread ranks"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| !l.starts_with('#')).count(),
        3,
        "{stdout}"
    );
}

#[test]
fn a_killed_rank_is_named_and_the_others_are_stopped() {
    // bench-engine runs long enough to be killed mid-run; the launcher
    // must name the killed rank and its signal, stop the others after the
    // grace period and exit 128 + 9.
    let launcher = spawn(
        &[
            "launch",
            "-n",
            "3",
            "--grace-s",
            "0.5",
            "--",
            "bench-engine",
            "--ranks",
            "512",
            "--repeat",
            "1000",
        ],
        &[],
    );
    let pids: Vec<u32> = (0..3).map(|r| rank_pid(launcher.id(), r)).collect();
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[1]);
    let out = wait_within(launcher, Duration::from_secs(30), "sim launch");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(
        stderr.contains("sim launch: rank 1 was killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rank 0 was killed by sim launch after the grace period"),
        "{stderr}"
    );
    for pid in pids {
        assert!(!alive(pid), "rank process {pid} outlived the launcher");
    }
}

#[test]
fn ranks_stop_when_the_launcher_dies() {
    let launcher = spawn(
        &[
            "launch", "-n", "1", "--", "bench", "--fabric", "threads", "--ranks", "2", "-b", "64K",
            "-e", "64K", "-n", "1000000",
        ],
        &[],
    );
    let mut launcher = launcher;
    let launcher_pid = launcher.id();
    let rank = rank_pid(launcher_pid, 0);
    std::thread::sleep(Duration::from_millis(300));
    kill9(launcher_pid);
    // Only reap it: its output pipes stay open as long as the rank runs.
    launcher.wait().expect("the launcher is reaped");
    let start = now();
    while alive(rank) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "rank {rank} outlived its launcher by 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ranks_of_any_subcommand_stop_when_the_launcher_dies() {
    // bench-engine never reads the rank environment; it must still not
    // outlive a launcher killed with SIGKILL.
    let mut launcher = spawn(
        &[
            "launch",
            "-n",
            "2",
            "--",
            "bench-engine",
            "--ranks",
            "512",
            "--repeat",
            "1000",
        ],
        &[],
    );
    let launcher_pid = launcher.id();
    let ranks: Vec<u32> = (0..2).map(|r| rank_pid(launcher_pid, r)).collect();
    std::thread::sleep(Duration::from_millis(300));
    kill9(launcher_pid);
    launcher.wait().expect("the launcher is reaped");
    let start = now();
    while ranks.iter().any(|&r| alive(r)) {
        if start.elapsed() > Duration::from_secs(10) {
            for &r in &ranks {
                if alive(r) {
                    kill9(r);
                }
            }
            panic!("ranks {ranks:?} outlived their launcher by 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_launched_run_without_fabric_is_refused_instead_of_simulated() {
    // `sim run` without --fabric runs the simulator: launched, it would
    // print simulated times as if measured on the launcher's fabric.
    for launch_fabric in [&["--fabric", "shm"][..], &[][..]] {
        let mut args = vec!["launch", "-n", "2"];
        args.extend_from_slice(launch_fabric);
        args.extend_from_slice(&["--", "run", "scenarios/ring_8.toml"]);
        let out = sim_env(&args, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("add --fabric"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing ran");
        assert!(!stderr.contains("[rank "), "{args:?}: no rank started");
    }
}
