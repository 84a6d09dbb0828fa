//! `sim bench-engine`: the engine's own speed, events per second of a
//! phantom allreduce (the one command that reads a wall clock).

use std::io::{self, Write};

use clap::ValueEnum;
use engine::bench::{BENCH_RANKS_PER_NODE, BenchAlgorithm, BenchNetwork, BenchSymmetry};
use engine::scenario::ByteSize;

use crate::exit::ExitStatus;

/// `--network`: the network the benchmark simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NetworkArg {
    /// Ideal per-pair links (1 us latency, 100 GB/s).
    Ideal,
    /// The fat-tree preset (DGX H100 nodes, IB NDR), packet-level model.
    Packet,
    /// The fat-tree preset (DGX H100 nodes, IB NDR), flow-level model.
    Flow,
}

impl From<NetworkArg> for BenchNetwork {
    fn from(a: NetworkArg) -> BenchNetwork {
        match a {
            NetworkArg::Ideal => BenchNetwork::Ideal,
            NetworkArg::Packet => BenchNetwork::Packet,
            NetworkArg::Flow => BenchNetwork::Flow,
        }
    }
}

/// `--algorithm`: the allreduce the benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmArg {
    /// The flat ring over all ranks in order.
    Ring,
    /// Reduce-scatter inside each node of 8 ranks, a ring per rail across
    /// nodes, then allgather inside each node.
    Hierarchical,
}

impl From<AlgorithmArg> for BenchAlgorithm {
    fn from(a: AlgorithmArg) -> BenchAlgorithm {
        match a {
            AlgorithmArg::Ring => BenchAlgorithm::Ring,
            AlgorithmArg::Hierarchical => BenchAlgorithm::Hierarchical,
        }
    }
}

/// `--symmetry`: how the benchmark uses the fat-tree's rotation by one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SymmetryArg {
    /// Every rank simulated, ECMP hashing each flow on its own.
    None,
    /// Every rank simulated, with symmetric routes.
    Routes,
    /// Symmetric routes, and only the first node's ranks simulated.
    Fold,
}

impl From<SymmetryArg> for BenchSymmetry {
    fn from(a: SymmetryArg) -> BenchSymmetry {
        match a {
            SymmetryArg::None => BenchSymmetry::None,
            SymmetryArg::Routes => BenchSymmetry::Routes,
            SymmetryArg::Fold => BenchSymmetry::Fold,
        }
    }
}

/// Runs `sim bench-engine`: `repeat` phantom allreduces, one line each.
pub fn bench_engine(
    ranks: usize,
    bytes: ByteSize,
    chunk: ByteSize,
    repeat: u32,
    (network, algorithm, symmetry): (BenchNetwork, BenchAlgorithm, BenchSymmetry),
) -> io::Result<ExitStatus> {
    if chunk.0 < 4096 {
        crate::report!("error: --chunk must be at least 4K");
        return Ok(ExitStatus::InvalidInput);
    }
    if algorithm == BenchAlgorithm::Hierarchical && !ranks.is_multiple_of(BENCH_RANKS_PER_NODE) {
        crate::report!(
            "error: the hierarchical allreduce needs a multiple of {BENCH_RANKS_PER_NODE} ranks"
        );
        return Ok(ExitStatus::InvalidInput);
    }
    let fold = symmetry == BenchSymmetry::Fold;
    let mut messages = engine::bench::allreduce_messages(algorithm, ranks, bytes.0, chunk.0);
    if fold {
        // A folded run sends the first node's share.
        messages /= (ranks / BENCH_RANKS_PER_NODE.min(ranks)).max(1) as u64;
    }
    if messages > engine::scenario::MESSAGES_PER_POINT_MAX {
        crate::report!(
            "error: {ranks} ranks at {} bytes would send {messages} messages; use fewer ranks or a larger --chunk",
            bytes.0
        );
        return Ok(ExitStatus::InvalidInput);
    }
    let mut out = crate::output::Stdout::new();
    writeln!(
        out,
        "# {} allreduce, phantom float payload, {ranks} ranks, {} bytes, chunk {} bytes, {} network{}",
        algorithm.algorithm().name(),
        bytes.0,
        chunk.0,
        match network {
            BenchNetwork::Ideal => "ideal",
            BenchNetwork::Packet => "fat-tree packet-level",
            BenchNetwork::Flow => "fat-tree flow-level",
        },
        match symmetry {
            BenchSymmetry::None => "",
            BenchSymmetry::Routes => ", symmetric routes",
            BenchSymmetry::Fold => ", folded by one node (symmetric routes)",
        }
    )?;
    writeln!(
        out,
        "{:>4} {:>12} {:>12} {:>14} {:>14}",
        "rep", "wall (s)", "events", "events/s", "simulated (us)"
    )?;
    for rep in 0..repeat {
        let r = engine::bench::bench_network(network, ranks, symmetry).and_then(|config| {
            engine::bench::allreduce_phantom(config, algorithm, ranks, bytes.0, chunk.0, fold)
        });
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                crate::report!("error: {e}");
                return Ok(ExitStatus::InvalidInput);
            }
        };
        writeln!(
            out,
            "{:>4} {:>12.4} {:>12} {:>14.0} {:>14.3}",
            rep,
            r.wall_s,
            r.stats.events,
            r.stats.events as f64 / r.wall_s,
            r.simulated_ps as f64 / 1e6
        )?;
        out.flush()?;
    }
    Ok(ExitStatus::Success)
}
