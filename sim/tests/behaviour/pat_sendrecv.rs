//! Sendrecv (nccl-tests' `sendrecv_perf`) and PAT in scenario files: rows
//! checked against the references, busbw equal to algbw for sendrecv, the
//! closed forms on ideal links, PAT's logarithmic latency at small sizes,
//! and the NCCL variants on a DGX H100 node.

use std::ops::ControlFlow;
use std::path::Path;

use algorithms::Registry;
use engine::scenario::Scenario;
use engine::study::{Options, Row, run_scenario};
use engine::tuning::AlgoFilter;

use crate::support::study_links;

/// Runs `scenario` on ideal links (no link counters): its rows.
fn ideal_rows(scenario: &Scenario) -> Vec<Row> {
    run_scenario(scenario, &AlgoFilter::default(), Options::default(), |_| {
        ControlFlow::Continue(())
    })
    .unwrap_or_else(|f| panic!("{:?}", f.1))
}

/// `text` as a scenario of the catalogue.
fn scenario(text: &str) -> Scenario {
    Scenario::parse(Path::new("test.toml"), text, &Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A `[[collective]]` entry on real data, checked.
fn entry(kind: &str, algorithm: Option<&str>, min: &str, max: &str) -> String {
    let algorithm = algorithm.map_or(String::new(), |a| format!("algorithm = \"{a}\"\n"));
    format!(
        "[[collective]]\nkind = \"{kind}\"\n{algorithm}min_bytes = \"{min}\"\nmax_bytes = \"{max}\"\n\
         step_factor = 8\ndtype = \"float\"\niters = 1\nwarmup = 0\ncheck = true\n"
    )
}

#[test]
fn a_sendrecv_row_has_busbw_equal_to_algbw_and_the_closed_form_time() {
    let text = format!(
        "name = \"sr\"\nworld_size = 6\nseed = 3\n[links]\nlatency_us = 2.0\nbandwidth_gb_per_s = 100.0\n{}{}",
        entry("sendrecv", None, "4", "256K"),
        entry("sendrecv", Some("nccl_sendrecv"), "4", "256K"),
    );
    let rows = ideal_rows(&scenario(&text));
    assert_eq!(rows.len(), 12, "6 sizes, two entries");
    for row in &rows {
        assert_eq!(row.collective, "sendrecv");
        assert_eq!(row.wrong, Some(0), "{row:?}");
        assert_eq!(row.algbw_gb_per_s, row.busbw_gb_per_s, "{row:?}");
        assert_eq!((row.redop, row.root), ("none", None));
        assert_eq!(
            row.count as u64 * 4,
            row.size_bytes,
            "count: the whole buffer"
        );
    }
    // The tuner's choice is the direct send, exactly alpha + n/B.
    for row in &rows[..6] {
        assert_eq!(row.algorithm, "direct");
        assert_eq!(row.model_ps, Some(row.time_ps), "{row:?}");
        let wire = (row.size_bytes * 1_000_000_000_000).div_ceil(100_000_000_000);
        assert_eq!(row.time_ps, 2_000_000 + wire, "{row:?}");
    }
    // NCCL's way: parts of at least chunk/8 per channel, all on the one
    // link to r+1, LL (twice the wire bytes) up to 16 KiB per channel:
    // never faster than the one message.
    for (direct, nccl) in rows[..6].iter().zip(&rows[6..]) {
        assert_eq!(nccl.algorithm, "nccl_sendrecv");
        assert!(nccl.time_ps >= direct.time_ps, "{direct:?} {nccl:?}");
    }
}

#[test]
fn pat_rows_are_exact_and_its_small_sizes_cost_log_n_latencies() {
    let mut text = String::from(
        "name = \"pat\"\nworld_size = 16\nseed = 5\n[links]\nlatency_us = 2.0\nbandwidth_gb_per_s = 100.0\n",
    );
    for kind in ["allgather", "reduce_scatter"] {
        for algorithm in ["pat", "ring"] {
            text += &entry(kind, Some(algorithm), "1K", "8M");
        }
    }
    let rows = ideal_rows(&scenario(&text));
    assert_eq!(rows.len(), 4 * 5);
    for row in &rows {
        assert_eq!(row.wrong, Some(0), "{row:?}");
        if row.algorithm == "pat" {
            assert_eq!(row.model_ps, Some(row.time_ps), "closed form: {row:?}");
        }
    }
    let at = |kind: &str, algorithm: &str, size: u64| {
        rows.iter()
            .find(|r| r.collective == kind && r.algorithm == algorithm && r.size_bytes == size)
            .unwrap_or_else(|| panic!("{kind} {algorithm} {size}"))
            .time_ps
    };
    for kind in ["allgather", "reduce_scatter"] {
        // 1 KiB on 16 ranks: 4 latencies against the ring's 15.
        let (pat, ring) = (at(kind, "pat", 1024), at(kind, "ring", 1024));
        assert!(pat < 4 * 2_000_000 + 1_000_000, "{kind}: {pat} ps");
        assert!(ring > 15 * 2_000_000, "{kind}: {ring} ps");
    }
}

#[test]
fn nccl_pat_and_nccl_sendrecv_run_exactly_on_a_dgx_h100_node() {
    let mut text = String::from(
        "name = \"h100\"\nseed = 9\n[topology]\npreset = \"dgx_h100\"\nmodel = \"flow\"\n",
    );
    text += &entry("allgather", Some("nccl_pat"), "8K", "512K");
    text += &entry("reduce_scatter", Some("nccl_pat"), "8K", "512K");
    text += &entry("sendrecv", Some("nccl_sendrecv"), "8K", "512K");
    let (rows, usage) = study_links(&scenario(&text));
    assert_eq!(rows.len(), 9);
    for row in &rows {
        assert_eq!(row.wrong, Some(0), "{row:?}");
        assert!(row.time_ps > 0, "{row:?}");
    }
    assert!(crate::support::sum_links(&usage, |l| l.bytes) > 0);
}
