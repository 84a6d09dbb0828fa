//! `sim sweep` and `sim merge`: the CSV is the same bytes whatever the
//! thread count and however the sweep is sharded; axes are checked with
//! located errors; the scaling columns are what the closed form gives;
//! failed points keep their rows and set the exit status.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{sim, temp_dir};

/// Ideal links, an allreduce and an allgather, phantom payloads:
/// 3 x 2 x 2 = 12 points of a few milliseconds each.
const IDEAL: &str = "world_size = 4\nseed = 3\n\
[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"1K\"\nmax_bytes = \"4K\"\n\
step_factor = 4\nphantom = true\niters = 2\nwarmup = 1\n\
[[collective]]\nkind = \"allgather\"\nmin_bytes = \"2K\"\nmax_bytes = \"2K\"\nphantom = true\niters = 1\nwarmup = 0\n\
[sweep]\n\
world_size = { from = 2, to = 8, factor = 2 }\n\
bytes = [\"1K\", \"16K\"]\n\
algorithm = [\"ring\", \"recursive_doubling\"]\n";

/// A small RoCE leaf-spine, packet model: nodes and oversubscription axes.
const LEAF_SPINE: &str = "seed = 2\n\
[topology]\npreset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 2\nspines = 1\nnic = \"roce200\"\n\
oversubscription = 1.0\n\
[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"64K\"\nmax_bytes = \"64K\"\n\
phantom = true\niters = 1\nwarmup = 0\n\
[sweep]\nnodes = [2, 4]\noversubscription = [1.0, 2.0]\n";

/// Writes `text` as `name.toml` in a fresh directory; returns the file.
fn scenario(name: &str, text: &str) -> PathBuf {
    let path = temp_dir(name).join(format!("{name}.toml"));
    fs::write(&path, text).unwrap();
    path
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

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the sweep at `path` with `extra` arguments into `out`; returns the
/// exit code and the file's text.
fn sweep_to(path: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["sweep", s(path), "--csv", s(out)];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = sim_out(&args);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (code, fs::read_to_string(out).unwrap_or_default())
}

/// Runs `path` as `n` shards and merges them; returns the exit codes of
/// the shards and of the merge, and the merged text.
fn sharded(path: &Path, n: usize) -> (Vec<Option<i32>>, Option<i32>, String) {
    let dir = path.parent().unwrap();
    let mut codes = Vec::new();
    let mut files = Vec::new();
    for i in 0..n {
        let file = dir.join(format!("shard_{i}_of_{n}.csv"));
        let (code, text) = sweep_to(
            path,
            &file,
            &["--shard", &format!("{i}/{n}"), "--threads", "1"],
        );
        assert!(text.starts_with("# sweep "), "{text}");
        assert!(text.contains(&format!(" shard {i}/{n}\n")), "{text}");
        codes.push(code);
        files.push(file);
    }
    let merged = dir.join(format!("merged_{n}.csv"));
    let mut args = vec!["merge", s(&merged)];
    args.extend(files.iter().map(|f| s(f)));
    let (code, _, stderr) = sim_out(&args);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (codes, code, fs::read_to_string(&merged).unwrap_or_default())
}

#[test]
fn the_csv_is_the_same_for_any_thread_count_and_any_sharding() {
    for (name, text, points) in [("ideal", IDEAL, 12), ("leaf_spine", LEAF_SPINE, 4)] {
        let path = scenario(&format!("sweep_det_{name}"), text);
        let dir = path.parent().unwrap();
        let (c1, one) = sweep_to(&path, &dir.join("t1.csv"), &["--threads", "1"]);
        let (c2, two) = sweep_to(&path, &dir.join("t2.csv"), &["--threads", "2", "--quiet"]);
        assert_eq!((c1, c2), (Some(0), Some(0)), "{name}");
        assert_eq!(one, two, "{name}: 1 and 2 threads differ");
        // The `# sweep` line, the header, then every point's rows, in order.
        assert!(one.starts_with("# sweep "), "{one}");
        let first_fields: Vec<usize> = one
            .lines()
            .skip(2)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(first_fields.windows(2).all(|w| w[0] <= w[1]), "{name}");
        assert_eq!(first_fields.last(), Some(&(points - 1)), "{name}");
        // Without --csv the same bytes go to stdout.
        let (code, stdout, _) = sim_out(&["sweep", s(&path), "--quiet"]);
        assert_eq!((code, stdout.as_str()), (Some(0), one.as_str()), "{name}");
        for n in [2, 3] {
            let (codes, merge_code, merged) = sharded(&path, n);
            assert!(codes.iter().all(|c| *c == Some(0)), "{name}: {codes:?}");
            assert_eq!(merge_code, Some(0), "{name}");
            assert_eq!(merged, one, "{name}: the merge of {n} shards differs");
        }
        // The scaling columns are filled in (not all empty).
        assert!(
            one.lines().nth(2).unwrap().ends_with(",1.000000,1.000000"),
            "{one}"
        );
    }
}

#[test]
fn merge_names_missing_shards_and_mixed_sweeps() {
    let path = scenario("sweep_merge_errors", IDEAL);
    let dir = path.parent().unwrap();
    let shard = |i: usize, n: usize, p: &Path| {
        let file = dir.join(format!(
            "{}_{i}_{n}.csv",
            p.file_stem().unwrap().to_str().unwrap()
        ));
        let (code, _) = sweep_to(p, &file, &["--shard", &format!("{i}/{n}")]);
        assert_eq!(code, Some(0));
        file
    };
    let (a, c) = (shard(0, 3, &path), shard(2, 3, &path));
    let out = dir.join("merged.csv");
    let (code, _, stderr) = sim_out(&["merge", s(&out), s(&a), s(&c)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "4 of the sweep's 12 points are in no shard file: 1, 4, 7, 10; missing shard(s): 1/3"
        ),
        "{stderr}"
    );
    let (code, _, stderr) = sim_out(&["merge", s(&out), s(&a), s(&a)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("point 0 is in both"), "{stderr}");
    let other = scenario("sweep_merge_other", &IDEAL.replace("seed = 3", "seed = 4"));
    let b = shard(1, 3, &other);
    let (code, _, stderr) = sim_out(&["merge", s(&out), s(&a), s(&b), s(&c)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("are shards of different sweeps"),
        "{stderr}"
    );
    // A full CSV is not a shard file.
    let (_, full) = sweep_to(&path, &dir.join("full.csv"), &[]);
    let first = full.lines().next().unwrap();
    assert!(
        first.starts_with("# sweep ") && !first.contains("shard"),
        "{first}"
    );
    let (code, _, stderr) = sim_out(&["merge", s(&out), s(&dir.join("full.csv"))]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("full.csv:1: not a shard file"), "{stderr}");
}

#[test]
fn bad_axes_are_located_errors() {
    let base = IDEAL.split("[sweep]").next().unwrap();
    let cases = [
        (
            "world_size = []",
            1,
            14,
            "the world_size axis lists no value",
        ),
        ("ranks = [2, 4]", 1, 1, "unknown sweep axis `ranks`"),
        (
            "world_size = { from = 2, to = 8, step = 0 }",
            1,
            41,
            "a range's step must be positive, got 0",
        ),
        (
            "bytes = { from = \"1K\", to = \"1M\", factor = 1 }",
            1,
            44,
            "a range's factor must be greater than 1, got 1",
        ),
        (
            "seed = [1, \"two\"]",
            1,
            12,
            "seed values are whole numbers, got a string",
        ),
        (
            "nodes = [2, 4]",
            1,
            1,
            "the nodes axis needs a [topology] preset",
        ),
    ];
    let sweep_line = base.lines().count() + 1;
    for (i, (axis, line, column, message)) in cases.iter().enumerate() {
        let path = scenario(
            &format!("sweep_bad_{i}"),
            &format!("{base}[sweep]\n{axis}\n"),
        );
        let (code, stdout, stderr) = sim_out(&["sweep", s(&path)]);
        assert_eq!(code, Some(2), "{axis}: {stderr}");
        assert!(stdout.is_empty());
        let at = format!("{}:{}:{column}: {message}", s(&path), sweep_line + line);
        assert!(stderr.contains(&at), "{axis}: expected `{at}` in {stderr}");
    }
    // Too many points: the product is named.
    let path = scenario(
        "sweep_bad_many",
        &format!(
            "{base}[sweep]\nseed = {{ from = 0, to = 999, step = 1 }}\nworld_size = {{ from = 1, to = 200, step = 1 }}\n"
        ),
    );
    let (code, _, stderr) = sim_out(&["sweep", s(&path)]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("the sweep has 200000 points (1000 x 200), more than the 100000 limit"),
        "{stderr}"
    );
    // A point the scenario cannot take names its values.
    let path = scenario(
        "sweep_bad_point",
        &format!("{base}[sweep]\nworld_size = [2, 0]\n"),
    );
    let (_, _, stderr) = sim_out(&["sweep", s(&path)]);
    assert!(
        stderr.contains("world_size values must be at least 1, got 0"),
        "{stderr}"
    );
    let path = scenario(
        "sweep_bad_algo",
        &format!("{base}[sweep]\nalgorithm = [\"ring\", \"bruck\"]\n"),
    );
    let (code, _, stderr) = sim_out(&["sweep", s(&path)]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(&format!(
            "{}:{sweep_line}:2: point 1 of the sweep (algorithm = bruck) is not a valid scenario: unknown algorithm `bruck` for allreduce",
            s(&path)
        )),
        "{stderr}"
    );
}

/// The time of a ring allreduce of `bytes` on `n` ideal links of 1 us and
/// 25 GB/s, in ps, with every block under one chunk: `2(n-1)` steps of
/// `alpha + (bytes/n)/B`.
fn ring_ps(n: u64, bytes: u64) -> u64 {
    2 * (n - 1) * (1_000_000 + bytes / n * 40)
}

#[test]
fn efficiency_is_computed_against_the_smallest_world() {
    let text = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
        [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"4K\"\nmax_bytes = \"4K\"\n\
        phantom = true\niters = 1\nwarmup = 0\n\
        [sweep]\nworld_size = [2, 4, 8]\n";
    let path = scenario("sweep_efficiency", text);
    let (code, csv, _) = sim_out(&["sweep", s(&path), "--quiet"]);
    assert_eq!(code, Some(0));
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let col = |name: &str| rows[0].iter().position(|h| *h == name).unwrap();
    let (time, speedup, efficiency) = (col("time_ps"), col("speedup"), col("efficiency"));
    assert_eq!(rows.len(), 4);
    // The 8-rank row against the 2-rank one: throughput 8 x 4096 / T(8)
    // over 2 x 4096 / T(2); efficiency divides by the 4x ranks.
    let (t2, t8) = (ring_ps(2, 4096), ring_ps(8, 4096));
    assert_eq!(rows[3][time], t8.to_string());
    assert_eq!(rows[1][time], t2.to_string());
    let s8 = (8.0 * 4096.0 / t8 as f64) / (2.0 * 4096.0 / t2 as f64);
    assert_eq!(rows[3][speedup], format!("{s8:.6}"));
    assert_eq!(rows[3][efficiency], format!("{:.6}", s8 / 4.0));
    assert_eq!(rows[3][efficiency], "0.151458");
    assert_eq!(rows[1][efficiency], "1.000000");
}

#[test]
fn sim_run_ignores_the_sweep_with_a_note() {
    let path = scenario("sweep_ignored", IDEAL);
    let (code, stdout, stderr) = sim_out(&["run", s(&path)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("\n# [sweep] ignored by sim run: use sim sweep\n"),
        "{stdout}"
    );
    // It runs the file as written: 4 ranks, both entries.
    assert!(stdout.contains("allreduce on 4 ranks"), "{stdout}");
    assert!(stdout.contains("allgather on 4 ranks"), "{stdout}");
    // Without a [sweep], `sim sweep` says what it needs.
    let plain = scenario("sweep_none", IDEAL.split("[sweep]").next().unwrap());
    let (code, _, stderr) = sim_out(&["sweep", s(&plain)]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no [sweep] table"), "{stderr}");
}

#[test]
fn a_failed_point_keeps_its_row_and_sets_the_exit_status() {
    // Rank 1 crashes at 20 us: after the 2-rank runs end, during the
    // 8-rank ones (3 calls of about 14 us).
    let text = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 25.0\n\
        [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"1K\"\nmax_bytes = \"4K\"\n\
        step_factor = 4\nphantom = true\niters = 2\nwarmup = 1\n\
        [[fault]]\nkind = \"crash\"\nrank = 1\nat_us = 20\n\
        [sweep]\nworld_size = [2, 8]\n";
    let path = scenario("sweep_failed", text);
    let dir = path.parent().unwrap();
    let (code, csv) = sweep_to(&path, &dir.join("out.csv"), &["--quiet"]);
    assert_eq!(code, Some(5), "{csv}");
    let statuses: Vec<(&str, &str)> = csv
        .lines()
        .skip(2)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0], f[2])
        })
        .collect();
    assert_eq!(statuses, [("0", "ok"), ("0", "ok"), ("1", "crashed")]);
    let last = csv.lines().last().unwrap();
    assert!(
        last.starts_with("1,8,crashed,allreduce,,,,,1024,"),
        "{last}"
    );
    let (_, _, stderr) = sim_out(&["sweep", s(&path), "--quiet"]);
    assert!(
        stderr.contains(
            "crashed: point 1 (world_size = 8): allreduce at 1024 bytes: rank 1 crashed at"
        ),
        "{stderr}"
    );
    // Its shards and their merge agree, exit status included.
    let (codes, merge_code, merged) = sharded(&path, 2);
    assert_eq!(codes, [Some(0), Some(5)]);
    assert_eq!(merge_code, Some(5));
    assert_eq!(merged, csv);
}

#[test]
fn the_nodes_axis_sets_racks_and_cpu_hosts() {
    // (topology lines, nodes, ranks each point must have)
    let cases = [
        (
            "preset = \"nvl72_cluster\"\nmodel = \"flow\"",
            "[1, 2]",
            ["72", "144"],
        ),
        (
            "preset = \"cpu_cluster\"\ncores_per_socket = 2\nhosts_per_leaf = 1\nmodel = \"flow\"",
            "[2, 3]",
            ["8", "12"],
        ),
    ];
    for (i, (topology, nodes, ranks)) in cases.into_iter().enumerate() {
        let text = format!(
            "seed = 1\n[topology]\n{topology}\n\
             [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = \"4K\"\n\
             max_bytes = \"4K\"\nphantom = true\niters = 1\nwarmup = 0\n\
             [sweep]\nnodes = {nodes}\n"
        );
        let path = scenario(&format!("sweep_nodes_{i}"), &text);
        let out = path.with_extension("csv");
        let (code, csv) = sweep_to(&path, &out, &[]);
        assert_eq!(code, Some(0), "{topology}: {csv}");
        // A `# sweep` line, the header, then a row per point.
        let mut lines = csv.lines().filter(|l| !l.starts_with('#'));
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let column = header.iter().position(|h| *h == "ranks").unwrap();
        let worlds: Vec<&str> = lines.map(|l| l.split(',').nth(column).unwrap()).collect();
        assert_eq!(worlds, ranks, "{topology}: {csv}");
    }
}
