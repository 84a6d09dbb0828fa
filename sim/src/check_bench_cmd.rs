//! `sim check-bench`: how fast the model checker verifies the programs
//! that matter (issue 19's targets), one row per point: the verdict, the
//! schedules the reduced search explored, the states it stored at once,
//! the process's peak memory, the wall time, and the naive search's
//! schedule count (exact when it finishes within a cap, else Knuth's
//! estimate) with the reduction factor. A benchmark, not a test: its
//! wall times depend on the machine and its load.

use std::io::{self, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use algorithms::{Algorithm, Collective, ReduceOp, Registry, catalogue_algorithm};
use checker::explore::{self, Control, Reduction, Target};
use checker::run::{self, Options};
use checker::spec::{Axes, Bounds, Buffering, CallSpec, CheckScenario, Faults, Point, Search};
use clap::ValueEnum;

use crate::exit::ExitStatus;

/// `--suite`: which points to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Suite {
    /// The ring on 4 ranks (one and two chunks per segment) and
    /// tag_reuse_fixed on 3 and 4 ranks.
    Targets,
    /// Every catalogue algorithm on 2 to 6 ranks (8 for the ring, tree,
    /// recursive doubling, Rabenseifner and hierarchical allreduces) under
    /// unbounded, one-slot and rendezvous buffering.
    Catalogue,
    /// Both.
    All,
}

/// The allreduces also run on 8 ranks.
const EIGHT_RANKS: [&str; 5] = [
    "ring",
    "tree",
    "recursive_doubling",
    "rabenseifner",
    "hierarchical",
];

/// Random walks behind a naive estimate.
const PROBES: u32 = 200;

/// One point to check.
struct BenchPoint {
    label: String,
    program: CheckScenario,
    point: Point,
}

fn call(index: usize, algorithm: Algorithm, tag: u64) -> CallSpec {
    CallSpec {
        id: format!("call{index}"),
        collective: algorithm.collective(),
        algorithm,
        op: ReduceOp::Sum,
        tag,
    }
}

fn bench_point(
    label: String,
    calls: Vec<CallSpec>,
    point: Point,
    concurrent: bool,
    max_schedules: u64,
) -> BenchPoint {
    let default_order = (0..calls.len()).collect();
    let program = CheckScenario {
        name: label.clone(),
        path: PathBuf::from("check-bench.toml"),
        calls,
        order: Default::default(),
        default_order,
        concurrent,
        axes: Axes {
            world_size: vec![point.world_size],
            count: vec![point.count],
            chunks: vec![point.chunks],
            root: vec![0],
            in_place: vec![true],
            buffering: vec![point.buffering],
        },
        faults: Faults::default(),
        search: Search::Exhaustive,
        bounds: Bounds {
            max_schedules,
            ..Bounds::default()
        },
        check_cost: false,
        expect: None,
        asserts: Vec::new(),
        notes: Vec::new(),
    };
    BenchPoint {
        label,
        program,
        point,
    }
}

fn point(world_size: usize, count: usize, chunks: usize, buffering: Buffering) -> Point {
    Point {
        world_size,
        count,
        chunks,
        root: 0,
        in_place: true,
        buffering,
    }
}

const BUFFERINGS: [Buffering; 3] = [
    Buffering::Unbounded,
    Buffering::Eager(1),
    Buffering::Eager(0),
];

fn targets(max_schedules: u64) -> Vec<BenchPoint> {
    let ring = || catalogue_algorithm(Collective::Allreduce, "ring");
    let mut out = Vec::new();
    for (chunks, buffering) in [
        (1, Buffering::Eager(0)),
        (2, Buffering::Eager(0)),
        (2, Buffering::Eager(1)),
    ] {
        out.push(bench_point(
            format!("ring, {chunks} chunk(s)/segment"),
            vec![call(0, ring(), 0)],
            point(4, 4 * chunks, chunks, buffering),
            false,
            max_schedules,
        ));
    }
    // tag_reuse_fixed's buffering (one eager slot) first, then the two
    // under which its calls share no slot.
    for buffering in [
        Buffering::Eager(1),
        Buffering::Eager(0),
        Buffering::Unbounded,
    ] {
        for n in [3, 4] {
            out.push(bench_point(
                "tag_reuse_fixed (2 concurrent rings, tags 7, 8)".into(),
                vec![call(0, ring(), 7), call(1, ring(), 8)],
                point(n, n, 1, buffering),
                true,
                max_schedules,
            ));
        }
    }
    out
}

fn catalogue(registry: &Registry, max_schedules: u64) -> Vec<BenchPoint> {
    let mut out = Vec::new();
    for algorithm in registry.iter() {
        let eight = algorithm.collective() == Collective::Allreduce
            && EIGHT_RANKS.contains(&algorithm.name());
        let sizes: Vec<usize> = (2..=6).chain(eight.then_some(8)).collect();
        for n in sizes {
            for buffering in BUFFERINGS {
                out.push(bench_point(
                    format!("{} {}", algorithm.collective().name(), algorithm.name()),
                    vec![call(0, algorithm.clone(), 0)],
                    point(n, n, 1, buffering),
                    false,
                    max_schedules,
                ));
            }
        }
    }
    out
}

/// The process's peak resident memory in MiB (Linux's VmHWM), if known.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Runs `sim check-bench`.
pub fn check_bench(
    suite: Suite,
    max_schedules: u64,
    naive_cap: u64,
    registry: &Registry,
) -> io::Result<ExitStatus> {
    let mut points = Vec::new();
    if matches!(suite, Suite::Targets | Suite::All) {
        points.extend(targets(max_schedules));
    }
    if matches!(suite, Suite::Catalogue | Suite::All) {
        points.extend(catalogue(registry, max_schedules));
    }
    let mut out = crate::output::Stdout::new();
    writeln!(
        out,
        "# exhaustive search, reductions: {}; with joins of branches also {}; with concurrent calls also {}; where DPOR runs {} schedules of concurrent calls without finishing, a stateful search takes over (sleep sets and a visited-state table; stored = states in it, schedules = DPOR's plus the terminal states; its cap bounds the states stored); states = the most search nodes held at once; naive = every interleaving, exact when it finishes within {naive_cap} schedules, else ~ Knuth's estimate from {PROBES} random walks",
        explore::REDUCTIONS,
        explore::BRANCHES_REDUCTION,
        explore::CALLS_REDUCTION,
        explore::STATEFUL_AFTER
    )?;
    writeln!(
        out,
        "{:<48} {:<40} {:<24} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "program",
        "point",
        "verdict",
        "schedules",
        "blocked",
        "states",
        "stored",
        "peak MiB",
        "wall (s)",
        "naive",
        "factor"
    )?;
    let mut total = Duration::ZERO;
    let mut unfinished = 0;
    for p in points {
        let program = Rc::new(p.program);
        let report = match run::check(
            &program,
            Options {
                compare_naive: false,
                no_shrink: true,
            },
        ) {
            Ok(r) => r,
            Err(e) => {
                writeln!(
                    out,
                    "{:<48} {:<40} error: {e}",
                    p.label,
                    p.point.to_string()
                )?;
                unfinished += 1;
                continue;
            }
        };
        let Some(row) = report.points.first() else {
            continue;
        };
        total += row.wall;
        let verdict = match row.violation {
            Some(v) => v.to_string(),
            None if row.stats.complete() => "verified".into(),
            None => {
                unfinished += 1;
                format!(
                    "within bounds ({:.1}%)",
                    f64::from(row.stats.explored_ppm.unwrap_or(0)) / 1e4
                )
            }
        };
        let target = Target {
            program: &program,
            point: p.point,
            faults: program.faults,
            bounds: Bounds {
                max_schedules: naive_cap,
                ..program.bounds
            },
        };
        let exact = explore::exhaustive(&target, Reduction::Naive, &[], |_| Control::Continue)
            .ok()
            .filter(|s| s.complete());
        let (naive, naive_text) = match exact {
            Some(s) => (s.schedules as f64, s.schedules.to_string()),
            None => {
                let estimate = explore::estimate_naive(&target, PROBES, 1);
                (estimate, format!("~{estimate:.2e}"))
            }
        };
        let factor = naive / row.stats.schedules.max(1) as f64;
        writeln!(
            out,
            "{:<48} {:<40} {:<24} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9.3} {:>12} {:>12}",
            p.label,
            p.point.to_string(),
            verdict,
            row.stats.schedules,
            row.stats.sleep_blocked,
            row.stats.peak_nodes,
            row.stats.states,
            peak_rss_mib().map_or("n/a".into(), |m| format!("{m:.1}")),
            row.wall.as_secs_f64(),
            naive_text,
            format!("{factor:.3e}")
        )?;
        out.flush()?;
    }
    writeln!(
        out,
        "# reduced searches: {:.3} s in all (naive counts and estimates excluded); {unfinished} point(s) not verified",
        total.as_secs_f64()
    )?;
    Ok(ExitStatus::Success)
}
