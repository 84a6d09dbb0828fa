//! Tests of sweep axes: lists and ranges in order, located mistakes, the cap on the product.

use super::*;
use std::path::Path;

/// The axes of `[sweep]` in `text`.
fn axes(text: &str) -> Result<Vec<Axis>, ScenarioError> {
    let src = Source {
        path: Path::new("s.toml"),
        text,
    };
    let doc = DeTable::parse(text).unwrap();
    let (key, value) = doc.get_ref().get_key_value("sweep").unwrap();
    let DeValue::Table(t) = value.get_ref() else {
        panic!("sweep is a table")
    };
    parse(&src, key, t)
}

fn values(text: &str) -> Vec<String> {
    axes(text).unwrap()[0]
        .values
        .iter()
        .map(|v| v.to_string())
        .collect()
}

fn error(text: &str) -> (usize, usize, String) {
    match axes(text) {
        Err(ScenarioError::Invalid {
            line,
            column,
            message,
            ..
        }) => (line, column, message),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn lists_and_ranges_expand_in_order() {
    assert_eq!(
        values("[sweep]\nbytes = [\"1K\", 8, \"64M\"]"),
        ["1024", "8", "67108864"]
    );
    assert_eq!(
        values("[sweep]\nworld_size = { from = 2, to = 10, step = 4 }"),
        ["2", "6", "10"]
    );
    assert_eq!(
        values("[sweep]\nbytes = { from = \"1K\", to = \"5K\", factor = 2 }"),
        ["1024", "2048", "4096"]
    );
    assert_eq!(
        values("[sweep]\nloss_rate = { from = 0.0, to = 0.3, step = 0.1 }"),
        ["0", "0.1", "0.2", "0.3"]
    );
    assert_eq!(
        values("[sweep]\noversubscription = { from = 1, to = 8, factor = 2.0 }"),
        ["1", "2", "4", "8"]
    );
    let two = axes("[sweep]\nseed = [1, 2]\nalgorithm = [\"ring\", \"tree\"]").unwrap();
    assert_eq!(two[0].kind, AxisKind::Seed);
    assert_eq!(two[1].kind, AxisKind::Algorithm);
}

#[test]
fn mistakes_are_located() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("[sweep]\nworld_size = []", 2, 14, "lists no value"),
        ("[sweep]\nranks = [1]", 2, 1, "unknown sweep axis `ranks`"),
        (
            "[sweep]\nworld_size = { from = 1, to = 8, step = 0 }",
            2,
            41,
            "step must be positive, got 0",
        ),
        (
            "[sweep]\nbytes = { from = 1, to = 8, factor = 1 }",
            2,
            38,
            "factor must be greater than 1, got 1",
        ),
        (
            "[sweep]\nworld_size = [4, \"8\"]",
            2,
            18,
            "whole numbers, got a string",
        ),
        (
            "[sweep]\nnodes = { from = 8, to = 2, step = 1 }",
            2,
            26,
            "below its start",
        ),
        (
            "[sweep]\nseed = { from = 0, to = 4000000, step = 1 }",
            2,
            8,
            "more than 100000 values",
        ),
        (
            "[sweep]\nalgorithm = { from = 1, to = 2, step = 1 }",
            2,
            13,
            "not a range",
        ),
        ("[sweep]\nworld_size = 8", 2, 14, "must be a list of values"),
        ("[sweep]\nworld_size = [8, 8]", 2, 18, "lists 8 twice"),
        (
            "[sweep]\nworld_size = { from = 1, to = 8, factor = 1.5 }",
            2,
            43,
            "whole-number factor",
        ),
        ("[sweep]\n", 1, 2, "has no axis"),
    ];
    for (text, line, column, message) in cases {
        let (l, c, m) = error(text);
        assert!(m.contains(message), "{text}: {m}");
        assert_eq!((l, c), (*line, *column), "{text}: {m}");
    }
}

#[test]
fn the_product_of_the_axes_is_capped() {
    let (_, _, m) = error(
        "[sweep]\nseed = { from = 0, to = 999, step = 1 }\nworld_size = { from = 1, to = 1000, step = 1 }",
    );
    assert!(m.contains("1000000 points (1000 x 1000)"), "{m}");
}
