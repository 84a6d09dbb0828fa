//! The flow model's successor shortcut (`engine::network::flow`,
//! "Successors"): a message that takes over its pair's route from the
//! flow that just ended inherits its rate instead of a recomputation. Tree
//! allreduces and PAT, the pipelines it is for, must time exactly what
//! recomputing every change times: every rank's finish, every link
//! direction's counters.

use std::ops::ControlFlow;
use std::sync::Arc;

use algorithms::{
    Algorithm, Collective, DType, Fabric, Params, Payload, ReduceOp, Registry, Time,
    catalogue_algorithm,
};
use engine::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};
use engine::study::{Options, Progress};
use engine::{Execution, WorldConfig};
use topologies::presets;

/// The default fat-tree of `nodes` 8-GPU nodes, flow model, with or
/// without the shortcut.
fn fat_tree(nodes: usize, inherit: bool) -> NetworkConfig {
    let params = presets::FatTree {
        nodes,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let mut config = TopologyConfig::new(topology, placement, ModelLevel::Flow, 3);
    config.flow_successors_inherit = inherit;
    NetworkConfig::Topology(config)
}

/// One phantom call of `algorithm` on `ranks` ranks; each rank returns
/// when it finished.
fn run(
    network: NetworkConfig,
    ranks: usize,
    algorithm: &Algorithm,
    count: usize,
    chunk_bytes: u64,
) -> Execution<Time> {
    let config = WorldConfig::new(ranks, network).reduce_bytes_per_s(Some(200e9));
    let collective = algorithm.collective();
    let exec = engine::run(config, |fabric| async move {
        let own = if collective == Collective::Allgather {
            algorithms::layout::block_range(count, ranks, fabric.rank()).len()
        } else {
            count
        };
        let params = Params {
            chunk_bytes,
            ranks_per_node: 8,
            ..Params::default()
        };
        let input = Payload::phantom(DType::F32, own);
        algorithm
            .run_out_of_place(&fabric, &input, count, ReduceOp::Sum, &params)
            .await
            .unwrap();
        fabric.now()
    });
    assert!(exec.deadlock.is_none());
    exec
}

/// A link direction's bytes, flows, busy time and most flows at once.
type Counters = (u64, u64, u64, u64);

/// One scenario row: size, time, end of the run, every link's counters.
type RowFacts = (u64, u64, Time, Vec<Counters>);

/// The counters that a flow run sets, per link direction.
fn counters(usage: &[LinkUsage]) -> Vec<Counters> {
    usage
        .iter()
        .map(|u| (u.bytes, u.units, u.busy_ps, u.max_queue))
        .collect()
}

#[test]
fn tree_and_pat_time_the_same_with_successors_inheriting() {
    // (algorithm, nodes, elements, chunk): several chunks per pair so
    // that successors abound; sizes that do not split evenly included.
    let cases = [
        (Collective::Allreduce, "tree", 2, 100_003, 16 << 10),
        (Collective::Allreduce, "tree", 3, 64 << 10, 8 << 10),
        (Collective::Allgather, "pat", 2, 16 * 4096, 4 << 10),
        (Collective::ReduceScatter, "pat", 3, 24 * 3000, 2 << 10),
    ];
    for (collective, name, nodes, count, chunk) in cases {
        let algorithm = catalogue_algorithm(collective, name);
        let ranks = nodes * 8;
        let fast = run(fat_tree(nodes, true), ranks, &algorithm, count, chunk);
        let slow = run(fat_tree(nodes, false), ranks, &algorithm, count, chunk);
        let what = format!("{name} {collective:?} on {ranks} ranks");
        assert_eq!(fast.outputs, slow.outputs, "{what}: every rank's finish");
        assert!(fast.outputs.iter().all(Option::is_some), "{what}");
        assert_eq!(fast.end_time, slow.end_time, "{what}");
        assert_eq!(
            counters(fast.link_usage.as_deref().unwrap()),
            counters(slow.link_usage.as_deref().unwrap()),
            "{what}: link counters"
        );
        assert_eq!(fast.stats.links.messages, slow.stats.links.messages);
        assert!(slow.stats.links.messages > 100, "{what}: a real pipeline");
    }
}

/// `(size, time, end, link counters)` of every row of `text` run with or
/// without the shortcut.
fn scenario_rows(text: &str, inherit: bool) -> Vec<RowFacts> {
    let path = std::path::Path::new("f.toml");
    let mut scenario = engine::scenario::Scenario::parse(path, text, &Registry::builtin()).unwrap();
    let NetworkConfig::Topology(t) = &mut scenario.network else {
        panic!("a topology scenario");
    };
    t.flow_successors_inherit = inherit;
    let mut rows = Vec::new();
    engine::study::run_scenario(
        &scenario,
        &engine::tuning::AlgoFilter::default(),
        Options::default(),
        |progress| {
            if let Progress::Row(_, row, detail) = progress {
                let links = counters(detail.link_usage.as_deref().unwrap());
                rows.push((row.size_bytes, row.time_ps, detail.end_time, links));
            }
            ControlFlow::Continue(())
        },
    )
    .unwrap_or_else(|e| panic!("{:?}", e.1));
    rows
}

#[test]
fn nccls_trees_and_pat_time_the_same_with_successors_inheriting() {
    // NCCL's tree, NCCL's PAT and NCCL's own choice on a small fat-tree
    // of H100-style nodes, at sizes from one chunk to many.
    for collective in [
        "kind = \"allreduce\"\nalgorithm = \"nccl_tree\"\n",
        "kind = \"allgather\"\nalgorithm = \"nccl_pat\"\n",
        "kind = \"allreduce\"\n",
    ] {
        let text = format!(
            "seed = 2\n\
             tuner = \"nccl\"\n\
             [topology]\n\
             preset = \"fat_tree\"\n\
             nodes = 2\n\
             gpus_per_node = 8\n\
             style = \"h100\"\n\
             nic = \"ib_ndr\"\n\
             model = \"flow\"\n\
             [[collective]]\n\
             {collective}\
             min_bytes = \"64K\"\n\
             max_bytes = \"4M\"\n\
             step_factor = 8\n\
             iters = 1\n\
             warmup = 0\n\
             phantom = true\n"
        );
        let fast = scenario_rows(&text, true);
        let slow = scenario_rows(&text, false);
        assert_eq!(fast.len(), 3, "{collective}");
        assert_eq!(fast, slow, "{collective}");
    }
}
