//! The catalogue reaches the engine and the checker only through the
//! public algorithm interface: a registry of wrappers that forward every
//! `CollectiveAlgorithm` method to a catalogue algorithm, under new names
//! and as user algorithms, gives the same rows (times, tuner choices, folded
//! runs, checks) as the catalogue itself. An algorithm-specific branch
//! anywhere else (on a name, on `is_builtin`, on a concrete type) makes
//! the two differ.

use std::ops::ControlFlow;
use std::path::Path;

use algorithms::{
    Algorithm, AnyFabric, Chunking, Collective, CollectiveAlgorithm, CostModel, DType, Params,
    Payload, ReduceOp, Registry, RotationSymmetry, Running,
};
use checker::Check;
use engine::scenario::Scenario;
use engine::study::{Options, Row, run_scenario};
use engine::tuning::AlgoFilter;

/// A catalogue algorithm behind the public interface, renamed.
struct Forward {
    name: String,
    inner: Algorithm,
}

impl CollectiveAlgorithm for Forward {
    fn name(&self) -> &str {
        &self.name
    }
    fn collective(&self) -> Collective {
        self.inner.collective()
    }
    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        self.inner.facts().run(fabric, buf, op, params)
    }
    fn formula(&self) -> Option<&str> {
        self.inner.facts().formula()
    }
    fn cost_ps(
        &self,
        model: &CostModel,
        n: usize,
        count: usize,
        dtype: DType,
        params: &Params,
    ) -> Option<u64> {
        self.inner.facts().cost_ps(model, n, count, dtype, params)
    }
    fn reference(&self, inputs: &[Payload], op: ReduceOp, params: &Params) -> Option<Vec<Payload>> {
        self.inner.facts().reference(inputs, op, params)
    }
    fn chunking(&self) -> Chunking {
        self.inner.facts().chunking()
    }
    fn rotation_symmetry(&self) -> RotationSymmetry {
        self.inner.facts().rotation_symmetry()
    }
    fn messages_bound(&self, n: usize, count: usize, elem: usize, chunk: u64) -> u64 {
        self.inner.facts().messages_bound(n, count, elem, chunk)
    }
    fn nccl_algorithm(&self) -> Option<&str> {
        self.inner.facts().nccl_algorithm()
    }
    fn runs_nccl_channels(&self) -> bool {
        self.inner.facts().runs_nccl_channels()
    }
    fn reduces_in_network(&self) -> bool {
        self.inner.facts().reduces_in_network()
    }
}

/// The new name of a catalogue algorithm.
fn renamed(name: &str) -> String {
    format!("fwd_{name}")
}

/// The catalogue, forwarded and renamed, in the catalogue's order (the
/// tuner breaks ties by it), registered as user algorithms.
fn forwarded() -> Registry {
    let mut registry = Registry::new();
    for a in Registry::builtin().iter() {
        let algorithm = registry
            .register(Forward {
                name: renamed(a.name()),
                inner: a.clone(),
            })
            .expect("new names");
        assert!(!algorithm.is_builtin());
    }
    registry
}

/// The rows of `text` run with `registry`.
fn rows(text: &str, registry: &Registry) -> Vec<Row> {
    let scenario = Scenario::parse(Path::new("r.toml"), text, registry)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    run_scenario(
        &scenario,
        &AlgoFilter::default(),
        Options::default(),
        |_| ControlFlow::Continue(()),
    )
    .unwrap_or_else(|e| panic!("{:?}\n{text}", e.1))
}

/// One `[[collective]]` of `algorithm` (none: the tuner) for `kind`, from
/// 48 B to `max`.
fn entry(kind: Collective, algorithm: Option<&str>, max: &str, extra: &str) -> String {
    let algorithm = algorithm.map_or(String::new(), |a| format!("algorithm = \"{a}\"\n"));
    format!(
        "[[collective]]\nkind = \"{kind}\"\n{algorithm}min_bytes = 48\nmax_bytes = \"{max}\"\n\
         step_factor = 32\niters = 1\nwarmup = 1\nroot = 2\nranks_per_node = 2\nchunk_bytes = 1024\n{extra}"
    )
}

/// `rows` with the forwarded names put back, to compare with the catalogue's.
fn unrenamed(mut rows: Vec<Row>) -> Vec<Row> {
    for r in &mut rows {
        r.algorithm = r
            .algorithm
            .strip_prefix("fwd_")
            .unwrap_or_else(|| panic!("{} is not a forwarded name", r.algorithm))
            .to_string();
    }
    rows
}

const IDEAL: &str = "seed = 5\nworld_size = 6\n[links]\nlatency_us = 2.0\nbandwidth_gb_per_s = 20.0\n[compute]\nreduce_gb_per_s = 100.0\n";

const FAT_TREE: &str = "seed = 5\n[topology]\npreset = \"fat_tree\"\nnodes = 2\ngpus_per_node = 4\nstyle = \"h100\"\nnic = \"ib_ndr\"\nspines = 2\nsharp = true\nmodel = \"flow\"\n";

#[test]
fn every_catalogue_algorithm_runs_the_same_through_the_public_interface() {
    let (builtin, forwarded) = (Registry::builtin(), forwarded());
    for world in [IDEAL, FAT_TREE] {
        for a in builtin.iter() {
            let mine = format!(
                "{world}{}",
                entry(a.collective(), Some(a.name()), "48K", "")
            );
            let theirs = format!(
                "{world}{}",
                entry(a.collective(), Some(&renamed(a.name())), "48K", "")
            );
            assert_eq!(
                unrenamed(rows(&theirs, &forwarded)),
                rows(&mine, &builtin),
                "{a:?}"
            );
        }
    }
}

#[test]
fn the_tuner_chooses_the_same_through_the_public_interface() {
    let (builtin, forwarded) = (Registry::builtin(), forwarded());
    for kind in [
        Collective::Allreduce,
        Collective::Broadcast,
        Collective::Allgather,
        Collective::Alltoall,
    ] {
        let text = format!("{IDEAL}{}", entry(kind, None, "48M", "phantom = true\n"));
        let mine = rows(&text, &builtin);
        assert!(mine.iter().all(|r| r.tuned));
        assert_eq!(unrenamed(rows(&text, &forwarded)), mine, "{kind}");
    }
}

#[test]
fn folded_runs_are_the_same_through_the_public_interface() {
    let (builtin, forwarded) = (Registry::builtin(), forwarded());
    let world = "seed = 1\n[topology]\npreset = \"fat_tree\"\nnodes = 4\ngpus_per_node = 8\nstyle = \"h100\"\nnic = \"ib_ndr\"\nmodel = \"flow\"\nsymmetry = \"fold\"\n";
    let collective = "[[collective]]\nkind = \"allreduce\"\nmin_bytes = \"64K\"\nmax_bytes = \"4M\"\nstep_factor = 8\niters = 1\nwarmup = 0\nphantom = true\nranks_per_node = 8\n";
    for name in [None, Some("ring"), Some("hierarchical")] {
        let named = |n: String| format!("{world}{collective}algorithm = \"{n}\"\n");
        let (mine, theirs) = match name {
            Some(n) => (named(n.to_string()), named(renamed(n))),
            None => (
                format!("{world}{collective}"),
                format!("{world}{collective}"),
            ),
        };
        assert_eq!(
            unrenamed(rows(&theirs, &forwarded)),
            rows(&mine, &builtin),
            "{name:?}"
        );
    }
}

#[test]
fn checks_are_the_same_through_the_public_interface() {
    let forwarded = forwarded();
    for a in Registry::builtin().iter() {
        let fwd = forwarded
            .get(a.collective(), &renamed(a.name()))
            .expect("forwarded");
        let check = |alg: &Algorithm| {
            let report = Check::of(alg)
                .world_sizes(&[2, 3])
                .counts(&[6])
                .roots(&[0, 1])
                .cost()
                .run()
                .unwrap_or_else(|e| panic!("{a:?}: {e}"));
            let schedules: Vec<u64> = report.points.iter().map(|p| p.stats.schedules).collect();
            (report.verdict, report.complete, schedules)
        };
        assert_eq!(check(&fwd), check(a), "{a:?}");
    }
}
