//! SIGINT and SIGTERM during `sim sweep` and `sim run`: the command stops
//! between rows, its outputs are valid files marked partial (never the
//! old file truncated, never a temporary file left behind), it exits 130
//! or 143, and `sim sweep --resume` completes an interrupted sweep to the
//! same bytes as one uninterrupted run.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{sim, sim_command, temp_dir, wait_guarded};

/// A hang guard for each child; the commands take a second or two.
const LIMIT: Duration = Duration::from_secs(120);

/// 8 world sizes x 4 seeds = 32 points of 9 sizes each (about 20 ms
/// each, so a sweep signalled after its first point is far from its end);
/// the world size is a rank-count axis, so the scaling columns are filled
/// at the end.
const SWEEP: &str = "world_size = 4\nseed = 1\n\
[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 8\nmax_bytes = \"1M\"\n\
step_factor = 4\nphantom = true\niters = 50\nwarmup = 1\n\
[sweep]\nworld_size = [2, 3, 4, 5, 6, 7, 8, 9]\nseed = [1, 2, 3, 4]\n";

/// 28 sizes up to 1 GiB: the later ones take seconds each, so a run
/// signalled after its first rows is far from its end.
const RUN: &str = "world_size = 8\nseed = 1\n\
[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 8\nmax_bytes = \"1G\"\n\
step_factor = 2\nphantom = true\niters = 20\nwarmup = 1\n";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Sends `signal` to `child` (with the shell's `kill`: the workspace
/// forbids unsafe code, tests included).
fn signal(child: &Child, signal: i32) {
    let sent = std::process::Command::new("sh")
        .args(["-c", &format!("kill -{signal} {}", child.id())])
        .status()
        .unwrap();
    assert!(sent.success(), "kill failed");
}

/// The temporary files beside `path` (its output under construction).
fn temporaries(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().unwrap().to_str().unwrap();
    let prefix = format!(".{name}.");
    fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with(&prefix) && n.ends_with(".tmp")
        })
        .collect()
}

/// Waits until the output under construction for `path` holds at least
/// `lines` lines.
fn wait_for_lines(path: &Path, lines: usize, child: &mut Child) {
    let start = Instant::now();
    loop {
        let longest = temporaries(path)
            .iter()
            .filter_map(|t| fs::read_to_string(t).ok())
            .map(|text| text.lines().count())
            .max()
            .unwrap_or(0);
        if longest >= lines {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("sim ended ({status}) before it wrote {lines} lines");
        }
        assert!(
            start.elapsed() < LIMIT,
            "no {lines} lines written in {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Interrupts `sim sweep` with `sig` once its CSV has a point, checks
/// the partial file, resumes it and returns the resumed file's text.
fn interrupt_and_resume(path: &Path, csv: &Path, sig: i32, reference: &str) -> String {
    fs::write(csv, "an older result\n").unwrap();
    let mut child = sim_command(&[
        "sweep",
        s(path),
        "--csv",
        s(csv),
        "--threads",
        "2",
        "--quiet",
    ])
    .spawn()
    .unwrap();
    // The `# sweep` line, the header and a point of 9 rows.
    wait_for_lines(csv, 2 + 9, &mut child);
    signal(&child, sig);
    let status = wait_guarded(&mut child, LIMIT);
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(128 + sig), "{stderr}");
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    assert!(
        stderr.contains(&format!("interrupted by {name}")),
        "{stderr}"
    );
    assert!(temporaries(csv).is_empty(), "a temporary file was left");
    // Valid and marked partial: the line, the header, whole points in
    // order (the rows of the reference, scaling columns still empty),
    // then the `# partial:` line.
    let partial = fs::read_to_string(csv).unwrap();
    let lines: Vec<&str> = partial.lines().collect();
    let expected: Vec<&str> = reference.lines().collect();
    assert_eq!(lines[..2], expected[..2]);
    let last = lines.last().unwrap();
    assert!(
        last.starts_with(&format!("# partial: interrupted by {name} with ")),
        "{last}"
    );
    let rows = &lines[2..lines.len() - 1];
    assert!(rows.len() >= 9 && rows.len().is_multiple_of(9), "{partial}");
    assert!(
        rows.len() < expected.len() - 2,
        "the sweep was not interrupted"
    );
    for (row, full) in rows.iter().zip(&expected[2..]) {
        let unscaled = full.rsplitn(3, ',').nth(2).unwrap();
        assert_eq!(*row, format!("{unscaled},,"));
    }
    let out = sim(&[
        "sweep",
        s(path),
        "--csv",
        s(csv),
        "--resume",
        "--threads",
        "2",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    fs::read_to_string(csv).unwrap()
}

#[test]
fn an_interrupted_sweep_is_marked_partial_and_resumes_to_the_same_bytes() {
    let dir = temp_dir("interrupt-sweep");
    let path = dir.join("sweep.toml");
    fs::write(&path, SWEEP).unwrap();
    let whole = dir.join("whole.csv");
    let out = sim(&[
        "sweep",
        s(&path),
        "--csv",
        s(&whole),
        "--threads",
        "2",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let reference = fs::read_to_string(&whole).unwrap();
    assert_eq!(reference.lines().count(), 2 + 32 * 9);
    for (sig, name) in [(libc::SIGINT, "int.csv"), (libc::SIGTERM, "term.csv")] {
        let resumed = interrupt_and_resume(&path, &dir.join(name), sig, &reference);
        assert_eq!(resumed, reference, "{name}: the resumed sweep differs");
    }
}

#[test]
fn resume_refuses_another_sweeps_file() {
    let dir = temp_dir("interrupt-resume-other");
    let path = dir.join("sweep.toml");
    fs::write(&path, SWEEP.replace("seed = [1, 2, 3, 4]", "seed = [1]")).unwrap();
    let csv = dir.join("out.csv");
    let out = sim(&["sweep", s(&path), "--csv", s(&csv), "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let before = fs::read_to_string(&csv).unwrap();
    fs::write(&path, SWEEP.replace("seed = [1, 2, 3, 4]", "seed = [4]")).unwrap();
    let out = sim(&["sweep", s(&path), "--csv", s(&csv), "--resume", "--quiet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("out.csv:1: not this sweep's file"),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(&csv).unwrap(), before);
}

/// Spawns `sim run` on the long scenario with a CSV and a trace (both
/// already holding older results), signals it with `sig` after three table
/// rows, and checks the outputs are marked partial.
fn interrupt_run(dir: &Path, sig: i32) {
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    let path = dir.join("run.toml");
    fs::write(&path, RUN).unwrap();
    let (csv, trace) = (
        dir.join(format!("{name}.csv")),
        dir.join(format!("{name}.json")),
    );
    fs::write(&csv, "older\n").unwrap();
    fs::write(&trace, "older\n").unwrap();
    let mut child = sim_command(&["run", s(&path), "--csv", s(&csv), "--trace", s(&trace)])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (rows_tx, rows_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut rows = 0;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if !line.starts_with('#') {
                rows += 1;
                let _ = rows_tx.send(rows);
            }
        }
        rows
    });
    loop {
        let rows = rows_rx.recv_timeout(LIMIT).expect("sim run prints rows");
        if rows >= 3 {
            break;
        }
    }
    signal(&child, sig);
    let status = wait_guarded(&mut child, LIMIT);
    let printed = reader.join().unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(128 + sig), "{stderr}");
    assert!(printed < 28, "the run was not interrupted");
    assert!(temporaries(&csv).is_empty() && temporaries(&trace).is_empty());
    // The CSV: the header, a row per row printed, the `# partial:` line.
    let text = fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("collective,algorithm,"), "{text}");
    assert_eq!(lines.len(), 1 + printed + 1, "{text}");
    assert_eq!(
        lines.last().unwrap(),
        &format!("# partial: interrupted by {name} after {printed} row(s)")
    );
    // The trace: valid JSON, saying it is partial, with a run per row.
    let doc: serde_json::Value = serde_json::from_slice(&fs::read(&trace).unwrap()).unwrap();
    let note = doc["otherData"]["partial"].as_str().unwrap();
    assert!(note.contains(name), "{note}");
    let runs = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .count();
    assert_eq!(runs, printed);
}

#[test]
fn an_interrupted_run_leaves_valid_outputs_marked_partial() {
    let dir = temp_dir("interrupt-run");
    interrupt_run(&dir, libc::SIGINT);
    interrupt_run(&dir, libc::SIGTERM);
}
