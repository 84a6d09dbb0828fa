//! `sim compare`: real nccl-tests output beside the simulator's prediction
//! on a scenario of the same machine (the fixtures of
//! `engine/tests/fixtures/nccl_tests/`), and the logs it refuses.

use crate::support::{repo_root, sim, temp_dir};

const FIXTURES: &str = "engine/tests/fixtures/nccl_tests";

/// One DGX H100-style node, flow model: the machine of the 8-GPU logs.
const DGX_H100: &str = "seed = 1\n[topology]\npreset = \"dgx_h100\"\nmodel = \"flow\"\n";

/// Runs `sim compare` with `args`: (status, stdout, stderr).
fn compare(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    let out = sim(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `text` to `name` in a fresh directory for test `test`.
fn write(test: &str, name: &str, text: &str) -> String {
    let path = temp_dir(&format!("compare-{test}")).join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn an_allreduce_log_is_compared_size_by_size_with_a_csv() {
    let dir = temp_dir("compare-allreduce");
    let scenario = dir.join("dgx_h100.toml");
    std::fs::write(&scenario, DGX_H100).unwrap();
    let csv = dir.join("compare.csv");
    let log = format!("{FIXTURES}/allreduce_g8.txt");
    let (status, stdout, stderr) = compare(&[
        &log,
        scenario.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(status, Some(0), "{stderr}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    // One row per size of the log, 8 B to 128 MiB, in its order.
    let sizes: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(sizes, (3..=27).map(|k| 1u64 << k).collect::<Vec<_>>());
    for row in &rows {
        // size count type redop root | time predicted error busbw predicted | time error busbw | algorithm
        assert_eq!(row.len(), 14, "{row:?}");
        for error in [row[7], row[11]] {
            let e: f64 = error.parse().unwrap_or_else(|_| panic!("{row:?}"));
            assert!(e.is_finite() && e > -100.0, "{row:?}");
        }
        assert!(row[13].ends_with('*'), "the tuner chose: {row:?}");
    }
    let median = stdout
        .lines()
        .find(|l| l.starts_with("# median |error|: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        median.contains(" % over 25 sizes (out-of-place "),
        "{median}"
    );
    // The CSV: one record per size and placement.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let records: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(records.len(), 25 * 2);
    for r in &records {
        assert_eq!(r.len(), header.len(), "{r:?}");
        assert_eq!(r[column("status")], "ok");
        assert!(r[column("error_pct")].parse::<f64>().unwrap().is_finite());
        assert!(["out-of-place", "in-place"].contains(&r[column("placement")]));
    }
    assert_eq!(records[0][column("size_bytes")], "8");
    assert_eq!(records[0][column("log_line")], "17");
}

#[test]
fn a_concatenated_session_reports_each_test_sendrecv_included() {
    let scenario = write("session", "dgx_h100.toml", DGX_H100);
    let log = format!("{FIXTURES}/concatenated.txt");
    let (status, stdout, stderr) = compare(&[&log, &scenario]);
    assert_eq!(status, Some(0), "{stderr}");
    for section in [
        "# allreduce: ",
        "# reduce_scatter: ",
        "# sendrecv: ",
        "# alltoall: ",
        "# broadcast: ",
    ] {
        assert!(stdout.contains(section), "{section}\n{stdout}");
    }
    assert!(
        stdout.contains("# note: half is simulated as uint8"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("# median |error|: ").count(), 5, "{stdout}");
    assert!(
        stdout.contains("# median |error| (all collectives): "),
        "{stdout}"
    );
}

#[test]
fn a_malformed_log_exits_2_naming_the_line() {
    let scenario = write("malformed", "dgx_h100.toml", DGX_H100);
    let good =
        std::fs::read_to_string(repo_root().join(FIXTURES).join("allreduce_g8.txt")).unwrap();
    // Line 19 is the 32-byte row; give it a non-number for its time.
    let lines: Vec<String> = good
        .lines()
        .enumerate()
        .map(|(i, l)| match i {
            18 => l.replacen("11.52", "11.5x", 1),
            _ => l.to_string(),
        })
        .collect();
    let log = write("malformed-log", "bad.txt", &(lines.join("\n") + "\n"));
    let (status, stdout, stderr) = compare(&[&log, &scenario]);
    assert_eq!(status, Some(2), "{stdout}");
    assert!(
        stderr.starts_with(&format!("error: {log}:19:57: ")),
        "{stderr}"
    );
    assert!(stderr.contains("11.5x"), "{stderr}");
    assert!(stdout.is_empty(), "nothing is run: {stdout}");
}

#[test]
fn a_log_from_another_world_size_exits_2() {
    let scenario = write("world", "dgx_h100.toml", DGX_H100);
    let log = format!("{FIXTURES}/allgather_mpi16.txt");
    let (status, _, stderr) = compare(&[&log, &scenario]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("error: {log}:30: ")), "{stderr}");
    assert!(
        stderr.contains("16 ranks") && stderr.contains("has 8 ranks"),
        "{stderr}"
    );
}
