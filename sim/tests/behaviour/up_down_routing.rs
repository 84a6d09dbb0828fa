//! `[topology] routing`: `"shortest"` (the default) or `"up_down"`, with an
//! optional `routing_root`. Up*/down* routing sends the flow that would
//! close the cycle around a ring of switches the long way round; mistakes
//! in either key are located at their line and column.

use std::fs;
use std::path::Path;

use engine::network::NetworkConfig;
use engine::scenario::{Scenario, ScenarioError};
use topologies::{Router, Routing};

use crate::support::{sim, temp_dir};

/// Five leaf switches `s0..s4` in a ring of RoCE links, a CPU host `h<i>`
/// on each switch, and one small allreduce. `routing` is inserted as line
/// 3 onwards, right after the preset.
fn switch_ring(routing: &str) -> String {
    let mut text = format!("[topology]\npreset = \"explicit\"\n{routing}");
    for (prefix, kind) in [("s", "leaf"), ("h", "cpu")] {
        for i in 0..5 {
            text += &format!("[[topology.vertex]]\nname = \"{prefix}{i}\"\nkind = \"{kind}\"\n");
        }
    }
    for i in 0..5 {
        for (a, b) in [
            (format!("h{i}"), format!("s{i}")),
            (format!("s{i}"), format!("s{}", (i + 1) % 5)),
        ] {
            text +=
                &format!("[[topology.link]]\nfrom = \"{a}\"\nto = \"{b}\"\nkind = \"roce100\"\n");
        }
    }
    text + "[[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\n\
            min_bytes = 8\nmax_bytes = \"64K\"\niters = 1\nwarmup = 0\n"
}

/// The topology scenario parsed from `text`.
fn parse(text: &str) -> Scenario {
    Scenario::parse(
        Path::new("ring.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The router of a topology scenario, applied to `f`.
fn with_router<T>(s: &Scenario, f: impl FnOnce(&mut Router) -> T) -> T {
    let NetworkConfig::Topology(config) = &s.network else {
        panic!("a [topology] scenario has a topology network");
    };
    f(&mut config.router.lock().expect("no test panicked holding it"))
}

/// The vertex names a route from host `a` to host `b` passes, in order.
fn path(s: &Scenario, a: usize, b: usize) -> Vec<String> {
    with_router(s, |r| {
        let t = r.topology().clone();
        let (src, dst) = (
            t.find(&format!("h{a}")).unwrap(),
            t.find(&format!("h{b}")).unwrap(),
        );
        let route = r.route(src, dst, 0).unwrap();
        let mut names = vec![t.vertex(src).name.clone()];
        names.extend(route.iter().map(|&l| t.vertex(t.ends(l).1).name.clone()));
        names
    })
}

#[test]
fn shortest_routing_is_the_default() {
    for routing in ["", "routing = \"shortest\"\n"] {
        let s = parse(&switch_ring(routing));
        assert_eq!(with_router(&s, |r| r.routing()), Routing::Shortest);
        assert!(
            !s.network_description.contains("routing"),
            "{}",
            s.network_description
        );
        // Every host two switches clockwise is two switch hops away.
        for i in 0..5 {
            let (j, k) = ((i + 1) % 5, (i + 2) % 5);
            assert_eq!(
                path(&s, i, k),
                [
                    format!("h{i}"),
                    format!("s{i}"),
                    format!("s{j}"),
                    format!("s{k}"),
                    format!("h{k}")
                ]
            );
        }
    }
}

#[test]
fn up_down_routing_breaks_the_ring_at_its_root() {
    let s = parse(&switch_ring("routing = \"up_down\"\n"));
    assert_eq!(
        with_router(&s, |r| r.routing()),
        Routing::UpDown { root: None }
    );
    assert!(
        s.network_description
            .ends_with(", up_down routing (root default)"),
        "{}",
        s.network_description
    );
    // Rooted at s0 (levels s0: 0, s1 and s4: 1, s2 and s3: 2), s2 -> s3 is
    // down and s3 -> s4 up: h2 -> h4 goes up to s0 and down instead.
    assert_eq!(path(&s, 2, 4), ["h2", "s2", "s1", "s0", "s4", "h4"]);
    assert_eq!(path(&s, 3, 0), ["h3", "s3", "s4", "s0", "h0"]);

    // Rooted at s2 (s1 and s3: 1, s0 and s4: 2), s3 -> s4 is down and
    // s4 -> s0 up (s0 has the lower id): h3 -> h0 goes the long way.
    let s = parse(&switch_ring(
        "routing = \"up_down\"\nrouting_root = \"s2\"\n",
    ));
    let s2 = with_router(&s, |r| r.topology().find("s2"));
    assert_eq!(
        with_router(&s, |r| r.routing()),
        Routing::UpDown { root: s2 }
    );
    assert!(
        s.network_description.ends_with("(root s2)"),
        "{}",
        s.network_description
    );
    assert_eq!(path(&s, 3, 0), ["h3", "s3", "s2", "s1", "s0", "h0"]);
    assert_eq!(path(&s, 2, 4), ["h2", "s2", "s3", "s4", "h4"]);
    assert_eq!(path(&s, 4, 1), ["h4", "s4", "s0", "s1", "h1"]);
}

#[test]
fn routing_mistakes_are_located() {
    let cases = [
        (
            "routing = \"zigzag\"\n",
            (3, 11),
            "unknown routing `zigzag`; expected \"shortest\" or \"up_down\"",
        ),
        (
            "routing = \"up_down\"\nrouting_root = \"s9\"\n",
            (4, 16),
            "routing_root `s9` is not a vertex of the topology",
        ),
        (
            "routing = \"up_down\"\nrouting_root = \"h0\"\n",
            (4, 16),
            "the up*/down* root h0 does not forward traffic",
        ),
        (
            "routing_root = \"s0\"\n",
            (3, 16),
            "`routing_root` applies only to routing = \"up_down\"",
        ),
        (
            "routing = 3\n",
            (3, 11),
            "invalid type: integer `3`, expected a string",
        ),
    ];
    for (routing, at, needle) in cases {
        let text = switch_ring(routing);
        match Scenario::parse(
            Path::new("bad.toml"),
            &text,
            &algorithms::Registry::builtin(),
        ) {
            Err(ScenarioError::Invalid {
                line,
                column,
                message,
                ..
            }) => {
                assert_eq!((line, column), at, "{message}");
                assert!(message.contains(needle), "`{message}` lacks `{needle}`");
            }
            other => panic!("expected an invalid-scenario error for {routing:?}, got {other:?}"),
        }
    }
}

#[test]
fn routing_applies_to_presets_too() {
    let text = "[topology]\npreset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 2\n\
                routing = \"up_down\"\nrouting_root = \"spine1\"\n\
                [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n";
    let s = parse(text);
    let root = with_router(&s, |r| r.topology().find("spine1"));
    assert_eq!(with_router(&s, |r| r.routing()), Routing::UpDown { root });
}

#[test]
fn an_up_down_ring_runs_with_correct_results() {
    let dir = temp_dir("up-down-ring");
    let path = dir.join("ring.toml");
    fs::write(&path, switch_ring("routing = \"up_down\"\n")).unwrap();
    let out = sim(&["run", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("up_down routing (root default)"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert!(!rows.is_empty(), "{stdout}");
    for row in rows {
        let wrong = row.split_whitespace().nth(8).expect("a #wrong column");
        assert_eq!(wrong, "0", "{row}");
    }
}
