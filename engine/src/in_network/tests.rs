//! Tests of the in-network reductions (`super`).

use std::sync::Arc;

use algorithms::nccl::{collnet, nvls};
use algorithms::{Algorithm, DType, Fabric, FabricError, Params, Payload, ReduceOp, Registry, Tag};
use topologies::{LinkSpec, Topology, presets};

use crate::network::{ModelLevel, NetworkConfig, TopologyConfig};
use crate::world::WorldConfig;

/// A world of `n` ranks on the topology's first `n` endpoints.
pub(super) fn world(topology: Topology, n: usize, level: ModelLevel) -> WorldConfig {
    let topology = Arc::new(topology);
    let placement: Arc<[topologies::VertexId]> = topology.endpoints()[..n].into();
    WorldConfig::new(
        n,
        NetworkConfig::Topology(TopologyConfig::new(topology, placement, level, 1)),
    )
}

/// Inputs whose sums depend on the order: rank `r`'s element `i` is
/// `(r + 1) * 1e7 + i / 7` with alternating signs.
pub(super) fn inputs(n: usize, count: usize) -> Vec<Payload> {
    (0..n)
        .map(|r| {
            let sign = if r % 2 == 0 { 1.0 } else { -1.0 };
            Payload::from_vec(
                (0..count)
                    .map(|i| sign * ((r + 1) as f32 * 1.0e7 + i as f32 / 7.0))
                    .collect::<Vec<f32>>(),
            )
        })
        .collect()
}

/// Runs `algorithm` on every rank of `config` on `inputs`; each rank's
/// output, and when every rank finished.
pub(super) fn run(
    config: WorldConfig,
    algorithm: &Algorithm,
    inputs: &[Payload],
    params: &Params,
) -> (Vec<Payload>, u64) {
    let exec = crate::run(config, |f| {
        let mut buf = inputs[f.rank()].clone();
        let algorithm = algorithm.clone();
        let params = *params;
        async move {
            algorithm
                .run(&f, &mut buf, ReduceOp::Sum, &params)
                .await
                .map(|()| buf)
                .map_err(|e| e.to_string())
        }
    });
    let outputs = exec
        .outputs
        .into_iter()
        .map(|o| o.expect("every rank finished").expect("no rank failed"))
        .collect();
    (outputs, exec.end_time.as_ps())
}

pub(super) fn algorithm(name: &str) -> Algorithm {
    Registry::builtin()
        .get(algorithms::Collective::Allreduce, name)
        .expect("in the catalogue")
        .clone()
}

#[test]
fn nvls_on_a_dgx_h100_is_bit_exact_and_takes_the_closed_form_time() {
    // 8 GPUs, each one NVLink 4 bundle (18 x 20.6 GB/s) to the
    // NVSwitch; 4 chunks of 128 KiB.
    let topology = presets::dgx_h100().unwrap();
    let gpu = topology.find("node0/gpu0").unwrap();
    let up = topology.out_links(gpu)[0];
    let link = *topology.link(up);
    let switch = topology.find("node0/nvswitch").unwrap();
    let forward = topology.vertex(switch).forward_latency_ps;
    let (chunks, chunk_bytes) = (4u64, 128 * 1024u64);
    let count = (chunks * chunk_bytes / 4) as usize;
    let inputs = inputs(8, count);
    let expected = nvls::reference(&inputs, ReduceOp::Sum, &Params::default());
    for level in [ModelLevel::Flow, ModelLevel::Packet] {
        let (outputs, end) = run(
            world(topology.clone(), 8, level),
            &algorithm("nccl_nvls"),
            &inputs,
            &Params::default(),
        );
        for (r, out) in outputs.iter().enumerate() {
            assert_eq!(out.count_wrong(&expected[r]), 0, "rank {r} ({level:?})");
        }
        if level == ModelLevel::Flow {
            // Up back to back, each chunk reduced when the last copy is
            // in, down behind the one before:
            // (k + 1) c / B + 2 latency + the switch's forwarding.
            let c = topologies::duration_ps(chunk_bytes, link.bandwidth_bytes_per_s);
            let want = (chunks + 1) * c + 2 * link.latency_ps + forward;
            assert_eq!(end, want);
            // busbw = 2 (N-1)/N S / T exceeds the GPU's link rate.
            let bytes = (chunks * chunk_bytes) as f64;
            let busbw = 2.0 * 7.0 / 8.0 * bytes / (end as f64 * 1e-12);
            assert!(busbw > link.bandwidth_bytes_per_s, "{busbw}");
        }
    }
}

#[test]
fn collnet_over_a_sharp_fat_tree_reduces_in_its_order_and_refuses_without_sharp() {
    let fat = |sharp: bool| {
        let mut t = presets::fat_tree(&presets::FatTree {
            nodes: 2,
            gpus_per_node: 4,
            ..presets::FatTree::default()
        })
        .unwrap();
        if sharp {
            t.enable_sharp();
        }
        t
    };
    // Nodes of 4, so the chain's order (4, 3, 2, 1 up) and the heads'
    // (1, 2, 3, 4) give different float sums.
    let params = Params {
        ranks_per_node: 4,
        chunk_bytes: 1024,
        ..Params::default()
    };
    let inputs = inputs(8, 1000);
    for (name, shape) in [
        ("nccl_collnet_direct", collnet::CollNetShape::Direct),
        ("nccl_collnet_chain", collnet::CollNetShape::Chain),
    ] {
        let expected = collnet::reference(&inputs, ReduceOp::Sum, &params, shape);
        let (outputs, _) = run(
            world(fat(true), 8, ModelLevel::Flow),
            &algorithm(name),
            &inputs,
            &params,
        );
        for (r, out) in outputs.iter().enumerate() {
            assert_eq!(out.count_wrong(&expected[r]), 0, "{name} rank {r}");
        }
        // Without SHARP: refused, naming the ranks.
        let exec = crate::run(world(fat(false), 8, ModelLevel::Flow), |f| {
            let mut buf = inputs[f.rank()].clone();
            let a = algorithm(name);
            async move { a.run(&f, &mut buf, ReduceOp::Sum, &params).await.err() }
        });
        let error = exec.outputs[0]
            .clone()
            .flatten()
            .expect("rank 0 is refused");
        let text = error.to_string();
        assert!(
            text.contains("no switch that reduces serves ranks [0, 4]"),
            "{text}"
        );
    }
}

#[test]
fn nvls_on_ideal_links_takes_the_closed_form_time() {
    // 1 us, 10 GB/s per link; 3 chunks of 128 KiB on 4 ranks.
    let spec = LinkSpec::new(1_000_000, 1e10).unwrap();
    let (chunks, chunk_bytes) = (3u64, 128 * 1024u64);
    let inputs = inputs(4, (chunks * chunk_bytes / 4) as usize);
    let (outputs, end) = run(
        WorldConfig::new(4, NetworkConfig::Ideal(spec)),
        &algorithm("nccl_nvls"),
        &inputs,
        &Params::default(),
    );
    let expected = nvls::reference(&inputs, ReduceOp::Sum, &Params::default());
    assert!(
        outputs
            .iter()
            .zip(&expected)
            .all(|(o, e)| o.count_wrong(e) == 0)
    );
    let c = spec.serialization_ps(chunk_bytes);
    assert_eq!(end, (chunks + 1) * c + 2 * spec.latency_ps);
}

#[test]
fn an_nvlink3_switch_refuses_clearly() {
    let a100 = world(presets::dgx_a100().unwrap(), 2, ModelLevel::Flow);
    let exec = crate::run(a100, |f| async move {
        f.reduce_in_network(
            &[0, 1],
            Tag(0),
            Payload::phantom(DType::F32, 4),
            ReduceOp::Sum,
        )
        .await
    });
    match &exec.outputs[1] {
        Some(Err(FabricError::NoInNetworkReduction { rank: 1, reason })) => {
            assert!(reason.starts_with(algorithms::in_network::NO_SWITCH_REASON));
            assert!(reason.contains("ranks [0, 1]"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
