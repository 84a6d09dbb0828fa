//! Tests of check scenario parsing: a full file, the defaults, the module
//! docs' example, and every mistake located at its line and column.

use std::path::PathBuf;

use super::*;
use crate::spec::{Assertion, Axes, Bounds, Buffering, Faults, Point, Search};

fn parse_ok(text: &str) -> CheckScenario {
    parse(Path::new("checks/t.toml"), text, &Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn error(text: &str) -> (usize, usize, String) {
    match parse(Path::new("t.toml"), text, &Registry::builtin()) {
        Err(ScenarioError::Invalid {
            line,
            column,
            message,
            ..
        }) => (line, column, message),
        other => panic!("expected an error for\n{text}\ngot {other:?}"),
    }
}

/// One allreduce ring call, lines 1 to 3.
const CALL: &str = "[[call]]\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n";

#[test]
fn a_full_file_parses_into_exactly_what_it_says() {
    let text = r#"name = "mixed"
expect = "deadlock"
concurrent = true
cost = true

[[call]]
id = "sum"
collective = "allreduce"
algorithm = "rabenseifner"
op = "max"
tag = 7

[[call]]
id = "bcast"
collective = "broadcast"
algorithm = "chain"

[[call]]
collective = "reduce_scatter"
algorithm = "recursive_halving"

[order]
default = ["bcast", "sum", "call2"]
"2" = ["call2", "sum"]
"0" = ["sum"]

[params]
world_size = { from = 2, to = 6, step = 2 }
count = [8, 12]
chunks = 3
root = [0, 1]
in_place = [false, true]
buffering = ["eager:1", "rendezvous", "unbounded"]

[faults]
drops = 2
retransmit = true
retry_count = 3
crashes = 1
timeouts = 4

[search]
kind = "pct"
schedules = 50
seed = 9
depth = 2
max_schedules = 500
max_depth = 300
delay_bound = 4

[[assert]]
kind = "max_bytes_sent"
bytes = "1K"
rank = 5

[[assert]]
kind = "max_messages_sent"
messages = 12

[[assert]]
kind = "max_steps"
steps = 30
"#;
    let expected = CheckScenario {
        name: "mixed".to_string(),
        path: PathBuf::from("checks/t.toml"),
        calls: vec![
            CallSpec {
                id: "sum".to_string(),
                collective: Collective::Allreduce,
                algorithm: algorithms::catalogue_algorithm(Collective::Allreduce, "rabenseifner"),
                op: ReduceOp::Max,
                tag: 7,
            },
            CallSpec {
                id: "bcast".to_string(),
                collective: Collective::Broadcast,
                algorithm: algorithms::catalogue_algorithm(Collective::Broadcast, "chain"),
                op: ReduceOp::Sum,
                tag: 1,
            },
            CallSpec {
                id: "call2".to_string(),
                collective: Collective::ReduceScatter,
                algorithm: algorithms::catalogue_algorithm(
                    Collective::ReduceScatter,
                    "recursive_halving",
                ),
                op: ReduceOp::Sum,
                tag: 2,
            },
        ],
        order: BTreeMap::from([(0, vec![0]), (2, vec![2, 0])]),
        default_order: vec![1, 0, 2],
        concurrent: true,
        axes: Axes {
            world_size: vec![2, 4, 6],
            count: vec![8, 12],
            chunks: vec![3],
            root: vec![0, 1],
            in_place: vec![false, true],
            buffering: vec![
                Buffering::Eager(1),
                Buffering::Eager(0),
                Buffering::Unbounded,
            ],
        },
        faults: Faults {
            drops: 2,
            retransmit: true,
            retry_count: 3,
            crashes: 1,
            timeouts: 4,
        },
        search: Search::Pct {
            schedules: 50,
            seed: 9,
            depth: 2,
        },
        bounds: Bounds {
            max_schedules: 500,
            max_depth: 300,
            delay_bound: Some(4),
            stateful_after: crate::explore::STATEFUL_AFTER,
        },
        check_cost: true,
        expect: Some(Verdict::Deadlock),
        asserts: vec![
            Assertion::MaxBytesSent {
                rank: Some(5),
                bytes: 1024,
            },
            Assertion::MaxMessagesSent {
                rank: None,
                messages: 12,
            },
            Assertion::MaxSteps { steps: 30 },
        ],
        notes: vec![],
    };
    let got = parse_ok(text);
    assert_eq!(got, expected);
    assert_eq!(got.order_of(2), &[2, 0]);
    assert_eq!(got.order_of(1), &[1, 0, 2]);
}

#[test]
fn a_minimal_file_takes_every_default() {
    let got = parse_ok(
        "[[call]]\ncollective = \"allgather\"\nalgorithm = \"send_all_first\"\n\
         [[call]]\ncollective = \"allreduce\"\nalgorithm = \"buggy_ring\"\n",
    );
    let expected = CheckScenario {
        name: "t".to_string(),
        path: PathBuf::from("checks/t.toml"),
        calls: vec![
            CallSpec {
                id: "call0".to_string(),
                collective: Collective::Allgather,
                algorithm: Algorithm::new(crate::demo::SendAllFirst),
                op: ReduceOp::Sum,
                tag: 0,
            },
            CallSpec {
                id: "call1".to_string(),
                collective: Collective::Allreduce,
                algorithm: Algorithm::new(crate::demo::BuggyRing),
                op: ReduceOp::Sum,
                tag: 1,
            },
        ],
        order: BTreeMap::new(),
        default_order: vec![0, 1],
        concurrent: false,
        axes: Axes {
            world_size: vec![2, 3, 4],
            count: vec![4],
            chunks: vec![1],
            root: vec![0],
            in_place: vec![true],
            buffering: vec![Buffering::Eager(8)],
        },
        faults: Faults {
            drops: 0,
            retransmit: false,
            retry_count: 7,
            crashes: 0,
            timeouts: 0,
        },
        search: Search::Exhaustive,
        bounds: Bounds::default(),
        check_cost: false,
        expect: None,
        asserts: vec![],
        notes: vec![],
    };
    assert_eq!(got, expected);
}

#[test]
fn random_search_defaults_its_schedules_and_seed() {
    let got = parse_ok(&format!("{CALL}[search]\nkind = \"random\"\n"));
    assert_eq!(
        got.search,
        Search::Random {
            schedules: 1000,
            seed: 1
        }
    );
    let got = parse_ok(&format!("{CALL}[search]\nkind = \"pct\"\n"));
    assert_eq!(
        got.search,
        Search::Pct {
            schedules: 1000,
            seed: 1,
            depth: 3
        }
    );
}

#[test]
fn the_module_docs_example_is_a_valid_scenario() {
    let source = include_str!("../scenario.rs");
    let example: String = source
        .lines()
        .skip_while(|l| *l != "//! ```toml")
        .skip(1)
        .take_while(|l| *l != "//! ```")
        .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start_matches(' ')))
        .collect();
    assert!(example.contains("[[assert]]"), "{example}");
    let got = parse_ok(&example);
    assert_eq!(got.name, "ring_ok");
    assert_eq!(got.calls.len(), 2);
    assert_eq!(got.default_order, vec![1, 0]);
    assert_eq!(got.order, BTreeMap::from([(0, vec![0, 1])]));
    assert_eq!(got.axes.count, vec![2, 3, 4]);
    assert_eq!(
        got.search,
        Search::Random {
            schedules: 1000,
            seed: 1
        }
    );
    assert_eq!(got.bounds.delay_bound, Some(2));
}

#[test]
fn ranged_params_multiply_into_points() {
    let got = parse_ok(&format!(
        "{CALL}[params]\nworld_size = {{ from = 2, to = 5 }}\ncount = {{ from = 0, to = 12, step = 4 }}\n\
         chunks = [1, 2]\nin_place = [true, false]\nbuffering = [\"eager:2\", \"unbounded\"]\n"
    ));
    assert_eq!(got.axes.world_size, vec![2, 3, 4, 5]);
    assert_eq!(got.axes.count, vec![0, 4, 8, 12]);
    let points = got.points();
    // 4 world sizes x 4 counts x 2 chunk counts x 1 root x 2 x 2.
    assert_eq!(points.len(), 4 * 4 * 2 * 2 * 2);
    assert_eq!(
        points[0],
        Point {
            world_size: 2,
            count: 0,
            chunks: 1,
            root: 0,
            in_place: true,
            buffering: Buffering::Eager(2),
        }
    );
    assert_eq!(points[points.len() - 1].world_size, 5);
    assert_eq!(points[points.len() - 1].buffering, Buffering::Unbounded);
}

#[test]
fn a_range_with_a_step_stops_at_or_before_its_end() {
    let got = parse_ok(&format!(
        "{CALL}[params]\nchunks = {{ from = 1, to = 8, step = 3 }}\n"
    ));
    assert_eq!(got.axes.chunks, vec![1, 4, 7]);
}

#[test]
fn mistakes_are_located() {
    let call = CALL;
    #[rustfmt::skip]
    let cases: Vec<(String, usize, usize, &str)> = vec![
        // Unknown keys, everywhere.
        (format!("speed = 3\n{call}"), 1, 1, "unknown field `speed`"),
        (format!("{call}colour = 1\n"), 4, 1, "unknown field `colour`"),
        (format!("{call}[params]\nsize = 2\n"), 5, 1, "unknown field `size`"),
        (format!("{call}[faults]\ndrop = 1\n"), 5, 1, "unknown field `drop`"),
        (format!("{call}[search]\nkind = \"random\"\nschedule = 5\n"), 6, 1, "unknown field `schedule`"),
        (format!("{call}[[assert]]\nkind = \"max_steps\"\nstep = 5\n"), 6, 1, "unknown field `step`"),
        (format!("{call}[params]\ncount = {{ from = 1, to = 4, by = 2 }}\n"), 5, 29, "unknown range key `by`"),
        // Unknown names.
        ("[[call]]\ncollective = \"allreduse\"\nalgorithm = \"ring\"\n".into(), 2, 14, "unknown collective `allreduse`"),
        ("[[call]]\ncollective = \"allreduce\"\nalgorithm = \"rung\"\n".into(), 3, 13, "unknown algorithm `rung`; expected one of ring, recursive_doubling, rabenseifner, tree, hierarchical, nccl_ring, nccl_tree, nccl_nvls, nccl_nvls_tree, nccl_collnet_direct, nccl_collnet_chain, buggy_ring, arrival_order_sum for allreduce"),
        (format!("{call}op = \"sun\"\n"), 4, 6, "unknown reduction `sun`"),
        (format!("expect = \"verifed\"\n{call}"), 1, 10, "unknown verdict `verifed`; expected one of verified, deadlock"),
        (format!("{call}[params]\nbuffering = [\"eager:1\", \"eager\"]\n"), 5, 25, "buffering values are \"eager:K\""),
        (format!("{call}[params]\nbuffering = \"eager:-1\"\n"), 5, 13, "got \"eager:-1\""),
        (format!("{call}[search]\nkind = \"dfs\"\n"), 5, 8, "unknown search kind `dfs`; expected exhaustive, random or pct"),
        (format!("{call}[[assert]]\nkind = \"max_time\"\n"), 5, 8, "unknown assert kind `max_time`"),
        // Algorithms of another collective.
        ("[[call]]\ncollective = \"allreduce\"\nalgorithm = \"bruck\"\n".into(), 3, 13, "algorithm `bruck` does not implement allreduce"),
        ("[[call]]\ncollective = \"allreduce\"\nalgorithm = \"send_all_first\"\n".into(), 3, 13, "algorithm `send_all_first` does not implement allreduce"),
        ("[[call]]\ncollective = \"allgather\"\nalgorithm = \"ring\"\nop = \"max\"\n".into(), 4, 6, "allgather does not reduce"),
        // Call ids.
        ("[[call]]\nid = \"a\"\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n[[call]]\nid = \"a\"\ncollective = \"allgather\"\nalgorithm = \"ring\"\n".into(), 6, 6, "call id `a` is already used by call 0 (line 1)"),
        ("[[call]]\nid = \"call1\"\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n[[call]]\ncollective = \"allgather\"\nalgorithm = \"ring\"\n".into(), 5, 1, "call id `call1` is already used"),
        // Orders.
        (format!("{call}[order]\ndefault = [\"call0\", \"x\"]\n"), 5, 21, "no call has id `x`; expected one of call0"),
        (format!("{call}[order]\n\"1\" = [\"call0\", \"call0\"]\n"), 5, 17, "the order of rank 1 names call `call0` twice"),
        (format!("{call}[order]\nfirst = [\"call0\"]\n"), 5, 1, "order key `first` is neither `default` nor a rank number"),
        (format!("{call}[order]\n\"01\" = [\"call0\"]\n"), 5, 1, "order key `01`"),
        (format!("{call}[order]\n\"4\" = [\"call0\"]\n"), 5, 1, "rank 4 does not exist: the largest world size is 4"),
        (format!("{call}[order]\ndefault = []\n"), 5, 11, "the default order is empty"),
        // Lists and ranges.
        (format!("{call}[params]\nchunks = []\n"), 5, 10, "the chunks list is empty"),
        (format!("{call}[params]\nworld_size = {{ from = 4, to = 2 }}\n"), 5, 31, "the range ends (to = 2) below its start (from = 4)"),
        (format!("{call}[params]\ncount = {{ from = 1, to = 4, step = 0 }}\n"), 5, 36, "step must be a whole number from 1 to 4096, got 0"),
        (format!("{call}[params]\ncount = {{ from = 1 }}\n"), 5, 9, "needs `from` and `to`"),
        (format!("{call}[params]\nworld_size = 17\n"), 5, 14, "world_size values are whole numbers from 1 to 16, got 17"),
        (format!("{call}[params]\ncount = {{ from = 1, to = 4097 }}\n"), 5, 26, "count values are whole numbers from 0 to 4096, got 4097"),
        (format!("{call}[params]\ncount = [4, \"8\"]\n"), 5, 13, "got a string"),
        (format!("{call}[params]\nin_place = {{ from = 0, to = 1 }}\n"), 5, 12, "in_place takes a value or a list of values, not a range"),
        (format!("{call}[params]\nin_place = [true, 1]\n"), 5, 19, "in_place values are true or false, got an integer"),
        (format!("{call}[params]\nbuffering = [\"eager:0\", \"rendezvous\"]\n"), 5, 25, "the buffering list has rendezvous twice"),
        (format!("{call}[params]\ncount = {{ from = 0, to = 4000 }}\nchunks = [1, 2, 3]\n"), 4, 1, "36009 parameter points (3 x 4001 x 3 x 1 x 1 x 1), more than the 10000 limit"),
        // Roots and alltoall blocks.
        ("[[call]]\ncollective = \"broadcast\"\nalgorithm = \"binomial\"\n[params]\nworld_size = [4, 2, 3]\nroot = [0, 2]\n".into(), 6, 12, "root 2 does not exist at world size 2, the smallest"),
        ("[[call]]\ncollective = \"alltoall\"\nalgorithm = \"pairwise\"\n[params]\nworld_size = [2, 3]\ncount = [6, 8]\n".into(), 6, 13, "count 8 is not divisible by world size 3: alltoall call `call0`"),
        ("[[call]]\ncollective = \"alltoall\"\nalgorithm = \"bruck\"\n".into(), 2, 14, "count 4 (the default; set count in [params]) is not divisible by world size 3"),
        // Cost, search and bounds.
        (format!("{call}[search]\nkind = \"random\"\nschedules = 0\n"), 6, 13, "schedules must be between 1 and 1000000000, got 0"),
        (format!("{call}[search]\nmax_depth = 0\n"), 5, 13, "max_depth must be between 1 and 1000000, got 0"),
        (format!("{call}[search]\nmax_schedules = 0\n"), 5, 17, "max_schedules must be between 1"),
        (format!("{call}[search]\ndepth = 2\n"), 5, 9, "`depth` does not apply to the exhaustive search"),
        (format!("{call}[search]\nkind = \"pct\"\ndepth = 0\n"), 6, 9, "depth must be between 1 and 64, got 0"),
        // Faults.
        (format!("{call}[faults]\nretransmit = true\nretry_count = 8\n"), 6, 15, "retry_count must be between 0 and 7, got 8"),
        (format!("{call}[faults]\ncrashes = 5\n"), 5, 11, "crashes must be between 0 and 4, got 5"),
        (format!("{call}[faults]\ndrops = -1\n"), 5, 9, "drops must be between 0 and 64, got -1"),
        // Assertions.
        (format!("{call}[params]\nworld_size = [2, 3]\n[[assert]]\nkind = \"max_bytes_sent\"\nbytes = 64\nrank = 3\n"), 9, 8, "rank must be between 0 and 2, got 3"),
        (format!("{call}[[assert]]\nkind = \"max_steps\"\n"), 4, 1, "a max_steps assertion needs `steps`"),
        (format!("{call}[[assert]]\nkind = \"max_steps\"\nsteps = 3\nrank = 0\n"), 7, 8, "`rank` does not apply to a max_steps assertion"),
        (format!("{call}[[assert]]\nkind = \"max_bytes_sent\"\nmessages = 3\n"), 6, 12, "`messages` does not apply to a max_bytes_sent assertion"),
        // The file as a whole.
        ("name = \"x\"\n".into(), 1, 1, "the check has no [[call]]"),
        (format!("name = \"\"\n{call}"), 1, 8, "name must not be empty"),
        (format!("{call}tag = 72057594037927936\n"), 4, 7, "tag must be between 0 and 72057594037927935"),
    ];
    for (text, line, column, message) in &cases {
        let (l, c, m) = error(text);
        assert!(
            m.contains(message),
            "{text}\nexpected `{message}`, got: {m}"
        );
        assert_eq!((l, c), (*line, *column), "{text}\n{m}");
    }
}

#[test]
fn load_reads_the_file_and_names_it_in_errors() {
    let dir = std::env::temp_dir().join(format!("check_scenario_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("ring_ok.toml");
    std::fs::write(&good, CALL).unwrap();
    let got = load(&good, &Registry::builtin()).unwrap();
    assert_eq!(got.name, "ring_ok");
    assert_eq!(got.path, good);
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, format!("{CALL}[params]\nchunks = 0\n")).unwrap();
    let e = load(&bad, &Registry::builtin()).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:5:10: chunks values are", bad.display())),
        "{e}"
    );
    let missing = dir.join("missing.toml");
    assert!(matches!(
        load(&missing, &Registry::builtin()),
        Err(ScenarioError::Read { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cost_property_of_an_algorithm_without_a_formula_is_skipped_with_a_note() {
    let got = parse_ok(
        "cost = true\n[[call]]\ncollective = \"allreduce\"\nalgorithm = \"buggy_ring\"\n\
         [[call]]\ncollective = \"allreduce\"\nalgorithm = \"ring\"\n",
    );
    assert!(got.check_cost);
    assert_eq!(
        got.notes,
        vec![
            "call `call0`: allreduce buggy_ring has no cost formula; its cost property is skipped"
        ]
    );
}
