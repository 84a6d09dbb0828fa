//! Output files: a file that cannot be written is an error naming it
//! (exit 1), whichever command writes it; an output that is an input, or
//! another output, is refused before anything runs (exit 2); the links
//! timeline is capped, and a bin too fine for a run is refused.

use std::fs;
use std::path::Path;

use crate::support::{sim, temp_dir};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `sim` with `args`; returns the exit code, stdout and stderr.
fn sim_out(args: &[&str]) -> (Option<i32>, String, String) {
    let out = sim(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A small sweep of two points.
const SWEEP: &str = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
    [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 64\nphantom = true\n\
    [sweep]\nseed = [1, 2]\n";

/// A leaf-spine of 4 hosts, packet model, three sizes.
const LEAF_SPINE: &str = "seed = 1\n[topology]\npreset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 2\n\
    spines = 1\nnic = \"ib_ndr\"\n[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
    min_bytes = \"64K\"\nmax_bytes = \"1M\"\nstep_factor = 4\niters = 1\nwarmup = 0\nphantom = true\n";

#[test]
fn an_unwritable_output_exits_1_naming_it() {
    let dir = temp_dir("outputs-full");
    let sweep = dir.join("sweep.toml");
    fs::write(&sweep, SWEEP).unwrap();
    let cex = dir.join("m.cex.toml");
    let saved = sim(&[
        "check",
        "scenarios/check/mismatched_order.toml",
        "--save",
        s(&cex),
    ]);
    assert_eq!(saved.status.code(), Some(3), "{saved:?}");
    // The first sizes of a measured nccl-tests log, and its machine.
    let log = dir.join("nccl.log");
    let measured = fs::read_to_string(
        crate::support::repo_root().join("engine/tests/fixtures/nccl_tests/allreduce_g8.txt"),
    )
    .unwrap();
    let head: Vec<&str> = measured.lines().take(20).collect();
    fs::write(&log, head.join("\n") + "\n").unwrap();
    let machine = dir.join("dgx.toml");
    fs::write(
        &machine,
        "seed = 1\n[topology]\npreset = \"dgx_h100\"\nmodel = \"flow\"\n",
    )
    .unwrap();
    let shard = dir.join("shard.csv");
    let made = sim(&[
        "sweep",
        s(&sweep),
        "--shard",
        "0/1",
        "--csv",
        s(&shard),
        "--quiet",
    ]);
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    let cases: [(&[&str], &str); 7] = [
        (
            &["run", "scenarios/ring_8.toml", "--csv", "/dev/full"],
            "CSV",
        ),
        (
            &["run", "scenarios/ring_8.toml", "--trace", "/dev/full"],
            "trace",
        ),
        (
            &["sweep", s(&sweep), "--csv", "/dev/full", "--quiet"],
            "CSV",
        ),
        (&["replay", s(&cex), "--trace", "/dev/full"], "trace"),
        (
            &[
                "check",
                "scenarios/check/mismatched_order.toml",
                "--save",
                "/dev/full",
            ],
            "counterexample",
        ),
        (
            &["compare", s(&log), s(&machine), "--csv", "/dev/full"],
            "CSV",
        ),
        (&["merge", "/dev/full", s(&shard)], "merged CSV"),
    ];
    for (args, what) in cases {
        let (code, _, stderr) = sim_out(args);
        let command = args.join(" ");
        assert_eq!(code, Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains(&format!("/dev/full: cannot write {what}: ")),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
    }
}

#[test]
fn an_output_that_is_an_input_or_another_output_is_refused() {
    let dir = temp_dir("outputs-same");
    let scenario = dir.join("s.toml");
    let text =
        fs::read_to_string(crate::support::repo_root().join("scenarios/ring_8.toml")).unwrap();
    fs::write(&scenario, &text).unwrap();
    let sweep = dir.join("sweep.toml");
    fs::write(&sweep, SWEEP).unwrap();
    let same = dir.join("sub/../s.toml");
    fs::create_dir_all(dir.join("sub")).unwrap();
    let (a, b) = (dir.join("out.csv"), dir.join("sub/../out.csv"));
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["run", s(&scenario), "--csv", s(&scenario)],
            "is the scenario",
        ),
        (
            vec!["run", s(&scenario), "--links-timeline", s(&same)],
            "is the scenario",
        ),
        (
            vec!["run", s(&scenario), "--csv", s(&a), "--trace", s(&b)],
            "are the same file",
        ),
        (
            vec!["sweep", s(&sweep), "--csv", s(&sweep)],
            "is the scenario",
        ),
        (
            vec![
                "check",
                "scenarios/check/mismatched_order.toml",
                "--save",
                "scenarios/check/mismatched_order.toml",
            ],
            "is the check scenario",
        ),
    ];
    for (args, message) in cases {
        let (code, stdout, stderr) = sim_out(&args);
        let command = args.join(" ");
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(stderr.contains(message), "{command}: {stderr}");
        assert!(stdout.is_empty(), "{command}: nothing runs: {stdout}");
    }
    assert_eq!(fs::read_to_string(&scenario).unwrap(), text);
    assert!(fs::read_to_string(&sweep).unwrap() == SWEEP);
    assert!(!a.exists());
}

#[test]
fn an_output_that_is_the_scenarios_nvidia_smi_file_is_refused() {
    let dir = temp_dir("outputs-nvsmi");
    let root = crate::support::repo_root().join("scenarios");
    fs::create_dir_all(dir.join("topo")).unwrap();
    let scenario = dir.join("dgx1.toml");
    let text = fs::read_to_string(root.join("dgx1_v100_nvidia_smi.toml")).unwrap();
    // `sim sweep` needs a [sweep] table; `sim run` ignores it.
    fs::write(&scenario, format!("{text}\n[sweep]\nseed = [1, 2]\n")).unwrap();
    let topo = dir.join("topo/dgx1_v100.txt");
    fs::copy(root.join("topo/dgx1_v100.txt"), &topo).unwrap();
    let before = fs::read_to_string(&topo).unwrap();
    for command in ["run", "sweep"] {
        let (code, stdout, stderr) = sim_out(&[command, s(&scenario), "--csv", s(&topo)]);
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("is a file the scenario reads"),
            "{command}: {stderr}"
        );
        assert!(stdout.is_empty(), "{command}: nothing runs: {stdout}");
    }
    assert_eq!(fs::read_to_string(&topo).unwrap(), before);
}

#[test]
fn the_links_timeline_stops_at_its_cap_and_says_how_to_raise_it() {
    let dir = temp_dir("outputs-timeline");
    let path = dir.join("s.toml");
    fs::write(&path, LEAF_SPINE).unwrap();
    let timeline = dir.join("timeline.csv");
    let (code, stdout, stderr) = sim_out(&[
        "run",
        s(&path),
        "--links-timeline",
        s(&timeline),
        "--timeline-bin-us",
        "1",
        "--timeline-rows-max",
        "400",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("# the links timeline reached its cap of 400 rows: allreduce at "),
        "{stdout}"
    );
    assert!(
        stdout.contains("raise the cap with --timeline-rows-max"),
        "{stdout}"
    );
    let text = fs::read_to_string(&timeline).unwrap();
    let rows = text.lines().filter(|l| !l.starts_with('#')).count() - 1;
    assert!((1..=400).contains(&rows), "{rows} rows");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("# capped: the file reached its cap of 400 rows; allreduce at "),
        "{text}"
    );
}

#[test]
fn a_bin_too_fine_for_the_run_is_refused_and_the_old_timeline_stays() {
    let dir = temp_dir("outputs-bin");
    let path = dir.join("s.toml");
    fs::write(&path, LEAF_SPINE).unwrap();
    let timeline = dir.join("timeline.csv");
    fs::write(&timeline, "older\n").unwrap();
    let (code, _, stderr) = sim_out(&[
        "run",
        s(&path),
        "--links-timeline",
        s(&timeline),
        "--timeline-bin-us",
        "0.000001",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--timeline-bin-us 0.000001 is too fine for this scenario: a run lasted "),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("more than the links timeline's cap of 1048576 rows; use --timeline-bin-us "),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(&timeline).unwrap(), "older\n");
    let leftovers = fs::read_dir(&dir).unwrap().count();
    assert_eq!(leftovers, 2, "no temporary file is left");
}
