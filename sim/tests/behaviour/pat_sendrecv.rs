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

/// A 4-node fat-tree (32 GPUs) at the flow level, with its rotation by
/// one node.
fn fat_tree_4() -> engine::network::NetworkConfig {
    use engine::network::{ModelLevel, NetworkConfig, TopologyConfig};
    use std::sync::Arc;
    use topologies::presets;
    let params = presets::FatTree {
        nodes: 4,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let rotation = presets::fat_tree_rotation(&params, &topology, &placement).unwrap();
    let mut config = TopologyConfig::new(topology, placement, ModelLevel::Flow, 7);
    config.rotation = Some(Arc::new(rotation));
    NetworkConfig::Topology(config)
}

/// Every rank's finishing time and the link counters of a phantom call.
fn timed(
    config: engine::WorldConfig,
    algorithm: &algorithms::Algorithm,
    count: usize,
) -> (Vec<u64>, Vec<(u64, u64)>) {
    use algorithms::{DType, Fabric, Params, Payload, ReduceOp};
    let exec = engine::run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, count);
        let params = Params {
            chunk_bytes: 64 << 10,
            ..Params::default()
        };
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, &params)
            .await
            .unwrap();
        fabric.now().as_ps()
    });
    assert!(exec.deadlock.is_none());
    let times = exec.outputs.iter().map(|t| t.unwrap()).collect();
    let links = exec
        .link_usage
        .as_deref()
        .unwrap()
        .iter()
        .map(|l| (l.bytes, l.busy_ps))
        .collect();
    (times, links)
}

/// The catalogue's PAT and direct sendrecv on a fat-tree: the folded run
/// (one node simulated) gives every rank's time and every link's counters
/// of the full run. (The NCCL variants fold on ideal links, see
/// `fold::exactly_the_rotation_symmetric_algorithms_fold`; on a topology
/// their framed sends take per-channel routes that do not follow the
/// rotation, for `nccl_ring` as for them.)
#[test]
fn pat_and_sendrecv_fold_by_node_exactly() {
    use algorithms::{Collective, catalogue_algorithm};
    let ranks = 32;
    for (collective, name) in [
        (Collective::Allgather, "pat"),
        (Collective::ReduceScatter, "pat"),
        (Collective::SendRecv, "direct"),
    ] {
        let algorithm = catalogue_algorithm(collective, name);
        assert!(algorithm.folds_by(8, &algorithms::Params::default()));
        // Small (aggregated) and large (pieces) blocks.
        for count in [ranks * 64, ranks * 65_536] {
            let full = engine::WorldConfig::new(ranks, fat_tree_4());
            let mut folded = engine::WorldConfig::new(ranks, fat_tree_4());
            engine::fold::fold(&mut folded, 8).unwrap();
            let (full_times, full_links) = timed(full, &algorithm, count);
            let (folded_times, folded_links) = timed(folded, &algorithm, count);
            assert_eq!(folded_times.len(), 8);
            for (r, t) in full_times.iter().enumerate() {
                assert_eq!(*t, folded_times[r % 8], "{collective} {name} rank {r}");
            }
            assert_eq!(
                full_links, folded_links,
                "{collective} {name} count {count}"
            );
        }
    }
}
