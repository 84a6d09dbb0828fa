//! The tuner as users reach it: `sim algorithms`, `NCCL_ALGO`, and the
//! algorithm column of `sim run`.

use std::process::Command;

use algorithms::{Collective, Registry};

use crate::support::{repo_root, sim, temp_dir};

const AUTO: &str = "world_size = 16\n[links]\nlatency_us = 5\nbandwidth_gb_per_s = 25\n\
[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = \"64M\"\nstep_factor = 64\nphantom = true\niters = 1\nwarmup = 0\n";

fn run_with_env(text: &str, nccl_algo: Option<&str>) -> (Option<i32>, String, String) {
    // One directory per call: `temp_dir` empties its directory, and the
    // tests of this file run in parallel.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir(&format!("tuner_cli-{call}"));
    let path = dir.join(format!(
        "auto-{}.toml",
        nccl_algo.unwrap_or("none").replace(['^', ','], "_")
    ));
    std::fs::write(&path, text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sim"));
    cmd.args(["run", path.to_str().unwrap()])
        .current_dir(repo_root());
    match nccl_algo {
        Some(v) => cmd.env("NCCL_ALGO", v),
        None => cmd.env_remove("NCCL_ALGO"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The algorithm column of each table row.
fn chosen(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

#[test]
fn sim_algorithms_lists_the_whole_catalogue() {
    let out = sim(&["algorithms"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for e in Registry::builtin().iter() {
        let line = text
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .take(2)
                    .eq([e.collective().name(), e.name()])
            })
            .unwrap_or_else(|| panic!("{e:?} missing from:\n{text}"));
        let formula = match e.facts().formula() {
            Some(f) => f,
            // NCCL's p2p has no time model: named, never tuned.
            None if e.collective() == Collective::SendRecv => "the tuner never picks it",
            None => {
                assert!(e.facts().runs_nccl_channels(), "{e:?} has no formula");
                "NCCL's tuning model picks it"
            }
        };
        assert!(line.contains(formula), "{line}");
    }
}

#[test]
fn the_tuner_switches_algorithm_with_size_and_marks_its_choice() {
    let (code, stdout, stderr) = run_with_env(AUTO, None);
    assert_eq!(code, Some(0), "{stderr}");
    let algos = chosen(&stdout);
    assert_eq!(algos.len(), 4, "{stdout}");
    assert!(algos.iter().all(|a| a.ends_with('*')), "{stdout}");
    assert_ne!(
        algos.first(),
        algos.last(),
        "small and large sizes pick different algorithms:\n{stdout}"
    );
}

#[test]
fn nccl_algo_restricts_the_tuner() {
    let (code, stdout, _) = run_with_env(AUTO, Some("ring"));
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("# NCCL_ALGO=ring restricts the tuner"),
        "{stdout}"
    );
    assert!(chosen(&stdout).iter().all(|a| a == "ring*"), "{stdout}");

    let (_, stdout, _) = run_with_env(AUTO, Some("^ring,tree"));
    assert!(
        chosen(&stdout).iter().all(|a| a != "ring*" && a != "tree*"),
        "{stdout}"
    );

    // NCCL's own names (nvls, pat, ...) are known; other names are not.
    let (code, _, stderr) = run_with_env(AUTO, Some("sharp"));
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("NCCL_ALGO: unknown algorithm `sharp`; valid: collnet_chain, collnet_direct, nvls, nvls_tree, \
             pat, ring, tree"),
        "{stderr}"
    );
}

#[test]
fn an_algorithm_named_in_the_scenario_wins_over_nccl_algo() {
    let text = AUTO.replace(
        "kind = \"allreduce\"",
        "kind = \"allreduce\"\nalgorithm = \"rabenseifner\"",
    );
    let (code, stdout, _) = run_with_env(&text, Some("tree"));
    assert_eq!(code, Some(0));
    assert!(
        chosen(&stdout).iter().all(|a| a == "rabenseifner"),
        "{stdout}"
    );
}
