//! What NCCL's topology detection ([`Machine::detect`]) sees on the newer
//! presets: an NVL72 rack is one NVLink domain, so one node of 72 GPUs
//! (NCCL's MNNVL clique, `src/init.cc:1176-1188` @ b91894bd); racks joined
//! by a network are one node each; NVLink 5 implies Blackwell (compute
//! capability 10.0); every NIC of a node counts, two per GPU included.

use std::path::Path;

use algorithms::Registry;
use engine::nccl::machine::Machine;
use engine::scenario::Scenario;
use topologies::Topology;
use topologies::presets::{self, CpuCluster, DgxNode, NodeStyle, Nvl72Cluster, RackStyle};

fn detect(t: &Topology) -> Machine {
    Machine::detect(t, &t.endpoints(), None)
}

#[test]
fn an_nvl72_rack_is_one_blackwell_node_of_72_gpus() {
    for style in [RackStyle::Gb200, RackStyle::Gb300] {
        let m = detect(&presets::nvl72_rack(style).unwrap());
        assert_eq!(m.node_count(), 1, "{style:?}");
        assert_eq!(m.nodes[0].ranks.len(), 72);
        assert_eq!(m.nodes[0].nics.len(), 72);
        assert_eq!(m.compute_capability, 100);
        assert!(m.has_nvlink);
    }
}

#[test]
fn racks_joined_by_a_network_are_one_node_each() {
    let t = presets::nvl72_cluster(&Nvl72Cluster::default()).unwrap();
    let m = detect(&t);
    assert_eq!(m.node_count(), 2);
    assert_eq!(m.ranks_per_node(), 72);
    // Rack-major ranks: rank 72 opens the second node.
    assert_eq!(m.node_of[71], 0);
    assert_eq!(m.node_of[72], 1);
    assert_eq!(m.nodes[1].nics.len(), 72);
    assert_eq!(m.compute_capability, 100);
}

#[test]
fn hgx_boards_imply_their_architecture_and_count_every_nic() {
    let board = |style, nics_per_gpu| {
        presets::dgx_node(&DgxNode {
            style,
            gpus: 8,
            nics_per_gpu,
        })
        .unwrap()
    };
    let m = detect(&board(NodeStyle::B300, 2));
    assert_eq!((m.node_count(), m.nodes[0].nics.len()), (1, 16));
    assert_eq!(m.compute_capability, 100);
    assert_eq!(detect(&board(NodeStyle::B200, 1)).compute_capability, 100);
    assert_eq!(detect(&board(NodeStyle::H200, 1)).compute_capability, 90);
    assert_eq!(detect(&board(NodeStyle::H20, 1)).compute_capability, 90);
}

#[test]
fn cpu_hosts_are_one_node_each_with_all_their_cores() {
    let t = presets::cpu_cluster(&CpuCluster {
        hosts: 3,
        cores_per_socket: Some(18),
        ..CpuCluster::default()
    })
    .unwrap();
    let m = detect(&t);
    assert_eq!(m.node_count(), 3);
    assert_eq!(m.ranks_per_node(), 36);
    assert!(!m.has_nvlink);
}

#[test]
fn the_nccl_model_builds_on_a_two_rack_cluster() {
    let text = "[topology]\npreset = \"nvl72_cluster\"\nracks = 2\nmodel = \"flow\"\n\
                [[collective]]\nkind = \"allreduce\"\nmin_bytes = \"1M\"\nmax_bytes = \"1M\"\n\
                iters = 1\nwarmup = 0\n";
    let s = Scenario::parse(Path::new("nvl72.toml"), text, &Registry::builtin())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.world_size, 144);
    let system = s.nccl_system(144).expect("a topology has the NCCL model");
    assert!(system.channels >= 1);
}
