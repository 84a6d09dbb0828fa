//! The parser on logs in nccl-tests' exact format (the fixtures under
//! `engine/tests/fixtures/nccl_tests/`: an 8-GPU `-g 8` allreduce, a
//! 16-rank MPI allgather, a concatenated shell session) and on malformed
//! ones; prediction and comparison on a small world.

use std::path::Path;

use algorithms::{Collective, Registry};

use super::compare::{Comparison, error_pct, median, write_csv};
use super::predict::{Outcome, Predictor};
use super::*;
use crate::tuning::AlgoFilter;

const ALLREDUCE_G8: &str = include_str!("../../tests/fixtures/nccl_tests/allreduce_g8.txt");
const ALLGATHER_MPI16: &str = include_str!("../../tests/fixtures/nccl_tests/allgather_mpi16.txt");
const CONCATENATED: &str = include_str!("../../tests/fixtures/nccl_tests/concatenated.txt");

const HEADER: &str = "\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
";

/// A one-table `-g 4` allreduce log with `rows` as its data rows.
fn allreduce_log(rows: &str) -> String {
    format!(
        "$ ./build/all_reduce_perf -b 8 -e 64 -g 4\n\
         # nThread 1 nGpus 4 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n\
         #\n# Using devices\n\
         #  Rank  0 Group  0 Pid   1001 on      node1 device  0 [0x07] NVIDIA A100-SXM4-80GB\n\
         #  Rank  1 Group  0 Pid   1001 on      node1 device  1 [0x0b] NVIDIA A100-SXM4-80GB\n\
         #  Rank  2 Group  0 Pid   1001 on      node1 device  2 [0x48] NVIDIA A100-SXM4-80GB\n\
         #  Rank  3 Group  0 Pid   1001 on      node1 device  3 [0x4c] NVIDIA A100-SXM4-80GB\n\
         #\n{HEADER}{rows}\
         # Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.01 \n#\n"
    )
}

const GOOD_ROW: &str = "           8             2     float     sum      -1    10.50    0.00    0.00      0    10.40    0.00    0.00      0\n";

fn row_error(rows: &str) -> ParseError {
    parse(&allreduce_log(rows), None).expect_err("a malformed row")
}

#[test]
fn an_allreduce_from_one_process_driving_8_gpus() {
    let tables = parse(ALLREDUCE_G8, None).unwrap();
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    assert_eq!(t.test, Test::Collective(Collective::Allreduce));
    assert_eq!(t.named_at, Some(1));
    assert_eq!(t.line, 15);
    assert_eq!(
        t.world,
        Some(World {
            ranks: 8,
            source: WorldSource::RankLines { line: 5 }
        })
    );
    assert_eq!(t.placements, [Placement::OutOfPlace, Placement::InPlace]);
    assert_eq!(t.rows.len(), 25, "8 B to 128 MiB, doubling");
    let first = &t.rows[0];
    assert_eq!((first.line, first.size_bytes, first.count), (17, 8, 2));
    assert_eq!(first.dtype, "float");
    assert_eq!(first.redop.as_deref(), Some("sum"));
    assert_eq!(first.root, Some(-1));
    let oop = first.out_of_place.as_ref().unwrap();
    assert_eq!((oop.time_us, oop.check), (11.38, Some(0.0)));
    assert_eq!(first.in_place.as_ref().unwrap().time_us, 11.26);
    let last = t.rows.last().unwrap();
    assert_eq!(last.size_bytes, 128 << 20);
    assert_eq!(last.in_place.as_ref().unwrap().busbw_gb_per_s, 403.22);
    assert_eq!(t.out_of_bounds, Some(0));
    assert_eq!(t.avg_busbw_gb_per_s, Some(100.161));
}

#[test]
fn an_allgather_from_an_mpi_launch_of_16_ranks() {
    let tables = parse(ALLGATHER_MPI16, None).unwrap();
    assert_eq!(tables.len(), 1);
    let t = &tables[0];
    // Named by `# Collective test starting`, after mpirun's warnings.
    assert_eq!(t.test, Test::Collective(Collective::Allgather));
    assert_eq!(t.named_at, Some(8));
    assert_eq!(t.world.map(|w| w.ranks), Some(16));
    assert_eq!(t.rows.len(), 21, "1 KiB to 1 GiB");
    // The count is per rank: 16 floats from each of 16 ranks.
    let first = &t.rows[0];
    assert_eq!((first.size_bytes, first.count), (1024, 16));
    assert_eq!(first.redop.as_deref(), Some("none"));
    assert!(t.rows.iter().all(|r| r.size_bytes == r.count * 4 * 16));
}

#[test]
fn a_concatenated_session_gives_each_test_its_table() {
    let tables = parse(CONCATENATED, None).unwrap();
    let tests: Vec<String> = tables.iter().map(|t| t.test.to_string()).collect();
    assert_eq!(
        tests,
        [
            "allreduce",
            "reduce_scatter",
            "sendrecv",
            "alltoall",
            "broadcast"
        ]
    );
    assert_eq!(tables[2].test, Test::Collective(Collective::SendRecv));
    // sendrecv_perf's count is the whole buffer (busbw = algbw).
    let sr = &tables[2].rows[0];
    assert_eq!((sr.size_bytes, sr.count), (1024, 256));
    for t in &tables {
        assert_eq!(t.rows.len(), 6, "{}", t.test);
        assert_eq!(t.world.map(|w| w.ranks), Some(8), "{}", t.test);
        // Each table named by its own command line, not the previous one's.
        let named = t.named_at.unwrap();
        assert!(
            named < t.line
                && CONCATENATED
                    .lines()
                    .nth(named - 1)
                    .unwrap()
                    .contains(&t.test.binary())
        );
    }
    // NCCL_DEBUG=INFO lines between rows are skipped.
    assert_eq!(tables[0].rows[1].size_bytes, 4096);
    // Half-precision reduce-scatter: per-rank count of 2-byte elements.
    let rs = &tables[1].rows[0];
    assert_eq!(
        (rs.dtype.as_str(), rs.size_bytes, rs.count),
        ("half", 1024, 64)
    );
    // The old alltoall table has no redop or root column, and `error`.
    let a2a = &tables[3];
    assert_eq!((a2a.rows[0].redop.clone(), a2a.rows[0].root), (None, None));
    assert_eq!(a2a.rows[0].out_of_place.as_ref().unwrap().check, Some(0.0));
    assert_eq!(tables[4].rows[0].root, Some(3));
}

#[test]
fn columns_come_from_the_header_line() {
    // Newer binaries: bitwise and timestamp columns; `N/A` without -c.
    let log = "# Collective test starting: reduce_perf\n\
        #  Rank  0 Group  0 Pid 7 on h device  0 [0000:07:00] GPU\n\
        #  Rank  1 Group  0 Pid 7 on h device  1 [0000:0b:00] GPU\n\
        #       size         count      type   redop    root     time   algbw   busbw  #wrong  #bitdiff     time   algbw   busbw  #wrong  #bitdiff  timestamp\n\
        \x20       1024           256     float     max       1    12.00    0.09    0.09     N/A         0    12.10    0.08    0.08     N/A         0  2025-01-31 10:00:00\n";
    let t = &parse(log, None).unwrap()[0];
    assert_eq!(t.test, Test::Collective(Collective::Reduce));
    let row = &t.rows[0];
    assert_eq!((row.root, row.redop.as_deref()), (Some(1), Some("max")));
    assert_eq!(row.out_of_place.as_ref().unwrap().check, None);
    assert_eq!(row.in_place.as_ref().unwrap().time_us, 12.1);
    // Without Rank lines the header's nThread x nGpus is the world.
    let log = format!(
        "# Collective test starting: all_reduce_perf\n# nThread 2 nGpus 2 minBytes 8\n{HEADER}{GOOD_ROW}"
    );
    let world = parse(&log, None).unwrap()[0].world.unwrap();
    assert_eq!(
        (world.ranks, world.source),
        (4, WorldSource::Header { line: 2 })
    );
}

#[test]
fn mpirun_prefixes_launchers_and_implied_world_sizes() {
    // `mpirun --tag-output` prefixes; the world from -np x nGpus.
    let log = format!(
        "mpirun -np 2 ./all_gather_perf -b 64 -e 64 -g 2\n\
         [1,0]<stdout>:# nThread 1 nGpus 2 minBytes 64\n\
         [1,0]<stdout>:{}\
         [1,0]<stdout>:        64             4     float    none      -1    10.00    0.01    0.01      0    10.00    0.01    0.01      0\n",
        HEADER.lines().nth(1).unwrap().to_string() + "\n"
    );
    let t = &parse(&log, None).unwrap()[0];
    assert_eq!(
        t.world,
        Some(World {
            ranks: 4,
            source: WorldSource::Launcher { line: 1 }
        })
    );
    // Nothing says the world: the per-rank count does.
    let log = format!(
        "{HEADER}        64             2     float    none      -1    10.00    0.01    0.01      0    10.00    0.01    0.01      0\n"
    );
    let t = &parse(&log, Some(Test::Collective(Collective::Allgather))).unwrap()[0];
    assert_eq!(t.named_at, None);
    assert_eq!(
        t.world.map(|w| (w.ranks, w.source)),
        Some((8, WorldSource::Rows { line: 4 }))
    );
}

#[test]
fn a_table_nobody_names_needs_the_fallback() {
    let log = format!("{HEADER}{GOOD_ROW}");
    let e = parse(&log, None).unwrap_err();
    assert_eq!(e, ParseError::UnknownTest { line: 2 });
    assert!(e.to_string().contains("--collective"), "{e}");
    let named = Test::from_name("all-reduce").unwrap();
    assert_eq!(parse(&log, Some(named)).unwrap()[0].test, named);
    // A reducing collective's table has a redop column.
    let log = "#  size count type time algbw busbw error time algbw busbw error\n";
    let e = parse(log, Some(named)).unwrap_err();
    assert!(matches!(e, ParseError::Line { line: 1, .. }), "{e}");
    assert_eq!(parse("nothing here\n", None), Err(ParseError::NoTable));
}

#[test]
fn test_names_are_binaries_or_collectives() {
    for (name, want) in [
        (
            "all_reduce_perf",
            Some(Test::Collective(Collective::Allreduce)),
        ),
        (
            "all_gather_perf_mpi",
            Some(Test::Collective(Collective::Allgather)),
        ),
        ("allgather", Some(Test::Collective(Collective::Allgather))),
        (
            "sendrecv_perf",
            Some(Test::Collective(Collective::SendRecv)),
        ),
        ("hypercube_perf", Some(Test::Unsupported("hypercube"))),
        ("barrier", None),
        ("foo_perf", None),
    ] {
        assert_eq!(Test::from_name(name), want, "{name}");
    }
    assert_eq!(
        Test::Collective(Collective::Alltoall).binary(),
        "alltoall_perf"
    );
}

#[test]
fn malformed_rows_are_errors_at_their_line_and_column() {
    let cases = [
        // One field short.
        (
            "           8             2     float     sum      -1    10.50    0.00    0.00      0    10.40    0.00    0.00\n",
            14,
            110,
            "expected 13 fields",
        ),
        // A non-number.
        (
            "           8             2     float     sum      -1    10.5x    0.00    0.00      0    10.40    0.00    0.00      0\n",
            14,
            57,
            "the time in us",
        ),
        // A size that is not count x element size.
        (
            "          12             2     float     sum      -1    10.50    0.00    0.00      0    10.40    0.00    0.00      0\n",
            14,
            11,
            "size 12 is not count 2 x 4 bytes (float) = 8",
        ),
        // An unknown type.
        (
            "           8             2   float16     sum      -1    10.50    0.00    0.00      0    10.40    0.00    0.00      0\n",
            14,
            30,
            "unknown type `float16`",
        ),
        // Not a number at all.
        (
            "Test NCCL failure common.cu:892 'unhandled cuda error'\n",
            14,
            1,
            "the size in bytes",
        ),
        // Infinity is no time.
        (
            "           8             2     float     sum      -1      inf    0.00    0.00      0    10.40    0.00    0.00      0\n",
            14,
            59,
            "a number",
        ),
    ];
    for (rows, line, column, text) in cases {
        let e = row_error(&format!("{GOOD_ROW}{rows}"));
        let ParseError::Row {
            line: l,
            column: c,
            message,
        } = &e
        else {
            panic!("{e}");
        };
        assert_eq!((*l, *c), (line, column), "{e}");
        assert!(message.contains(text), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{line}:{column}: ")),
            "{e}"
        );
    }
}

#[test]
fn per_rank_sizes_and_roots_are_checked_against_the_world() {
    // 16 ranks, but the size says 8.
    let log = ALLGATHER_MPI16.replacen(
        "        1024            16     float",
        "         512            16     float",
        1,
    );
    let e = parse(&log, None).unwrap_err();
    assert_eq!(e.line(), Some(32), "{e}");
    assert!(e.to_string().contains("x 16 ranks"), "{e}");
    // A broadcast root outside the 8 ranks.
    let log = CONCATENATED.replacen("  none       3  ", "  none       9  ", 1);
    let e = parse(&log, None).unwrap_err();
    assert!(e.to_string().contains("root 9 is not a rank"), "{e}");
    // One process's Rank line twice: not one job.
    let log = ALLREDUCE_G8.replacen("#  Rank  1 Group", "#  Rank  0 Group", 1);
    let e = parse(&log, None).unwrap_err();
    assert_eq!(
        e,
        ParseError::DuplicateRank {
            line: 6,
            rank: 0,
            first: 5
        }
    );
}

#[test]
fn garbage_never_panics() {
    let logs = [
        "#       size         count      type\n",
        "#       size         count      type   time\n1 2 3 4\n",
        "# nThread x nGpus y\n",
        "#  Rank  x\n",
        "# Collective test starting:\n",
        "\u{fffd}\u{0}#\t size count type redop root time algbw busbw #wrong\n99999999999999999999999 1 float sum -1 1 1 1 0\n",
        "# Collective test starting: all_gather_perf\n# size count type time algbw busbw\n18446744073709551615 18446744073709551615 double 1 1 1\n",
        "[1,0]<stdout>:",
        "[",
    ];
    for log in logs {
        let _ = parse(log, Some(Test::Collective(Collective::Allreduce)));
    }
}

proptest::proptest! {
    /// Any stretch of a real log replaced by any printable text (digits,
    /// `#`, newlines, field separators included) is read or refused with
    /// an error, never a panic.
    #[test]
    fn edited_logs_are_read_or_refused_never_a_panic(
        which in 0usize..3,
        at in 0usize..10_000,
        len in 0usize..64,
        junk in "[ -~\n]{0,64}",
    ) {
        let log = [ALLREDUCE_G8, ALLGATHER_MPI16, CONCATENATED][which];
        // The fixtures are ASCII: every index is a character boundary.
        let at = at % log.len();
        let end = (at + len).min(log.len());
        let edited = format!("{}{junk}{}", &log[..at], &log[end..]);
        let _ = parse(&edited, Some(Test::Collective(Collective::Allreduce)));
        let _ = parse(&edited, None);
    }
}

const WORLD: &str = "world_size = 4\nseed = 1\n[links]\nlatency_us = 2.0\nbandwidth_gb_per_s = 100.0\n\
    [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nmin_bytes = 8\nmax_bytes = 8\nchunk_bytes = \"64K\"\n";

#[test]
fn predictions_use_the_tuner_at_exactly_the_logs_sizes() {
    let registry = Registry::builtin();
    let predictor = Predictor::from_toml(Path::new("w.toml"), WORLD, &registry).unwrap();
    let rows = format!(
        "{GOOD_ROW}          64            16     float     sum      -1    10.90    0.01    0.01      0    10.80    0.01    0.01      0\n\
         \x20         64            32      half     sum      -1    11.00    0.01    0.01      0    11.00    0.01    0.01      0\n\
         \x20         64            16     float  mulsum      -1    11.00    0.01    0.01      0    11.00    0.01    0.01      0\n"
    );
    let tables = parse(&allreduce_log(&rows), None).unwrap();
    assert_eq!(predictor.world_mismatch(&tables[0]), None);
    let prediction = predictor.predict(&tables[0], &AlgoFilter::default());
    assert_eq!(prediction.outcomes.len(), 4);
    for (row, outcome) in tables[0].rows.iter().zip(&prediction.outcomes) {
        let Outcome::Predicted(p) = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(p.size_bytes, row.size_bytes);
        assert!(p.tuned, "the scenario's own algorithm is not used");
        assert_eq!(p.chunk_bytes % 1024, 0);
        assert!(p.time_ps > 0);
    }
    assert_eq!(prediction.notes.len(), 2, "{:?}", prediction.notes);
    let comparison = Comparison::new(&tables[0], prediction);
    let errors = comparison.errors();
    assert_eq!(errors.rows, 4);
    let text = comparison.text("log.txt");
    assert!(
        text.contains("# allreduce: log.txt:11 (all_reduce_perf, named at line 1), 4 ranks"),
        "{text}"
    );
    assert!(text.contains("# median |error|: "), "{text}");
    assert!(text.contains("% over 4 sizes (out-of-place "), "{text}");
    let mut csv = Vec::new();
    write_csv(&mut csv, &[comparison]).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 * 2, "{csv}");
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("allreduce,13,4,8,2,float,sum,-1,out-of-place,10.5,"),
        "{csv}"
    );
}

#[test]
fn rows_that_cannot_run_are_outcomes_not_errors() {
    let registry = Registry::builtin();
    let predictor = Predictor::from_toml(Path::new("w.toml"), WORLD, &registry).unwrap();
    let tables = parse(CONCATENATED, None).unwrap();
    // 8 ranks in the log, 4 in the scenario.
    let why = predictor.world_mismatch(&tables[0]).unwrap();
    assert!(
        why.contains("8 ranks") && why.contains("w.toml has 4 ranks"),
        "{why}"
    );
    // hypercube: every row not simulated, the table kept.
    // (The sendrecv table renamed: hypercube_perf's count is per rank.)
    let renamed: Vec<String> = CONCATENATED
        .replace("sendrecv_perf", "hypercube_perf")
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let row = (71..78).contains(&i) && fields.len() > 2;
            match fields.first().and_then(|f| f.parse::<u64>().ok()) {
                Some(size) if row => line.replacen(fields[1], &(size / 32).to_string(), 1),
                _ => line.to_string(),
            }
        })
        .collect();
    let hypercube = parse(&renamed.join("\n"), None).unwrap();
    let p = predictor.predict(&hypercube[2], &AlgoFilter::default());
    assert!(
        p.outcomes
            .iter()
            .all(|o| matches!(o, Outcome::NotSimulated(_)))
    );
    let text = Comparison::new(&hypercube[2], p).text("s.log");
    assert!(
        text.contains("not simulated: the simulator has no hypercube test"),
        "{text}"
    );
    assert!(text.contains("6 rows left out, lines"), "{text}");
    // A root the scenario does not have.
    let log = CONCATENATED.replace("  none       3  ", "  none       5  ");
    let tables = parse(&log, None).unwrap();
    let p = predictor.predict(&tables[4], &AlgoFilter::default());
    assert!(
        matches!(&p.outcomes[0], Outcome::NotSimulated(why) if why.contains("root 5")),
        "{p:?}"
    );
}

#[test]
fn errors_and_medians() {
    assert!((error_pct(12.0, 10.0).unwrap() - 20.0).abs() < 1e-9);
    assert_eq!(error_pct(5.0, 10.0), Some(-50.0));
    assert_eq!(error_pct(5.0, 0.0), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&[]), None);
}
