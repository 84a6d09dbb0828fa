//! `[topology]` scenarios: every mistake in one is located at its line and
//! column (in the `nvidia-smi topo -m` file when the mistake is there),
//! valid ones run with correct results, and the `--links-csv` and
//! `--trace` outputs describe what the network carried.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use engine::link_report::LINKS_CSV_HEADER;
use engine::scenario::{Scenario, ScenarioError};
use serde_json::Value;

use crate::support::{repo_root, sim, temp_dir};

/// One small collective, appended to every topology text below.
const COLLECTIVE: &str = "[[collective]]\n\
kind = \"allreduce\"\n\
algorithm = \"ring\"\n\
min_bytes = 8\n\
max_bytes = 8\n\
iters = 1\n\
warmup = 0\n";

/// Two GPUs on one NVSwitch, written out explicitly. Line numbers matter:
/// the cases below count on them.
const TWO_ON_A_SWITCH: &str = r#"seed = 3
[topology]
preset = "explicit"
[[topology.vertex]]
name = "gpu0"
kind = "gpu"
[[topology.vertex]]
name = "gpu1"
kind = "gpu"
[[topology.vertex]]
name = "sw"
kind = "nvswitch"
[[topology.link]]
from = "gpu0"
to = "sw"
kind = "nvlink4"
[[topology.link]]
from = "gpu1"
to = "sw"
kind = "nvlink4"
"#;

/// Three GPUs and two switches that are not linked: gpu0 and gpu1 hang
/// off sw0, gpu2 off sw1.
const TWO_ISLANDS: &str = r#"[topology]
preset = "explicit"
[[topology.vertex]]
name = "gpu0"
kind = "gpu"
[[topology.vertex]]
name = "gpu1"
kind = "gpu"
[[topology.vertex]]
name = "gpu2"
kind = "gpu"
[[topology.vertex]]
name = "sw0"
kind = "leaf"
[[topology.vertex]]
name = "sw1"
kind = "leaf"
[[topology.link]]
from = "gpu0"
to = "sw0"
kind = "ib_ndr"
[[topology.link]]
from = "gpu1"
to = "sw0"
kind = "ib_ndr"
[[topology.link]]
from = "gpu2"
to = "sw1"
kind = "ib_ndr"
"#;

/// `topology` followed by [`COLLECTIVE`].
fn with_collective(topology: &str) -> String {
    format!("{topology}{COLLECTIVE}")
}

/// Validates `text` as if read from `path`; returns its error.
fn error_at(path: &Path, text: &str) -> (String, usize, usize, String) {
    match Scenario::parse(path, text, &algorithms::Registry::builtin()) {
        Err(ScenarioError::Invalid {
            path,
            line,
            column,
            message,
        }) => (path, line, column, message),
        other => panic!("expected an invalid-scenario error for:\n{text}\ngot {other:?}"),
    }
}

/// Checks that `text` (plus [`COLLECTIVE`]) is rejected at `line:column`
/// of `bad.toml` with a message containing `needle`.
fn assert_rejected(topology: &str, line: usize, column: usize, needle: &str) {
    let text = with_collective(topology);
    let (path, l, c, message) = error_at(Path::new("bad.toml"), &text);
    assert_eq!(path, "bad.toml");
    assert!(
        message.contains(needle),
        "message `{message}` lacks `{needle}` for:\n{text}"
    );
    assert_eq!(
        (l, c),
        (line, column),
        "position of `{message}` in:\n{text}"
    );
}

/// Writes `text` as `name` in `dir` and runs `sim run` on it with `extra`
/// arguments; returns the exit code, stdout and stderr.
fn run_in(dir: &Path, name: &str, text: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    let mut args = vec!["run", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = sim(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The table rows of a `sim run` stdout (lines that are not comments).
fn table_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect()
}

/// The `#wrong` column of a table row.
fn wrong_of(row: &str) -> &str {
    row.split_whitespace()
        .nth(8)
        .expect("a table row has a #wrong column")
}

#[test]
fn preset_mistakes_are_located() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "[topology]\npreset = \"dgx_z100\"\n",
            2,
            10,
            "unknown preset `dgx_z100`; expected one of dgx_a100, dgx_h100, hgx_h200, h20, \
             hgx_b200, hgx_b300, gb200_nvl72, gb300_nvl72, nvl72_cluster, pcie_box, fat_tree, \
             leaf_spine, cpu_cluster, ring, torus2d, nvidia_smi, explicit",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nx = 4\n",
            3,
            5,
            "`x` does not apply to preset `fat_tree`; it takes: nodes, gpus_per_node, \
             nics_per_gpu, style, leaves, nodes_per_leaf, spines, oversubscription, nic, sharp",
        ),
        (
            "[topology]\npreset = \"dgx_h100\"\nsharp = true\n",
            3,
            9,
            "`sharp` does not apply to preset `dgx_h100`; it takes: gpus_per_node, nics_per_gpu",
        ),
        (
            "[topology]\npreset = \"leaf_spine\"\nhosts = 4\nsharp = true\n",
            4,
            9,
            "sharp = true needs InfiniBand switches (SHARP is an InfiniBand feature); this \
             leaf_spine's network links are roce200",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\nsharp = 1\n",
            4,
            9,
            "invalid type: integer `1`, expected a boolean",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\nnic = \"ib_qdr\"\n",
            4,
            7,
            "unknown link kind `ib_qdr`; expected one of nvlink2..nvlink5",
        ),
        (
            "[topology]\npreset = \"ring\"\ngpus = 0\n",
            3,
            8,
            "gpus must be between 1 and",
        ),
        (
            "[topology]\npreset = \"explicit\"\nmodel = \"fluid\"\n",
            3,
            9,
            "unknown model `fluid`; expected \"packet\" or \"flow\"",
        ),
        // The topologies crate rejects these; the message names the
        // parameter and the error points at the preset.
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\ngpus_per_node = 2\nleaves = 3\n",
            2,
            10,
            "leaves must be a positive multiple of the 2 rails",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\nnic = \"nvlink4\"\n",
            2,
            10,
            "nic must be a network link kind",
        ),
        (
            "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 1.0\n\
             [topology]\npreset = \"ring\"\ngpus = 2\n",
            5,
            1,
            "give either [links] (ideal links) or [topology] (a hardware model), not both",
        ),
        (
            "seed = 1\n",
            1,
            1,
            "the scenario needs [links] (ideal links) or [topology] (a hardware model)",
        ),
        (
            "seed = 1\n[topology]\npreset = \"nvidia_smi\"\n",
            2,
            1,
            "preset nvidia_smi needs `file`",
        ),
        (
            "[topology]\npreset = \"ring\"\ngpus = 2\n[[topology.vertex]]\nname = \"a\"\nkind = \"gpu\"\n",
            4,
            1,
            "`vertex` does not apply to preset `ring`; it takes: gpus, kind, links_per_pair",
        ),
    ];
    for &(topology, line, column, needle) in cases {
        assert_rejected(topology, line, column, needle);
    }
}

#[test]
fn new_preset_mistakes_are_located() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "[topology]\npreset = \"hgx_b200\"\nnics_per_gpu = 3\n",
            3,
            16,
            "nics_per_gpu must be between 1 and 2, got 3",
        ),
        (
            "[topology]\npreset = \"gb200_nvl72\"\nracks = 2\n",
            3,
            9,
            "`racks` does not apply to preset `gb200_nvl72`; it takes: nothing",
        ),
        (
            "[topology]\npreset = \"nvl72_cluster\"\nracks = 0\n",
            3,
            9,
            "racks must be between 1 and",
        ),
        (
            "[topology]\npreset = \"nvl72_cluster\"\nstyle = \"gb100\"\n",
            3,
            9,
            "unknown rack style `gb100`; expected \"gb200\" or \"gb300\"",
        ),
        (
            "[topology]\npreset = \"nvl72_cluster\"\nspines = 0\n",
            3,
            10,
            "spines = 0 needs a single leaf",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\nstyle = \"b200\"\n",
            4,
            9,
            "unknown node style `b200`; expected one of \"a100\", \"h100\", \"hgx_h200\", \"h20\", \
             \"hgx_b200\", \"hgx_b300\"",
        ),
        (
            "[topology]\npreset = \"fat_tree\"\nnodes = 2\nspines = 0\n",
            4,
            10,
            "spines = 0 needs a single leaf (it joins every host on its own), but there are 8 leaves",
        ),
        (
            "[topology]\npreset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 2\nspines = 0\n",
            5,
            10,
            "but there are 2 leaves; give at least 1 spine",
        ),
        (
            "[topology]\npreset = \"cpu_cluster\"\ncpu = \"m2_ultra\"\n",
            3,
            7,
            "unknown cpu `m2_ultra`; expected \"xeon_8480\" or \"epyc_9654\"",
        ),
        (
            "[topology]\npreset = \"cpu_cluster\"\ncores_per_socket = 1000\n",
            3,
            20,
            "cores_per_socket must be between 1 and 512",
        ),
        (
            "[topology]\npreset = \"cpu_cluster\"\nmemory_gb_per_s = -3.0\n",
            3,
            19,
            "memory_gb_per_s",
        ),
        (
            "[topology]\npreset = \"cpu_cluster\"\nsockets = 9\n",
            3,
            11,
            "sockets must be between 1 and 8",
        ),
        (
            "[topology]\npreset = \"cpu_cluster\"\nnic = \"pcie6x16\"\n",
            2,
            10,
            "cpu_cluster: nic must be a network link kind",
        ),
    ];
    for &(topology, line, column, needle) in cases {
        assert_rejected(topology, line, column, needle);
    }
}

#[test]
fn leaf_spine_with_one_leaf_and_no_spine_runs() {
    let dir = temp_dir("one-leaf-no-spine");
    let text = with_collective(
        "[topology]\npreset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 4\nspines = 0\n",
    );
    let (code, stdout, stderr) = run_in(&dir, "one_leaf.toml", &text, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("leaf_spine topology (9 vertices, 8 links)"),
        "{stdout}"
    );
    for row in table_rows(&stdout) {
        assert_eq!(wrong_of(row), "0", "{row}");
    }
}

#[test]
fn explicit_topology_mistakes_are_located() {
    let cases: &[(String, usize, usize, &str)] = &[
        (
            TWO_ON_A_SWITCH.replace("kind = \"nvswitch\"", "kind = \"crossbar\""),
            12,
            8,
            "unknown vertex kind `crossbar`; expected one of gpu, cpu, nic, nvswitch, \
             pcie_switch, socket, leaf, spine",
        ),
        (
            TWO_ON_A_SWITCH.replace("name = \"gpu1\"", "name = \"gpu0\""),
            8,
            8,
            "two vertices are named \"gpu0\"",
        ),
        (
            TWO_ON_A_SWITCH.replace("from = \"gpu1\"\nto = \"sw\"", "from = \"gpu1\"\nto = \"sw2\""),
            19,
            6,
            "link to `sw2`, which is not a [[topology.vertex]]",
        ),
        (
            TWO_ON_A_SWITCH.replacen("kind = \"nvlink4\"", "kind = \"nvlink9\"", 1),
            16,
            8,
            "unknown link kind `nvlink9`; expected one of nvlink2..nvlink5",
        ),
        (
            TWO_ON_A_SWITCH.replacen(
                "kind = \"nvlink4\"",
                "kind = \"nvlink4\"\nmtu_bytes = 4096\nbuffer_bytes = 1000",
                1,
            ),
            13,
            1,
            "a link's buffer (1000 B) must hold at least one MTU packet (4096 B)",
        ),
        (
            // So slow one packet takes longer than a second to serialise:
            // rejected, rather than overflowing route costs.
            TWO_ON_A_SWITCH.replacen(
                "kind = \"nvlink4\"",
                "kind = \"nvlink4\"\nbandwidth_gb_per_s = 1e-20",
                1,
            ),
            13,
            1,
            "must each be at most 1000000000000 ps (1 s)",
        ),
        (
            TWO_ON_A_SWITCH.replacen(
                "kind = \"nvlink4\"",
                "kind = \"nvlink4\"\nlatency_ns = 2e9",
                1,
            ),
            13,
            1,
            "gpu0 -> sw: latency 2000000000000 ps",
        ),
        (
            TWO_ON_A_SWITCH.replace("seed = 3", "seed = 3\nworld_size = 3"),
            2,
            14,
            "world_size must be between 1 and 2, got 3",
        ),
        (
            TWO_ON_A_SWITCH.replace(
                "preset = \"explicit\"",
                "preset = \"explicit\"\nplacement = [0, 5]",
            ),
            4,
            17,
            "rank 1 is placed on endpoint 5, but the topology has endpoints 0..1",
        ),
        (
            TWO_ON_A_SWITCH.replace(
                "preset = \"explicit\"",
                "preset = \"explicit\"\nplacement = [1, 1]",
            ),
            4,
            17,
            "rank 1 is placed on endpoint 1, which rank 0 already uses",
        ),
        (
            TWO_ON_A_SWITCH
                .replace("seed = 3", "seed = 3\nworld_size = 2")
                .replace(
                    "preset = \"explicit\"",
                    "preset = \"explicit\"\nplacement = [1]",
                ),
            5,
            13,
            "placement lists 1 ranks but the scenario has 2",
        ),
        (
            "seed = 1\n[topology]\npreset = \"explicit\"\n".to_string(),
            2,
            1,
            "an explicit topology lists its vertices as [[topology.vertex]] tables",
        ),
        (
            "[topology]\npreset = \"explicit\"\n[[topology.vertex]]\nname = \"sw\"\nkind = \"leaf\"\n"
                .to_string(),
            2,
            10,
            "the topology has no GPU or CPU endpoint to run ranks on",
        ),
    ];
    for (topology, line, column, needle) in cases {
        assert_rejected(topology, *line, *column, needle);
    }
}

#[test]
fn more_ranks_than_a_topology_supports_is_an_input_error() {
    // 2049 nodes of 8 GPUs: 16392 endpoints, over the 16384-rank limit.
    assert_rejected(
        "[topology]\npreset = \"fat_tree\"\nnodes = 2049\n",
        2,
        10,
        "16392 ranks on a topology; at most 16384 are supported; set world_size",
    );
    // Asking for fewer ranks on the same topology is fine.
    let text = with_collective(
        "world_size = 16\n[topology]\npreset = \"fat_tree\"\nnodes = 2049\nmodel = \"flow\"\n",
    );
    let s = Scenario::parse(
        Path::new("ok.toml"),
        &text,
        &algorithms::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(s.world_size, 16);
    // The limit itself: 2048 nodes, every endpoint a rank.
    let text =
        with_collective("[topology]\npreset = \"fat_tree\"\nnodes = 2048\nmodel = \"flow\"\n");
    let s = Scenario::parse(
        Path::new("ok.toml"),
        &text,
        &algorithms::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(s.world_size, 16384);
}

#[test]
fn an_empty_placement_is_reported_at_the_placement() {
    // The ring has two GPUs; what is wrong is the placement, which lists
    // no rank. Today: `2:10: the topology has no GPU or CPU endpoint to run
    // ranks on` (sim/src/scenario/topology.rs, `network`: world_size is
    // taken from the empty placement, then the zero check blames the
    // topology).
    let text = with_collective("[topology]\npreset = \"ring\"\ngpus = 2\nplacement = []\n");
    let (_, line, column, message) = error_at(Path::new("bad.toml"), &text);
    assert_eq!((line, column), (4, 13), "{message}");
    assert!(message.contains("placement"), "{message}");
    assert!(!message.contains("no GPU or CPU endpoint"), "{message}");
}

#[test]
fn a_collective_larger_than_the_placement_is_an_input_error() {
    // The topology places two ranks; the collective asks for four. There
    // is no vertex for ranks 2 and 3: validation must reject the
    // collective's world_size (sim/src/scenario/validate.rs, `collective`,
    // checks it against WORLD_SIZE_MAX only). Today the run indexes the
    // placement out of bounds (sim/src/network/mod.rs, `Routed::transfer`)
    // and `sim` panics with exit status 101.
    let text = "[topology]\npreset = \"ring\"\ngpus = 2\n[[collective]]\nkind = \"allreduce\"\n\
                world_size = 4\nmin_bytes = 8\nmax_bytes = 8\niters = 1\nwarmup = 0\n";
    let (_, line, column, message) = error_at(Path::new("bad.toml"), text);
    assert_eq!((line, column), (6, 14), "{message}");
    assert!(message.contains("world_size"), "{message}");

    let dir = temp_dir("collective-world-size");
    let (code, stdout, stderr) = run_in(&dir, "big.toml", text, &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("big.toml:6:14: "), "{stderr}");
}

#[test]
fn ranks_that_cannot_reach_each_other_are_named_with_their_vertices() {
    // In order, rank 0 is on gpu0 and rank 2 on gpu2, the first pair with
    // no path between them.
    assert_rejected(
        TWO_ISLANDS,
        2,
        10,
        "ranks 0 (gpu0) and 2 (gpu2) are not connected",
    );
    // Reversed, rank 0 is on gpu2 and cannot reach rank 1 on gpu1.
    let reversed = TWO_ISLANDS.replace(
        "preset = \"explicit\"",
        "preset = \"explicit\"\nplacement = [2, 1, 0]",
    );
    assert_rejected(
        &reversed,
        2,
        10,
        "ranks 0 (gpu2) and 1 (gpu1) are not connected",
    );
    // Without gpu2, the island of sw0 alone is fine.
    let two = TWO_ISLANDS.replace(
        "preset = \"explicit\"",
        "preset = \"explicit\"\nplacement = [0, 1]",
    );
    let s = Scenario::parse(
        Path::new("ok.toml"),
        &with_collective(&two),
        &algorithms::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(s.world_size, 2);
}

/// A two-GPU `nvidia-smi topo -m` matrix with one bad cell (`NVX`, line
/// 3, column 13) after a leading blank line.
const BAD_CELL: &str = "\n      GPU0  GPU1  CPU Affinity  NUMA Affinity\n\
GPU0   X    NVX   0-1           0\n\
GPU1   NV1   X    0-1           0\n";

/// The same matrix with a row one cell short: the error points just past
/// the end of `GPU1   NV1` (10 characters), line 4, column 11.
const SHORT_ROW: &str = "\n      GPU0  GPU1  CPU Affinity  NUMA Affinity\n\
GPU0   X    NV1   0-1           0\n\
GPU1   NV1\n";

#[test]
fn nvidia_smi_file_mistakes_point_into_that_file() {
    let dir = temp_dir("nvsmi-errors");
    let scenario = dir.join("s.toml");
    let text = |file: &str| {
        with_collective(&format!(
            "[topology]\npreset = \"nvidia_smi\"\nfile = \"{file}\"\n"
        ))
    };

    // A missing file: the error is at the `file` value of the scenario.
    let (path, line, column, message) = error_at(&scenario, &text("missing.txt"));
    assert_eq!(path, scenario.display().to_string());
    assert_eq!((line, column), (3, 8), "{message}");
    assert!(
        message.starts_with(&format!(
            "cannot read {}:",
            dir.join("missing.txt").display()
        )),
        "{message}"
    );

    // A bad cell and a short row, in files next to the scenario.
    let cases = [
        (
            "bad_cell.txt",
            BAD_CELL,
            3,
            13,
            "unknown cell `NVX` (expected X, NV1..NV18, PIX, PXB, PHB, NODE or SYS)",
        ),
        (
            "short_row.txt",
            SHORT_ROW,
            4,
            11,
            "row `GPU1` has 1 cells, expected one per device column (2)",
        ),
    ];
    for (name, matrix, line, column, needle) in cases {
        let topo = dir.join(name);
        fs::write(&topo, matrix).unwrap();
        let (path, l, c, message) = error_at(&scenario, &text(name));
        assert_eq!(
            path,
            topo.display().to_string(),
            "the topo file, not the scenario"
        );
        assert_eq!((l, c), (line, column), "{message}");
        assert!(message.contains(needle), "{message}");
    }
    // The fixed matrix imports.
    let good = dir.join("good.txt");
    fs::write(&good, BAD_CELL.replace("NVX", "NV1")).unwrap();
    let s = Scenario::parse(
        &scenario,
        &text("good.txt"),
        &algorithms::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(s.world_size, 2);
}

#[test]
fn the_command_exits_2_naming_the_scenario_or_the_topo_file() {
    let dir = temp_dir("topology-exit-2");
    let (code, stdout, stderr) = run_in(
        &dir,
        "preset.toml",
        &with_collective("[topology]\npreset = \"dgx_z100\"\n"),
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    let path = dir.join("preset.toml");
    assert!(
        stderr.contains(&format!(
            "{}:2:10: unknown preset `dgx_z100`",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");

    let (code, stdout, stderr) = run_in(&dir, "islands.toml", &with_collective(TWO_ISLANDS), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    let path = dir.join("islands.toml");
    assert!(
        stderr.contains(&format!(
            "{}:2:10: ranks 0 (gpu0) and 2 (gpu2) are not connected",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");

    fs::write(dir.join("bad_cell.txt"), BAD_CELL).unwrap();
    let (code, stdout, stderr) = run_in(
        &dir,
        "nvsmi.toml",
        &with_collective("[topology]\npreset = \"nvidia_smi\"\nfile = \"bad_cell.txt\"\n"),
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    let topo = dir.join("bad_cell.txt");
    assert!(
        stderr.contains(&format!("{}:3:13: unknown cell `NVX`", topo.display())),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

/// [`TWO_ON_A_SWITCH`] running a ring allreduce of real floats at 64K and
/// 128K, one warm-up and one timed call each, in `model`.
fn two_on_a_switch_run(model: &str) -> String {
    TWO_ON_A_SWITCH.replace(
        "preset = \"explicit\"",
        &format!("preset = \"explicit\"\nmodel = \"{model}\""),
    ) + "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
         min_bytes = \"64K\"\nmax_bytes = \"128K\"\niters = 1\nwarmup = 1\n"
}

#[test]
fn an_explicit_topology_runs_correctly_in_both_models() {
    let dir = temp_dir("explicit-run");
    for model in ["packet", "flow"] {
        let (code, stdout, stderr) = run_in(
            &dir,
            &format!("{model}.toml"),
            &two_on_a_switch_run(model),
            &[],
        );
        assert_eq!(code, Some(0), "{model}: {stdout}{stderr}");
        assert!(
            stdout.contains(&format!(
                "2 ranks, seed 3, explicit topology (3 vertices, 2 links), {model} model"
            )),
            "{stdout}"
        );
        let rows = table_rows(&stdout);
        assert_eq!(rows.len(), 2, "{stdout}");
        for row in rows {
            assert_eq!(wrong_of(row), "0", "{row}");
        }
        assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    }
}

#[test]
fn each_nvidia_smi_sample_runs_a_correct_ring_allreduce() {
    let dir = temp_dir("nvsmi-samples");
    let samples = repo_root().join("scenarios/topo");
    let mut names: Vec<PathBuf> = fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    for (i, sample) in names.iter().enumerate() {
        // Alternate an absolute path with a copy next to the scenario.
        let file = if i % 2 == 0 {
            sample.display().to_string()
        } else {
            let name = sample.file_name().unwrap();
            fs::copy(sample, dir.join(name)).unwrap();
            name.to_string_lossy().into_owned()
        };
        let model = if i % 2 == 0 { "packet" } else { "flow" };
        let text = format!(
            "seed = 11\n[topology]\npreset = \"nvidia_smi\"\nfile = \"{file}\"\nmodel = \"{model}\"\n\
             [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
             min_bytes = \"8K\"\nmax_bytes = \"16K\"\niters = 1\nwarmup = 0\n"
        );
        let (code, stdout, stderr) = run_in(&dir, &format!("sample{i}.toml"), &text, &[]);
        assert_eq!(code, Some(0), "{}: {stdout}{stderr}", sample.display());
        // Every sample is one node of eight GPUs; NICs are not endpoints.
        assert!(stdout.contains("8 ranks"), "{stdout}");
        let rows = table_rows(&stdout);
        assert_eq!(rows.len(), 2, "{stdout}");
        for row in rows {
            assert_eq!(wrong_of(row), "0", "{}: {row}", sample.display());
        }
        assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    }
}

/// One links CSV, parsed: the header and each row's cells. (No cell of
/// these topologies holds a comma or a quote.)
fn read_links_csv(path: &Path) -> (String, Vec<Vec<String>>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().expect("a header line").to_string();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

/// Column `name` of `row`.
fn cell<'a>(row: &'a [String], name: &str) -> &'a str {
    let i = LINKS_CSV_HEADER
        .iter()
        .position(|h| *h == name)
        .expect("a links CSV column");
    &row[i]
}

#[test]
fn placement_reverses_the_ring_direction_on_a_ring_of_gpus() {
    // A ring of four GPUs: link directions 0, 2, 4, 6 are gpu0->gpu1,
    // gpu1->gpu2, gpu2->gpu3, gpu3->gpu0 (clockwise), 1, 3, 5, 7 the
    // reverse. In order, rank r on gpu r sends to rank r+1 on gpu r+1:
    // clockwise. Reversed, rank r on gpu 3-r sends to gpu 2-r:
    // anticlockwise. A ring allreduce of n bytes on 4 ranks has each rank
    // send 2(4-1) segments of n/4 bytes: 1.5 n over its one outgoing link.
    let dir = temp_dir("placement");
    let size: u64 = 64 * 1024;
    let base = "seed = 2\n[topology]\npreset = \"ring\"\ngpus = 4\n";
    let collective = "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
                      min_bytes = \"64K\"\nmax_bytes = \"64K\"\niters = 1\nwarmup = 0\n";
    let mut tables = Vec::new();
    for (name, placement, loaded) in [
        ("in_order", "", [0usize, 2, 4, 6]),
        ("reversed", "placement = [3, 2, 1, 0]\n", [1, 3, 5, 7]),
    ] {
        let csv = dir.join(format!("{name}.csv"));
        let text = format!("{base}{placement}{collective}");
        let (code, stdout, stderr) = run_in(
            &dir,
            &format!("{name}.toml"),
            &text,
            &["--links-csv", csv.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        let rows = table_rows(&stdout);
        assert_eq!(rows.len(), 1, "{stdout}");
        assert_eq!(wrong_of(rows[0]), "0", "{name}: {}", rows[0]);
        tables.push(rows[0].to_string());

        let (_, links) = read_links_csv(&csv);
        assert_eq!(links.len(), 8, "{name}");
        for row in &links {
            let id: usize = cell(row, "link_id").parse().unwrap();
            let bytes: u64 = cell(row, "bytes").parse().unwrap();
            let expected = if loaded.contains(&id) {
                size * 3 / 2
            } else {
                0
            };
            assert_eq!(bytes, expected, "{name}: link {id} {row:?}");
        }
    }
    // The topology is symmetric: the same times, the same table row.
    assert_eq!(tables[0], tables[1]);
}

#[test]
fn the_links_csv_accounts_for_every_byte_the_ranks_sent() {
    // Ring allreduce on N ranks: each rank sends 2(N-1) segments of n/N
    // bytes per call, all over its one link into the switch; with one
    // warm-up and one timed call that is 2 calls. Two GPUs, 64K and 128K:
    // each GPU sends n per call. Four GPUs (flow model): 1.5 n per call.
    let dir = temp_dir("links-csv");
    let four = "seed = 4\n[topology]\npreset = \"explicit\"\nmodel = \"flow\"\n".to_string()
        + &(0..4)
            .map(|g| format!("[[topology.vertex]]\nname = \"gpu{g}\"\nkind = \"gpu\"\n"))
            .collect::<String>()
        + "[[topology.vertex]]\nname = \"sw\"\nkind = \"leaf\"\n"
        + &(0..4)
            .map(|g| {
                format!("[[topology.link]]\nfrom = \"gpu{g}\"\nto = \"sw\"\nkind = \"ib_ndr\"\n")
            })
            .collect::<String>()
        + "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
           min_bytes = \"64K\"\nmax_bytes = \"128K\"\niters = 1\nwarmup = 1\n";
    // (name, text, ranks, link directions, bytes one rank sends per byte
    // of buffer per call, as a fraction num/den)
    let cases = [
        (
            "two",
            two_on_a_switch_run("packet"),
            2u64,
            4usize,
            (1u64, 1u64),
        ),
        ("four", four, 4, 8, (3, 2)),
    ];
    for (name, text, ranks, directions, (num, den)) in cases {
        let csv = dir.join(format!("{name}.csv"));
        let (code, stdout, stderr) = run_in(
            &dir,
            &format!("{name}.toml"),
            &text,
            &["--links-csv", csv.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
        let (header, rows) = read_links_csv(&csv);
        assert_eq!(header, LINKS_CSV_HEADER.join(","));
        let sizes = [64 * 1024u64, 128 * 1024];
        assert_eq!(rows.len(), directions * sizes.len(), "{name}");
        for row in &rows {
            assert_eq!(row.len(), LINKS_CSV_HEADER.len(), "{row:?}");
            assert_eq!(cell(row, "ranks"), ranks.to_string());
            let u: f64 = cell(row, "utilisation").parse().unwrap();
            assert!(
                (0.0..=1.0).contains(&u),
                "{name}: utilisation {u} in {row:?}"
            );
        }
        let calls = 2;
        for size in sizes {
            let point: Vec<&Vec<String>> = rows
                .iter()
                .filter(|r| cell(r, "size_bytes") == size.to_string())
                .collect();
            assert_eq!(point.len(), directions, "{name} {size}");
            let per_rank = calls * size * num / den;
            let mut from_gpus = 0;
            for row in &point {
                let bytes: u64 = cell(row, "bytes").parse().unwrap();
                if cell(row, "from").starts_with("gpu") {
                    assert_eq!(bytes, per_rank, "{name} {size}: {row:?}");
                    from_gpus += bytes;
                } else {
                    // What the switch delivers, each GPU receives.
                    assert!(cell(row, "to").starts_with("gpu"));
                    assert_eq!(bytes, per_rank, "{name} {size}: {row:?}");
                }
            }
            assert_eq!(from_gpus, ranks * per_rank, "{name} {size}");
        }
    }
}

#[test]
fn an_ideal_links_scenario_writes_only_the_links_csv_header() {
    let dir = temp_dir("links-csv-ideal");
    let csv = dir.join("links.csv");
    let text = "world_size = 2\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 10.0\n".to_string()
        + COLLECTIVE;
    let (code, stdout, stderr) = run_in(
        &dir,
        "ideal.toml",
        &text,
        &["--links-csv", csv.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        fs::read_to_string(&csv).unwrap(),
        format!("{}\n", LINKS_CSV_HEADER.join(","))
    );
}

/// Runs `text` with `--trace` (and `--links-csv`); returns the trace and
/// the link direction names of the links CSV.
fn traced(dir: &Path, name: &str, text: &str) -> (Value, BTreeSet<String>) {
    let trace = dir.join(format!("{name}.json"));
    let csv = dir.join(format!("{name}.csv"));
    let (code, stdout, stderr) = run_in(
        dir,
        &format!("{name}.toml"),
        text,
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--links-csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{name}: {stdout}{stderr}");
    let doc: Value =
        serde_json::from_str(&fs::read_to_string(&trace).unwrap()).expect("the trace is JSON");
    let (_, rows) = read_links_csv(&csv);
    let links = rows
        .iter()
        .map(|r| format!("{}->{}", cell(r, "from"), cell(r, "to")))
        .collect();
    (doc, links)
}

#[test]
fn the_trace_has_a_process_per_point_a_track_per_rank_and_link_counters() {
    let dir = temp_dir("trace");
    let text = two_on_a_switch_run("packet").replace("iters = 1", "iters = 2");
    let (doc, links) = traced(&dir, "two", &text);
    let events = doc["traceEvents"].as_array().expect("traceEvents");

    // One process per point, labelled with the collective and size.
    let processes: BTreeMap<u64, &str> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        processes.values().copied().collect::<Vec<_>>(),
        ["allreduce ring 65536 B", "allreduce ring 131072 B"]
    );

    // Track names: `rank r` (and overflow lanes `rank r +k`), every rank.
    let mut rank_of: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e["name"] == "thread_name") {
        let name = e["args"]["name"].as_str().unwrap();
        let rank: usize = name
            .strip_prefix("rank ")
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("track name `{name}`"));
        rank_of.insert(
            (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()),
            rank,
        );
    }
    for &pid in processes.keys() {
        let main_tracks: BTreeSet<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name" && e["pid"] == pid)
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| !n.contains('+'))
            .collect();
        assert_eq!(
            main_tracks,
            BTreeSet::from(["rank 0", "rank 1"]),
            "pid {pid}"
        );
    }

    // Slices: sends, receives and the calls, none of negative length.
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for name in ["send", "recv", "allreduce"] {
        assert!(
            slices.iter().any(|e| e["name"] == name),
            "no `{name}` slice"
        );
    }
    for s in &slices {
        assert!(s["dur"].as_f64().unwrap() >= 0.0, "{s}");
        assert!(s["ts"].as_f64().unwrap() >= 0.0, "{s}");
    }

    // A rank's calls follow each other: 3 per point, never overlapping.
    let mut calls: BTreeMap<(u64, usize), Vec<(f64, f64)>> = BTreeMap::new();
    for s in slices.iter().filter(|e| e["name"] == "allreduce") {
        let key = (s["pid"].as_u64().unwrap(), s["tid"].as_u64().unwrap());
        let rank = *rank_of.get(&key).expect("every slice is on a named track");
        let (ts, dur) = (s["ts"].as_f64().unwrap(), s["dur"].as_f64().unwrap());
        calls.entry((key.0, rank)).or_default().push((ts, ts + dur));
    }
    assert_eq!(calls.len(), 2 * 2, "two points of two ranks");
    for ((pid, rank), mut spans) in calls {
        assert_eq!(spans.len(), 3, "pid {pid} rank {rank}: 1 warm-up + 2 timed");
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0 + 1e-9,
                "pid {pid} rank {rank}: calls {w:?} overlap"
            );
        }
    }

    // Link counters: in the packet model a packet crossing the switch
    // reserves room in the switch's port towards its destination, so both
    // switch-to-GPU directions change their backlog.
    let counters: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(counters.contains("sw->gpu0"), "{counters:?}");
    assert!(counters.contains("sw->gpu1"), "{counters:?}");
    for c in &counters {
        assert!(links.contains(*c), "counter `{c}` is not a link direction");
    }
}

#[test]
fn trace_counters_of_a_preset_are_named_after_its_link_directions() {
    let dir = temp_dir("trace-preset");
    let text = "[topology]\npreset = \"dgx_h100\"\ngpus_per_node = 2\n".to_string()
        + &COLLECTIVE
            .replace("max_bytes = 8", "max_bytes = \"64K\"")
            .replace("min_bytes = 8", "min_bytes = \"64K\"");
    let (doc, links) = traced(&dir, "dgx", &text);
    let counters: BTreeSet<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // The two GPUs of a DGX talk through its NVSwitch.
    assert!(
        counters.contains("node0/nvswitch->node0/gpu0"),
        "{counters:?}"
    );
    assert!(
        counters.contains("node0/nvswitch->node0/gpu1"),
        "{counters:?}"
    );
    for c in &counters {
        assert!(links.contains(*c), "counter `{c}` is not a link direction");
    }
}

#[test]
fn an_unwritable_links_csv_or_trace_exits_1_before_running() {
    let dir = temp_dir("unwritable");
    let scenario = dir.join("ok.toml");
    fs::write(&scenario, two_on_a_switch_run("packet")).unwrap();
    let missing = dir.join("no/such/dir");
    for (flag, what) in [("--links-csv", "links CSV"), ("--trace", "trace")] {
        let target = missing.join("out");
        let out = sim(&[
            "run",
            scenario.to_str().unwrap(),
            flag,
            target.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("{}: cannot write {what}", target.display())),
            "{stderr}"
        );
        // Nothing ran: not even the table's header was printed.
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn explicit_switches_forward_with_their_kinds_latency_unless_told() {
    let latency_of = |text: &str| {
        let s = Scenario::parse(
            Path::new("lat.toml"),
            &with_collective(text),
            &algorithms::Registry::builtin(),
        )
        .unwrap();
        let engine::network::NetworkConfig::Topology(t) = &s.network else {
            panic!("a topology scenario")
        };
        let sw = t.topology.find("sw").unwrap();
        t.topology.vertex(sw).forward_latency_ps
    };
    let leaf = TWO_ON_A_SWITCH.replace("kind = \"nvswitch\"", "kind = \"leaf\"");
    let default = topologies::VertexKind::Leaf.default_forward_latency_ps();
    assert!(default > 0);
    assert_eq!(latency_of(&leaf), default);
    let told = leaf.replace(
        "kind = \"leaf\"",
        "kind = \"leaf\"\nforward_latency_ns = 7.5",
    );
    assert_eq!(latency_of(&told), 7_500);
}
