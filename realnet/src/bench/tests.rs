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
                    let (rows, _) = run_bench(f, options, 1, |_| {}).map_err(|e| e.to_string())?;
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
