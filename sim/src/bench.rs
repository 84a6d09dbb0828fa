//! The engine benchmark behind `sim bench-engine`: a phantom ring
//! allreduce, timed in wall-clock time, reporting simulated events per
//! second. This is the only module that reads a wall clock; nothing it
//! measures reaches a simulation result.

use std::time::Instant;

use algorithms::{Algorithm, Collective, DType, Params, Payload, ReduceOp, collective};
use topologies::LinkSpec;

use crate::executor::run;
use crate::network::NetworkConfig;
use crate::world::{EngineStats, WorldConfig};

/// What one benchmark repetition measured.
#[derive(Clone, Copy, Debug)]
pub struct BenchResult {
    /// Wall-clock seconds for the whole simulation.
    pub wall_s: f64,
    /// Virtual time at which the allreduce completed, in picoseconds.
    pub simulated_ps: u64,
    /// Engine counters.
    pub stats: EngineStats,
}

/// Simulates one phantom float-sum ring allreduce of `bytes` on `ranks`
/// ranks (NVLink-like links: 1 us latency, 100 GB/s) and times it.
pub fn ring_allreduce_phantom(ranks: usize, bytes: u64, chunk_bytes: u64) -> BenchResult {
    let config = WorldConfig {
        world_size: ranks,
        network: NetworkConfig::Ideal(
            LinkSpec::new(1_000_000, 100e9).expect("constant link parameters are valid"),
        ),
        trace: false,
        reduce_bytes_per_s: None,
    };
    let count = usize::try_from(bytes / 4).expect("sizes fit in memory");
    #[allow(clippy::disallowed_methods)] // benchmark wall time, never simulation output
    let started = Instant::now();
    let exec = run(config, |fabric| async move {
        let mut buf = Payload::phantom(DType::F32, count);
        let params = Params {
            chunk_bytes,
            ..Params::default()
        };
        collective::run(
            &fabric,
            Collective::Allreduce,
            Algorithm::Ring,
            &mut buf,
            ReduceOp::Sum,
            &params,
        )
        .await
    });
    let wall_s = started.elapsed().as_secs_f64();
    assert!(exec.deadlock.is_none(), "ring allreduce does not deadlock");
    BenchResult {
        wall_s,
        simulated_ps: exec.end_time.as_ps(),
        stats: exec.stats,
    }
}
