//! The bidirectional ring through every back-end, as a user runs it: the
//! `bidir-sim` binary (the `sim` command with the example's registry) on
//! the example's scenario files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `bidir-sim` with `args` in the example's directory.
fn bidir_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bidir-sim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("NCCL_ALGO")
        .output()
        .expect("bidir-sim starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The table rows of `stdout` whose algorithm column is `algorithm`:
/// (size, busbw, #wrong).
fn rows(stdout: &str, algorithm: &str) -> Vec<(u64, f64, String)> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == 10 && f[9].trim_end_matches('*') == algorithm)
        .map(|f| {
            (
                f[0].parse().unwrap(),
                f[7].parse().unwrap(),
                f[8].to_string(),
            )
        })
        .collect()
}

/// A scratch directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bidir_ring_{name}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_registry_lists_the_new_algorithms_beside_the_catalogue() {
    let out = bidir_sim(&["algorithms"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("allreduce         bidir_ring "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("2(N-1)") && line.ends_with("[user]"),
        "{line}"
    );
    assert!(stdout.contains("bidir_ring_sends_first"), "{stdout}");
    assert!(stdout.contains("allreduce         ring "), "{stdout}");
}

#[test]
fn simulated_on_a_dgx_node_it_ties_the_catalogue_ring_with_every_element_right() {
    let out = bidir_sim(&["run", "scenarios/dgx_h100.toml"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let (ring, bidir) = (rows(&stdout, "ring"), rows(&stdout, "bidir_ring"));
    assert_eq!(ring.len(), 4, "{stdout}");
    assert_eq!(bidir.len(), 4, "{stdout}");
    for ((size, ring_bw, _), (_, bidir_bw, wrong)) in ring.iter().zip(&bidir) {
        assert_eq!(wrong, "0", "{stdout}");
        // Every GPU has its own NVSwitch port: a one-way ring already
        // keeps both directions busy.
        assert!(
            (bidir_bw / ring_bw - 1.0).abs() < 0.05,
            "{size} B: ring {ring_bw}, bidir {bidir_bw}"
        );
    }
}

#[test]
fn simulated_on_two_fat_tree_nodes_it_is_right_and_faster_at_large_sizes() {
    let out = bidir_sim(&["run", "scenarios/fat_tree_2_nodes.toml"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let (ring, bidir) = (rows(&stdout, "ring"), rows(&stdout, "bidir_ring"));
    assert_eq!(bidir.len(), 3, "{stdout}");
    assert!(bidir.iter().all(|r| r.2 == "0"), "{stdout}");
    // 16 MiB: half the bytes cross the network each way.
    let (last_ring, last_bidir) = (ring[2].1, bidir[2].1);
    assert!(
        last_bidir > 1.5 * last_ring,
        "ring {last_ring}, bidir {last_bidir}"
    );
}

#[test]
fn a_sweep_names_the_new_algorithm_on_an_axis() {
    let out = bidir_sim(&["sweep", "scenarios/ring_sweep.toml", "--quiet"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    // The `# sweep` line, the header, then the rows.
    let busbw: Vec<(String, f64)> = stdout
        .lines()
        .skip(2)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .map(|f| (f[5].to_string(), f[16].parse().unwrap()))
        .collect();
    assert_eq!(busbw.len(), 6, "{stdout}");
    for pair in busbw.chunks(2) {
        assert_eq!(
            (pair[0].0.as_str(), pair[1].0.as_str()),
            ("ring", "bidir_ring")
        );
        let ratio = pair[1].1 / pair[0].1;
        // Both directions of every ring link carry data: about twice.
        assert!((1.9..2.05).contains(&ratio), "{stdout}");
    }
}

#[test]
fn the_checker_verifies_it_and_finds_shrinks_and_replays_the_planted_deadlock() {
    let out = bidir_sim(&["check", "scenarios/check_bidir_ring.toml", "--no-save"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("verdict: verified (expected verified)"),
        "{stdout}"
    );
    // Branches and exchanges: one schedule per point, up to 5 ranks.
    let points: Vec<&str> = stdout.lines().filter(|l| l.contains(" count=")).collect();
    assert_eq!(points.len(), 4 * 2 * 3, "{stdout}");
    assert!(
        points.iter().all(|l| l.contains(": ok, 1 schedule(s)")),
        "{stdout}"
    );
    assert!(stdout.contains("  N=5 count=12 "), "{stdout}");
    let out = bidir_sim(&[
        "check",
        "scenarios/check_bidir_ring_random.toml",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let dir = scratch("check");
    let cex = dir.join("sends_first.cex.toml");
    let cex_arg = cex.to_str().unwrap();
    let out = bidir_sim(&[
        "check",
        "scenarios/check_sends_first.toml",
        "--save",
        cex_arg,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("verdict: deadlock (expected deadlock)"),
        "{stdout}"
    );
    // Found on 3 ranks, shrunk to 2.
    assert!(stdout.contains("counterexample at N=2 "), "{stdout}");
    assert!(stdout.contains("(call `call0`)"), "{stdout}");
    let out = bidir_sim(&["replay", cex_arg]);
    let replay = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{replay}{}", text(&out.stderr));
    assert!(
        replay.contains("deadlock: rank(s) 0, 1 never finish"),
        "{replay}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A user's bug that only shows from 3 ranks (mirrored block positions):
/// found on the scenario's first point (4 ranks), shrunk to 3 ranks and
/// the fewer elements, saved and replayed with the same verdict.
#[test]
fn the_checker_finds_the_mirrored_positions_bug_and_shrinks_it_to_three_ranks() {
    let dir = scratch("mirrored");
    let cex = dir.join("mirrored.cex.toml");
    let cex_arg = cex.to_str().unwrap();
    let out = bidir_sim(&["check", "scenarios/check_mirrored.toml", "--save", cex_arg]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.contains("verdict: wrong_result (expected wrong_result)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("counterexample at N=3 count=6 "),
        "{stdout}"
    );
    let out = bidir_sim(&["replay", cex_arg]);
    let replay = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{replay}{}", text(&out.stderr));
    assert!(replay.contains("wrong_result"), "{replay}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn launched_on_shm_and_tcp_with_two_to_four_processes_every_element_is_right() {
    for fabric in ["shm", "tcp"] {
        for n in ["2", "3", "4"] {
            let out = bidir_sim(&[
                "launch",
                "-n",
                n,
                "--fabric",
                fabric,
                "--",
                "bench",
                "--algorithm",
                "bidir_ring",
                "-b",
                "8",
                "-e",
                "256K",
                "-f",
                "32",
                "-n",
                "2",
                "-w",
                "1",
            ]);
            let stdout = text(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{fabric} x{n}: {stdout}{}",
                text(&out.stderr)
            );
            let bidir = rows(&stdout, "bidir_ring");
            assert_eq!(bidir.len(), 4, "{fabric} x{n}: {stdout}"); // 8, 256, 8K, 256K
            assert!(bidir.iter().all(|r| r.2 == "0"), "{fabric} x{n}: {stdout}");
            assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
        }
    }
}

#[test]
fn the_library_api_simulates_checks_and_replays_the_same_algorithm() {
    use algorithms::{Algorithm, Collective};
    use checker::Check;
    use checker::spec::{Buffering, Verdict};
    use engine::{Measure, Simulation};

    let registry = bidir_ring::registry();
    let bidir = registry.get(Collective::Allreduce, "bidir_ring").unwrap();
    let sim = Simulation::preset("ring")
        .param("gpus", 4)
        .model("flow")
        .seed(1)
        .build(&registry)
        .unwrap();
    let rows = sim
        .measure(&bidir, &Measure::sizes(1 << 20, 1 << 20).iters(1).warmup(0))
        .unwrap();
    assert_eq!(rows[0].wrong, Some(0));

    let report = Check::of(&bidir)
        .world_sizes(&[2])
        .buffering(&[Buffering::Eager(0)])
        .cost()
        .run()
        .unwrap();
    assert_eq!(report.verdict, Verdict::Verified);
    let buggy = Algorithm::new(bidir_ring::BidirRingSendsFirst);
    let check = Check::of(&buggy)
        .world_sizes(&[2])
        .buffering(&[Buffering::Eager(0)]);
    let report = check.run().unwrap();
    let cex = report
        .counterexample
        .as_ref()
        .expect("the planted deadlock");
    assert_eq!(check.replay(cex).unwrap().found(), Verdict::Deadlock);
    // Saved, it replays from its files with the CLI too.
    let dir = scratch("library");
    let (_, saved) = check.save(&dir, &report).unwrap();
    let saved = saved.expect("a counterexample file");
    let out = bidir_sim(&["replay", saved.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .is_dir()
    );
}
