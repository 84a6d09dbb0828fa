//! A rank that stops responding (SIGSTOP) in the middle of a launched
//! benchmark, each rank in turn, twice, on shm and on TCP: every survivor
//! names the stopped rank ("rank R stopped responding") and blames no
//! live rank, and `sim launch` names it as the cause and kills it. The
//! job's timeout is short (`--timeout-s 1.5`); the heartbeats' interval
//! and silence threshold follow from it.

use std::process::Command;
use std::time::Duration;

use super::real_support::{alive, rank_pid, spawn, text, wait_for_table, wait_within};

/// Rounds of stopping each rank in turn.
const ROUNDS: usize = 2;
/// Ranks in the job.
const RANKS: usize = 3;

/// Sends `signal` (a name kill(1) knows) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// Kills the ranks left behind if the test fails half-way (a stopped
/// process would otherwise stay forever).
struct Reaper(Vec<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// Launches a 3-rank benchmark on `fabric`, stops rank `victim` once the
/// timed calls run, and checks what every survivor and the launcher say.
fn stop_one_rank(fabric: &str, victim: usize) {
    let mut launcher = spawn(
        &[
            "launch",
            "-n",
            "3",
            "--fabric",
            fabric,
            "--grace-s",
            "20",
            "--",
            "bench",
            "-b",
            "256K",
            "-e",
            "256K",
            "-n",
            "1000000",
            "-w",
            "1",
            "--timeout-s",
            "1.5",
        ],
        &[],
    );
    let pids: Vec<u32> = (0..RANKS).map(|r| rank_pid(launcher.id(), r)).collect();
    let _reaper = Reaper(pids.clone());
    wait_for_table(&mut launcher);
    std::thread::sleep(Duration::from_millis(200));
    signal(pids[victim], "STOP");
    let out = wait_within(launcher, Duration::from_secs(30), "sim launch");
    let stderr = text(&out.stderr);
    let what = format!("{fabric}, rank {victim} stopped");
    assert!(!out.status.success(), "{what}: the job succeeded: {stderr}");
    assert!(
        stderr.contains(&format!(
            "sim launch: rank {victim} is stopped (SIGSTOP or a debugger) and responds to nothing"
        )),
        "{what}: the launcher does not name it: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "sim launch: rank {victim} was stopped (SIGSTOP or a debugger), responding to nothing, and was killed by sim launch"
        )),
        "{what}: the launcher did not kill it: {stderr}"
    );
    for r in (0..RANKS).filter(|r| *r != victim) {
        let own: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("[rank {r}] error:")))
            .collect();
        assert!(
            own.iter()
                .any(|l| l.contains(&format!("rank {victim} stopped responding"))),
            "{what}: rank {r} does not name rank {victim}: {own:?}\n{stderr}"
        );
        for live in (0..RANKS).filter(|x| *x != victim) {
            assert!(
                !own.iter().any(|l| {
                    l.contains(&format!("rank {live} stopped responding"))
                        || l.contains(&format!("though rank {live} is alive"))
                        || l.contains(&format!("rank {live} is dead or hung"))
                }),
                "{what}: rank {r} blames live rank {live}: {own:?}"
            );
        }
        assert!(
            stderr.contains(&format!("sim launch: rank {r} exited with status")),
            "{what}: rank {r} did not exit on its own: {stderr}"
        );
    }
    for pid in pids {
        assert!(
            !alive(pid),
            "{what}: rank process {pid} outlived the launcher"
        );
    }
}

fn each_rank_in_turn(fabric: &str) {
    for _ in 0..ROUNDS {
        for victim in 0..RANKS {
            stop_one_rank(fabric, victim);
        }
    }
}

#[test]
fn a_stopped_rank_is_named_by_every_survivor_and_the_launcher_on_shm() {
    each_rank_in_turn("shm");
}

#[test]
fn a_stopped_rank_is_named_by_every_survivor_and_the_launcher_on_tcp() {
    each_rank_in_turn("tcp");
}
