//! Golden transcripts: the exact text `sim run` prints for a few scenarios.
//! A change to the table's format or to any simulated time shows up here.
//! Regenerate deliberately with `BLESS=1 cargo test --test behaviour golden`.

use std::fs;

use crate::support::{repo_root, sim};

fn check_transcript(scenario: &str, golden: &str, status: i32) {
    let out = sim(&["run", scenario]);
    assert_eq!(
        out.status.code(),
        Some(status),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    let path = repo_root().join("sim/tests/behaviour/golden").join(golden);
    if std::env::var_os("BLESS").is_some() {
        fs::write(&path, &text).expect("golden file is writable");
    }
    let want = fs::read_to_string(&path).expect("golden file exists (BLESS=1 creates it)");
    assert_eq!(text, want, "transcript of {scenario} changed");
}

#[test]
fn mixed_scenario_transcript() {
    check_transcript("sim/tests/behaviour/golden/mixed.toml", "mixed.txt", 0);
}

#[test]
fn deadlock_transcript() {
    check_transcript(
        "scenarios/deadlock_extra_recv.toml",
        "deadlock_extra_recv.txt",
        3,
    );
}
