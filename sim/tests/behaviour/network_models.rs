//! The packet- and flow-level network models through the whole engine:
//! exact times on an idle link, fair sharing of a bottleneck, and the two
//! models agreeing on uncongested traffic.

use std::sync::Arc;

use algorithms::{DType, Fabric, Payload, Shape, Tag, Time};
use engine::WorldConfig;
use engine::network::{ModelLevel, NetworkConfig, TopologyConfig};
use topologies::{Link, LinkKind, Topology, Vertex, VertexId, VertexKind};

pub const LEVELS: [ModelLevel; 2] = [ModelLevel::Packet, ModelLevel::Flow];

/// A world of ranks placed on `placement` in `topology`.
pub fn world(topology: Topology, placement: Vec<VertexId>, level: ModelLevel) -> WorldConfig {
    WorldConfig::new(
        placement.len(),
        NetworkConfig::Topology(TopologyConfig::new(
            Arc::new(topology),
            placement.into(),
            level,
            1,
        )),
    )
}

/// Every `(src, dst, bytes)` message sent at time zero; returns when each
/// arrived (in the order given) and the run's event count.
pub fn arrivals(config: WorldConfig, messages: &[(usize, usize, u64)]) -> (Vec<Time>, u64) {
    let messages: Arc<[(usize, usize, u64)]> = messages.into();
    let exec = engine::run(config, |fabric| {
        let messages = Arc::clone(&messages);
        async move {
            let me = fabric.rank();
            for (i, &(s, d, b)) in messages.iter().enumerate() {
                if s == me {
                    let p = Payload::phantom(DType::U8, b as usize);
                    fabric.send(d, Tag(i as u64), p).await.unwrap();
                }
            }
            let mut got = Vec::new();
            for (i, &(s, d, b)) in messages.iter().enumerate() {
                if d == me {
                    let shape = Shape::new(DType::U8, b as usize);
                    fabric.recv(s, Tag(i as u64), shape).await.unwrap();
                    got.push((i, fabric.now()));
                }
            }
            got
        }
    });
    assert!(exec.deadlock.is_none() && !exec.out_of_time);
    let mut times = vec![Time::ZERO; messages.len()];
    for out in exec.outputs.into_iter().flatten() {
        for (i, t) in out {
            times[i] = t;
        }
    }
    (times, exec.stats.events)
}

/// Receives are posted in message order, so a later message to the same
/// receiver is observed no earlier than an earlier one: tests here send at
/// most one message per receiver unless they want that order.
fn two_gpus(kind: &str) -> (Topology, Vec<VertexId>, Link) {
    let mut t = Topology::new();
    let a = t.add_vertex(Vertex::new("gpu0", VertexKind::Gpu)).unwrap();
    let b = t.add_vertex(Vertex::new("gpu1", VertexKind::Gpu)).unwrap();
    let link = Link::bundle(LinkKind::parse(kind).unwrap(), 1);
    t.add_link(a, b, link).unwrap();
    (t, vec![a, b], link)
}

#[test]
fn an_idle_link_takes_serialization_plus_latency_to_the_nanosecond() {
    for kind in ["ib_ndr", "nvlink4", "pcie5x16", "roce100"] {
        for level in LEVELS {
            for bytes in [1u64, 4096, 4097, 1 << 20, 64 << 20] {
                let (t, placement, link) = two_gpus(kind);
                let (times, _) = arrivals(world(t, placement, level), &[(0, 1, bytes)]);
                let expected = link.serialization_ps(bytes) + link.latency_ps;
                let got = times[0].as_ps();
                assert!(
                    got.abs_diff(expected) < 1000,
                    "{kind} {level:?} {bytes} B: {got} ps, expected {expected} ps"
                );
            }
        }
    }
}

/// Two GPUs sending to a third through one switch: the switch's link to
/// the receiver is the bottleneck.
fn converging() -> (Topology, Vec<VertexId>, Link) {
    let mut t = Topology::new();
    let g: Vec<VertexId> = (0..3)
        .map(|i| {
            t.add_vertex(Vertex::new(format!("gpu{i}"), VertexKind::Gpu))
                .unwrap()
        })
        .collect();
    let sw = t.add_vertex(Vertex::new("leaf", VertexKind::Leaf)).unwrap();
    let link = Link::bundle(LinkKind::parse("ib_ndr").unwrap(), 1);
    for &v in &g {
        t.add_link(v, sw, link).unwrap();
    }
    (t, g, link)
}

#[test]
fn two_flows_through_one_bottleneck_each_get_half_of_it() {
    let bytes = 16u64 << 20;
    for level in LEVELS {
        let (t, placement, link) = converging();
        let (alone, _) = arrivals(world(t, placement, level), &[(0, 2, bytes)]);
        let (t, placement, _) = converging();
        let (both, _) = arrivals(world(t, placement, level), &[(0, 2, bytes), (1, 2, bytes)]);
        let serialization = link.serialization_ps(bytes) as f64;
        // Alone, the message streams at the full link rate.
        assert!(alone[0].as_ps() as f64 / serialization < 1.01, "{level:?}");
        // Together, each gets half: both finish at about twice that.
        for t in &both {
            let ratio = t.as_ps() as f64 / serialization;
            assert!((1.98..2.02).contains(&ratio), "{level:?}: ratio {ratio}");
        }
    }
}

/// Runs a scenario; returns each row's time and the largest number of
/// flows or bytes any link held at once over the run (`max_queue`).
fn times_and_peak_queue(text: &str) -> (Vec<u64>, Vec<u64>, u64) {
    let s = engine::scenario::Scenario::parse(
        std::path::Path::new("agree.toml"),
        text,
        &algorithms::Registry::builtin(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut peak = 0;
    let mut events = Vec::new();
    let rows = engine::study::run_scenario(
        &s,
        &engine::tuning::AlgoFilter::default(),
        engine::study::Options::default(),
        |p| {
            if let engine::study::Progress::Row(_, _, detail) = p {
                let usage = detail.link_usage.as_ref().expect("a topology model");
                peak = usage
                    .iter()
                    .map(|u| u.max_queue)
                    .max()
                    .unwrap_or(0)
                    .max(peak);
                events.push(detail.stats.events);
            }
            std::ops::ControlFlow::Continue(())
        },
    )
    .unwrap_or_else(|f| panic!("{:?}", f.1));
    (rows.iter().map(|r| r.time_ps).collect(), events, peak)
}

fn ring_allreduce_scenario(
    topology: &str,
    model: &str,
    min_bytes: &str,
    max_bytes: &str,
) -> String {
    format!(
        "[topology]\n{topology}\nmodel = \"{model}\"\n\
         [[collective]]\nkind = \"allreduce\"\nalgorithm = \"ring\"\nphantom = true\n\
         min_bytes = \"{min_bytes}\"\nmax_bytes = \"{max_bytes}\"\nstep_factor = 16\niters = 1\nwarmup = 0\n"
    )
}

#[test]
fn packet_and_flow_models_agree_within_two_percent_on_uncongested_traffic() {
    for topology in [
        "preset = \"dgx_h100\"",
        "preset = \"ring\"\ngpus = 6\nkind = \"nvlink4\"",
        // Two leaves of two hosts: the ring crosses the spine once each way.
        "preset = \"leaf_spine\"\nhosts = 4\nhosts_per_leaf = 2\nspines = 2",
    ] {
        let (packet, _, _) =
            times_and_peak_queue(&ring_allreduce_scenario(topology, "packet", "1K", "16M"));
        let (flow, _, peak_flows) =
            times_and_peak_queue(&ring_allreduce_scenario(topology, "flow", "1K", "16M"));
        // Uncongested: no link ever carried two flows at once.
        assert_eq!(peak_flows, 1, "{topology}");
        assert_eq!(packet.len(), flow.len());
        for (p, f) in packet.iter().zip(&flow) {
            let ratio = *f as f64 / *p as f64;
            assert!(
                (0.98..=1.02).contains(&ratio),
                "{topology}: packet {p} ps vs flow {f} ps"
            );
        }
    }
}

#[test]
fn an_oversubscribed_leaf_spine_slows_cross_leaf_traffic_by_its_flow_count() {
    // Hosts 0..8 on leaf 0 each send 4 MiB to host 8+i on leaf 1, all at
    // once. Every link carries whole flows at full rate, shared max-min,
    // so the last message arrives when the most loaded link has carried
    // all its flows: makespan = (max flows on a link) * bytes / bandwidth,
    // the flow counts taken from the routes the router picks.
    let bytes = 4u64 << 20;
    let messages: Vec<(usize, usize, u64)> = (0..8).map(|i| (i, 8 + i, bytes)).collect();
    let mut makespans = Vec::new();
    for oversubscription in [1.0, 4.0] {
        let params = topologies::presets::LeafSpine {
            hosts: 16,
            hosts_per_leaf: 8,
            spines: 2,
            nic: LinkKind::Roce { gbps: 200 },
            oversubscription,
        };
        let topology = Arc::new(topologies::presets::leaf_spine(&params).unwrap());
        let placement = topology.endpoints();
        let mut router = topologies::Router::new(Arc::clone(&topology), 1);
        let mut flows_on = vec![0u64; topology.link_direction_count()];
        for &(s, d, _) in &messages {
            let route = router
                .route(
                    placement[s],
                    placement[d],
                    engine::network::flow_id(s, d, 16),
                )
                .unwrap();
            for l in route.iter() {
                flows_on[l.index()] += 1;
            }
        }
        let most = *flows_on.iter().max().unwrap();
        if oversubscription == 4.0 {
            // 8 flows over the leaf's 2 uplinks: at least 4 share one.
            assert!(most >= 4);
        }
        let nic = Link::bundle(LinkKind::Roce { gbps: 200 }, 1);
        let expected = most * nic.serialization_ps(bytes);
        for level in LEVELS {
            let config = WorldConfig::new(
                16,
                NetworkConfig::Topology(TopologyConfig::new(
                    Arc::clone(&topology),
                    placement.clone().into(),
                    level,
                    1,
                )),
            );
            let (times, _) = arrivals(config, &messages);
            let makespan = times.iter().max().unwrap().as_ps();
            let ratio = makespan as f64 / expected as f64;
            // Latency adds a few microseconds at most to a ~1 ms transfer.
            assert!(
                (1.0..1.02).contains(&ratio),
                "oversubscription {oversubscription} {level:?}: {makespan} ps vs {expected} ps"
            );
            makespans.push((oversubscription, level, makespan, most));
        }
    }
    // The slowdown is the ratio of the flow counts, in both models.
    for level in LEVELS {
        let of = |o: f64| {
            makespans
                .iter()
                .find(|m| m.0 == o && m.1 == level)
                .map(|m| (m.2 as f64, m.3 as f64))
                .unwrap()
        };
        let ((blocking, most4), (free, most1)) = (of(4.0), of(1.0));
        let slowdown = blocking / free;
        let expected = most4 / most1;
        assert!(
            (slowdown / expected - 1.0).abs() < 0.02,
            "{level:?}: {slowdown} vs {expected}"
        );
    }
}

#[test]
fn the_flow_model_needs_over_ten_times_fewer_events_on_a_512_rank_ring() {
    // 512 ranks of the fat-tree preset (64 DGX H100 nodes). Events are the
    // engine's unit of work; the wall-time ratio is in `sim bench-engine`.
    let topology = "preset = \"fat_tree\"\nnodes = 64";
    let (_, packet, _) =
        times_and_peak_queue(&ring_allreduce_scenario(topology, "packet", "16M", "16M"));
    let (_, flow, _) =
        times_and_peak_queue(&ring_allreduce_scenario(topology, "flow", "16M", "16M"));
    let (p, f) = (packet.last().unwrap(), flow.last().unwrap());
    assert!(*p >= 10 * *f, "16 MiB: packet {p} events, flow {f} events");
}
