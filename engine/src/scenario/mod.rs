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

use algorithms::{Algorithm, Collective, DType, Rank, ReduceOp, Registry, Time};
use topologies::LinkSpec;

use crate::nccl::{NcclConfig, NcclSystem};
use crate::network::NetworkConfig;

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

/// A scheduled fault of one rank (`[[fault]]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// A slow rank: it reaches every call `delay_ps` after the others, and
    /// its reductions take `compute_slowdown` times longer.
    Straggler {
        /// The rank.
        rank: Rank,
        /// How late it starts each call, in ps.
        delay_ps: u64,
        /// How many times slower it reduces (1 = normal).
        compute_slowdown: f64,
    },
    /// The rank's program stops at virtual time `at` (its process died):
    /// it sends nothing more; what it sent still arrives.
    Crash {
        /// The rank.
        rank: Rank,
        /// When, from the start of each point's run.
        at: Time,
    },
}

/// One `[[collective]]` entry: a collective run over a range of sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveSpec {
    /// Which collective.
    pub kind: Collective,
    /// Which algorithm implements it; `None` lets the tuner choose per size.
    pub algorithm: Option<Algorithm>,
    /// Number of ranks (the scenario's `world_size` unless overridden).
    pub world_size: usize,
    /// Root of rooted collectives.
    pub root: Rank,
    /// Ranks per node, for hierarchical algorithms.
    pub ranks_per_node: usize,
    /// Smallest message size in bytes.
    pub min_bytes: u64,
    /// Largest message size in bytes.
    pub max_bytes: u64,
    /// Each size is the previous one times this.
    pub step_factor: u64,
    /// Element type.
    pub dtype: DType,
    /// Reduction operator.
    pub op: ReduceOp,
    /// Timed iterations per size.
    pub iters: u32,
    /// Untimed iterations before them.
    pub warmup: u32,
    /// Pipeline chunk size in bytes.
    pub chunk_bytes: u64,
    /// Pipeline depth in chunks (NCCL's `NCCL_STEPS`).
    pub slots: usize,
    /// Size-only payloads.
    pub phantom: bool,
    /// Whether to check results against a reference.
    pub check: bool,
    /// Sizes above this are not simulated but extrapolated (see
    /// [`CollectiveSpec::extrapolation_bases`]).
    pub extrapolate_above: Option<u64>,
}

impl CollectiveSpec {
    /// One line describing the entry, as `sim run` prints it above its rows
    /// (without the payload kind, which only the simulator varies).
    pub fn describe(&self) -> String {
        let c = self;
        let algorithm = c.algorithm.as_ref().map_or("auto (tuner)", |a| a.name());
        let root = if c.kind.has_root() {
            format!(", root {}", c.root)
        } else {
            String::new()
        };
        let data = if c.kind.reduces() {
            format!("{} {}", c.dtype, c.op)
        } else {
            c.dtype.to_string()
        };
        format!(
            "{} on {} ranks, {data}{root}, {}..{} bytes x{}, algorithm {algorithm}, chunk {} bytes, {} slots, {} warm-up + {} timed iterations",
            c.kind,
            c.world_size,
            c.min_bytes,
            c.max_bytes,
            c.step_factor,
            c.chunk_bytes,
            c.slots,
            c.warmup,
            c.iters,
        ) + &c
            .extrapolation_bases()
            .filter(|_| c.sizes().iter().any(|&s| c.extrapolates(s)))
            .map_or_else(String::new, |(low, high)| {
                format!(
                    ", sizes above {} B extrapolated from {low} B and {high} B",
                    c.extrapolate_above.unwrap_or(high)
                )
            })
    }

    /// The sizes in bytes to run, nccl-tests style: `min, min*f, ...` up to
    /// `max`, each rounded down to whole elements (for alltoall, to whole
    /// elements per rank). A zero minimum yields one empty run, then
    /// continues from one element. A barrier moves no data: one size, 0.
    pub fn sizes(&self) -> Vec<u64> {
        algorithms::collective::sweep_sizes(
            self.kind,
            self.dtype,
            self.world_size,
            self.min_bytes,
            self.max_bytes,
            self.step_factor,
        )
    }

    /// The granularity of this entry's sizes: an element, or for
    /// alltoall an element per rank (as [`Self::sizes`] rounds them).
    pub fn size_unit(&self) -> u64 {
        let elem = self.dtype.size_bytes() as u64;
        if self.kind == Collective::Alltoall {
            elem * self.world_size as u64
        } else {
            elem
        }
    }

    /// With `extrapolate_above = T`: the two sizes whose simulated runs
    /// the larger sizes are drawn from, half of `T` and `T` (each rounded
    /// down to [`Self::size_unit`]); `None` without it.
    pub fn extrapolation_bases(&self) -> Option<(u64, u64)> {
        let above = self.extrapolate_above?;
        let unit = self.size_unit().max(1);
        Some((above / 2 / unit * unit, above / unit * unit))
    }

    /// Whether `size` is extrapolated rather than simulated.
    pub fn extrapolates(&self, size: u64) -> bool {
        self.extrapolate_above.is_some_and(|above| size > above)
    }

    /// The sizes a run of this entry simulates: every size not
    /// extrapolated, then the extrapolation's bases if some size is.
    pub fn simulated_sizes(&self) -> Vec<u64> {
        let sizes = self.sizes();
        let mut simulated: Vec<u64> = sizes
            .iter()
            .copied()
            .filter(|&s| !self.extrapolates(s))
            .collect();
        if let Some((low, high)) = self.extrapolation_bases()
            && sizes.iter().any(|&s| self.extrapolates(s))
        {
            simulated.extend([low, high]);
            simulated.sort_unstable();
            simulated.dedup();
        }
        simulated
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::Straggler {
                rank,
                delay_ps,
                compute_slowdown,
            } => write!(
                f,
                "rank {rank} is a straggler: {} late to every call, reductions {compute_slowdown}x slower",
                Time(delay_ps)
            ),
            Fault::Crash { rank, at } => write!(f, "rank {rank} crashes at {at}"),
        }
    }
}

/// A programming mistake injected into one rank's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// At the start of its first call, `rank` posts a receive from `from`
    /// that no rank ever sends.
    ExtraRecv {
        /// The rank that makes the mistake.
        rank: Rank,
        /// The rank it waits for.
        from: Rank,
    },
    /// `rank` never calls the collectives.
    Skip {
        /// The rank that skips.
        rank: Rank,
    },
    /// `rank` calls the collectives with one element more than the other
    /// ranks (ranks that disagree on the size).
    CountMismatch {
        /// The rank that disagrees.
        rank: Rank,
    },
    /// After its last call, `rank` adds 1 to the first element of its
    /// result (silent data corruption); the check must catch it.
    CorruptResult {
        /// The rank whose result is corrupted.
        rank: Rank,
    },
}

/// A scenario that cannot be read or is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: cannot read scenario: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is not valid at a place in it.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
}

impl ScenarioError {
    /// An error at `line`:`column` of `path`; long values quoted in
    /// `message` are shortened ([`inputs::shorten_quoted`]), so a 2 MB
    /// string is not echoed whole.
    pub fn at(path: &Path, line: usize, column: usize, message: &str) -> ScenarioError {
        ScenarioError::Invalid {
            path: path.display().to_string(),
            line,
            column,
            message: inputs::shorten_quoted(message).into_owned(),
        }
    }
}

impl From<inputs::InputError> for ScenarioError {
    /// Text that is not UTF-8 is located at its first bad byte; a file
    /// that cannot or may not be read (missing, a device, a FIFO, over
    /// the cap) says why.
    fn from(e: inputs::InputError) -> ScenarioError {
        match e.line_column() {
            Some((line, column)) => ScenarioError::Invalid {
                path: e.path().to_string(),
                line,
                column,
                message: e.reason(),
            },
            None => ScenarioError::Read {
                path: e.path().to_string(),
                reason: e.reason(),
            },
        }
    }
}

/// Reads the scenario, sweep or check file at `path` through the bounded
/// reader ([`inputs::kind::SCENARIO`]: a regular file of at most 8 MiB,
/// UTF-8 text).
pub fn read_file(path: &Path) -> Result<String, ScenarioError> {
    Ok(inputs::read_text(path, &inputs::kind::SCENARIO)?)
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
