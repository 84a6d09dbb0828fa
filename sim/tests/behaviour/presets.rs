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
