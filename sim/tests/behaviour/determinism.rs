//! The same scenario and seed give byte-identical output.

use std::fs;

use crate::support::{sim, temp_dir};

const SCENARIO: &str = r#"
world_size = 6
seed = 1234
[links]
latency_us = 1.25
bandwidth_gb_per_s = 12.5
[compute]
reduce_gb_per_s = 80
[[collective]]
kind = "allreduce"
min_bytes = 0
max_bytes = "256K"
step_factor = 8
dtype = "double"
op = "avg"
iters = 3
warmup = 2
chunk_bytes = "8K"
[[collective]]
kind = "allreduce"
min_bytes = 1
max_bytes = "1M"
step_factor = 32
dtype = "uint8"
op = "prod"
iters = 2
warmup = 0
"#;

#[test]
fn two_runs_write_identical_csv_and_tables() {
    let dir = temp_dir("determinism");
    let scenario = dir.join("s.toml");
    fs::write(&scenario, SCENARIO).unwrap();
    let mut runs = Vec::new();
    for i in 0..2 {
        let csv = dir.join(format!("out{i}.csv"));
        let out = sim(&[
            "run",
            scenario.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        runs.push((out.stdout, fs::read(&csv).unwrap()));
    }
    assert_eq!(runs[0], runs[1]);
    let csv = String::from_utf8(runs[0].1.clone()).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // Sizes 0, 8, 64, 512, 4096, 32768, 262144 (double) and 1, 32, 1024,
    // 32768, 1048576 (uint8): 12 rows and a header, all correct.
    assert_eq!(lines.len(), 13, "{csv}");
    assert!(lines[1].starts_with("allreduce,"), "{csv}");
    assert!(lines[1].contains(",6,0,0,double,avg,-1,"), "{csv}");
    let wrong_column = 13;
    assert!(
        lines
            .iter()
            .skip(1)
            .all(|l| l.split(',').nth(wrong_column) == Some("0")),
        "every row has #wrong = 0: {csv}"
    );
    let table = String::from_utf8(runs[0].0.clone()).unwrap();
    assert!(table.contains("# Out of bounds values : 0 OK"), "{table}");
}

/// A topology with ECMP choices (two spines, parallel uplinks), contention
/// and both models: everything written must repeat byte for byte.
fn topology_scenario(model: &str) -> String {
    format!(
        r#"
seed = 77
[topology]
preset = "fat_tree"
nodes = 3
gpus_per_node = 4
spines = 2
model = "{model}"
[compute]
reduce_gb_per_s = 500
[[collective]]
kind = "allreduce"
algorithm = "auto"
min_bytes = 64
max_bytes = "4M"
step_factor = 64
iters = 2
warmup = 1
[[collective]]
kind = "alltoall"
min_bytes = "12K"
max_bytes = "1536K"
step_factor = 128
iters = 1
warmup = 0
"#
    )
}

#[test]
fn topology_runs_repeat_their_tables_link_csvs_and_traces() {
    let dir = temp_dir("determinism-topology");
    for model in ["packet", "flow"] {
        let scenario = dir.join(format!("{model}.toml"));
        fs::write(&scenario, topology_scenario(model)).unwrap();
        let mut runs = Vec::new();
        for i in 0..2 {
            let links = dir.join(format!("{model}{i}.links.csv"));
            let trace = dir.join(format!("{model}{i}.json"));
            let out = sim(&[
                "run",
                scenario.to_str().unwrap(),
                "--links-csv",
                links.to_str().unwrap(),
                "--trace",
                trace.to_str().unwrap(),
            ]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            runs.push((
                out.stdout,
                fs::read(&links).unwrap(),
                fs::read(&trace).unwrap(),
            ));
        }
        assert!(
            runs[0].1.len() > 1000 && runs[0].2.len() > 1000,
            "{model}: outputs written"
        );
        assert!(runs[0] == runs[1], "{model}: a second run differs");
    }
}
