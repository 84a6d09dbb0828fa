//! Helpers for the tests of the real-fabric commands (`sim bench`,
//! `sim launch`, `sim run --fabric`).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::support::repo_root;

/// Every launcher variable the rank environment reads.
pub const RANK_VARS: [&str; 17] = [
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_ID",
    "REALNET_JOB_ID",
    "REALNET_TOKEN",
    "REALNET_FABRIC",
    "REALNET_LAUNCHER",
    "REALNET_TIMEOUT_MS",
    "NCCL_ALGO",
];

/// The `sim` command with a clean rank environment plus `env`.
pub fn sim_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sim"));
    cmd.args(args).current_dir(repo_root());
    for v in RANK_VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `sim` with a clean rank environment plus `env`.
pub fn sim_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    sim_command(args, env)
        .output()
        .expect("the sim binary runs")
}

/// Starts `sim` with piped outputs.
pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    sim_command(args, env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sim binary starts")
}

/// Waits for `child` at most `limit` (killing it and failing past that),
/// then collects its output; fails if a descendant still holds its output
/// pipes 5 s after it exited (a rank left behind).
pub fn wait_within(mut child: Child, limit: Duration, what: &str) -> Output {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut readers = 0;
    if let Some(mut out) = child.stdout.take() {
        let tx = tx.clone();
        readers += 1;
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            let _ = tx.send((true, buf));
        });
    }
    if let Some(mut err) = child.stderr.take() {
        let tx = tx.clone();
        readers += 1;
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err.read_to_end(&mut buf);
            let _ = tx.send((false, buf));
        });
    }
    let start = now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait works") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..readers {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok((true, b)) => stdout = b,
            Ok((false, b)) => stderr = b,
            Err(_) => panic!("{what} exited but a process it started still holds its output"),
        }
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

/// The wall clock: these tests wait for real processes, not simulated
/// time.
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    Instant::now()
}

/// Bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The children of process `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The value of variable `name` in process `pid`'s environment.
pub fn environ_var(pid: u32, name: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    raw.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(&format!("{name}=")).map(str::to_string)
    })
}

/// Whether process `pid` still runs (a zombie waiting for its reaper does
/// not count).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("X");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// The child of `launcher` that is rank `rank`, waiting up to 20 s for it
/// to appear.
pub fn rank_pid(launcher: u32, rank: usize) -> u32 {
    let start = now();
    loop {
        for pid in children(launcher) {
            if environ_var(pid, "RANK").as_deref() == Some(&rank.to_string()) {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "rank {rank} of launcher {launcher} never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends SIGKILL to `pid` (through kill(1): the tests forbid unsafe code).
pub fn kill9(pid: u32) {
    signal(pid, "KILL");
}

/// Sends `pid` the signal named `name` (as kill(1) spells it: KILL, STOP,
/// CONT...).
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Writes a scenario file.
pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("scenario written");
}

/// Waits (up to 60 s) until `child`'s stdout shows the table header, the
/// sign that every rank connected and the benchmark started; the rest of
/// its stdout is drained in the background.
pub fn wait_for_table(child: &mut Child) {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("#       size") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the benchmark started within 60 s");
}
