//! `sim bench` on thread ranks: the rows, their columns and CSV, and the
//! command line's errors.

use super::real_support::{sim_env, text};
use super::support::temp_dir;

#[test]
fn bench_prints_sim_runs_columns_and_the_csv() {
    let dir = temp_dir("real-bench");
    let csv = dir.join("bench.csv");
    let out = sim_env(
        &[
            "bench",
            "--fabric",
            "threads",
            "--ranks",
            "3",
            "-b",
            "64",
            "-e",
            "1K",
            "-f",
            "4",
            "-n",
            "2",
            "-w",
            "1",
            "--algorithm",
            "ring",
            "--chunk",
            "128",
            "--csv",
            csv.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.starts_with("# sim bench on threads: 3 thread ranks\n"),
        "{stdout}"
    );
    assert!(stdout.contains(&engine::report::table_header()), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for (row, size) in rows.iter().zip(["64", "256", "1024"]) {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[0], size);
        assert_eq!(&cols[2..5], ["float", "sum", "-1"]);
        assert_eq!(cols[8], "0", "#wrong in {row}");
        assert_eq!(cols[9], "ring");
    }
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), engine::report::CSV_HEADER.join(","));
    let records: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(&r[..5], ["allreduce", "ring", "false", "128", "3"]);
        let size: f64 = r[5].parse().unwrap();
        let time_ps: f64 = r[14].parse().unwrap();
        let (algbw, busbw): (f64, f64) = (r[11].parse().unwrap(), r[12].parse().unwrap());
        // algbw = size / time; allreduce's bus factor on 3 ranks: 2(N-1)/N
        // (the CSV keeps six decimals).
        let want = size / (time_ps * 1e-12) / 1e9;
        assert!((algbw - want).abs() < 1e-6, "{r:?}");
        assert!((busbw - want * 4.0 / 3.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r[13], "0");
        assert_eq!(r[15], "", "no closed-form time for real runs");
    }
}

#[test]
fn rooted_and_tuned_collectives_check_clean() {
    for args in [
        &[
            "--collective",
            "broadcast",
            "-r",
            "2",
            "--algorithm",
            "chain",
        ][..],
        &["--collective", "alltoall", "-d", "int64"][..],
        &[
            "--collective",
            "reduce_scatter",
            "-o",
            "max",
            "-d",
            "double",
        ][..],
        &["--collective", "barrier"][..],
    ] {
        let mut all = vec![
            "bench", "--ranks", "3", "-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-w", "0",
        ];
        all.extend_from_slice(args);
        let out = sim_env(&all, &[]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {stdout}\n{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("# Out of bounds values : 0 OK"),
            "{args:?}: {stdout}"
        );
    }
}

#[test]
fn command_line_and_environment_errors_exit_2_and_say_why() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["bench", "-c", "2"], &[], "--check"),
        (
            &["bench", "--algorithm", "bogus"],
            &[],
            "unknown algorithm `bogus`",
        ),
        (
            &["bench", "--collective", "broadcast", "--algorithm", "ring"],
            &[],
            "valid: binomial, chain",
        ),
        (&["bench", "-b", "1M", "-e", "1K"], &[], "above the largest"),
        (
            &["bench", "-d", "int32", "-o", "avg"],
            &[],
            "`avg` is not defined for dtype `int32`",
        ),
        (
            &["bench", "--collective", "reduce", "-r", "5", "--ranks", "2"],
            &[],
            "root 5",
        ),
        (
            &["bench", "--fabric", "tcp", "--ranks", "2"],
            &[],
            "--ranks applies to --fabric threads",
        ),
        (&["bench", "--timeout-s", "0"], &[], "timeout"),
        (&["bench"], &[("RANK", "1")], "WORLD_SIZE is not set"),
        (
            &["bench"],
            &[("RANK", "3"), ("WORLD_SIZE", "2")],
            "RANK=\"3\"",
        ),
        (
            &["bench", "--fabric", "threads"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", "1"),
                ("REALNET_JOB_ID", "1"),
                ("REALNET_TOKEN", "t"),
            ],
            "use --fabric shm or tcp",
        ),
        (
            &["bench"],
            &[("REALNET_FABRIC", "ib")],
            "REALNET_FABRIC: unknown fabric `ib`",
        ),
        (&["launch", "-n", "2", "bench"], &[], "--"),
        (&["launch", "-n", "0", "--", "bench"], &[], "--nprocs"),
        (
            &["launch", "-n", "2", "--fabric", "threads", "--", "bench"],
            &[],
            "runs every rank in one process",
        ),
    ];
    for (args, env, wanted) in cases {
        let out = sim_env(args, env);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(
            stderr.contains(wanted),
            "{args:?} {env:?}: {stderr} lacks {wanted}"
        );
    }
}

#[test]
fn sizes_too_large_for_memory_are_refused_before_anything_runs() {
    // 16 EiB cannot even be addressed; 4 TiB per rank is beyond any host
    // these tests run on. Neither may panic or start filling memory.
    for max in ["18446744073709551615", "4096G"] {
        let out = sim_env(
            &[
                "bench", "--ranks", "2", "-b", max, "-e", max, "-n", "1", "-w", "0",
            ],
            &[],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "-e {max}: {stderr}");
        assert!(stderr.contains("memory"), "-e {max}: {stderr}");
        assert!(!stderr.contains("panicked"), "-e {max}: {stderr}");
    }
}

/// NVLS, NVLS-Tree and CollNet need a switch that reduces in the network: thread
/// ranks refuse them with that reason, in `sim bench` and `sim run
/// --fabric`, exiting non-zero without a panic.
#[test]
fn in_network_algorithms_are_refused_on_real_fabrics() {
    for algorithm in [
        "nccl_nvls",
        "nccl_nvls_tree",
        "nccl_collnet_direct",
        "nccl_collnet_chain",
    ] {
        let out = sim_env(
            &[
                "bench",
                "--fabric",
                "threads",
                "--ranks",
                "2",
                "-b",
                "64",
                "-e",
                "64",
                "-n",
                "1",
                "-w",
                "0",
                "--algorithm",
                algorithm,
            ],
            &[],
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{algorithm}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            stderr.contains(algorithms::in_network::NO_SWITCH_REASON),
            "{algorithm}: {stderr}"
        );
    }
    let dir = temp_dir("real-nvls");
    let path = dir.join("nvls.toml");
    std::fs::write(
        &path,
        "world_size = 2\n[links]\nlatency_us = 1\nbandwidth_gb_per_s = 10\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"nccl_nvls\"\nmin_bytes = 64\n\
         max_bytes = 64\n",
    )
    .unwrap();
    let out = sim_env(&["run", path.to_str().unwrap(), "--fabric", "threads"], &[]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(algorithms::in_network::NO_SWITCH_REASON),
        "{stderr}"
    );
}
