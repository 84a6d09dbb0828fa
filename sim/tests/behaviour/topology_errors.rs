//! Mistakes in `[topology]` scenarios: each is located at its line and
//! column (in the `nvidia-smi topo -m` file when the mistake is there),
//! and the command exits 2 naming the file.

use std::fs;
use std::path::Path;

use engine::scenario::{Scenario, ScenarioError};

use crate::support::temp_dir;
use crate::topology_scenarios::{TWO_ISLANDS, TWO_ON_A_SWITCH, run_in, with_collective};

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
