//! NCCL 2.29.7's model of NVLS, NVLS tree, CollNet and PAT against the
//! hand examples of the notes (`/work/notes/nccl_newer_algos.md`): each is
//! a consequence of NCCL's cited formulas on the graph the search finds,
//! not a fit.

use std::path::Path;

use algorithms::nccl::{NcclAlgorithm, Protocol};
use algorithms::{Collective, Registry};
use engine::nccl::{Allowed, Communicator, Graph, NcclSystem, NcclVersion, PathType};
use engine::scenario::Scenario;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(Path::new("nccl_newer.toml"), text, &Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn system(scenario: &Scenario) -> &NcclSystem {
    scenario
        .nccl_system(scenario.world_size)
        .expect("a topology scenario has the NCCL model")
}

/// A preset at NCCL 2.29.7 with extra `[nccl]` lines and `[topology]`
/// lines.
fn on(preset: &str, topology: &str, nccl: &str) -> Scenario {
    scenario(&format!(
        "seed = 1\n[topology]\npreset = \"{preset}\"\nmodel = \"flow\"\n{topology}\n[nccl]\nversion = \"2.29.7\"\n{nccl}\n\
         [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n"
    ))
}

/// Eight GPUs on one NVSwitch vertex, each by 18 NVLink 5 links (721.8
/// GB/s at NCCL's 40.1 per link): a B200 board.
fn b200_node(nccl: &str) -> String {
    let mut t = String::from("seed = 1\n[topology]\npreset = \"explicit\"\nmodel = \"flow\"\n");
    t += "[[topology.vertex]]\nname = \"nvs\"\nkind = \"nvswitch\"\n";
    for g in 0..8 {
        t += &format!("[[topology.vertex]]\nname = \"gpu{g}\"\nkind = \"gpu\"\n");
        t += &format!(
            "[[topology.link]]\nfrom = \"gpu{g}\"\nto = \"nvs\"\nkind = \"nvlink5\"\ncount = 18\n"
        );
    }
    t += nccl;
    t += "\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n";
    t
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

const AR: Collective = Collective::Allreduce;
const S: Protocol = Protocol::Simple;

#[test]
fn nvls_on_a_dgx_h100_is_eight_heads_25_us_and_476_gb_s_bus() {
    let s = on("dgx_h100", "", "");
    let sys = system(&s);
    assert_eq!(sys.version, NcclVersion::V2_29_7);
    let g = sys.nvls.as_ref().expect("an NVSwitch node has NVLS");
    // 9 x 40 = 360 <= 370.8 GB/s per GPU; bwInter climbs to Hopper's 60.
    assert_eq!((g.channels(), g.bw_intra, g.bw_inter), (8, 40.0, 60.0));
    let c = sys.communicator();
    assert_eq!(c.nvls_channels, 16);
    assert!(close(c.latency(AR, NcclAlgorithm::Nvls, S), 25.0));
    // bus = 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476; algbw x 8 / 14.
    assert!(close(
        c.bandwidth(AR, NcclAlgorithm::Nvls, S),
        476.0 * 8.0 / 14.0
    ));
    // One node: no NVLS tree, no CollNet, no PAT.
    let table = c.table(AR, 1 << 30);
    assert!(
        table[5]
            .iter()
            .chain(&table[2])
            .chain(&table[3])
            .all(Option::is_none)
    );
    let choice = sys.choose(AR, 1 << 30, 4);
    assert_eq!(
        (choice.algorithm, choice.protocol),
        (NcclAlgorithm::Nvls, S)
    );
    assert_eq!(
        (choice.channels, choice.heads, choice.threads),
        (16, 8, 640)
    );
    assert_eq!(choice.chunk_bytes, 131_072);
    assert_eq!(
        sys.heads(NcclAlgorithm::Nvls),
        vec![(0..8).collect::<Vec<_>>()]
    );
}

#[test]
fn nvls_on_a_b200_node_is_capped_by_its_inter_bandwidth_at_720_gb_s() {
    let s = scenario(&b200_node(""));
    let sys = system(&s);
    // Blackwell leaves the version unset: 2.29.7, and the header says so.
    assert_eq!(sys.machine.compute_capability, 100);
    assert_eq!(sys.version, NcclVersion::V2_29_7);
    assert!(
        sys.describe()
            .contains("NCCL 2.29.7 (the default on Blackwell GPUs"),
        "{}",
        sys.describe()
    );
    let g = sys.nvls.as_ref().expect("NVLS");
    assert_eq!((g.channels(), g.bw_intra, g.bw_inter), (8, 80.0, 90.0));
    let c = sys.communicator();
    assert_eq!(c.nvls_channels, 24);
    // 80 x 0.74 x 7/8 x 2 = 103.6 > 90: bus = 8 x 90 = 720.
    assert!(close(
        c.bandwidth(AR, NcclAlgorithm::Nvls, S),
        720.0 * 8.0 / 14.0
    ));
}

#[test]
fn a_pinned_2_21_5_on_blackwell_is_refused_at_its_key() {
    let text = b200_node("[nccl]\nversion = \"2.21.5\"\n");
    let e = Scenario::parse(Path::new("b200.toml"), &text, &Registry::builtin())
        .expect_err("2.21.5 has no Blackwell tables")
        .to_string();
    let line = text.lines().position(|l| l.starts_with("version")).unwrap() + 1;
    assert!(e.contains(&format!("b200.toml:{line}:")), "{e}");
    assert!(e.contains("version = \"2.29.7\""), "{e}");
    // Named GPUs count too.
    let e = Scenario::parse(
        Path::new("h.toml"),
        "seed = 1\n[topology]\npreset = \"dgx_h100\"\n[nccl]\nversion = \"2.21.5\"\ngpu = \"b200\"\n\
         [[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
        &Registry::builtin(),
    )
    .expect_err("b200 on 2.21.5")
    .to_string();
    assert!(e.contains("h.toml:5:"), "{e}");
}

#[test]
fn nvls_tree_latency_is_25_plus_41_8_per_tree_level() {
    for (nodes, levels) in [(2, 1.0), (4, 2.0)] {
        let s = on("fat_tree", &format!("nodes = {nodes}"), "");
        let c = system(&s).communicator();
        let lat = c.latency(AR, NcclAlgorithm::NvlsTree, S);
        assert!(close(lat, 25.0 + 41.8 * levels), "{nodes} nodes: {lat}");
        assert!(
            c.table(AR, 1 << 20)[5][2].is_some(),
            "NVLS tree runs across nodes"
        );
        // Without SHARP, NVLS itself is off across nodes.
        assert!(c.table(AR, 1 << 20)[4][2].is_none());
    }
}

#[test]
fn collnet_needs_enabling_and_a_reducing_network_then_direct_is_44_us() {
    let off = on("fat_tree", "nodes = 2\nsharp = true", "");
    assert!(system(&off).communicator().table(AR, 1 << 20)[2][2].is_none());
    let no_sharp = on("fat_tree", "nodes = 2", "collnet_enable = 1");
    assert!(system(&no_sharp).communicator().table(AR, 1 << 20)[2][2].is_none());
    let s = on("fat_tree", "nodes = 2\nsharp = true", "collnet_enable = 1");
    let sys = system(&s);
    let c = sys.communicator();
    // 2 x (3.7 + 0.4 x 7) + 31 and 2 x 7 x 2.8 + 30.
    assert!(close(c.latency(AR, NcclAlgorithm::CollNetDirect, S), 44.0));
    assert!(close(c.latency(AR, NcclAlgorithm::CollNetChain, S), 69.2));
    let table = c.table(AR, 1 << 20);
    assert!(table[2][2].is_some() && table[3][2].is_some());
    // NVLS across nodes rides SHARP: 25 + 18.
    assert!(close(c.latency(AR, NcclAlgorithm::Nvls, S), 43.0));
    // Heads: each NIC's PCIe-local GPU. NVLS: 9 x 40 <= 370.8 per GPU
    // inside, the NICs' 48 GB/s (PCIe Gen5 x16) across; CollNet direct at
    // the NICs' speed.
    let nvls = sys.nvls.as_ref().expect("NVLS");
    assert_eq!(
        (nvls.channels(), nvls.bw_intra, nvls.bw_inter),
        (8, 40.0, 48.0)
    );
    let direct = sys.collnet_direct.as_ref().expect("CollNet direct");
    assert_eq!(
        (direct.channels(), direct.bw_intra, direct.bw_inter),
        (8, 48.0, 48.0)
    );
    assert_eq!(
        sys.heads(NcclAlgorithm::CollNetDirect),
        vec![(0..8).collect::<Vec<_>>(), (8..16).collect()]
    );
}

#[test]
fn pat_latency_with_one_gpu_per_node_is_8_plus_4_log2_plus_2_8_n() {
    for nodes in [4usize, 8, 16] {
        let s = on(
            "fat_tree",
            &format!("nodes = {nodes}\ngpus_per_node = 1"),
            "",
        );
        let c = system(&s).communicator();
        assert!(c.pat, "one GPU per node enables PAT");
        let want = 8.0 + 4.0 * nodes.ilog2() as f64 + 2.8 * nodes as f64;
        let lat = c.latency(Collective::Allgather, NcclAlgorithm::Pat, S);
        assert!(close(lat, want), "{nodes} nodes: {lat} vs {want}");
        assert!(
            c.table(AR, 1 << 20)[6].iter().all(Option::is_none),
            "no PAT allreduce"
        );
    }
    let off = on("fat_tree", "nodes = 4\ngpus_per_node = 1", "pat_enable = 0");
    assert!(!system(&off).communicator().pat);
    let two = on("fat_tree", "nodes = 4\ngpus_per_node = 2", "");
    assert!(
        !system(&two).communicator().pat,
        "PAT needs one GPU per node"
    );
}

/// The notes' PAT example: a tree graph of 2 channels x 24 GB/s, Intel
/// CPUs, one GPU per node, allgather, Ring LL128 off.
fn pat_example<'g>(graph: &'g Graph, nodes: usize) -> Communicator<'g> {
    let mut allowed = Allowed::default();
    allowed.protocols[1] = false;
    Communicator {
        constants: NcclVersion::V2_29_7.constants(),
        ranks: nodes,
        nodes,
        compute_capability: 90,
        amd_cpu: false,
        ring: graph,
        tree_pattern: true,
        channels: 4,
        allowed,
        max_local_ranks: 1,
        nvls: None,
        nvls_channels: 0,
        nvls_reduces: true,
        collnet: false,
        collnet_direct: None,
        pat: true,
    }
}

#[test]
fn pat_and_ring_winners_are_the_notes_table() {
    let graph = Graph {
        channels: 2,
        bw_intra: 24.0,
        bw_inter: 24.0,
        intra_nvlink: false,
        inter: PathType::Pix,
        order: Vec::new(),
        nic: Vec::new(),
    };
    let winner = |nodes: usize, per_rank: u64| {
        let c = pat_example(&graph, nodes);
        let bytes = per_rank * nodes as u64;
        let choice = c.choose(Collective::Allgather, bytes, per_rank, 4);
        (choice.algorithm, choice.protocol, choice.predicted_us)
    };
    let (a, p, t) = winner(8, 1024);
    assert_eq!((a, p), (NcclAlgorithm::Ring, Protocol::Ll));
    assert!((t - 41.95).abs() < 0.01, "{t}");
    let pat_us = pat_example(&graph, 8)
        .time_us(Collective::Allgather, NcclAlgorithm::Pat, S, 8 * 1024)
        .unwrap();
    assert!((pat_us - 42.63).abs() < 0.01, "{pat_us}");
    let (a, _, t) = winner(8, 64 << 10);
    assert_eq!(a, NcclAlgorithm::Pat);
    assert!((t - 56.96).abs() < 0.01, "{t}");
    let (a, p, t) = winner(8, 1 << 20);
    assert_eq!((a, p), (NcclAlgorithm::Ring, S));
    assert!((t - 259.3).abs() < 0.1, "{t}");
    for nodes in [16, 32, 64] {
        for per_rank in [1024, 64 << 10, 1 << 20] {
            assert_eq!(
                winner(nodes, per_rank).0,
                NcclAlgorithm::Pat,
                "{nodes} x {per_rank}"
            );
        }
    }
}

#[test]
fn with_nvls_disabled_the_choice_is_nccls_next_one() {
    let bytes = 1u64 << 30;
    let next = |c: &Communicator| {
        // The strict minimum over every cell but NVLS's.
        let table = c.table(AR, bytes);
        let mut best: Option<(usize, usize, f64)> = None;
        for (a, row) in table.iter().enumerate() {
            for (p, t) in row.iter().enumerate() {
                if let Some(t) = *t
                    && a != 4
                    && best.is_none_or(|b| t < b.2)
                {
                    best = Some((a, p, t));
                }
            }
        }
        best.expect("ring runs")
    };
    let on_default = on("dgx_h100", "", "");
    let sys = system(&on_default);
    let expected = next(&sys.communicator());
    assert_eq!(sys.choose(AR, bytes, 4).algorithm, NcclAlgorithm::Nvls);
    for nccl in [
        "nvls_enable = 0",
        "algo = \"^nvls\"",
        "algo = \"allreduce:^NVLS\"",
    ] {
        let s = on("dgx_h100", "", nccl);
        let sys = system(&s);
        let choice = sys.choose(AR, bytes, 4);
        assert_ne!(choice.algorithm, NcclAlgorithm::Nvls, "{nccl}");
        let (a, p, t) = expected;
        assert_eq!(
            (NcclAlgorithm::ALL[a], Protocol::ALL[p]),
            (choice.algorithm, choice.protocol),
            "{nccl}"
        );
        assert!(close(choice.predicted_us, t), "{nccl}");
    }
}

#[test]
fn version_2_21_5_has_only_ring_and_tree() {
    let s = scenario(
        "seed = 1\n[topology]\npreset = \"dgx_h100\"\n[[collective]]\nkind = \"allreduce\"\nmin_bytes = 8\nmax_bytes = 8\n",
    );
    let sys = system(&s);
    assert_eq!(sys.version, NcclVersion::V2_21_5);
    assert!(sys.nvls.is_none());
    let table = sys.table(AR, 1 << 30);
    assert!(table[2..].iter().flatten().all(Option::is_none));
    assert!(!sys.describe().contains("NVLS"), "{}", sys.describe());
}

#[test]
fn select_runs_nccl_nvls_when_nccl_picks_it_else_nccls_next_choice() {
    let text = |nccl: &str| {
        format!(
            "seed = 1\n[topology]\npreset = \"dgx_h100\"\nmodel = \"flow\"\n[nccl]\nversion = \"2.29.7\"\n{nccl}\n\
             [[collective]]\nkind = \"allreduce\"\nmin_bytes = \"1G\"\nmax_bytes = \"1G\"\nphantom = true\n"
        )
    };
    let count = (1usize << 30) / 4;
    let registry = Registry::builtin();
    let s = scenario(&text(""));
    let filter = engine::tuning::AlgoFilter::default();
    let pick = engine::study::select(&s, &s.collectives[0], &filter, count);
    assert_eq!(pick.algorithm.name(), "nccl_nvls");
    let choice = pick.nccl.expect("NCCL's choice");
    assert_eq!((choice.algorithm, choice.heads), (NcclAlgorithm::Nvls, 8));
    assert_eq!(
        (pick.params.channels, pick.params.chunk_bytes),
        (16, 131_072)
    );
    // Excluded by NCCL_ALGO, or turned off by NCCL_NVLS_ENABLE: NCCL's
    // next choice, the same either way.
    let not_nvls = engine::tuning::AlgoFilter::parse("^nvls", &registry).unwrap();
    let next = engine::study::select(&s, &s.collectives[0], &not_nvls, count);
    let off = scenario(&text("nvls_enable = 0"));
    let disabled = engine::study::select(&off, &off.collectives[0], &filter, count);
    for pick in [&next, &disabled] {
        let choice = pick.nccl.expect("NCCL's choice");
        assert_ne!(choice.algorithm, NcclAlgorithm::Nvls);
        assert!(pick.algorithm.facts().runs_nccl_channels());
        assert_ne!(pick.algorithm.name(), "nccl_nvls");
    }
    assert_eq!(next.nccl, disabled.nccl);
}

#[test]
fn select_runs_nccl_nvls_tree_across_two_nodes_else_nccls_next_choice() {
    // Two DGX H100-style nodes on a fat-tree without SHARP: NCCL's NVLS
    // tree wins from 4 MiB (NVLS across nodes would need the switches).
    let text = |nccl: &str| {
        format!(
            "seed = 1\n[topology]\npreset = \"fat_tree\"\nnodes = 2\nmodel = \"flow\"\n\
             [nccl]\nversion = \"2.29.7\"\n{nccl}\n\
             [[collective]]\nkind = \"allreduce\"\nmin_bytes = \"16M\"\nmax_bytes = \"16M\"\nphantom = true\n"
        )
    };
    let count = (16usize << 20) / 4;
    let registry = Registry::builtin();
    let s = scenario(&text(""));
    let filter = engine::tuning::AlgoFilter::default();
    let pick = engine::study::select(&s, &s.collectives[0], &filter, count);
    assert_eq!(pick.algorithm.name(), "nccl_nvls_tree");
    let choice = pick.nccl.expect("NCCL's choice");
    assert_eq!(
        (choice.algorithm, choice.protocol, choice.heads),
        (NcclAlgorithm::NvlsTree, S, 8)
    );
    // NCCL's NVLS channels; its NVLS-Tree chunk: 128 KiB
    // (NCCL_NVLS_CHUNKSIZE), down to 64 KiB as 16 MiB < 4 x (16 channels
    // x 8 heads) x 128 KiB (src/enqueue.cc:2179 @b91894bd).
    assert_eq!(
        (pick.params.channels, pick.params.chunk_bytes),
        (16, 65_536)
    );
    // Excluded by NCCL_ALGO, or NVLS turned off: NCCL's next choice, the
    // same either way, and runnable.
    let not_tree = engine::tuning::AlgoFilter::parse("^nvlstree", &registry).unwrap();
    let next = engine::study::select(&s, &s.collectives[0], &not_tree, count);
    let off = scenario(&text("nvls_enable = 0"));
    let disabled = engine::study::select(&off, &off.collectives[0], &filter, count);
    for pick in [&next, &disabled] {
        let choice = pick.nccl.expect("NCCL's choice");
        assert_ne!(choice.algorithm, NcclAlgorithm::NvlsTree);
        assert_ne!(pick.algorithm.name(), "nccl_nvls_tree");
        assert_eq!(
            pick.algorithm.facts().nccl_algorithm(),
            Some(engine::nccl::registry_name(choice.algorithm))
        );
    }
    assert_eq!(next.nccl, disabled.nccl);
}
