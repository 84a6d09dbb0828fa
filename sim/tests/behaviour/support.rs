//! Helpers shared by the behaviour tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
