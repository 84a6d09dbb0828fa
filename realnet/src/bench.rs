//! [`run_bench`]: the nccl-tests experience on any [`Endpoint`].
//!
//! For each size from `min_bytes` to `max_bytes` (times `step_factor`
//! each step) every rank runs `warmup` untimed calls of the collective, a
//! barrier, then `iters` timed calls back to back on the same buffer (as
//! nccl-tests' in-place mode does; the data drifts, the speed does not).
//! A rank's time per call is its elapsed time over the timed calls divided
//! by `iters`; the row's time is the largest over the ranks. Each rank
//! also times every call on its own (from the end of the one before) and
//! keeps the median: one call descheduled by the operating system for a
//! time slice (milliseconds on a shared host) moves the mean of a few
//! microsecond calls many times over, and the median not at all; the row's
//! [`BenchRow::median_time_ps`] is the largest of the ranks' medians (with
//! [`BenchOptions::time_each_call`]). With `check`,
//! one more call on a fresh copy of the input is checked against the exact
//! result ([`check`]); `#wrong` sums the wrong elements over the ranks.
//! The per-rank times and counts travel through the fabric itself, in an
//! allgather of their own.
//!
//! Every call (warm-up, barrier, timed, checked, statistics) gets its own
//! [`CallId`], numbered from the `first_seq` the caller gives, so that the
//! fabric can tell calls apart and catch ranks running different ones.
//!
//! `algbw = size / time` and `busbw = algbw x` the collective's bus factor
//! ([`Collective::busbw_factor`]), in GB/s (1 GB = 1e9 bytes), as in
//! nccl-tests and the simulator's table.

pub mod check;

use std::fmt;
use std::pin::pin;
use std::time::Instant;

use algorithms::layout::block_range;
use algorithms::tuner;
use algorithms::{
    Algorithm, Collective, CollectiveError, CostModel, DType, Params, Payload, Rank, ReduceOp, Tag,
    catalogue_algorithm,
};

use crate::call::CallId;
use crate::endpoint::Endpoint;

/// How each size's algorithm is picked.
#[derive(Clone, Debug, PartialEq)]
pub enum AlgorithmChoice {
    /// Always this one, with the options' chunk size.
    Fixed(Algorithm),
    /// The tuner's choice (algorithm and chunk size) under `model`, among
    /// `allowed`, else among `fallback` (when no allowed algorithm's cost
    /// fits), as the simulator's tuner picks.
    Tuned {
        /// The alpha-beta-gamma model the tuner assumes.
        model: CostModel,
        /// The algorithms it may pick, in tie-breaking order.
        allowed: Vec<Algorithm>,
        /// Every algorithm of the collective, in registry order.
        fallback: Vec<Algorithm>,
    },
}

/// What to benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    /// The collective.
    pub collective: Collective,
    /// Its algorithm, or the tuner.
    pub algorithm: AlgorithmChoice,
    /// The reduction (for collectives that reduce).
    pub op: ReduceOp,
    /// The element type.
    pub dtype: DType,
    /// The smallest size in bytes (nccl-tests `-b`).
    pub min_bytes: u64,
    /// The largest size in bytes (`-e`).
    pub max_bytes: u64,
    /// Each size is the previous one times this (`-f`), at least 2.
    pub step_factor: u64,
    /// Timed calls per size (`-n`), at least 1.
    pub iters: u32,
    /// Untimed calls before them (`-w`).
    pub warmup: u32,
    /// Whether to check results (`-c`).
    pub check: bool,
    /// Whether to time each call on its own for [`BenchRow::median_time_ps`]
    /// (a clock read per call, which a latency benchmark of sub-microsecond
    /// calls would rather not time; without it the median is 0).
    pub time_each_call: bool,
    /// Chunk size (for a fixed algorithm), slots, root and ranks per node;
    /// the tag is set per call.
    pub params: Params,
}

impl Default for BenchOptions {
    /// nccl-tests' defaults: a float sum allreduce of 32 MiB, 5 warm-ups,
    /// 20 timed calls, checked; the ring.
    fn default() -> Self {
        BenchOptions {
            collective: Collective::Allreduce,
            algorithm: AlgorithmChoice::Fixed(catalogue_algorithm(Collective::Allreduce, "ring")),
            op: ReduceOp::Sum,
            dtype: DType::F32,
            min_bytes: 32 << 20,
            max_bytes: 32 << 20,
            step_factor: 2,
            iters: 20,
            warmup: 5,
            check: true,
            time_each_call: false,
            params: Params::default(),
        }
    }
}

impl BenchOptions {
    /// Why these options cannot run on `world_size` ranks, if they cannot.
    pub fn validate(&self, world_size: usize) -> Result<(), String> {
        if let AlgorithmChoice::Fixed(a) = &self.algorithm
            && a.collective() != self.collective
        {
            return Err(format!(
                "algorithm `{a}` implements {}, not {}",
                a.collective(),
                self.collective
            ));
        }
        if self.dtype == DType::Sym {
            return Err(
                "dtype `sym` is for in-process checkers: a real fabric cannot carry symbols".into(),
            );
        }
        if self.collective.reduces() && !self.op.supports(self.dtype) {
            return Err(format!(
                "reduction `{}` is not defined for dtype `{}`",
                self.op, self.dtype
            ));
        }
        if self.collective.has_root() && self.params.root >= world_size {
            return Err(format!(
                "root {} is not a rank of a job of {world_size}",
                self.params.root
            ));
        }
        if self.min_bytes > self.max_bytes {
            return Err(format!(
                "the smallest size ({} B) is above the largest ({} B)",
                self.min_bytes, self.max_bytes
            ));
        }
        if self.max_bytes > isize::MAX as u64 {
            return Err(format!(
                "the largest size ({} B) exceeds the addressable memory: no buffer can hold it",
                self.max_bytes
            ));
        }
        if self.step_factor < 2 {
            return Err(format!(
                "the step factor must be at least 2, got {}",
                self.step_factor
            ));
        }
        if self.iters == 0 {
            return Err("at least one timed iteration is needed".into());
        }
        if self.params.chunk_bytes == 0 || self.params.slots == 0 {
            return Err("the chunk size and slots must be positive".into());
        }
        Ok(())
    }

    /// The sizes in bytes to run on `world_size` ranks, as `sim run` runs
    /// a scenario's: `min, min*f, ...` up to `max`, rounded down to whole
    /// elements (for alltoall, whole elements per rank); a zero minimum
    /// gives one empty run first; a barrier moves no data: one size, 0.
    pub fn sizes(&self, world_size: usize) -> Vec<u64> {
        algorithms::collective::sweep_sizes(
            self.collective,
            self.dtype,
            world_size,
            self.min_bytes,
            self.max_bytes,
            self.step_factor,
        )
    }

    /// The algorithm and parameters for `count` elements on `n` ranks, and
    /// whether the tuner chose them.
    pub fn select(&self, n: usize, count: usize) -> (Algorithm, Params, bool) {
        let params = Params {
            tag: Tag(0),
            ..self.params
        };
        match &self.algorithm {
            AlgorithmChoice::Fixed(a) => (a.clone(), params, false),
            AlgorithmChoice::Tuned {
                model,
                allowed,
                fallback,
            } => {
                let choose = |candidates: &[Algorithm]| {
                    tuner::choose(candidates, model, n, count, self.dtype, &params)
                };
                match choose(allowed).or_else(|| choose(fallback)) {
                    Some(c) => (
                        c.algorithm,
                        Params {
                            chunk_bytes: c.chunk_bytes,
                            ..params
                        },
                        true,
                    ),
                    None => (
                        fallback
                            .first()
                            .cloned()
                            .unwrap_or_else(|| catalogue_algorithm(Collective::Allreduce, "ring")),
                        params,
                        true,
                    ),
                }
            }
        }
    }
}

/// One size's result, the same on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRow {
    /// The collective.
    pub collective: Collective,
    /// The algorithm that ran.
    pub algorithm: Algorithm,
    /// Whether the tuner chose it (and the chunk size).
    pub tuned: bool,
    /// The chunk size used.
    pub chunk_bytes: u64,
    /// The number of ranks.
    pub ranks: usize,
    /// The size in bytes (the collective's full buffer).
    pub size_bytes: u64,
    /// Elements of the full buffer.
    pub count: usize,
    /// The element type.
    pub dtype: DType,
    /// The reduction, for collectives that reduce.
    pub op: Option<ReduceOp>,
    /// The root, for rooted collectives.
    pub root: Option<Rank>,
    /// Time per call, the largest over the ranks, in picoseconds.
    pub time_ps: u64,
    /// Each rank's time per call, in picoseconds, by rank.
    pub rank_time_ps: Vec<u64>,
    /// The median time of one timed call, the largest over the ranks, in
    /// picoseconds (robust to the calls the host descheduled); 0 unless
    /// [`BenchOptions::time_each_call`].
    pub median_time_ps: u64,
    /// Algorithm bandwidth, GB/s.
    pub algbw_gb_per_s: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gb_per_s: f64,
    /// Wrong elements summed over the ranks (`None`: not checked).
    pub wrong: Option<u64>,
}

/// Why a benchmark stopped on this rank.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchError {
    /// The size being run.
    pub size_bytes: u64,
    /// What was running: "warm-up 3 of allreduce ring", ...
    pub during: String,
    /// What failed.
    pub error: CollectiveError,
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} bytes: {}",
            self.during, self.size_bytes, self.error
        )
    }
}

impl std::error::Error for BenchError {}

/// Runs the benchmark on this rank (every rank of the job calls it with
/// the same options), numbering calls from `first_seq`; `on_row` sees each
/// size's row as it completes. Returns the rows and the next free call
/// number.
pub fn run_bench<E: Endpoint>(
    endpoint: &E,
    options: &BenchOptions,
    first_seq: u64,
    mut on_row: impl FnMut(&BenchRow),
) -> Result<(Vec<BenchRow>, u64), BenchError> {
    let n = endpoint.world_size();
    let mut calls = Calls {
        endpoint,
        seq: first_seq,
        barrier: catalogue_algorithm(Collective::Barrier, "dissemination"),
        allgather: catalogue_algorithm(Collective::Allgather, "ring"),
    };
    let mut rows = Vec::new();
    for size in options.sizes(n) {
        let row = run_size(&mut calls, options, size)?;
        on_row(&row);
        rows.push(row);
    }
    Ok((rows, calls.seq))
}

/// Numbers and runs the calls of one rank.
struct Calls<'a, E> {
    endpoint: &'a E,
    seq: u64,
    /// The barrier before each size's timed calls.
    barrier: Algorithm,
    /// The allgather of the ranks' statistics.
    allgather: Algorithm,
}

impl<E: Endpoint> Calls<'_, E> {
    /// Runs one call of `algorithm` on `buf` (on the endpoint's own type
    /// where the catalogue allows: [`Algorithm::run_inline`]).
    fn run(
        &mut self,
        algorithm: &Algorithm,
        buf: &mut Payload,
        op: ReduceOp,
        params: &Params,
    ) -> Result<(), CollectiveError> {
        self.endpoint.begin_call(CallId::new(self.seq, algorithm))?;
        self.seq += 1;
        let ep = self.endpoint;
        // Pinned here and lent to the executor: the call's future is built
        // in place, not copied into `block_on`'s frame (hundreds of bytes,
        // a measurable part of a call of a few bytes).
        ep.block_on(pin!(algorithm.run_inline(ep, buf, op, params)))
    }
}

/// Runs one size: warm-ups, barrier, timed calls, check, statistics.
fn run_size<E: Endpoint>(
    calls: &mut Calls<'_, E>,
    options: &BenchOptions,
    size_bytes: u64,
) -> Result<BenchRow, BenchError> {
    let ep = calls.endpoint;
    let (n, rank) = (ep.world_size(), ep.rank());
    let c = options.collective;
    let count = usize::try_from(size_bytes / options.dtype.size_bytes() as u64)
        .expect("a size that fits in memory");
    let (algorithm, mut params, tuned) = options.select(n, count);
    if tuned && let Some(max) = ep.chunk_bytes_max(params.slots) {
        params.chunk_bytes = params.chunk_bytes.min(max);
    }
    let failed = |during: String| {
        move |error: CollectiveError| BenchError {
            size_bytes,
            during,
            error,
        }
    };
    let input = check::input(options.dtype, options.op, rank, 0..count);
    let mut buf = input.clone();
    for i in 0..options.warmup {
        calls
            .run(&algorithm, &mut buf, options.op, &params)
            .map_err(|e| failed(format!("warm-up call {} of {c} {algorithm}", i + 1))(e))?;
    }
    let mut none = Payload::zeros(DType::U8, 0, false);
    let barrier = calls.barrier.clone();
    calls
        .run(&barrier, &mut none, ReduceOp::Sum, &params)
        .map_err(failed("the barrier before the timed calls".into()))?;
    let each = options.time_each_call;
    let mut call_ps = Vec::with_capacity(if each { options.iters as usize } else { 0 });
    let started = Instant::now();
    let mut last = started;
    // The error's words are only formatted on failure: a format per call
    // would be timed with the call.
    for i in 0..options.iters {
        calls
            .run(&algorithm, &mut buf, options.op, &params)
            .map_err(|e| failed(format!("timed call {} of {c} {algorithm}", i + 1))(e))?;
        if each {
            let now = Instant::now();
            call_ps.push(picoseconds(now.duration_since(last)));
            last = now;
        }
    }
    let my_time_ps = picoseconds(started.elapsed()) / u64::from(options.iters);
    let my_median_ps = median_ps(&mut call_ps);
    let my_wrong = if options.check {
        buf.copy_from(0..count, &input)
            .expect("the input has the buffer's shape");
        calls
            .run(&algorithm, &mut buf, options.op, &params)
            .map_err(failed(format!("the checked call of {c} {algorithm}")))?;
        check::count_wrong(c, options.op, params.root, rank, n, &buf)
    } else {
        0
    };
    // Every rank's [time, wrong, median], gathered through the fabric.
    let mut stats = Payload::zeros(DType::I64, STATS * n, false);
    let mine = Payload::from_vec(vec![
        my_time_ps as i64,
        my_wrong as i64,
        my_median_ps as i64,
    ]);
    stats
        .copy_from(block_range(STATS * n, n, rank), &mine)
        .expect("three elements per rank");
    let allgather = calls.allgather.clone();
    calls
        .run(&allgather, &mut stats, ReduceOp::Sum, &params)
        .map_err(failed("gathering the ranks' times".into()))?;
    let values = stats.as_slice::<i64>().expect("an int64 buffer");
    let rank_time_ps: Vec<u64> = values.chunks(STATS).map(|p| p[0] as u64).collect();
    let wrong: u64 = values.chunks(STATS).map(|p| p[1] as u64).sum();
    let median_time_ps = values.chunks(STATS).map(|p| p[2] as u64).max().unwrap_or(0);
    let time_ps = rank_time_ps.iter().copied().max().unwrap_or(0);
    let size = count as u64 * options.dtype.size_bytes() as u64;
    let algbw = if time_ps == 0 {
        0.0
    } else {
        size as f64 / (time_ps as f64 / 1e12) / 1e9
    };
    Ok(BenchRow {
        collective: c,
        algorithm,
        tuned,
        chunk_bytes: params.chunk_bytes,
        ranks: n,
        size_bytes: size,
        count,
        dtype: options.dtype,
        op: c.reduces().then_some(options.op),
        root: c.has_root().then_some(params.root),
        time_ps,
        rank_time_ps,
        median_time_ps,
        algbw_gb_per_s: algbw,
        busbw_gb_per_s: algbw * c.busbw_factor(n),
        wrong: options.check.then_some(wrong),
    })
}

/// Statistics each rank contributes per size: mean time, wrong
/// elements, median time.
const STATS: usize = 3;

/// A duration in integer picoseconds (saturating).
fn picoseconds(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_mul(1000)
}

/// The median of `times` (the mean of the middle two for an even count;
/// 0 for none), sorting them.
fn median_ps(times: &mut [u64]) -> u64 {
    times.sort_unstable();
    let n = times.len();
    match n {
        0 => 0,
        _ if n % 2 == 1 => times[n / 2],
        _ => times[n / 2 - 1] + (times[n / 2] - times[n / 2 - 1]) / 2,
    }
}

#[cfg(test)]
mod tests;
