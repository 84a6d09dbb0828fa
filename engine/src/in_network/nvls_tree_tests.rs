//! The simulator's in-network multicast and reduction to one member, and
//! `nccl_nvls_tree` on them.

use algorithms::nccl::nvls_tree;
use algorithms::{DType, Fabric, FabricError, Params, Payload, ReduceOp, Tag};
use topologies::{LinkSpec, presets};

use super::tests::{algorithm, inputs, run, world};

/// Inputs of mixed magnitudes, so association changes the float sums.
fn mixed_inputs(n: usize, count: usize) -> Vec<Payload> {
    let scale = [1.0f32, 1.0e-3, 1.0e4, -1.0e-2];
    (0..n)
        .map(|r| {
            Payload::from_vec(
                (0..count)
                    .map(|i| ((r * 131 + i * 71) % 1009) as f32 / 7.0 * scale[r % 4])
                    .collect::<Vec<f32>>(),
            )
        })
        .collect()
}
use crate::network::{ModelLevel, NetworkConfig};
use crate::trace::SpanKind;
use crate::world::WorldConfig;

#[test]
fn a_multicast_crosses_the_sources_link_once_and_reaches_every_member() {
    // One DGX H100: the source's payload goes up its NVLink bundle,
    // waits the switch's forwarding latency and comes down every GPU's.
    let topology = presets::dgx_h100().unwrap();
    let gpu = topology.find("node0/gpu0").unwrap();
    let link = *topology.link(topology.out_links(gpu)[0]);
    let switch = topology.find("node0/nvswitch").unwrap();
    let forward = topology.vertex(switch).forward_latency_ps;
    let bytes = 64 * 1024u64;
    let count = (bytes / 4) as usize;
    let sent = Payload::from_vec((0..count).map(|i| i as f32 * 0.5).collect::<Vec<f32>>());
    for level in [ModelLevel::Flow, ModelLevel::Packet] {
        let data = sent.clone();
        let exec = crate::run(world(topology.clone(), 4, level), |f| {
            let payload = if f.rank() == 2 {
                data.clone()
            } else {
                Payload::phantom(DType::F32, count)
            };
            async move {
                f.multicast_in_network(&[2, 0, 1, 3], Tag(5), payload)
                    .await
                    .map(|p| (p, f.now().as_ps()))
            }
        });
        let ends: Vec<u64> = (0..4)
            .map(|r| {
                let (got, end) = exec.outputs[r].clone().unwrap().unwrap();
                assert_eq!(got.count_wrong(&sent), 0, "rank {r} ({level:?})");
                end
            })
            .collect();
        if level == ModelLevel::Flow {
            let c = topologies::duration_ps(bytes, link.bandwidth_bytes_per_s);
            // The source is done at once; the others when their copy is in.
            assert_eq!(ends[2], 0);
            for r in [0, 1, 3] {
                assert_eq!(ends[r], 2 * c + 2 * link.latency_ps + forward, "rank {r}");
            }
            // Up once, down to all four (the source's own copy included).
            assert_eq!(exec.stats.links.bytes, 5 * bytes);
        }
    }
}

#[test]
fn a_reduction_to_one_member_sends_the_result_down_its_link_alone() {
    let topology = presets::dgx_h100().unwrap();
    let gpu = topology.find("node0/gpu0").unwrap();
    let link = *topology.link(topology.out_links(gpu)[0]);
    let switch = topology.find("node0/nvswitch").unwrap();
    let forward = topology.vertex(switch).forward_latency_ps;
    let bytes = 64 * 1024u64;
    let inputs = inputs(4, (bytes / 4) as usize);
    let expected = algorithms::reference::rank_order_reference(&inputs, ReduceOp::Sum);
    let exec = crate::run(world(topology, 4, ModelLevel::Flow), |f| {
        let mine = inputs[f.rank()].clone();
        async move {
            f.reduce_to_in_network(&[0, 1, 2, 3], 2, Tag(3), mine, ReduceOp::Sum)
                .await
                .map(|p| (p, f.now().as_ps()))
        }
    });
    let c = topologies::duration_ps(bytes, link.bandwidth_bytes_per_s);
    for r in 0..4 {
        let (got, end) = exec.outputs[r].clone().unwrap().unwrap();
        if r == 2 {
            let got = got.expect("the root gets the sum");
            assert_eq!(got.count_wrong(&expected), 0);
            assert_eq!(end, 2 * c + 2 * link.latency_ps + forward);
        } else {
            assert_eq!((got.is_none(), end), (true, 0), "rank {r}");
        }
    }
    // Four contributions up, one sum down.
    assert_eq!(exec.stats.links.bytes, 5 * bytes);
}

#[test]
fn a_multicast_checks_the_expected_shape_and_refuses_without_a_switch() {
    let exec = crate::run(
        world(presets::dgx_h100().unwrap(), 2, ModelLevel::Flow),
        |f| async move {
            let len = if f.rank() == 0 { 8 } else { 4 };
            f.multicast_in_network(&[0, 1], Tag(1), Payload::phantom(DType::F32, len))
                .await
                .err()
        },
    );
    let error = exec.outputs[1].clone().unwrap().expect("rank 1 is refused");
    assert!(
        matches!(
            error,
            FabricError::ShapeMismatch {
                rank: 1,
                from: 0,
                ..
            }
        ),
        "{error}"
    );
    // NVLink 3 switches neither reduce nor multicast.
    let exec = crate::run(
        world(presets::dgx_a100().unwrap(), 2, ModelLevel::Flow),
        |f| async move { f.can_multicast_in_network(&[0, 1]).err() },
    );
    let error = exec.outputs[0].clone().unwrap().expect("refused");
    assert!(
        matches!(error, FabricError::NoInNetworkMulticast { rank: 0, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("NVSwitch"), "{error}");
}

#[test]
fn nvls_tree_across_nodes_is_bit_exact_in_its_own_order() {
    // Units of 4 KiB: two channels (one per tree), each twenty full loops
    // of the heads' units (past the 8 slots: credits at work in the node
    // and on the tree's edges) and a short last loop. Two nodes of four GPUs
    // (flow and packet) and four nodes of two (a tree of three levels).
    for (nodes, gpus, levels) in [
        (2, 4, &[ModelLevel::Flow, ModelLevel::Packet][..]),
        (4, 2, &[ModelLevel::Flow][..]),
    ] {
        let topology = presets::fat_tree(&presets::FatTree {
            nodes,
            gpus_per_node: gpus,
            ..presets::FatTree::default()
        })
        .unwrap();
        let params = Params {
            ranks_per_node: gpus,
            chunk_bytes: 4096,
            channels: 2,
            ..Params::default()
        };
        let count = 2 * (20 * gpus * 1024 + 37);
        let inputs = mixed_inputs(8, count);
        let expected = nvls_tree::reference(&inputs, ReduceOp::Sum, &params);
        // The order shows: the node sums then the tree give other bits
        // than the rank-order fold.
        let flat = algorithms::reference::rank_order_reference(&inputs, ReduceOp::Sum);
        assert!(expected[0].count_wrong(&flat) > 0);
        for &level in levels {
            let (outputs, _) = run(
                world(topology.clone(), 8, level),
                &algorithm("nccl_nvls_tree"),
                &inputs,
                &params,
            );
            for (r, out) in outputs.iter().enumerate() {
                assert_eq!(
                    out.count_wrong(&expected[r]),
                    0,
                    "{nodes} nodes, rank {r} ({level:?})"
                );
            }
        }
    }
}

#[test]
fn nvls_tree_on_symbols_builds_its_documented_tree() {
    // Four nodes of two on ideal links (a root, a middle node, leaves),
    // units of two symbols, both trees, ten full loops and a short one (10
    // and 11 units per head: past the 8 slots, so the node's and the
    // tree's credits are at work); Sum and Avg (divided once, at the
    // root). Symbols compare reduction trees, association included.
    let params = Params {
        ranks_per_node: 2,
        chunk_bytes: 2 * DType::Sym.size_bytes() as u64,
        channels: 2,
        ..Params::default()
    };
    let count = 2 * (2 * 2 * 10 + 1);
    let inputs: Vec<Payload> = (0..8)
        .map(|r| {
            Payload::from_vec(
                (0..count)
                    .map(|i| algorithms::symbolic::leaf((r * count + i) as u64))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let spec = LinkSpec::new(1_000_000, 1e10).unwrap();
    let flat = algorithms::reference::rank_order_reference(&inputs, ReduceOp::Sum);
    for op in [ReduceOp::Sum, ReduceOp::Avg] {
        let expected = nvls_tree::reference(&inputs, op, &params);
        let exec = crate::run(WorldConfig::new(8, NetworkConfig::Ideal(spec)), |f| {
            let mut buf = inputs[f.rank()].clone();
            let a = algorithm("nccl_nvls_tree");
            async move { a.run(&f, &mut buf, op, &params).await.map(|()| buf) }
        });
        for (r, out) in exec.outputs.into_iter().enumerate() {
            let out = out.unwrap().unwrap();
            assert_eq!(out.count_wrong(&expected[r]), 0, "{op:?} rank {r}");
            if op == ReduceOp::Sum {
                assert_eq!(out.count_wrong(&flat), count, "not the flat fold");
            }
        }
    }
}

#[test]
fn nvls_tree_on_ideal_links_takes_the_closed_form_time() {
    // Two nodes of p = 4 ranks, one channel, one loop: each head one
    // unit of b = 4 KiB. T = (p + 5) c + 6 α while 3 α >= (p - 3) c.
    let spec = LinkSpec::new(1_000_000, 1e10).unwrap();
    let (p, b) = (4u64, 4096u64);
    let params = Params {
        ranks_per_node: p as usize,
        chunk_bytes: b,
        channels: 1,
        ..Params::default()
    };
    let inputs = inputs(8, (p * b / 4) as usize);
    let (outputs, end) = run(
        WorldConfig::new(8, NetworkConfig::Ideal(spec)),
        &algorithm("nccl_nvls_tree"),
        &inputs,
        &params,
    );
    let expected = nvls_tree::reference(&inputs, ReduceOp::Sum, &params);
    for (r, out) in outputs.iter().enumerate() {
        assert_eq!(out.count_wrong(&expected[r]), 0, "rank {r}");
    }
    let c = spec.serialization_ps(b);
    assert!(3 * spec.latency_ps >= (p - 3) * c);
    assert_eq!(end, (p + 5) * c + 6 * spec.latency_ps);
    assert_eq!(end, nvls_tree::ideal_time_ps(spec.latency_ps, c, p));
}

#[test]
fn nvls_tree_contributions_wait_for_a_free_slot_past_eight_units() {
    // Two nodes of two ranks on ideal links, one channel, every head `k`
    // units. Up to 8 units (NCCL_STEPS slots per head) every contribution
    // leaves at once; the ninth waits for the head's credit for the first
    // (sent once the first is done there, >= 2 α after the start, and α
    // on its way), so it comes at least 3 α after the start and its result
    // at least 2 α later: the call takes at least 2 α longer than with 8,
    // where one more loop sent at once would take 2 c (here c < α / 2).
    let spec = LinkSpec::new(1_000_000, 1e10).unwrap();
    let (p, b) = (2usize, 4096u64);
    let params = Params {
        ranks_per_node: p,
        chunk_bytes: b,
        channels: 1,
        ..Params::default()
    };
    let time = |loops: usize| {
        let inputs = inputs(2 * p, loops * p * (b / 4) as usize);
        let (outputs, end) = run(
            WorldConfig::new(2 * p, NetworkConfig::Ideal(spec)),
            &algorithm("nccl_nvls_tree"),
            &inputs,
            &params,
        );
        let expected = nvls_tree::reference(&inputs, ReduceOp::Sum, &params);
        for (r, out) in outputs.iter().enumerate() {
            assert_eq!(out.count_wrong(&expected[r]), 0, "{loops} loops, rank {r}");
        }
        end
    };
    let c = spec.serialization_ps(b);
    assert!(4 * c < 2 * spec.latency_ps);
    let (seven, eight, nine) = (time(7), time(8), time(9));
    assert!(eight - seven < 2 * spec.latency_ps, "{seven} {eight}");
    assert!(nine - eight >= 2 * spec.latency_ps, "{eight} {nine}");
}

#[test]
fn nvls_tree_heads_keep_eight_units_in_flight_on_every_tree_edge() {
    // Four nodes of two GPUs on the fat-tree, one channel (tree 0: a
    // root, a middle node, leaves), every head 24 units of 4 KiB. The
    // node sums come over NVLink far faster than a head's NIC drains
    // them, and sends are eager, so a head's units up (and the results
    // down) would pile up in the network; with NCCL's 8 slots per tree
    // connection a head's unit `k` to a peer head leaves only after the
    // peer has taken unit `k - 8` (and its credit has come back). Heads
    // of one local index on different nodes exchange only tree messages;
    // their data messages are the non-empty ones.
    let (nodes, gpus, units) = (4, 2, 24);
    let n = nodes * gpus;
    let topology = presets::fat_tree(&presets::FatTree {
        nodes,
        gpus_per_node: gpus,
        ..presets::FatTree::default()
    })
    .unwrap();
    let params = Params {
        ranks_per_node: gpus,
        chunk_bytes: 4096,
        channels: 1,
        ..Params::default()
    };
    let inputs = mixed_inputs(n, units * gpus * 1024);
    let expected = nvls_tree::reference(&inputs, ReduceOp::Sum, &params);
    let a = algorithm("nccl_nvls_tree");
    let exec = crate::run(world(topology, n, ModelLevel::Flow).traced(true), |f| {
        let mut buf = inputs[f.rank()].clone();
        let a = a.clone();
        async move {
            a.run(&f, &mut buf, ReduceOp::Sum, &params)
                .await
                .map(|()| buf)
        }
    });
    for (r, out) in exec.outputs.into_iter().enumerate() {
        let out = out.unwrap().unwrap();
        assert_eq!(out.count_wrong(&expected[r]), 0, "rank {r}");
    }
    let spans = exec.trace.expect("traced").spans;
    let (mut edges, mut full) = (0, 0);
    for src in 0..n {
        for dst in (0..n).filter(|&d| d % gpus == src % gpus && d / gpus != src / gpus) {
            // When src posted each unit to dst, and when dst took each.
            let mut sent: Vec<u64> = spans
                .iter()
                .filter(|s| {
                    (s.kind, s.rank, s.peer) == (SpanKind::Send, src, Some(dst)) && s.bytes > 0
                })
                .map(|s| s.start.as_ps())
                .collect();
            let mut taken: Vec<u64> = spans
                .iter()
                .filter(|s| {
                    (s.kind, s.rank, s.peer) == (SpanKind::Recv, dst, Some(src)) && s.bytes > 0
                })
                .map(|s| s.end.as_ps())
                .collect();
            if sent.is_empty() {
                continue;
            }
            sent.sort_unstable();
            taken.sort_unstable();
            assert_eq!((sent.len(), taken.len()), (units, units), "{src} -> {dst}");
            edges += 1;
            for k in 8..units {
                assert!(
                    sent[k] > taken[k - 8],
                    "{src} -> {dst}: unit {k} sent at {} ps, unit {} taken at {} ps",
                    sent[k],
                    k - 8,
                    taken[k - 8]
                );
            }
            // The most units sent and not yet taken at once.
            let most = (0..units)
                .map(|k| k + 1 - taken.partition_point(|&t| t <= sent[k]))
                .max()
                .unwrap_or(0);
            assert!(most <= 8, "{src} -> {dst}: {most} units in flight");
            full += usize::from(most == 8);
        }
    }
    // Three tree edges, both ways, for each local index.
    assert_eq!(edges, 3 * 2 * gpus);
    // The slots fill: a missing credit would show.
    assert!(full > 0, "no edge ever had 8 units in flight");
}

#[test]
fn nvls_tree_refuses_a_fabric_whose_switch_does_not_reduce() {
    // Two A100 nodes: NVLink 3 switches.
    let topology = presets::fat_tree(&presets::FatTree {
        nodes: 2,
        gpus_per_node: 2,
        style: presets::NodeStyle::A100,
        ..presets::FatTree::default()
    })
    .unwrap();
    let params = Params {
        ranks_per_node: 2,
        ..Params::default()
    };
    let exec = crate::run(world(topology, 4, ModelLevel::Flow), |f| {
        let a = algorithm("nccl_nvls_tree");
        async move {
            let mut buf = Payload::phantom(DType::F32, 64);
            a.run(&f, &mut buf, ReduceOp::Sum, &params).await.err()
        }
    });
    for r in 0..4 {
        let error = exec.outputs[r].clone().unwrap().expect("refused");
        assert!(error.to_string().contains("NVSwitch"), "rank {r}: {error}");
    }
}
