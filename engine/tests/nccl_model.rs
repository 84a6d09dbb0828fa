//! The NCCL model against NCCL's documented behaviour: its channel search
//! on known machines, its tuning choice recomputed here from the cited
//! constants, and the mechanisms the simulator charges (protocol framing,
//! per-hop and base latencies, channels pinned to NICs).

use std::ops::ControlFlow;
use std::path::Path;

use algorithms::nccl::{NcclAlgorithm, Protocol};
use algorithms::{Collective, Registry};
use engine::nccl::{Constants, NcclSystem, NcclVersion};
use engine::network::NetworkConfig;
use engine::scenario::Scenario;
use engine::study::{self, Detail, Options, Progress, Row};
use engine::tuning::AlgoFilter;
use topologies::duration_ps;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(Path::new("nccl_test.toml"), text, &Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Runs a scenario; every row with what its run measured.
fn run(scenario: &Scenario) -> Vec<(Row, Detail)> {
    let mut out = Vec::new();
    study::run_scenario(scenario, &AlgoFilter::default(), Options::default(), |p| {
        if let Progress::Row(_, row, detail) = p {
            out.push((row.clone(), detail.clone()));
        }
        ControlFlow::Continue(())
    })
    .unwrap_or_else(|e| panic!("{:?}", e.1));
    out
}

fn system(scenario: &Scenario) -> &NcclSystem {
    scenario
        .nccl_system(scenario.world_size)
        .expect("a topology scenario has the NCCL model")
}

/// Two GPUs joined by one NVLink 4 link (20.6 GB/s, 25 ns), NCCL forced to
/// `proto` on one channel.
fn two_gpus(proto: &str, bytes: u64) -> String {
    format!(
        r#"seed = 1
[topology]
preset = "explicit"
model = "packet"
[[topology.vertex]]
name = "gpu0"
kind = "gpu"
[[topology.vertex]]
name = "gpu1"
kind = "gpu"
[[topology.link]]
from = "gpu0"
to = "gpu1"
kind = "nvlink4"
[nccl]
proto = "{proto}"
algo = "Ring"
max_nchannels = 1
[[collective]]
kind = "allreduce"
min_bytes = {bytes}
max_bytes = {bytes}
iters = 1
warmup = 0
"#
    )
}

#[test]
fn each_protocol_takes_its_documented_time_between_two_gpus() {
    let k = NcclVersion::V2_21_5.constants();
    let link_ps = 25_000; // nvlink4's latency
    let bw = 20.6e9;
    // 8 KiB: each rank's segment is 4 KiB, one pipeline unit, so the
    // allreduce is two steps (reduce-scatter, allgather), each one
    // message each way.
    let bytes = 8192u64;
    for (p, proto) in [
        (0, Protocol::Ll),
        (1, Protocol::Ll128),
        (2, Protocol::Simple),
    ] {
        let s = scenario(&two_gpus(proto.name(), bytes));
        let rows = run(&s);
        let (row, detail) = &rows[0];
        let nccl = row.nccl.expect("an NCCL row");
        assert_eq!((nccl.protocol, nccl.channels), (proto, 1), "{row:?}");
        let segment = bytes / 2;
        let wire = proto.wire_bytes(segment);
        let base = (k.base_latency_us[1][p] * 1e6) as u64;
        let hop = (k.hop_latency_us[0][1][p] * 1e6) as u64;
        // A step: the wire bytes serialised, then NCCL's per-hop latency
        // (of which the link's own 25 ns is part).
        let step = duration_ps(wire, bw) + hop.max(link_ps);
        assert_eq!(row.time_ps, base + 2 * step, "{proto}: {row:?}");
        // What the link carried: two messages of the wire size each way.
        let usage = detail.link_usage.as_ref().expect("a topology run");
        let carried: u64 = usage.iter().map(|u| u.bytes).sum();
        assert_eq!(carried, 4 * wire, "{proto}");
        let payload = 4 * segment;
        match proto {
            Protocol::Ll => assert_eq!(carried, 2 * payload, "LL: half the wire is payload"),
            Protocol::Ll128 => assert!(
                carried * 120 >= payload * 128 && carried * 120 < payload * 128 + 120 * 128 * 4
            ),
            Protocol::Simple => assert_eq!(carried, payload),
        }
    }
    // Simple synchronises every step: its per-hop latency (3.4 us) is
    // what makes it slower than LL (0.6 us) for a small message, by
    // exactly the difference of the two steps and base latencies.
    let ll = run(&scenario(&two_gpus("LL", bytes)))[0].0.time_ps;
    let simple = run(&scenario(&two_gpus("Simple", bytes)))[0].0.time_ps;
    assert!(simple > ll + 2 * 2_000_000, "{simple} vs {ll}");
}

#[test]
fn one_process_driving_both_gpus_starts_the_second_one_launch_late() {
    // nccl-tests -g 2: one thread launches both GPUs' kernels in turn, so
    // the second starts a launch later, and the two-step allreduce waits
    // for it exactly once.
    let per_gpu = run(&scenario(&two_gpus("LL", 8192)))[0].0.time_ps;
    let text = two_gpus("LL", 8192).replace(
        "max_nchannels = 1\n",
        "max_nchannels = 1\ngpus_per_process = 2\nlaunch_us = 5.0\n",
    );
    let one_process = run(&scenario(&text))[0].0.time_ps;
    assert_eq!(one_process, per_gpu + 5_000_000);
}

#[test]
fn the_dgx_h100_search_gives_nccls_channels() {
    // One node: 18 NVLink 4 links (370.8 GB/s); Hopper's intra-node
    // speeds start at 60: 6 rings (360 GB/s), then no better speed above
    // 0.49 of it; duplicated to 12 x 30; 24 channels at run time.
    let s = scenario(
        "seed = 1\n[topology]\npreset = \"dgx_h100\"\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
    );
    let sys = system(&s);
    assert_eq!(sys.machine.compute_capability, 90);
    assert_eq!((sys.graph.channels, sys.graph.bw_intra), (12, 30.0));
    assert_eq!(sys.channels, 24);
    assert!(sys.graph.intra_nvlink);
    // Two nodes: a channel per NIC at 48 GB/s (PCIe Gen5 x16 to an NDR
    // NIC), 8 x 48 = 384 >= 370.8 ends the search; no duplication on
    // Hopper below 50 GB/s with more than 4 channels; 16 at run time.
    let s = scenario(
        "seed = 1\n[topology]\npreset = \"fat_tree\"\nnodes = 2\nmodel = \"flow\"\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
    );
    let sys = system(&s);
    assert_eq!((sys.graph.channels, sys.graph.bw_inter), (8, 48.0));
    assert_eq!(sys.channels, 16);
    assert_eq!(sys.graph.inter, engine::nccl::PathType::Pix);
}

#[test]
fn the_dgx1_search_finds_nvlink_only_rings() {
    let s = Scenario::load(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/dgx1_v100_nvidia_smi.toml"
        )),
        &Registry::builtin(),
    )
    .expect("the bundled scenario");
    let NetworkConfig::Topology(t) = &s.network else {
        panic!("a topology")
    };
    let sys = system(&s);
    assert!(
        sys.graph.intra_nvlink,
        "NVLink-only rings exist on the cube mesh"
    );
    assert!(
        sys.plan.rings.len() >= 2,
        "several channels: {:?}",
        sys.plan.rings
    );
    for ring in &sys.plan.rings {
        for (i, &a) in ring.iter().enumerate() {
            let b = ring[(i + 1) % ring.len()];
            let (va, vb) = (t.placement[a], t.placement[b]);
            let direct = t.topology.out_links(va).into_iter().any(|l| {
                t.topology.ends(l).1 == vb
                    && matches!(t.topology.link(l).kind, topologies::LinkKind::NvLink { .. })
            });
            assert!(direct, "ring {ring:?}: {a} -> {b} is not one NVLink hop");
        }
    }
    // The rank-order ring is not one: 3 -> 4 has no NVLink on a DGX-1.
    let first = &sys.plan.rings[0];
    assert_ne!(first, &(0..8).collect::<Vec<_>>());
}

/// NCCL's tuning choice recomputed from the version's constants, written
/// out here as `src/graph/tuning.cc` states it (@ab2b89c4), for a
/// communicator of `n` ranks on `nodes` nodes of compute capability 9.0
/// and an Intel CPU, whose search found `ch` channels of `bw` GB/s with
/// NVLink inside nodes, and `rt` channels at run time.
#[allow(clippy::too_many_arguments)]
fn expected_choice(
    k: &Constants,
    coll: Collective,
    n: usize,
    nodes: usize,
    ch: usize,
    bw: f64,
    rt: usize,
    bytes: u64,
) -> (NcclAlgorithm, Protocol, f64) {
    let (ci, ni) = (2, (nodes - 1).min(2));
    let ll_max = if nodes == 1 {
        k.ll_max_bw[2][ni]
    } else {
        k.ll_max_bw[0][ni]
    };
    let ppn = n as f64 / nodes as f64;
    let per_node = n / nodes;
    let steps = match coll {
        Collective::Allreduce => 2 * (n - 1),
        Collective::Allgather | Collective::ReduceScatter => n - 1,
        _ => n,
    };
    let net_steps = match coll {
        Collective::Allreduce if nodes > 1 => 2 * nodes,
        Collective::Allreduce => 0,
        Collective::Allgather | Collective::ReduceScatter => nodes - 1,
        _ => nodes,
    };
    let mut best: Option<(NcclAlgorithm, Protocol, f64)> = None;
    for (a, algo) in [(0, NcclAlgorithm::Tree), (1, NcclAlgorithm::Ring)] {
        if a == 0 && coll != Collective::Allreduce {
            continue;
        }
        for (p, proto) in [
            (0, Protocol::Ll),
            (1, Protocol::Ll128),
            (2, Protocol::Simple),
        ] {
            let x = ch as f64 * bw;
            let mut bus = match (a, p) {
                (1, 0) => (0.5 * x).min(ll_max),
                (1, 1) => (x * if ppn < 2.0 { 0.7 } else { 0.92 })
                    .min(ch as f64 * k.ring_ll128_per_channel[ci][ni]),
                (1, _) => x,
                _ => {
                    let y = (0.92 * x).min(ch as f64 * k.tree_per_channel[ci][ni]);
                    match p {
                        0 => (y / 3.8).min(ll_max),
                        1 => (y * if nodes == 1 { 7.0 / 9.0 } else { 15.0 / 16.0 })
                            .min(ch as f64 * k.tree_ll128_per_channel[ci][ni]),
                        _ => y,
                    }
                }
            };
            bus *= if a == 1 { n as f64 / steps as f64 } else { 0.5 };
            let base = k.base_latency_us[a][p];
            let intra = k.hop_latency_us[0][a][p];
            let inter = k.hop_latency_us[2][a][p];
            let mut lat = if a == 0 {
                base + 2.0 * ((per_node - 1) as f64 * intra + (nodes as f64).log2().floor() * inter)
            } else if matches!(coll, Collective::Broadcast | Collective::Reduce) {
                base + if nodes == 1 { intra } else { inter }
            } else {
                let ov = if nodes == 1 {
                    0.0
                } else if p == 2 {
                    3.0
                } else {
                    1.0
                };
                base + (steps - net_steps) as f64 * intra.max(ov) + net_steps as f64 * inter
            };
            if a == 0 {
                let idx = (bytes >> 6).max(1).ilog2() as usize;
                if idx < 23 {
                    bus *= k.tree_correction[p][idx];
                }
            }
            if a == 1
                && p == 2
                && coll == Collective::Allreduce
                && nodes > 1
                && bytes / (rt * n) as u64 >= 64
            {
                lat *= 1.4;
            }
            let t = lat + bytes as f64 / (1000.0 * bus);
            if best.is_none_or(|(_, _, b)| t < b) {
                best = Some((algo, proto, t));
            }
        }
    }
    best.expect("ring is always available")
}

#[test]
fn nccls_choice_matches_its_documented_cost_model() {
    let k = NcclVersion::V2_21_5.constants();
    let mut checked = 0;
    let mut seen = std::collections::BTreeSet::new();
    for nodes in [1usize, 2, 4, 8, 16] {
        let topology = if nodes == 1 {
            "preset = \"dgx_h100\"".to_string()
        } else {
            format!("preset = \"fat_tree\"\nnodes = {nodes}\nmodel = \"flow\"")
        };
        let s = scenario(&format!(
            "seed = 1\n[topology]\n{topology}\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n"
        ));
        let sys = system(&s);
        let comm = sys.communicator();
        let n = s.world_size;
        for coll in [
            Collective::Allreduce,
            Collective::Allgather,
            Collective::ReduceScatter,
            Collective::Broadcast,
        ] {
            let mut bytes = 8u64;
            while bytes <= 8 << 30 {
                let want = expected_choice(
                    k,
                    coll,
                    n,
                    nodes,
                    sys.graph.channels,
                    sys.graph.bw_intra,
                    sys.channels,
                    bytes,
                );
                let work = match coll {
                    Collective::Allgather | Collective::ReduceScatter => bytes / n as u64,
                    _ => bytes,
                };
                let got = comm.choose(coll, bytes, work, 4);
                assert_eq!(
                    (got.algorithm, got.protocol),
                    (want.0, want.1),
                    "{coll} {bytes} B on {nodes} nodes"
                );
                assert!(
                    (got.predicted_us - want.2).abs() < 1e-6 * want.2,
                    "{got:?} vs {want:?}"
                );
                // Channels: NCCL's count drops by one while the bytes
                // are under nc x threads x threshold.
                let (nt, thr) = match want.1 {
                    Protocol::Ll => (
                        512u64,
                        if want.0 == NcclAlgorithm::Ring {
                            8 * n as u64
                        } else {
                            8
                        },
                    ),
                    Protocol::Ll128 => (640, 8),
                    Protocol::Simple => (512, 64),
                };
                let mut nc = sys.channels as u64;
                while bytes < nc * nt * thr && nc >= 2 {
                    nc -= 1;
                }
                assert!(got.channels as u64 <= nc, "{got:?}: at most {nc}");
                if work >= 16 * nc * 4096 {
                    assert_eq!(
                        got.channels as u64, nc,
                        "{coll} {bytes}: a large call uses them all"
                    );
                }
                seen.insert((nodes, got.algorithm, got.protocol));
                checked += 1;
                bytes *= 4;
            }
        }
    }
    assert!(checked > 300, "{checked}");
    // The grid exercises every protocol, and both algorithms across nodes.
    for p in Protocol::ALL {
        assert!(
            seen.iter().any(|&(_, _, q)| q == p),
            "{p} never chosen: {seen:?}"
        );
    }
    assert!(
        seen.iter()
            .any(|&(n, a, _)| n > 1 && a == NcclAlgorithm::Tree),
        "{seen:?}"
    );
}

#[test]
fn a_rail_optimised_clusters_ring_uses_every_nic_equally_one_gpu_each_way() {
    let s = scenario(
        r#"seed = 2
[topology]
preset = "fat_tree"
nodes = 2
model = "flow"
[nccl]
algo = "Ring"
proto = "Simple"
[[collective]]
kind = "allreduce"
min_bytes = "64M"
max_bytes = "64M"
iters = 1
warmup = 0
phantom = true
"#,
    );
    let NetworkConfig::Topology(t) = &s.network else {
        panic!("a topology")
    };
    let rows = run(&s);
    let (row, detail) = &rows[0];
    assert_eq!(row.nccl.map(|n| n.channels), Some(16), "{row:?}");
    let usage = detail.link_usage.as_ref().expect("topology usage");
    let topo = &t.topology;
    // Every NIC's network port, each direction: its bytes.
    let mut up = Vec::new();
    let mut down = Vec::new();
    for l in topo.link_ids() {
        let (a, b) = topo.ends(l);
        if !topo.link(l).kind.is_network() {
            continue;
        }
        if topo.vertex(a).kind == topologies::VertexKind::Nic {
            up.push((topo.vertex(a).name.clone(), usage[l.index()].bytes));
        }
        if topo.vertex(b).kind == topologies::VertexKind::Nic {
            down.push((topo.vertex(b).name.clone(), usage[l.index()].bytes));
        }
    }
    assert_eq!(up.len(), 16, "8 NICs per node, 2 nodes");
    let first = up[0].1;
    assert!(first > 0);
    for (name, bytes) in up.iter().chain(&down) {
        assert_eq!(*bytes, first, "{name} carries {bytes}, NIC 0 {first}");
    }
    // Every GPU's PCIe link carries exactly one NIC's worth each way.
    for l in topo.link_ids() {
        let (a, b) = topo.ends(l);
        let gpu_end = [a, b]
            .iter()
            .any(|&v| topo.vertex(v).kind == topologies::VertexKind::Gpu);
        let pcie = matches!(topo.link(l).kind, topologies::LinkKind::Pcie { .. });
        if gpu_end && pcie {
            assert_eq!(usage[l.index()].bytes, first, "{}", topo.link_name(l));
        }
    }
    // And by the plan: on every node, each NIC is entered by one GPU and
    // left by one GPU, whichever channels use it.
    let sys = system(&s);
    for node in 0..2 {
        let mut entries = std::collections::BTreeMap::new();
        let mut exits = std::collections::BTreeMap::new();
        for c in 0..sys.channels {
            let order = &sys.graph.order[c % sys.graph.channels][node];
            let (entry, exit) = (order[0], *order.last().expect("ranks"));
            let other = if node == 0 { order.len() } else { 0 };
            let (nic, _) = sys.nics(exit, other, c as u16).expect("different nodes");
            entries
                .entry(nic)
                .or_insert_with(std::collections::BTreeSet::new)
                .insert(entry);
            exits
                .entry(nic)
                .or_insert_with(std::collections::BTreeSet::new)
                .insert(exit);
        }
        assert_eq!(entries.len(), 8, "every NIC of node {node} is used");
        for (nic, gpus) in entries.iter().chain(&exits) {
            assert_eq!(gpus.len(), 1, "{nic:?} serves {gpus:?}");
        }
    }
    assert_eq!(row.wrong, None);
}
