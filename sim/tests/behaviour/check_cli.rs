//! `sim check` and `sim replay` on the command line: exit statuses, the
//! saved counterexample replayed to the same verdict, the Chrome trace of
//! a replay, and located errors for bad input.

use std::path::Path;
use std::process::Output;

use checker::cex::CexFile;

use crate::support::{sim, temp_dir};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

/// Runs `sim check` on `scenarios/check/NAME.toml`, saving any
/// counterexample to `save`.
fn check_saving(name: &str, save: &Path) -> Output {
    let scenario = format!("scenarios/check/{name}.toml");
    let save = save.to_str().expect("a UTF-8 temp path");
    sim(&["check", &scenario, "--save", save])
}

#[test]
fn check_exit_status_says_verified_deadlock_or_wrong_result() {
    let dir = temp_dir("check-cli-status");
    for (name, status) in [
        ("ring_ok", 0),
        ("pat_ok", 0),
        ("sendrecv_ok", 0),
        ("mismatched_order", 3),
        ("buggy_ring", 4),
    ] {
        let cex = dir.join(format!("{name}.cex.toml"));
        let out = check_saving(name, &cex);
        assert_eq!(
            code(&out),
            status,
            "{name}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        let verdict = text
            .lines()
            .find_map(|l| l.strip_prefix("verdict: "))
            .unwrap_or_else(|| panic!("{name}: no verdict line in {text}"));
        assert!(verdict.contains("(expected "), "{name}: {verdict}");
        assert!(!verdict.contains("NOT"), "{name}: {verdict}");
        // A counterexample is saved exactly when something failed.
        assert_eq!(cex.exists(), status != 0, "{name}: {}", cex.display());
    }
}

#[test]
fn a_saved_counterexample_replays_to_the_same_status_and_summary() {
    let dir = temp_dir("check-cli-replay");
    for (name, status) in [
        ("mismatched_order", 3),
        ("buggy_ring", 4),
        ("tag_reuse", 4),
        ("nondeterministic_sum", 4),
        ("drop_without_retry", 4),
    ] {
        let path = dir.join(format!("{name}.cex.toml"));
        let checked = check_saving(name, &path);
        assert_eq!(code(&checked), status, "{name}: {}", stderr(&checked));
        let file = CexFile::load(&path).expect("the saved file loads");
        let summary_line = format!("{}: {}", file.verdict, file.summary);
        assert!(
            stdout(&checked).lines().any(|l| l == summary_line),
            "{name}: `sim check` prints `{summary_line}`"
        );
        assert!(
            stdout(&checked).contains(&format!("sim replay {}", path.display())),
            "{name}: the check says how to replay"
        );

        let replayed = sim(&["replay", path.to_str().expect("UTF-8")]);
        assert_eq!(
            code(&replayed),
            status,
            "{name}: {}{}",
            stdout(&replayed),
            stderr(&replayed)
        );
        assert!(
            stdout(&replayed).lines().any(|l| l == summary_line),
            "{name}: `sim replay` prints `{summary_line}`:\n{}",
            stdout(&replayed)
        );
        assert!(
            stderr(&replayed).is_empty(),
            "{name}: {}",
            stderr(&replayed)
        );
    }
}

#[test]
fn replay_writes_a_chrome_trace_with_a_slice_per_step() {
    let dir = temp_dir("check-cli-trace");
    let cex = dir.join("buggy_ring.cex.toml");
    assert_eq!(code(&check_saving("buggy_ring", &cex)), 4);
    let file = CexFile::load(&cex).expect("the saved file loads");
    assert!(!file.choices.is_empty(), "the counterexample has steps");
    let trace = dir.join("out.json");
    let out = sim(&[
        "replay",
        cex.to_str().expect("UTF-8"),
        "--trace",
        trace.to_str().expect("UTF-8"),
    ]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let text = std::fs::read_to_string(&trace).expect("the trace is written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    let events = json["traceEvents"].as_array().expect("a traceEvents array");
    let slices: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "step")
        .collect();
    assert_eq!(slices.len(), file.choices.len(), "one step slice per step");
    for (i, (slice, choice)) in slices.iter().zip(&file.choices).enumerate() {
        assert_eq!(slice["name"], choice.as_str(), "slice {i} names its choice");
        assert_eq!(slice["args"]["step"], i + 1);
        let rank = slice["tid"].as_u64().expect("a rank lane");
        assert!(rank < file.world_size as u64, "lane {rank}");
    }
    let lanes = events.iter().filter(|e| e["ph"] == "M").count();
    assert_eq!(lanes, file.world_size, "a named lane per rank");
    // Every delivery has its message's arrow: a start and an end.
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    let ends = events.iter().filter(|e| e["ph"] == "f").count();
    let deliveries = file
        .choices
        .iter()
        .filter(|c| c.starts_with("deliver"))
        .count();
    assert_eq!((starts, ends), (deliveries, deliveries));
}

#[test]
fn a_malformed_scenario_exits_2_naming_file_line_and_column() {
    let dir = temp_dir("check-cli-bad-scenario");
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "expect = \"verified\"\n\n[[call]]\ncollective = \"allreduce\"\nalgorithm = \"ringg\"\n",
    )
    .expect("write the scenario");
    let out = sim(&["check", path.to_str().expect("UTF-8")]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:5:13:", path.display())),
        "file:line:column of `\"ringg\"`: {err}"
    );
    assert!(err.contains("unknown algorithm `ringg`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The buggy ring's counterexample with its third choice replaced by a
/// delivery that is never enabled (no rank ever sends from 2 to 1).
fn edited_counterexample(dir: &Path) -> (std::path::PathBuf, CexFile) {
    let cex = dir.join("buggy_ring.cex.toml");
    assert_eq!(code(&check_saving("buggy_ring", &cex)), 4);
    let mut file = CexFile::load(&cex).expect("the saved file loads");
    assert!(file.choices.len() >= 3);
    file.choices[2] = "deliver 2->1 tag 0".into();
    let edited = dir.join("edited.cex.toml");
    file.save(&edited).expect("the edited file is written");
    (edited, file)
}

#[test]
fn a_counterexample_whose_choices_do_not_replay_exits_2() {
    let dir = temp_dir("check-cli-bad-cex");
    let (edited, _) = edited_counterexample(&dir);
    let out = sim(&["replay", edited.to_str().expect("UTF-8")]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&edited.display().to_string()),
        "names the file: {err}"
    );
    assert!(
        err.contains("deliver 2->1 tag 0"),
        "names the choice: {err}"
    );
    assert!(
        err.contains("choice 3 "),
        "numbers the choice from 1: {err}"
    );
    assert!(
        err.contains("does not match the scenario"),
        "says why: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A choice that cannot even be read is named by its position.
    let mut file = CexFile::load(&edited).expect("loads");
    file.choices[1] = "teleport 0->1".into();
    file.save(&edited).expect("written");
    let out = sim(&["replay", edited.to_str().expect("UTF-8")]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("choice 2") && err.contains("teleport 0->1"),
        "{err}"
    );
}

#[test]
fn min_buffering_names_one_eager_slot_for_zero_buffering() {
    let out = sim(&[
        "check",
        "scenarios/check/zero_buffering.toml",
        "--min-buffering",
        "--no-save",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().any(|l| l.starts_with("minimum: 1 ")), "{text}");
    let below = text
        .split("below it (rendezvous):")
        .nth(1)
        .unwrap_or_else(|| panic!("the failing capacity is shown: {text}"));
    assert!(below.contains("deadlock: "), "{below}");
    assert!(below.contains("cycle: "), "{below}");
}
