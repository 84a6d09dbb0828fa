//! Invalid scenarios exit with status 2 and a message naming the file,
//! line and column and what was expected; no input makes `sim` panic.

use std::path::Path;

use engine::scenario::{Scenario, ScenarioError};
use proptest::prelude::*;

use crate::support::{sim, temp_dir};

const VALID: &str = "world_size = 4\n\
[links]\n\
latency_us = 1.0\n\
bandwidth_gb_per_s = 25.0\n\
[[collective]]\n\
kind = \"allreduce\"\n\
min_bytes = 8\n\
max_bytes = \"1M\"\n";

/// Parses `text` and returns `(line, column, message)` of its error.
fn error_of(text: &str) -> (usize, usize, String) {
    match Scenario::parse(
        Path::new("bad.toml"),
        text,
        &algorithms::Registry::builtin(),
    ) {
        Err(ScenarioError::Invalid {
            path,
            line,
            column,
            message,
        }) => {
            assert_eq!(path, "bad.toml");
            (line, column, message)
        }
        other => panic!("expected an invalid-scenario error, got {other:?}"),
    }
}

#[test]
fn the_valid_base_parses() {
    let s = Scenario::parse(
        Path::new("ok.toml"),
        VALID,
        &algorithms::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(s.world_size, 4);
    assert_eq!(s.collectives[0].sizes().len(), 18);
}

#[test]
fn each_mistake_is_located() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "world_size = 4\n[links\n",
            2,
            7,
            "unclosed table, expected `]`",
        ),
        (
            &VALID.replace("kind = \"allreduce\"", "kind = \"allreduce\"\ncolor = 3"),
            7,
            1,
            "unknown field `color`",
        ),
        (
            &VALID.replace("world_size = 4", "world_size = 0"),
            1,
            14,
            "world_size must be between 1 and",
        ),
        (
            &VALID.replace("bandwidth_gb_per_s = 25.0", "bandwidth_gb_per_s = -3"),
            4,
            22,
            "must be a positive number, got -3",
        ),
        (
            &VALID.replace("bandwidth_gb_per_s = 25.0", "bandwidth_gb_per_s = -3.0"),
            4,
            22,
            "bandwidth_gb_per_s must be a positive number, got -3",
        ),
        (
            &VALID.replace("max_bytes = \"1M\"", "max_bytes = 4"),
            8,
            13,
            "max_bytes (4) is smaller than min_bytes (8)",
        ),
        (
            &VALID.replace("min_bytes = 8", "min_bytes = \"8Q\""),
            7,
            13,
            "invalid size `8Q`",
        ),
        (
            &VALID.replace(
                "min_bytes = 8",
                "min_bytes = 8\nop = \"avg\"\ndtype = \"int32\"",
            ),
            8,
            6,
            "op `avg` is only defined for float and double",
        ),
        (
            &VALID.replace("min_bytes = 8", "min_bytes = 8\nalgorithm = \"bruck\""),
            8,
            13,
            "unknown algorithm `bruck` for allreduce; valid: ring, recursive_doubling, rabenseifner, tree, hierarchical",
        ),
        (
            &VALID.replace("min_bytes = 8", "min_bytes = 8\nalgorithm = \"fastest\""),
            8,
            13,
            "unknown algorithm `fastest` for allreduce; valid:",
        ),
        (
            &VALID.replace("kind = \"allreduce\"", "kind = \"allreduce_v\""),
            6,
            8,
            "unknown collective `allreduce_v`; valid: allreduce, reduce_scatter",
        ),
        (
            &VALID.replace("min_bytes = 8", "min_bytes = 8\nroot = 4"),
            8,
            8,
            "root must be between 0 and 3, got 4",
        ),
        (
            &VALID.replace("min_bytes = 8", "min_bytes = 8\ndtype = \"half\""),
            8,
            9,
            "unknown dtype `half`",
        ),
        (
            &format!("{VALID}[[inject]]\nkind = \"extra_recv\"\nrank = 9\nfrom = 1\n"),
            11,
            8,
            "rank must be between 0 and 3, got 9",
        ),
        (
            "world_size = 4\n[links]\nlatency_us = 1.0\nbandwidth_gb_per_s = 2.0\n",
            1,
            1,
            "no [[collective]]",
        ),
        (
            &VALID.replace("max_bytes = \"1M\"", "max_bytes = \"4G\""),
            8,
            13,
            "set phantom = true",
        ),
        (
            &VALID
                .replace(
                    "min_bytes = 8",
                    "min_bytes = 8\nchunk_bytes = 1\nphantom = true",
                )
                .replace("\"1M\"", "\"1G\""),
            8,
            15,
            "use a larger chunk_bytes",
        ),
    ];
    for (text, line, column, needle) in cases {
        let (l, c, message) = error_of(text);
        assert!(
            message.contains(needle),
            "message `{message}` lacks `{needle}` for:\n{text}"
        );
        assert_eq!(
            (l, c),
            (*line, *column),
            "position of `{message}` in:\n{text}"
        );
    }
}

#[test]
fn the_command_exits_2_with_file_line_and_column() {
    let dir = temp_dir("errors");
    let path = dir.join("zero.toml");
    std::fs::write(&path, VALID.replace("world_size = 4", "world_size = 0")).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:1:14: world_size must be", path.display())),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no table for an invalid scenario");

    let missing = sim(&["run", "no/such/file.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("no/such/file.toml: cannot read scenario")
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Arbitrary edits of a valid scenario never panic the parser.
    #[test]
    fn no_input_panics(cut in 0usize..VALID.len(), insert in "[ -~\n]{0,12}") {
        let mut text = VALID.to_string();
        let at = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.insert_str(at, &insert);
        let _ = Scenario::parse(Path::new("fuzz.toml"), &text, &algorithms::Registry::builtin());
    }
}
