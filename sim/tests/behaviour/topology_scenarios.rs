//! `[topology]` scenarios that are valid run with correct results (in
//! both network models, from presets, explicit graphs and `nvidia-smi`
//! samples); the shared texts and helpers of `topology_errors` (every
//! mistake located) and `topology_outputs` (`--links-csv`, `--trace`).

use std::fs;
use std::path::{Path, PathBuf};

use engine::scenario::Scenario;

use crate::support::{repo_root, sim, temp_dir};

/// One small collective, appended to every topology text below.
pub(crate) const COLLECTIVE: &str = "[[collective]]\n\
kind = \"allreduce\"\n\
algorithm = \"ring\"\n\
min_bytes = 8\n\
max_bytes = 8\n\
iters = 1\n\
warmup = 0\n";

/// Two GPUs on one NVSwitch, written out explicitly. Line numbers matter:
/// the cases below count on them.
pub(crate) const TWO_ON_A_SWITCH: &str = r#"seed = 3
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
pub(crate) const TWO_ISLANDS: &str = r#"[topology]
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
pub(crate) fn with_collective(topology: &str) -> String {
    format!("{topology}{COLLECTIVE}")
}

/// Writes `text` as `name` in `dir` and runs `sim run` on it with `extra`
/// arguments; returns the exit code, stdout and stderr.
pub(crate) fn run_in(
    dir: &Path,
    name: &str,
    text: &str,
    extra: &[&str],
) -> (Option<i32>, String, String) {
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
pub(crate) fn table_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect()
}

/// The `#wrong` column of a table row.
pub(crate) fn wrong_of(row: &str) -> &str {
    row.split_whitespace()
        .nth(8)
        .expect("a table row has a #wrong column")
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

/// [`TWO_ON_A_SWITCH`] running a ring allreduce of real floats at 64K and
/// 128K, one warm-up and one timed call each, in `model`.
pub(crate) fn two_on_a_switch_run(model: &str) -> String {
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
