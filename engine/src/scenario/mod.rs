//! Scenarios: TOML files that say what to simulate.
//!
//! ```toml
//! name = "ring_8"
//! world_size = 8                # ranks
//! seed = 42                     # one seed for the whole run (inputs, losses,
//!                               # ECMP routes); default 0, said in the header
//! timeout_ms = 600000           # optional collective watchdog, virtual ms
//!
//! [links]                       # ideal model: one full-duplex link per rank pair
//! latency_us = 1.5              # alpha
//! bandwidth_gb_per_s = 25.0     # per direction, 1 GB = 1e9 bytes
//!
//! [compute]                     # optional; without it reductions are free
//! reduce_gb_per_s = 200.0
//!
//! [[collective]]                # one or more
//! kind = "allreduce"
//! algorithm = "ring"            # default "ring"
//! min_bytes = 8                 # nccl-tests -b
//! max_bytes = "128M"            # nccl-tests -e
//! step_factor = 2               # nccl-tests -f, default 2
//! dtype = "float"               # float double int32 int64 uint8 (default float)
//! op = "sum"                    # sum prod min max avg (default sum)
//! iters = 20                    # timed iterations (default 20)
//! warmup = 5                    # untimed iterations first (default 5)
//! chunk_bytes = "512K"          # pipeline chunk (default 512K)
//! slots = 8                     # chunks in flight per connection (default 8, NCCL_STEPS)
//! phantom = false               # size-only payloads: nothing allocated, no check
//! check = true                  # count wrong elements against a reference
//! extrapolate_above = "1G"      # optional: sizes above it drawn on the line through
//!                               # simulated runs at half of it and at it (steady state)
//!
//! [[fault]]                     # optional scheduled faults of ranks
//! kind = "straggler"            # reaches every call late and/or reduces slowly
//! rank = 3
//! delay_us = 50                 # straggler: how late it starts each call
//! compute_slowdown = 4.0        # straggler: its reductions take 4x longer
//! # kind = "crash"; rank = 5; at_us = 20   (its program stops at 20 us)
//!
//! [[link_fault]]                # optional, topology scenarios: faults of the links
//! kind = "down"                 # between two vertices: "down", "degraded"
//! from = "leaf0"                # (bandwidth_factor = 0.25), "flapping"
//! to = "spine1"                 # (period_us, down_us, until_us required) or "lossy"
//! at_us = 100                   # (loss_rate and/or corruption_rate in [0, 1];
//!                               # network links, packet model only)
//! until_us = 300                # optional for down/degraded/lossy: back to normal then
//! both_directions = true        # default true
//!
//! [rdma]                        # optional, topology scenarios: the RDMA transport
//! ib_timeout = 18               # (InfiniBand, RoCE) NCCL_IB_TIMEOUT, 1..=31:
//!                               # timeout 4.096 us x 2^18
//! ib_retry_cnt = 7              # NCCL_IB_RETRY_CNT, 0..=7
//!
//! [tcp]                         # optional, topology scenarios: the TCP-like transport
//! rto_min_ms = 200              # (plain Ethernet) tcp_rto_min_us in ms, >= 0.001
//! rto_max_ms = 120000           # tcp_rto_max_ms, 1000..=120000
//! retries2 = 15                 # tcp_retries2, 0..=255: timeouts before giving up
//!
//! [pfc]                         # optional, topology scenarios: RoCE pause thresholds
//! xoff_bytes = "64K"            # per ingress port; each defaults per link
//! xon_bytes = "32K"             # below xoff_bytes
//! headroom_bytes = "16K"        # above xoff_bytes, for what is in flight
//!
//! [[inject]]                    # optional programming mistakes, for deadlock studies
//! kind = "extra_recv"           # rank posts a receive from `from` that nobody sends;
//!                               # or "skip" (never calls the collectives), "count_mismatch"
//!                               # (one element more than the others), "corrupt_result"
//!                               # (first element of its result off by one)
//! rank = 3
//! from = 5
//!
//! [sweep]                       # optional: axes for `sim sweep` (see crate::sweep);
//! world_size = [8, 16, 32]      # `sim run` runs the file as written without them
//! ```
//!
//! Every problem is reported as a [`ScenarioError`] naming the file, line
//! and column; nothing in a scenario can make the program panic.
//!
//! This file holds [`Scenario`] and the limits every scenario is checked
//! against; `entries.rs` the validated list entries ([`CollectiveSpec`],
//! [`Fault`], [`Inject`]), `error.rs` [`ScenarioError`] and [`read_file`],
//! `validate/` the checks that build a [`Scenario`] from the file.

mod entries;
mod error;
mod extrapolate;
mod fold_check;
mod link_faults;
mod links;
mod nccl;
mod raw;
pub mod size;
pub mod time_scale;
mod topology;
mod transport;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

use algorithms::Registry;
use topologies::LinkSpec;

use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::NetworkConfig;

pub use entries::{CollectiveSpec, Fault, Inject};
pub use error::{ScenarioError, read_file};
pub use nccl::TunerModel;
pub use size::ByteSize;
pub use time_scale::TimeValue;
pub use validate::{DEFAULT_SEED, Expect, Source};

/// The largest world a scenario may ask for (keeps a typo from exhausting
/// memory).
pub const WORLD_SIZE_MAX: usize = 1 << 20;

/// The most memory real-data payloads may need (inputs and working buffers
/// of every rank plus the reference, at the largest size); beyond it a
/// scenario must use phantom payloads. Leaves headroom on a 24 GiB machine.
pub const REAL_DATA_BYTES_MAX: u64 = 8 << 30;

/// The most messages one size of one collective may send, over all ranks
/// and all warm-up and timed calls: several minutes of simulation at a few
/// million events per second. Beyond it the world size, chunk size or
/// iteration count is almost certainly a mistake.
pub const MESSAGES_PER_POINT_MAX: u64 = 1 << 30;

/// The most chunks `chunk_bytes` may cut the largest buffer into: pipelined
/// algorithms hold per-chunk state (the tree's schedule), so a one-byte
/// chunk on a large buffer would exhaust memory.
pub const CHUNKS_PER_BUFFER_MAX: u64 = 1 << 20;

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Where it was read from.
    pub path: PathBuf,
    /// A name for reports (the file stem unless given).
    pub name: String,
    /// The seed of the run's random number generator.
    pub seed: u64,
    /// Whether the file gave the seed ([`DEFAULT_SEED`] otherwise; the
    /// report header says so, since the seed also picks ECMP routes).
    pub seed_given: bool,
    /// Number of ranks.
    pub world_size: usize,
    /// The network: ideal links or a topology model.
    pub network: NetworkConfig,
    /// One line describing the network, for the report header.
    pub network_description: String,
    /// One line per `[[link_fault]]`, for the report header.
    pub link_fault_notes: Vec<String>,
    /// One line for each of `[rdma]`, `[pfc]` and `[tcp]` given, for the
    /// report header (the transport and PFC settings a run uses).
    pub network_notes: Vec<String>,
    /// The alpha-beta link the tuner assumes: the ideal link, or on a
    /// topology the slowest route between ring neighbours.
    pub tuner_link: LinkSpec,
    /// The collective watchdog: a call not finished on every rank this
    /// long (virtual ps) after it started fails with a timeout report.
    pub call_timeout_ps: Option<u64>,
    /// Reduction throughput per rank in bytes per second (`None`: free);
    /// a calibration's float rate (see [`Scenario::reduce_bytes_per_s_of`]).
    pub reduce_bytes_per_s: Option<f64>,
    /// `[calibration]`: the file its links and compute come from.
    pub calibration: Option<LoadedCalibration>,
    /// The collectives to run, in order.
    pub collectives: Vec<CollectiveSpec>,
    /// Programming mistakes injected into the rank programs.
    pub injects: Vec<Inject>,
    /// Scheduled faults of ranks.
    pub faults: Vec<Fault>,
    /// Whether `sim run` also runs every point without the link faults
    /// and shows how much they cost.
    pub compare_without_link_faults: bool,
    /// Whether the file has a `[sweep]` table, which `sim run` ignores
    /// (`sim sweep` runs it).
    pub has_sweep: bool,
    /// The other files it reads (an `nvidia-smi topo -m` file named by
    /// `[topology] file`), so that no output may overwrite them.
    pub input_files: Vec<PathBuf>,
    /// `[topology] symmetry = "fold"`: runs simulate only ranks
    /// `0..shift`, one per orbit of the preset's rotation (see
    /// [`crate::fold`]).
    pub fold: Option<usize>,
    /// `[topology] symmetry = "fold"` of NCCL's channels (`nccl_tree` on a
    /// `fat_tree`): runs simulate one representative per orbit of the turn
    /// of every node's GPUs by a quarter of a node (where NCCL's channels
    /// fit it) or by half, the channels turning with them (see
    /// [`crate::fold`]); `fold` is then `None`.
    pub fold_turn: Option<crate::fold::RankAction>,
    /// The algorithms its names were resolved in, and the tuner chooses
    /// among.
    pub registry: Registry,
    /// What picks the algorithm of a collective that names none.
    pub tuner: TunerModel,
    /// The NCCL model's settings (on a topology).
    pub nccl: Option<NcclConfig>,
    /// NCCL on the machine, per collective rank count (on a topology, not
    /// folded by a shift).
    pub nccl_systems: std::collections::BTreeMap<usize, std::sync::Arc<NcclSystem>>,
    /// The value of the file that makes the run's steps longest (a rate
    /// or a delay, see [`time_scale`]): what a run that passes the end of
    /// virtual time names.
    pub slowest_value: Option<TimeValue>,
}

/// A calibration file a scenario read.
#[derive(Clone, Debug)]
pub struct LoadedCalibration {
    /// Where it was read from (relative to the scenario's directory).
    pub path: PathBuf,
    /// Its contents.
    pub calibration: crate::calibration::Calibration,
}

impl Scenario {
    /// The reduction rate of `dtype`: a calibration's rate for that type
    /// where it measured one, else [`Scenario::reduce_bytes_per_s`].
    pub fn reduce_bytes_per_s_of(&self, dtype: algorithms::DType) -> Option<f64> {
        self.calibration
            .as_ref()
            .and_then(|c| c.calibration.reduce_bytes_per_s(dtype))
            .or(self.reduce_bytes_per_s)
    }

    /// NCCL on the machine for a collective on `ranks` ranks, if the
    /// scenario has the NCCL model.
    pub fn nccl_system(&self, ranks: usize) -> Option<&std::sync::Arc<NcclSystem>> {
        self.nccl_systems.get(&ranks)
    }

    /// What picks the algorithms of collectives that name none, for the
    /// report header: NCCL's model on this machine, or the alpha-beta
    /// tuner.
    pub fn tuner_note(&self) -> String {
        match (self.tuner, self.nccl_system(self.world_size)) {
            (TunerModel::Nccl, Some(system)) => {
                format!("tuner (algorithm = auto): {}", system.describe())
            }
            _ => "tuner (algorithm = auto): alpha-beta, each algorithm's closed-form cost on the tuner link"
                .to_string(),
        }
    }

    /// The same scenario with NCCL's settings changed by `change` (for
    /// NCCL's environment variables), its NCCL systems rebuilt.
    pub fn with_nccl(
        mut self,
        change: impl FnOnce(&mut NcclConfig) -> Result<(), String>,
    ) -> Result<Scenario, String> {
        let Some(config) = &mut self.nccl else {
            return Ok(self);
        };
        change(config)?;
        let sizes: Vec<usize> = self.nccl_systems.keys().copied().collect();
        self.nccl_systems = nccl::systems(&self.network, config, sizes);
        Ok(self)
    }

    /// Why a run of this scenario passed the end of virtual time at `at`
    /// ("allreduce at 8 bytes"), naming the value that makes its steps
    /// longest at its line and column when the file has one.
    pub fn out_of_time_message(&self, at: &str) -> String {
        let end = "virtual time passed its end (2^64 ps, about 213 days)";
        match &self.slowest_value {
            Some(v) => format!(
                "{}: {end} at {at}; `{}` here is the value that makes the run's steps \
                 longest ({} takes {}): make it realistic for this size",
                v.location(&self.path),
                v.assignment(),
                v.step,
                v.duration()
            ),
            None => format!(
                "{}: {end} at {at}; the link bandwidth, latency or reduction rate is \
                 unrealistic for this size",
                self.path.display()
            ),
        }
    }

    /// The same scenario without its link faults (the healthy network).
    pub fn without_link_faults(&self) -> Scenario {
        let mut s = self.clone();
        if let NetworkConfig::Topology(t) = &mut s.network {
            t.changes = std::sync::Arc::new([]);
        }
        s.link_fault_notes.clear();
        s.compare_without_link_faults = false;
        s
    }
}

impl Scenario {
    /// Reads and validates the scenario at `path` ([`read_file`]), its
    /// algorithm names resolved in `registry`.
    pub fn load(path: &Path, registry: &Registry) -> Result<Scenario, ScenarioError> {
        let text = read_file(path)?;
        Scenario::parse(path, &text, registry)
    }

    /// Parses and validates scenario `text`, reporting errors against
    /// `path`; algorithm names are resolved in `registry`.
    pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<Scenario, ScenarioError> {
        validate::parse(path, text, registry, Expect::Study)
    }

    /// Parses and validates scenario `text` as [`Scenario::parse`] does,
    /// but `[[collective]]` entries are optional: a world (links or a
    /// topology, seed, faults) for the library's [`Simulation`](crate::Simulation).
    pub fn parse_world(
        path: &Path,
        text: &str,
        registry: &Registry,
    ) -> Result<Scenario, ScenarioError> {
        validate::parse(path, text, registry, Expect::World)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = if self.seed_given {
            ""
        } else {
            " (the default: the file gives no seed)"
        };
        write!(
            f,
            "{}: {} ranks, seed {}{default}, {}",
            self.name, self.world_size, self.seed, self.network_description
        )
    }
}
