//! The collectives of the algorithm catalogue run unchanged on every
//! hardware preset, in both network models, and give correct results.

use std::ops::ControlFlow;
use std::path::Path;

use engine::scenario::Scenario;
use engine::study::{Options, run_scenario};
use engine::tuning::AlgoFilter;

/// Every preset, small enough to run quickly, as `[topology]` lines.
const PRESETS: &[(&str, &str)] = &[
    ("dgx_a100", "preset = \"dgx_a100\""),
    ("dgx_h100", "preset = \"dgx_h100\""),
    ("pcie_box", "preset = \"pcie_box\""),
    (
        "fat_tree",
        "preset = \"fat_tree\"\nnodes = 3\ngpus_per_node = 4\nspines = 2",
    ),
    (
        "fat_tree_oversubscribed",
        "preset = \"fat_tree\"\nnodes = 4\ngpus_per_node = 2\nstyle = \"a100\"\noversubscription = 2.0",
    ),
    (
        "leaf_spine",
        "preset = \"leaf_spine\"\nhosts = 6\nhosts_per_leaf = 2\nspines = 2\nnic = \"roce100\"",
    ),
    (
        "hgx_b200_two_nics",
        "preset = \"hgx_b200\"\ngpus_per_node = 4\nnics_per_gpu = 2",
    ),
    (
        "fat_tree_hgx_b300",
        "preset = \"fat_tree\"\nnodes = 2\ngpus_per_node = 2\nstyle = \"hgx_b300\"\nnics_per_gpu = 2",
    ),
    ("gb300_nvl72", "preset = \"gb300_nvl72\""),
    (
        "cpu_cluster",
        "preset = \"cpu_cluster\"\nhosts = 3\nhosts_per_leaf = 2\ncores_per_socket = 2\nspines = 1",
    ),
    ("ring", "preset = \"ring\"\ngpus = 5"),
    (
        "torus2d",
        "preset = \"torus2d\"\nx = 3\ny = 3\nkind = \"nvlink3\"",
    ),
];

fn scenario(topology: &str, model: &str, algorithm: &str) -> Scenario {
    let text = format!(
        "seed = 5\n[topology]\n{topology}\nmodel = \"{model}\"\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"{algorithm}\"\n\
         min_bytes = 4\nmax_bytes = \"1M\"\nstep_factor = 32\niters = 1\nwarmup = 0\n\
         chunk_bytes = \"16K\"\ndtype = \"int32\"\n"
    );
    Scenario::parse(
        Path::new("preset.toml"),
        &text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn ring_and_tree_allreduce_are_correct_on_every_preset_in_both_models() {
    for (name, topology) in PRESETS {
        for model in ["packet", "flow"] {
            for algorithm in ["ring", "tree"] {
                let s = scenario(topology, model, algorithm);
                let rows = run_scenario(&s, &AlgoFilter::default(), Options::default(), |_| {
                    ControlFlow::Continue(())
                })
                .unwrap_or_else(|f| panic!("{name} {model} {algorithm}: {:?}", f.1));
                assert_eq!(rows.len(), 4, "{name}: sizes 4 B, 128 B, 4 KiB, 128 KiB");
                for row in rows {
                    assert_eq!(row.wrong, Some(0), "{name} {model} {algorithm} {row:?}");
                    assert!(row.time_ps > 0, "{name}: moving data takes time");
                }
            }
        }
    }
}

/// Each bundled scenario of the newer presets (`scenarios/presets/`), its
/// topology's documented vertex and link counts, and its ranks.
const BUNDLED: &[(&str, &str, usize)] = &[
    (
        "cpu_cluster",
        "cpu_cluster topology (151 vertices, 150 links)",
        144,
    ),
    (
        "gb200_nvl72",
        "gb200_nvl72 topology (181 vertices, 216 links)",
        72,
    ),
    (
        "gb300_nvl72",
        "gb300_nvl72 topology (181 vertices, 288 links)",
        72,
    ),
    ("h20", "h20 topology (23 vertices, 29 links)", 8),
    ("hgx_b200", "hgx_b200 topology (23 vertices, 29 links)", 8),
    (
        "hgx_b300_fat_tree",
        "fat_tree topology (80 vertices, 138 links)",
        16,
    ),
    (
        "hgx_h200_two_nics",
        "hgx_h200 topology (31 vertices, 37 links)",
        8,
    ),
    (
        "leaf_spine_one_leaf",
        "leaf_spine topology (9 vertices, 8 links)",
        4,
    ),
    (
        "nvl72_cluster_2racks",
        "nvl72_cluster topology (436 vertices, 720 links)",
        144,
    ),
];

#[test]
fn bundled_preset_scenarios_run_correctly_with_their_documented_counts() {
    let dir = crate::support::repo_root().join("scenarios/presets");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios/presets exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let expected: Vec<String> = BUNDLED.iter().map(|(n, ..)| format!("{n}.toml")).collect();
    assert_eq!(names, expected, "every bundled preset scenario is listed");
    for &(name, description, ranks) in BUNDLED {
        let path = format!("scenarios/presets/{name}.toml");
        let out = crate::support::sim(&["run", &path]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        let header = format!("# {name}: {ranks} ranks,");
        assert!(stdout.contains(&header), "{name}: {stdout}");
        assert!(stdout.contains(description), "{name}: {stdout}");
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect();
        assert!(!rows.is_empty(), "{name}: {stdout}");
        for row in rows {
            // `#wrong` is 0 with real data, N/A for a folded (phantom) run.
            let wrong = row.split_whitespace().nth(8).expect("a #wrong column");
            assert!(wrong == "0" || wrong == "N/A", "{name}: {row}");
            if name != "hgx_b300_fat_tree" {
                assert_eq!(wrong, "0", "{name}: {row}");
            }
        }
    }
}

/// The `[topology]` of each rack and CPU cluster with a rotation, and a
/// size that splits evenly over its ranks.
const FOLDABLE: &[(&str, &str)] = &[
    (
        "preset = \"nvl72_cluster\"\nracks = 2\nmodel = \"flow\"",
        "576K",
    ),
    (
        "preset = \"cpu_cluster\"\nhosts = 4\nhosts_per_leaf = 2\ncores_per_socket = 4\nmodel = \"flow\"",
        "64K",
    ),
];

#[test]
fn folded_rack_and_cpu_clusters_time_as_their_full_runs() {
    let time = |topology: &str, bytes: &str, fold: bool| {
        let text = format!(
            "seed = 1\n[topology]\n{topology}\n{}\
             [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
             min_bytes = \"{bytes}\"\nmax_bytes = \"{bytes}\"\niters = 1\nwarmup = 0\nphantom = true\n",
            if fold { "symmetry = \"fold\"\n" } else { "" }
        );
        let s = Scenario::parse(
            Path::new("fold.toml"),
            &text,
            &algorithms::Registry::builtin(),
        )
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let rows = run_scenario(&s, &AlgoFilter::default(), Options::default(), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|f| panic!("{text}: {:?}", f.1));
        assert_eq!(rows.len(), 1);
        rows[0].time_ps
    };
    for &(topology, bytes) in FOLDABLE {
        let full = time(topology, bytes, false);
        assert!(full > 0);
        assert_eq!(time(topology, bytes, true), full, "{topology}");
    }
}
