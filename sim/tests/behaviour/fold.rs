//! Folded runs (`engine::fold`): simulating one node's ranks of a symmetric
//! run gives the full run's times, message for message, and its link
//! counters, link for link; what cannot fold is refused with a reason.

use std::sync::Arc;

use algorithms::{
    Algorithm, Collective, DType, Params, Payload, ReduceOp, Registry, Time, catalogue_algorithm,
};
use engine::fold::fold;
use engine::network::{LinkUsage, ModelLevel, NetworkConfig, TopologyConfig};

use engine::{Execution, WorldConfig};
use topologies::{LinkSpec, presets};

/// Ranks per node of the fat-trees here (and the fold's shift).
const NODE: usize = 8;

/// The default fat-tree of `nodes` nodes at `level`, all GPUs placed in
/// order, with its rotation by one node (symmetric routes).
fn fat_tree(nodes: usize, level: ModelLevel) -> NetworkConfig {
    let params = presets::FatTree {
        nodes,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let rotation = presets::fat_tree_rotation(&params, &topology, &placement).unwrap();
    let mut config = TopologyConfig::new(topology, placement, level, 7);
    config.rotation = Some(Arc::new(rotation));
    NetworkConfig::Topology(config)
}

fn ideal() -> NetworkConfig {
    NetworkConfig::Ideal(LinkSpec::new(2_000_000, 25e9).unwrap())
}

fn config(network: NetworkConfig, ranks: usize) -> WorldConfig {
    WorldConfig::new(ranks, network).reduce_bytes_per_s(Some(200e9))
}

/// A phantom float-sum allreduce of `count` elements; each rank returns
/// when it finished.
fn allreduce(config: WorldConfig, algorithm: &Algorithm, count: usize) -> Execution<Time> {
    engine::run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, count);
        let params = Params {
            chunk_bytes: 64 << 10,
            ranks_per_node: NODE,
            ..Params::default()
        };
        use algorithms::Fabric;
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, &params)
            .await
            .unwrap();
        fabric.now()
    })
}

/// The full run and the folded one of the same network.
fn full_and_folded(
    network: NetworkConfig,
    ranks: usize,
    algorithm: &Algorithm,
    count: usize,
) -> (Execution<Time>, Execution<Time>) {
    let full = allreduce(config(network.clone(), ranks), algorithm, count);
    let mut folded = config(network, ranks);
    fold(&mut folded, NODE).unwrap();
    let folded = allreduce(folded, algorithm, count);
    assert!(full.deadlock.is_none() && folded.deadlock.is_none());
    (full, folded)
}

/// Every representative finishes when it did in the full run, and so
/// does every rank of its orbit; the folded run sent one orbit's share of
/// the messages.
fn assert_same_times(full: &Execution<Time>, folded: &Execution<Time>, ranks: usize) {
    assert_eq!(folded.outputs.len(), NODE);
    for rank in 0..ranks {
        assert_eq!(
            full.outputs[rank],
            folded.outputs[rank % NODE],
            "rank {rank} finishes when its representative does"
        );
    }
    assert_eq!(full.end_time, folded.end_time);
    let orbits = (ranks / NODE) as u64;
    assert_eq!(
        full.stats.links.messages,
        folded.stats.links.messages * orbits
    );
    assert!(folded.stats.events * 2 < full.stats.events);
}

/// Link counters of the folded run (each link given its orbit
/// representative's) equal the full run's, on every link direction.
fn assert_same_links(full: &Execution<Time>, folded: &Execution<Time>) {
    let full: &[LinkUsage] = full.link_usage.as_deref().unwrap();
    let folded: &[LinkUsage] = folded.link_usage.as_deref().unwrap();
    assert_eq!(full.len(), folded.len());
    let mut used = 0;
    for (l, (a, b)) in full.iter().zip(folded).enumerate() {
        assert_eq!(
            (a.bytes, a.units, a.busy_ps, a.max_queue),
            (b.bytes, b.units, b.busy_ps, b.max_queue),
            "link direction {l}"
        );
        used += usize::from(a.units > 0);
    }
    assert!(used > 0);
}

/// The ring and hierarchical allreduces of `count` elements on the 32
/// ranks of `network`, folded by one node, give the full run's times and
/// link counters.
fn folds_exactly(network: &NetworkConfig, count: usize) {
    for name in ["ring", "hierarchical"] {
        let algorithm = &catalogue_algorithm(Collective::Allreduce, name);
        let (full, folded) = full_and_folded(network.clone(), 32, algorithm, count);
        assert_same_times(&full, &folded, 32);
        assert_same_links(&full, &folded);
    }
}

#[test]
fn ideal_links_fold_exactly() {
    for name in ["ring", "hierarchical"] {
        let algorithm = &catalogue_algorithm(Collective::Allreduce, name);
        let (full, folded) = full_and_folded(ideal(), 64, algorithm, 64 << 10);
        assert_same_times(&full, &folded, 64);
    }
}

#[test]
fn the_flow_model_folds_exactly() {
    folds_exactly(&fat_tree(4, ModelLevel::Flow), 256 << 10);
}

#[test]
fn the_flow_model_folds_shared_links_by_weight() {
    // 2:1 oversubscribed, 2 spines: each leaf's 2 uplinks serve 4 nodes,
    // so an uplink's orbit has 2 members for the rotation's 4 steps and
    // two rotated copies of a cross-rail flow share it.
    let params = presets::FatTree {
        nodes: 4,
        spines: Some(2),
        oversubscription: 2.0,
        ..presets::FatTree::default()
    };
    let topology = Arc::new(presets::fat_tree(&params).unwrap());
    let placement: Arc<[_]> = topology.endpoints().into();
    let rotation = presets::fat_tree_rotation(&params, &topology, &placement).unwrap();
    assert!(rotation.link_orbits(&topology).is_err());
    let mut t = TopologyConfig::new(topology, placement, ModelLevel::Flow, 7);
    t.rotation = Some(Arc::new(rotation));
    folds_exactly(&NetworkConfig::Topology(t.clone()), 256 << 10);
    // The packet model cannot weigh packets: it refuses.
    let mut packet = t.clone();
    packet.level = ModelLevel::Packet;
    let mut c = config(NetworkConfig::Topology(packet), 32);
    let err = fold(&mut c, NODE).unwrap_err().to_string();
    assert!(err.contains("packet model"), "{err}");
}

#[test]
fn the_packet_model_folds_exactly() {
    folds_exactly(&fat_tree(4, ModelLevel::Packet), 64 << 10);
}

#[test]
fn an_uneven_split_is_caught_as_asymmetry() {
    // 64 ranks, a count that does not split evenly: the blocks the ranks
    // of an orbit pass on differ in size, so a folded ring cannot stand
    // for the full one, and a receive fails instead of timing a wrong
    // run.
    let mut folded = config(ideal(), 64);
    fold(&mut folded, NODE).unwrap();
    let exec = engine::run(folded, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, 64 * 1000 + 13);
        catalogue_algorithm(Collective::Allreduce, "ring")
            .run(&fabric, &mut buf, ReduceOp::Sum, &Params::default())
            .await
            .map_err(|e| e.to_string())
    });
    let errors: Vec<String> = exec
        .outputs
        .iter()
        .filter_map(|o| o.as_ref().and_then(|r| r.clone().err()))
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("expected")),
        "{errors:?} {:?}",
        exec.deadlock
    );
}

#[test]
fn what_cannot_fold_is_refused_with_a_reason() {
    let refused = |mut c: WorldConfig, shift: usize| fold(&mut c, shift).unwrap_err().to_string();
    assert!(refused(config(ideal(), 60), 8).contains("divide the world size (60)"));
    assert!(refused(config(ideal(), 64), 0).contains("must be positive"));
    let mut faults = engine::world::RankFaults::default();
    faults.crashes.push((3, Time::ZERO.plus_ps(10)));
    let crashing = config(ideal(), 64).faults(faults);
    assert!(refused(crashing, 8).contains("rank faults"));
    // A topology without a rotation.
    let NetworkConfig::Topology(mut t) = fat_tree(2, ModelLevel::Flow) else {
        unreachable!()
    };
    t.rotation = None;
    let no_rotation = config(NetworkConfig::Topology(t.clone()), 16);
    assert!(refused(no_rotation, 8).contains("no rotation"));
    // A rotation by another shift than the fold's.
    let t = fat_tree(2, ModelLevel::Flow);
    assert!(refused(config(t, 16), 4).contains("moves 16 ranks by 8"));
}

/// A fat-tree scenario of `nodes` nodes with `symmetry` and `extra` lines
/// appended after the collective (line 8 is `symmetry`).
pub(crate) fn scenario_text(nodes: usize, symmetry: &str, collective: &str, extra: &str) -> String {
    format!(
        "seed = 5\n\
         [topology]\n\
         preset = \"fat_tree\"\n\
         nodes = {nodes}\n\
         model = \"flow\"\n\
         spines = 4\n\
         oversubscription = 1\n\
         symmetry = \"{symmetry}\"\n\
         [[collective]]\n\
         {collective}\
         min_bytes = \"64K\"\n\
         max_bytes = \"4M\"\n\
         step_factor = 8\n\
         iters = 2\n\
         warmup = 1\n\
         phantom = true\n\
         {extra}"
    )
}

/// The scenario `text` as `f.toml`, or its error as text.
pub(crate) fn parse(text: &str) -> Result<engine::scenario::Scenario, String> {
    engine::scenario::Scenario::parse(std::path::Path::new("f.toml"), text, &Registry::builtin())
        .map_err(|e| e.to_string())
}

/// Every row of a scenario run with the default filter and options.
pub(crate) fn rows(scenario: &engine::scenario::Scenario) -> Vec<engine::study::Row> {
    engine::study::run_scenario(
        scenario,
        &engine::tuning::AlgoFilter::default(),
        engine::study::Options::default(),
        |_| std::ops::ControlFlow::Continue(()),
    )
    .unwrap_or_else(|e| panic!("{:?}", e.1))
}

/// `(size, time)` of every row of a scenario run.
pub(crate) fn times(text: &str) -> Vec<(u64, u64)> {
    let rows = rows(&parse(text).unwrap());
    rows.iter().map(|r| (r.size_bytes, r.time_ps)).collect()
}

#[test]
fn a_folded_scenario_times_what_its_full_run_times() {
    for algorithm in ["\"ring\"", "\"hierarchical\"\nranks_per_node = 8"] {
        let collective = format!("kind = \"allreduce\"\nalgorithm = {algorithm}\n");
        let full = times(&scenario_text(4, "routes", &collective, ""));
        let folded = times(&scenario_text(4, "fold", &collective, ""));
        assert_eq!(full.len(), 3);
        assert_eq!(full, folded, "{algorithm}");
    }
    // The other symmetric algorithms.
    for (kind, algorithm) in [
        ("allgather", "ring"),
        ("allgather", "bruck"),
        ("alltoall", "pairwise"),
        ("alltoall", "bruck"),
        ("reduce_scatter", "ring"),
        ("barrier", "dissemination"),
    ] {
        let collective = format!("kind = \"{kind}\"\nalgorithm = \"{algorithm}\"\n");
        let full = times(&scenario_text(4, "routes", &collective, ""));
        let folded = times(&scenario_text(4, "fold", &collective, ""));
        assert_eq!(full, folded, "{kind} {algorithm}");
    }
    // Tuned, a folded run picks among the algorithms that fold (the full
    // run of this allgather picks a faster one that does not).
    let tuned = parse(&scenario_text(4, "fold", "kind = \"allgather\"\n", "")).unwrap();
    let rows = rows(&tuned);
    assert_eq!(rows.len(), 3);
    for row in rows {
        let algorithm = catalogue_algorithm(Collective::Allgather, &row.algorithm);
        assert!(
            algorithm.facts().rotation_symmetry() != algorithms::RotationSymmetry::None,
            "{}",
            row.algorithm
        );
    }
}

#[test]
fn scenario_folds_that_cannot_hold_are_located_errors() {
    let ring = "kind = \"allreduce\"\n";
    let err = parse(&scenario_text(4, "mirror", ring, "")).unwrap_err();
    assert!(
        err.contains("f.toml:8:12") && err.contains("unknown symmetry `mirror`"),
        "{err}"
    );
    // Real data: the collective (line 9) is refused.
    let real = scenario_text(4, "fold", ring, "").replace("phantom = true", "phantom = false");
    let err = parse(&real).unwrap_err();
    assert!(
        err.contains("f.toml:9:1") && err.contains("phantom = true"),
        "{err}"
    );
    // A root, a rank fault, a collective on fewer ranks.
    let err = parse(&scenario_text(4, "fold", "kind = \"broadcast\"\n", "")).unwrap_err();
    assert!(err.contains("broadcast has a root"), "{err}");
    let straggler = "[[fault]]\nkind = \"straggler\"\nrank = 3\ndelay_us = 5\n";
    let err = parse(&scenario_text(4, "fold", ring, straggler)).unwrap_err();
    assert!(
        err.contains("f.toml:17:1") && err.contains("rank faults"),
        "{err}"
    );
    let fewer = "kind = \"allreduce\"\nworld_size = 16\n";
    let err = parse(&scenario_text(4, "fold", fewer, "")).unwrap_err();
    assert!(err.contains("all 32 ranks, not 16"), "{err}");
    // An oversubscribed tree's uplinks come back before the nodes do:
    // packets cannot fold them...
    let oversubscribed = |symmetry: &str| {
        let ring = "kind = \"allreduce\"\nalgorithm = \"ring\"\n";
        scenario_text(4, symmetry, ring, "")
            .replace("oversubscription = 1", "oversubscription = 2")
            .replace("spines = 4", "spines = 2")
    };
    let over = oversubscribed("fold").replace("model = \"flow\"", "model = \"packet\"");
    let err = parse(&over).unwrap_err();
    assert!(
        err.contains("f.toml:8:12")
            && err.contains("folding needs every link moved")
            && err.contains("packet model"),
        "{err}"
    );
    // ...but its routes can still be symmetric, and flows fold by weight.
    assert!(parse(&oversubscribed("routes")).is_ok());
    assert_eq!(
        times(&oversubscribed("routes")),
        times(&oversubscribed("fold"))
    );
    // Up*/down* routing from a spine the rotation moves: the rotated
    // routes would cross every spine, not the root, so symmetry is
    // refused; from the default root (a leaf, which stays) it holds.
    let up_down = |root: &str| {
        scenario_text(4, "routes", ring, "").replace(
            "spines = 4\n",
            &format!("spines = 4\nrouting = \"up_down\"\n{root}"),
        )
    };
    let err = parse(&up_down("routing_root = \"spine0\"\n")).unwrap_err();
    assert!(
        err.contains("f.toml:10:12")
            && err.contains("leaf0->spine0 is up but its image leaf0->spine1 is down"),
        "{err}"
    );
    let default_root = up_down("").replace(ring, "kind = \"allreduce\"\nalgorithm = \"ring\"\n");
    assert_eq!(
        times(&default_root),
        times(&default_root.replace("\"routes\"", "\"fold\"")),
        "up*/down* routes from a leaf root fold"
    );
    // A preset without a rotation.
    let pcie = "seed = 1\n[topology]\npreset = \"pcie_box\"\nsymmetry = \"fold\"\n\
                [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\nphantom = true\n";
    let err = parse(pcie).unwrap_err();
    assert!(
        err.contains("f.toml:4:12") && err.contains("preset `pcie_box` has no rotation"),
        "{err}"
    );
}

#[test]
fn uneven_sizes_trees_and_nccl_are_refused_saying_what_to_do_instead() {
    let ring = "kind = \"allreduce\"\nalgorithm = \"ring\"\n";
    // 32 ranks of 4-byte floats: sizes fold in multiples of 128 B.
    let uneven = scenario_text(4, "fold", ring, "").replace("\"64K\"", "\"65540\"");
    let err = parse(&uneven).unwrap_err();
    assert!(
        err.contains("f.toml:12:13")
            && err.contains("16385 elements, not a multiple of 32 ranks")
            && err.contains("the nearest sizes that fold are 65536 B and 65664 B")
            && err.contains("drop symmetry = \"fold\""),
        "{err}"
    );
    let tiny = scenario_text(4, "fold", ring, "").replace("\"64K\"", "100");
    let err = parse(&tiny).unwrap_err();
    assert!(
        err.contains("the smallest size that folds is 128 B"),
        "{err}"
    );
    // The size named is one that folds, and the run is the full run's.
    let named = scenario_text(4, "fold", ring, "").replace("\"64K\"", "65664");
    assert_eq!(
        times(&named),
        times(&named.replace("\"fold\"", "\"routes\"")),
        "the suggested size folds exactly"
    );
    // The catalogue's tree is no rotation of itself: refused at the
    // algorithm, naming what folds.
    let collective = "kind = \"allreduce\"\nalgorithm = \"tree\"\n";
    let err = parse(&scenario_text(4, "fold", collective, "")).unwrap_err();
    assert!(
        err.contains("f.toml:11:13")
            && err.contains("allreduce tree does not do the same")
            && err.contains("drop symmetry = \"fold\" to simulate every rank")
            && err.contains("allreduce ring or hierarchical"),
        "{err}"
    );
    // NCCL's algorithms named: nccl_pat and nccl_ring fold by the node
    // shift (see `fold_nccl.rs`), the others by the node turn, which is
    // tested exact for nccl_tree and nccl_nvls_tree only: the rest are
    // refused, saying so.
    let collective = "kind = \"allreduce\"\nalgorithm = \"nccl_nvls\"\n";
    let err = parse(&scenario_text(4, "fold", collective, "")).unwrap_err();
    assert!(
        err.contains("f.toml:9:1")
            && err.contains("allreduce nccl_nvls is neither nccl_tree nor nccl_nvls_tree")
            && err.contains("nccl_pat and nccl_ring fold by a shift of whole nodes")
            && err.contains("drop symmetry = \"fold\" to simulate every rank"),
        "{err}"
    );
    // NCCL's tuner with every collective naming its algorithm: refused
    // (it folds only where it chooses, see `fold_nccl.rs`).
    let nccl = format!("tuner = \"nccl\"\n{}", scenario_text(4, "fold", ring, ""));
    let err = parse(&nccl).unwrap_err();
    assert!(
        err.contains("f.toml:1:9")
            && err.contains("turn every node's GPUs together with the channels")
            && err.contains("tuner = \"alpha_beta\""),
        "{err}"
    );
}

/// What one catalogue entry's run on 32 ranks of ideal links gives: each
/// rank's finish time, or a description of how it failed.
fn catalogue_run(algorithm: &Algorithm, folded: bool) -> Result<Vec<Time>, String> {
    let mut c = config(ideal(), 32);
    if folded {
        fold(&mut c, NODE).unwrap();
    }
    let exec = engine::run(c, |fabric| async move {
        use algorithms::Fabric;
        let mut buf = Payload::phantom(DType::F32, 32 * 512);
        let params = Params {
            ranks_per_node: NODE,
            ..Params::default()
        };
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, &params)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<Time, String>(fabric.now())
    });
    if let Some(d) = exec.deadlock {
        return Err(format!("deadlock at {}", d.time));
    }
    exec.outputs
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("unfinished".into())))
        .collect()
}

#[test]
fn exactly_the_rotation_symmetric_algorithms_fold() {
    let mut checked = 0;
    let params = Params {
        ranks_per_node: NODE,
        ..Params::default()
    };
    for algorithm in Registry::builtin().iter() {
        let kind = algorithm.collective();
        if kind.has_root() {
            continue;
        }
        let full = catalogue_run(algorithm, false).unwrap();
        let folded = catalogue_run(algorithm, true);
        let same = folded
            .as_ref()
            .is_ok_and(|f| (0..32).all(|r| f[r % NODE] == full[r]));
        assert_eq!(
            same,
            algorithm.folds_by(NODE, &params),
            "{} {}: {folded:?}",
            kind.name(),
            algorithm.name()
        );
        checked += 1;
    }
    assert!(checked >= 12, "{checked}");
}

#[test]
fn the_bundled_16k_scenario_folds_by_one_node() {
    let path = crate::support::repo_root().join("scenarios/allreduce_16k_folded.toml");
    let s = engine::scenario::Scenario::load(&path, &algorithms::Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((s.world_size, s.fold), (16384, Some(8)));
    assert!(s.network_description.contains("folded by 8 ranks"));
    assert!(s.has_sweep);
}

#[test]
fn symmetric_routes_of_a_collective_on_fewer_ranks_wrap_around_all_of_them() {
    // Rank 15 of a 16-rank ring on a 32-rank tree sends to rank 0: rotated
    // back one node that is rank 7 to rank 24 (not 8), then forward again,
    // so the route ends at rank 0's GPU and nothing crosses nodes 2 and 3.
    let network = fat_tree(4, ModelLevel::Flow);
    let NetworkConfig::Topology(t) = &network else {
        unreachable!()
    };
    let topology = Arc::clone(&t.topology);
    let ring = catalogue_algorithm(Collective::Allreduce, "ring");
    let exec = allreduce(config(network, 16), &ring, 64 << 10);
    assert!(exec.deadlock.is_none());
    let usage = exec.link_usage.unwrap();
    let mut used = 0;
    for l in topology.link_ids() {
        if usage[l.index()].units > 0 {
            let name = topology.link_name(l);
            assert!(
                !name.contains("node2/") && !name.contains("node3/"),
                "{name}"
            );
            used += 1;
        }
    }
    assert!(used > 0);
}

/// The deadlock report of a run in which every rank first waits for its
/// left neighbour (a cycle through all ranks), folded or not.
fn ring_wait_deadlock(folded: bool) -> engine::DeadlockReport {
    let mut c = config(ideal(), 32);
    if folded {
        fold(&mut c, NODE).unwrap();
    }
    let exec = engine::run(c, |fabric| async move {
        use algorithms::{Fabric, Shape, Tag};
        let (n, r) = (fabric.world_size(), fabric.rank());
        let left = (r + n - 1) % n;
        let _ = fabric.recv(left, Tag(0), Shape::new(DType::F32, 4)).await;
    });
    exec.deadlock.expect("nobody sends")
}

#[test]
fn a_folded_deadlock_is_reported_as_the_full_runs() {
    // The folded run blocks ranks 0..8 only; rank 0 waits for rank 31,
    // whose representative is rank 7. The report lists all 32 ranks and
    // the cycle through them, as the full run's does.
    let full = ring_wait_deadlock(false);
    let folded = ring_wait_deadlock(true);
    assert_eq!(folded.blocked.len(), 32);
    assert_eq!(folded.blocked, full.blocked);
    assert_eq!(folded.cycle.as_ref().map(Vec::len), Some(32));
    assert_eq!(folded.cycle, full.cycle);
    assert!(
        folded.to_string().contains("32 rank(s) blocked"),
        "{folded}"
    );
}

/// Each rank's finish time of a phantom pairwise alltoall of `count`
/// elements on `network` (`ranks` ranks), folded by `shift` or not.
fn alltoall_times(
    network: NetworkConfig,
    ranks: usize,
    shift: Option<usize>,
    count: usize,
) -> Vec<u64> {
    let mut c = config(network, ranks);
    if let Some(shift) = shift {
        fold(&mut c, shift).unwrap();
    }
    let algorithm = &catalogue_algorithm(Collective::Alltoall, "pairwise");
    let exec = engine::run(c, |fabric| async move {
        use algorithms::Fabric;
        let mut buf = Payload::phantom(DType::F32, count);
        algorithm
            .run(&fabric, &mut buf, ReduceOp::Sum, &Params::default())
            .await
            .unwrap();
        fabric.now().as_ps()
    });
    exec.outputs.into_iter().map(Option::unwrap).collect()
}

#[test]
fn ties_and_rounding_are_where_a_fold_is_not_exact() {
    // Packet model, pairwise alltoall on 4 fat-tree nodes: flows of
    // different nodes meet on a port at the same picosecond, and events at
    // equal times go in scheduling order, which follows rank order, not
    // the rotation. So the full run with symmetric routes is itself not
    // symmetric (rank 3 and rank 11 finish at different times), and the
    // folded run, whose ranks stand for whole orbits, can only be close.
    let full = alltoall_times(fat_tree(4, ModelLevel::Packet), 32, None, 16384);
    let folded = alltoall_times(fat_tree(4, ModelLevel::Packet), 32, Some(NODE), 16384);
    assert!((0..NODE).any(|r| full[r] != full[r + NODE]), "{full:?}");
    for r in 0..32 {
        let (a, b) = (full[r], folded[r % NODE]);
        assert!(a.abs_diff(b) * 100 < a, "rank {r}: {a} ps against {b} ps");
    }
    // Flow model, alltoall on a 4x4 torus folded by rows: routes cross
    // several links of one orbit, max-min freezes links of equal share in
    // id order, and the rates differ in their last bits: a few ps.
    let torus = || {
        // 32 GB/s links (`smp`): the shares of a 4x4 torus's alltoall
        // then round differently in their last bits (NVLink's 20.6 GB/s
        // happen to divide evenly here).
        let link = topologies::LinkKind::Smp;
        let params = presets::Torus {
            x: 4,
            y: 4,
            link,
            ..presets::Torus::default()
        };
        let topology = Arc::new(presets::torus2d(&params).unwrap());
        let placement: Arc<[_]> = topology.endpoints().into();
        let rotation = presets::torus2d_rotation(&params, &topology, &placement).unwrap();
        let mut config = TopologyConfig::new(topology, placement, ModelLevel::Flow, 1);
        config.rotation = Some(Arc::new(rotation));
        NetworkConfig::Topology(config)
    };
    let full = alltoall_times(torus(), 16, None, 8192);
    let folded = alltoall_times(torus(), 16, Some(4), 8192);
    assert_ne!(full[0], full[4], "the full run is not symmetric to the ps");
    for r in 0..16 {
        assert!(full[r].abs_diff(folded[r % 4]) <= 10, "rank {r}");
    }
}
