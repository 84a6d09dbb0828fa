//! The engine does not allocate per message or event: a phantom allreduce
//! with eight times the bytes (several times the messages) makes no more
//! heap allocations than the smaller one, in every network model, unfolded
//! and folded by one node (`engine::fold`), and over plain Ethernet (the
//! TCP-like transport's ACKs and congestion windows).
//!
//! Its own test binary, because `allocation_counter` replaces the global
//! allocator (with one that counts the calling thread's allocations).

use engine::bench::{
    BenchAlgorithm, BenchNetwork, BenchSymmetry, allreduce_phantom, bench_network,
};

/// Allocations and messages of one phantom allreduce of `bytes` in 4 KiB
/// chunks on 16 ranks.
fn measure(
    (network, symmetry): (BenchNetwork, BenchSymmetry),
    algorithm: BenchAlgorithm,
    bytes: u64,
) -> (u64, u64) {
    let config = bench_network(network, 16, symmetry).expect("the bench network builds");
    let fold = symmetry == BenchSymmetry::Fold;
    let mut messages = 0;
    let info = allocation_counter::measure(|| {
        messages = allreduce_phantom(config, algorithm, 16, bytes, 4096, fold)
            .expect("the allreduce completes")
            .stats
            .links
            .messages;
    });
    (info.count_total, messages)
}

/// Eight times the bytes in the same 4 KiB chunks is several times the
/// messages; the allocations may grow only by the few
/// doublings of tables that hold more messages at once.
fn allocations_do_not_grow_with_messages(network: BenchNetwork, algorithm: BenchAlgorithm) {
    for symmetry in [BenchSymmetry::None, BenchSymmetry::Fold] {
        grows_by_tables_only((network, symmetry), algorithm);
    }
}

/// One setting of [`allocations_do_not_grow_with_messages`]: unfolded, or
/// folded by one node (its route maps are built once per flow).
fn grows_by_tables_only(network: (BenchNetwork, BenchSymmetry), algorithm: BenchAlgorithm) {
    // A first run warms up what is built once per process.
    measure(network, algorithm, 1 << 20);
    let (small_allocs, small_messages) = measure(network, algorithm, 1 << 20);
    let (large_allocs, large_messages) = measure(network, algorithm, 8 << 20);
    assert!(
        large_messages >= 4 * small_messages,
        "{network:?} {algorithm:?}: {small_messages} -> {large_messages} messages"
    );
    let grown = large_allocs.saturating_sub(small_allocs);
    eprintln!(
        "{network:?} {algorithm:?}: {small_allocs} -> {large_allocs} allocations, \
         {small_messages} -> {large_messages} messages"
    );
    assert!(
        grown * 20 < large_messages - small_messages,
        "{network:?} {algorithm:?}: {small_allocs} -> {large_allocs} allocations for \
         {small_messages} -> {large_messages} messages"
    );
}

#[test]
fn ideal_links_do_not_allocate_per_event() {
    allocations_do_not_grow_with_messages(BenchNetwork::Ideal, BenchAlgorithm::Ring);
}

#[test]
fn packet_model_does_not_allocate_per_event() {
    allocations_do_not_grow_with_messages(BenchNetwork::Packet, BenchAlgorithm::Ring);
    allocations_do_not_grow_with_messages(BenchNetwork::Packet, BenchAlgorithm::Hierarchical);
}

#[test]
fn flow_model_does_not_allocate_per_event() {
    allocations_do_not_grow_with_messages(BenchNetwork::Flow, BenchAlgorithm::Ring);
    allocations_do_not_grow_with_messages(BenchNetwork::Flow, BenchAlgorithm::Hierarchical);
}

/// Allocations and messages of one phantom ring allreduce of `bytes` in
/// 4 KiB chunks on 16 ranks of a two-node fat-tree whose NICs and
/// switches are plain 400 GbE: every inter-node flow runs the TCP-like
/// transport (ACK events, congestion windows, flows parked for ACKs).
fn measure_ethernet(bytes: u64) -> (u64, u64) {
    let params = topologies::presets::FatTree {
        nodes: 2,
        nic: topologies::LinkKind::parse("ethernet400"),
        ..topologies::presets::FatTree::default()
    };
    let topology = std::sync::Arc::new(topologies::presets::fat_tree(&params).unwrap());
    let placement: std::sync::Arc<[_]> = topology.endpoints()[..16].into();
    let config = engine::network::NetworkConfig::Topology(engine::network::TopologyConfig::new(
        topology,
        placement,
        engine::network::ModelLevel::Packet,
        1,
    ));
    let mut messages = 0;
    let info = allocation_counter::measure(|| {
        messages = allreduce_phantom(config, BenchAlgorithm::Ring, 16, bytes, 4096, false)
            .expect("the allreduce completes")
            .stats
            .links
            .messages;
    });
    (info.count_total, messages)
}

#[test]
fn plain_ethernets_tcp_transport_does_not_allocate_per_event() {
    measure_ethernet(1 << 20);
    let (small_allocs, small_messages) = measure_ethernet(1 << 20);
    let (large_allocs, large_messages) = measure_ethernet(8 << 20);
    assert!(large_messages >= 4 * small_messages);
    let grown = large_allocs.saturating_sub(small_allocs);
    eprintln!(
        "Ethernet Ring: {small_allocs} -> {large_allocs} allocations, \
         {small_messages} -> {large_messages} messages"
    );
    assert!(
        grown * 20 < large_messages - small_messages,
        "{small_allocs} -> {large_allocs} allocations for {small_messages} -> {large_messages} \
         messages"
    );
}
