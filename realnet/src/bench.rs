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
    /// Runs one call of `algorithm` on `buf`.
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
        ep.block_on(algorithm.run(ep, buf, op, params))
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
mod tests {
    use super::*;
    use crate::job::JobOptions;
    use crate::local::LocalFabric;

    /// Runs `options` on `n` thread ranks; every rank's rows.
    fn bench_on_threads(n: usize, options: &BenchOptions) -> Vec<Result<Vec<BenchRow>, String>> {
        let fabrics = LocalFabric::group(n, &JobOptions::default());
        std::thread::scope(|s| {
            let handles: Vec<_> = fabrics
                .iter()
                .map(|f| {
                    s.spawn(move || {
                        let (rows, _) =
                            run_bench(f, options, 1, |_| {}).map_err(|e| e.to_string())?;
                        f.finish().map_err(|e| e.to_string())?;
                        Ok(rows)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Small sizes of the catalogue's algorithm `name` of `collective`.
    fn small(collective: Collective, name: &str) -> BenchOptions {
        BenchOptions {
            collective,
            algorithm: AlgorithmChoice::Fixed(catalogue_algorithm(collective, name)),
            min_bytes: 64,
            max_bytes: 4096,
            step_factor: 4,
            iters: 3,
            warmup: 1,
            time_each_call: true,
            params: Params {
                chunk_bytes: 256,
                root: 1,
                ..Params::default()
            },
            ..BenchOptions::default()
        }
    }

    #[test]
    fn rows_cover_the_sizes_with_the_bus_factor_and_no_wrong_elements() {
        let n = 3;
        let options = small(Collective::Allreduce, "ring");
        let all = bench_on_threads(n, &options);
        let rows = all[0].clone().unwrap();
        for other in &all[1..] {
            assert_eq!(
                other.as_ref().unwrap(),
                &rows,
                "every rank has the same rows"
            );
        }
        let sizes: Vec<u64> = rows.iter().map(|r| r.size_bytes).collect();
        assert_eq!(sizes, vec![64, 256, 1024, 4096]);
        for r in &rows {
            assert_eq!(r.wrong, Some(0));
            assert_eq!(r.count as u64 * 4, r.size_bytes);
            assert!(r.time_ps > 0);
            assert_eq!(r.time_ps, *r.rank_time_ps.iter().max().unwrap());
            assert!(r.median_time_ps > 0);
            assert_eq!(r.rank_time_ps.len(), n);
            let algbw = r.size_bytes as f64 / (r.time_ps as f64 * 1e-12) / 1e9;
            assert!((r.algbw_gb_per_s - algbw).abs() < 1e-9 * algbw.max(1.0));
            assert!((r.busbw_gb_per_s / r.algbw_gb_per_s - 4.0 / 3.0).abs() < 1e-9);
            assert_eq!((r.op, r.root, r.tuned), (Some(ReduceOp::Sum), None, false));
        }
    }

    #[test]
    fn the_median_ignores_a_few_slow_calls() {
        // Nine calls of 1 us and one descheduled for 5 ms: the mean is
        // 501 us, the median 1 us.
        let mut times = vec![1_000_000u64; 9];
        times.push(5_000_000_000);
        assert_eq!(median_ps(&mut times.clone()[..9]), 1_000_000);
        assert_eq!(median_ps(&mut times), 1_000_000);
        assert_eq!(median_ps(&mut [3, 1, 2]), 2);
        assert_eq!(median_ps(&mut [4, 1, 3, 2]), 2);
        assert_eq!(median_ps(&mut [1, 2]), 1);
        assert_eq!(median_ps(&mut [3, 4]), 3);
        assert_eq!(median_ps(&mut []), 0);
    }

    #[test]
    fn every_catalogue_entry_checks_clean_on_threads() {
        for n in [2usize, 5] {
            for e in algorithms::Registry::builtin().iter() {
                let mut options = small(e.collective(), e.name());
                options.max_bytes = 1000;
                options.params.ranks_per_node = 2;
                options.dtype = DType::I32;
                options.op = ReduceOp::Max;
                for (rank, rows) in bench_on_threads(n, &options).into_iter().enumerate() {
                    if e.facts().reduces_in_network() {
                        // Threads have no switch that reduces: refused.
                        let error = rows.expect_err("refused on threads");
                        assert!(
                            error.contains(algorithms::in_network::NO_SWITCH_REASON),
                            "rank {rank}: {error}"
                        );
                        continue;
                    }
                    let rows = rows.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
                    assert!(!rows.is_empty());
                    for r in rows {
                        assert_eq!(r.wrong, Some(0), "{e:?} on {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_tuner_picks_per_size() {
        let options = BenchOptions {
            algorithm: AlgorithmChoice::Tuned {
                model: CostModel {
                    latency_ps: 10_000_000,
                    bandwidth_bytes_per_s: 10e9,
                    reduce_bytes_per_s: None,
                },
                allowed: vec![],
                fallback: algorithms::Registry::builtin()
                    .of(Collective::Allreduce)
                    .cloned()
                    .collect(),
            },
            min_bytes: 8,
            max_bytes: 1 << 20,
            step_factor: 1 << 17,
            ..small(Collective::Allreduce, "ring")
        };
        let rows = bench_on_threads(4, &options).remove(0).unwrap();
        assert!(rows.iter().all(|r| r.tuned && r.wrong == Some(0)));
        // A latency-bound small allreduce and a bandwidth-bound large one
        // do not pick the same algorithm under a 10 us latency.
        assert_ne!(rows[0].algorithm, rows[1].algorithm, "{rows:?}");
    }

    #[test]
    fn options_are_validated() {
        let n = 4;
        let mut o = small(Collective::Broadcast, "chain");
        o.algorithm = AlgorithmChoice::Fixed(catalogue_algorithm(Collective::Allreduce, "ring"));
        assert!(
            o.validate(n)
                .unwrap_err()
                .contains("`ring` implements allreduce, not broadcast")
        );
        o.algorithm = AlgorithmChoice::Fixed(catalogue_algorithm(Collective::Broadcast, "chain"));
        o.params.root = 4;
        assert!(o.validate(n).unwrap_err().contains("root 4"));
        let mut o = small(Collective::Allreduce, "ring");
        o.op = ReduceOp::Avg;
        o.dtype = DType::I32;
        assert!(o.validate(n).unwrap_err().contains("avg"));
        o.dtype = DType::Sym;
        assert!(o.validate(n).unwrap_err().contains("cannot carry symbols"));
        let mut o = small(Collective::Allreduce, "ring");
        o.min_bytes = 8192;
        assert!(o.validate(n).unwrap_err().contains("above"));
        o.max_bytes = u64::MAX;
        assert!(o.validate(n).unwrap_err().contains("addressable memory"));
        let mut o = small(Collective::Alltoall, "pairwise");
        o.min_bytes = 0;
        o.max_bytes = 100;
        assert!(o.validate(n).is_ok());
        assert_eq!(o.sizes(n), vec![0, 16, 64]);
    }

    /// A thread fabric whose rank 1 adds 1 to the first element of every
    /// message it sends: silent corruption the check must catch.
    struct Corrupting<'a>(&'a LocalFabric);

    impl algorithms::Fabric for Corrupting<'_> {
        fn rank(&self) -> Rank {
            self.0.rank()
        }

        fn world_size(&self) -> usize {
            self.0.world_size()
        }

        fn now(&self) -> algorithms::Time {
            self.0.now()
        }

        async fn send(
            &self,
            to: Rank,
            tag: Tag,
            mut payload: Payload,
        ) -> Result<(), algorithms::FabricError> {
            if self.0.rank() == 1 && payload.shape().dtype == DType::F32 && !payload.is_empty() {
                let one = Payload::from_vec(vec![1.0f32]);
                payload.reduce_from(0..1, &one, ReduceOp::Sum).unwrap();
            }
            self.0.send(to, tag, payload).await
        }

        async fn recv(
            &self,
            from: Rank,
            tag: Tag,
            expect: algorithms::Shape,
        ) -> Result<Payload, algorithms::FabricError> {
            self.0.recv(from, tag, expect).await
        }

        async fn compute(&self, work: algorithms::Work) -> Result<(), algorithms::FabricError> {
            self.0.compute(work).await
        }
    }

    impl Endpoint for Corrupting<'_> {
        fn mailbox(&self) -> &crate::mailbox::Mailbox {
            self.0.mailbox()
        }

        fn progress(&self) -> bool {
            self.0.progress()
        }

        fn begin_call(&self, call: CallId) -> Result<(), algorithms::FabricError> {
            self.0.begin_call(call)
        }

        fn finish(&self) -> Result<(), algorithms::FabricError> {
            self.0.finish()
        }
    }

    #[test]
    fn corrupted_messages_are_counted_as_wrong_on_every_rank() {
        let n = 3;
        let options = &small(Collective::Allreduce, "ring");
        let fabrics = LocalFabric::group(n, &JobOptions::default());
        let rows: Vec<Vec<BenchRow>> = std::thread::scope(|s| {
            let handles: Vec<_> = fabrics
                .iter()
                .map(|f| s.spawn(move || run_bench(&Corrupting(f), options, 1, |_| {}).unwrap().0))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in &rows[0] {
            let wrong = r.wrong.unwrap();
            assert!(wrong > 0 && wrong <= (n * r.count) as u64, "{r:?}");
        }
        assert_eq!(rows[0], rows[2], "every rank reports the same sum");
    }
}
