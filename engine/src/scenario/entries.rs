//! The entries of a scenario's lists, validated: [`CollectiveSpec`] (one
//! `[[collective]]`, with the sizes it runs and which it extrapolates),
//! [`Fault`] (one `[[fault]]` of a rank) and [`Inject`] (one `[[inject]]`
//! programming mistake).

use std::fmt;

use algorithms::{Algorithm, Collective, DType, Rank, ReduceOp, Time};

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
