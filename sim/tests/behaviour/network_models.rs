//! The packet- and flow-level network models through the whole engine:
//! exact times on an idle link, fair sharing of a bottleneck, and the two
//! models agreeing on uncongested traffic.

use std::sync::Arc;

use algorithms::{DType, Fabric, Payload, Shape, Tag, Time};
use sim::WorldConfig;
use sim::network::{ModelLevel, NetworkConfig, TopologyConfig};
use topologies::{Link, LinkKind, Topology, Vertex, VertexId, VertexKind};

pub const LEVELS: [ModelLevel; 2] = [ModelLevel::Packet, ModelLevel::Flow];

/// A world of ranks placed on `placement` in `topology`.
pub fn world(topology: Topology, placement: Vec<VertexId>, level: ModelLevel) -> WorldConfig {
    WorldConfig {
        world_size: placement.len(),
        network: NetworkConfig::Topology(TopologyConfig {
            topology: Arc::new(topology),
            placement: placement.into(),
            level,
            seed: 1,
        }),
        reduce_bytes_per_s: None,
        trace: false,
    }
}

/// Every `(src, dst, bytes)` message sent at time zero; returns when each
/// arrived (in the order given) and the run's event count.
pub fn arrivals(config: WorldConfig, messages: &[(usize, usize, u64)]) -> (Vec<Time>, u64) {
    let messages: Arc<[(usize, usize, u64)]> = messages.into();
    let exec = sim::run(config, |fabric| {
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
