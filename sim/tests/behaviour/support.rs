//! Helpers shared by the behaviour tests.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use engine::network::LinkUsage;
use engine::scenario::Scenario;
use engine::study::{Options, Progress, Row, run_scenario};
use engine::tuning::AlgoFilter;
use topologies::LinkSpec;

/// The repository root (scenarios live under it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sim/ has a parent")
        .to_path_buf()
}

/// Runs the `sim` binary with `args` from the repository root.
pub fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .current_dir(repo_root())
        .env_remove("NCCL_ALGO")
        .output()
        .expect("the sim binary runs")
}

/// An ideal link with whole-number parameters, so times are exact.
pub fn link(latency_ps: u64, bandwidth_bytes_per_s: u64) -> LinkSpec {
    LinkSpec::new(latency_ps, bandwidth_bytes_per_s as f64).expect("valid test link")
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir can be created");
    dir
}

/// Waits for `child` to exit, at most `limit` (a hang guard, not a timing
/// assertion): past it the child is killed and the test fails.
pub fn wait_guarded(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sim did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The `sim` binary with `args`, run from the repository root, its stdout
/// and stderr piped.
pub fn sim_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sim"));
    command
        .args(args)
        .current_dir(repo_root())
        .env_remove("NCCL_ALGO")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// Runs `scenario` (no NCCL_ALGO filter, default options): its rows and
/// every point's link counters.
pub fn study_links(scenario: &Scenario) -> (Vec<Row>, Vec<Vec<LinkUsage>>) {
    let mut usage = Vec::new();
    let rows = run_scenario(scenario, &AlgoFilter::default(), Options::default(), |p| {
        if let Progress::Row(_, _, d) = p {
            usage.push(d.link_usage.clone().unwrap());
        }
        ControlFlow::Continue(())
    })
    .unwrap_or_else(|f| panic!("{:?}", f.1));
    (rows, usage)
}

/// One link counter summed over every link of every point.
pub fn sum_links(usage: &[Vec<LinkUsage>], f: impl Fn(&LinkUsage) -> u64) -> u64 {
    usage.iter().flatten().map(f).sum()
}
