//! Every algorithm of the catalogue, model-checked: on 2 to 4 ranks, in
//! place and out of place, in 1 and 2 chunks where it pipelines, at the
//! first and the last root where it has one, under unbounded eager,
//! one-slot eager and rendezvous sends, every schedule gives the reference
//! result, bitwise the same on every rank and under every schedule, with no
//! message left over, with the traffic and critical path of its cost
//! formula, and the search is complete.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use algorithms::{Algorithm, Collective, ReduceOp, Registry, catalogue_algorithm};
use checker::report::print_counterexample;
use checker::run::{Options, check};
use checker::spec::{Axes, Bounds, Buffering, CallSpec, CheckScenario, Faults, Search, Verdict};

/// One and two chunks for the algorithms that cut their buffer into
/// pipeline chunks, one for the others.
fn chunks(algorithm: &Algorithm) -> Vec<usize> {
    if algorithm.uses_chunks() {
        vec![1, 2]
    } else {
        vec![1]
    }
}

/// The check of one catalogue entry on `n` ranks, `2n` elements.
fn scenario(algorithm: &Algorithm, n: usize, buffering: &[Buffering]) -> CheckScenario {
    let collective = algorithm.collective();
    let root = if collective.has_root() {
        vec![0, n - 1]
    } else {
        vec![0]
    };
    CheckScenario {
        name: format!("{collective}_{algorithm}_{n}"),
        path: PathBuf::from(format!("{collective}_{algorithm}.toml")),
        calls: vec![CallSpec {
            id: "call0".into(),
            collective,
            algorithm: algorithm.clone(),
            op: ReduceOp::Sum,
            tag: 0,
        }],
        order: BTreeMap::new(),
        default_order: vec![0],
        concurrent: false,
        axes: Axes {
            world_size: vec![n],
            count: vec![2 * n],
            chunks: chunks(algorithm),
            root,
            in_place: vec![true, false],
            buffering: buffering.to_vec(),
        },
        faults: Faults::default(),
        search: Search::Exhaustive,
        bounds: Bounds::default(),
        check_cost: true,
        expect: Some(Verdict::Verified),
        asserts: Vec::new(),
        notes: Vec::new(),
    }
}

/// Checks `collective` with `algorithm` on each `(ranks, bufferings)`;
/// panics with every counterexample found.
fn verify(algorithm: &Algorithm, cases: &[(usize, &[Buffering])]) {
    verify_chunked(algorithm, cases, |_| None);
}

/// [`verify`], with the chunk counts `chunks(n)` (when it gives some)
/// instead of the default ones.
fn verify_chunked(
    algorithm: &Algorithm,
    cases: &[(usize, &[Buffering])],
    chunks: impl Fn(usize) -> Option<Vec<usize>>,
) {
    let collective = algorithm.collective();
    let mut failures = Vec::new();
    for &(n, buffering) in cases {
        let mut scenario = scenario(algorithm, n, buffering);
        if let Some(c) = chunks(n) {
            scenario.axes.chunks = c;
        }
        let program = Rc::new(scenario);
        #[allow(clippy::disallowed_methods)] // timing the test, not a result
        let started = Instant::now();
        let report = check(&program, Options::default())
            .unwrap_or_else(|e| panic!("{}: the search failed: {e}", program.name));
        eprintln!(
            "{collective} {algorithm} N={n} {buffering:?}: {} ({} schedules, {} points) in {:?}",
            report.verdict,
            report.schedules,
            report.points.len(),
            started.elapsed()
        );
        if report.verdict == Verdict::Verified && report.complete {
            continue;
        }
        let mut text = format!(
            "{collective} {algorithm} N={n} {buffering:?}: {}{}\n",
            report.verdict,
            if report.complete {
                ""
            } else {
                " (incomplete search)"
            }
        );
        if let Some(cex) = &report.counterexample {
            let mut out = Vec::new();
            print_counterexample(&program, cex, &mut out).expect("writing to memory");
            text += &String::from_utf8_lossy(&out);
        }
        failures.push(text);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Unbounded eager sends, one eager slot per connection, rendezvous.
const ALL_BUFFERING: &[Buffering] = &[
    Buffering::Unbounded,
    Buffering::Eager(1),
    Buffering::Eager(0),
];

/// 2 to 4 ranks, each under every buffering.
const EVERY_CASE: &[(usize, &[Buffering])] =
    &[(2, ALL_BUFFERING), (3, ALL_BUFFERING), (4, ALL_BUFFERING)];

macro_rules! entries {
    ($($(#[$attr:meta])* $name:ident: $coll:ident $alg:literal, $cases:expr;)*) => {
        /// The entries the tests below check.
        const COVERED: &[(Collective, &str)] = &[$((Collective::$coll, $alg)),*];

        $(
            $(#[$attr])*
            #[test]
            fn $name() {
                verify(&catalogue_algorithm(Collective::$coll, $alg), $cases);
            }
        )*
    };
}

entries! {
    // 2,985,984 schedules for one point on 4 ranks under rendezvous
    // before the ring exchanged through `Fabric::exchange`; one now.
    allreduce_ring: Allreduce "ring", EVERY_CASE;
    allreduce_recursive_doubling: Allreduce "recursive_doubling", EVERY_CASE;
    allreduce_rabenseifner: Allreduce "rabenseifner", EVERY_CASE;
    allreduce_tree: Allreduce "tree", EVERY_CASE;
    allreduce_hierarchical: Allreduce "hierarchical", EVERY_CASE;
    reduce_scatter_ring: ReduceScatter "ring", EVERY_CASE;
    reduce_scatter_recursive_halving: ReduceScatter "recursive_halving", EVERY_CASE;
    allgather_ring: Allgather "ring", EVERY_CASE;
    allgather_recursive_doubling: Allgather "recursive_doubling", EVERY_CASE;
    allgather_bruck: Allgather "bruck", EVERY_CASE;
    broadcast_binomial: Broadcast "binomial", EVERY_CASE;
    broadcast_chain: Broadcast "chain", EVERY_CASE;
    reduce_binomial: Reduce "binomial", EVERY_CASE;
    reduce_chain: Reduce "chain", EVERY_CASE;
    alltoall_pairwise: Alltoall "pairwise", EVERY_CASE;
    alltoall_bruck: Alltoall "bruck", EVERY_CASE;
    barrier_dissemination: Barrier "dissemination", EVERY_CASE;
    gather_binomial: Gather "binomial", EVERY_CASE;
    gather_linear: Gather "linear", EVERY_CASE;
    scatter_binomial: Scatter "binomial", EVERY_CASE;
    scatter_linear: Scatter "linear", EVERY_CASE;
    allreduce_nccl_ring: Allreduce "nccl_ring", NCCL_RING_CASES;
    allreduce_nccl_tree: Allreduce "nccl_tree", NCCL_CASES;
    reduce_scatter_nccl_ring: ReduceScatter "nccl_ring", NCCL_CASES;
    allgather_nccl_ring: Allgather "nccl_ring", NCCL_CASES;
    broadcast_nccl_ring: Broadcast "nccl_ring", NCCL_CASES;
    reduce_nccl_ring: Reduce "nccl_ring", NCCL_CASES;
    allgather_pat: Allgather "pat", PAT_CASES;
    reduce_scatter_pat: ReduceScatter "pat", PAT_CASES;
    sendrecv_direct: SendRecv "direct", EVERY_CASE;
    allgather_nccl_pat: Allgather "nccl_pat", NCCL_CASES;
    reduce_scatter_nccl_pat: ReduceScatter "nccl_pat", NCCL_CASES;
    sendrecv_nccl_sendrecv: SendRecv "nccl_sendrecv", NCCL_CASES;
    allreduce_nccl_nvls: Allreduce "nccl_nvls", NVLS_CASES;
    allreduce_nccl_nvls_tree: Allreduce "nccl_nvls_tree", NVLS_TREE_CASES;
    allreduce_nccl_collnet_direct: Allreduce "nccl_collnet_direct", COLLNET_CASES;
    allreduce_nccl_collnet_chain: Allreduce "nccl_collnet_chain", COLLNET_CASES;
}

/// NVLS: every rank's contribution to every other (the checker's switch,
/// see `checker::fabric`): 2 ranks under every buffering, 3 unbounded.
const NVLS_CASES: &[(usize, &[Buffering])] = &[(2, ALL_BUFFERING), (3, &[Buffering::Unbounded])];

/// NVLS-Tree: 2 ranks (one node, 4 elements: both channels, both heads)
/// unbounded (244 schedules); 4 ranks with two channels interleave to
/// 14,976, so `scenarios/check/nvls_tree_ok.toml` checks them on one
/// element.
const NVLS_TREE_CASES: &[(usize, &[Buffering])] = &[(2, &[Buffering::Unbounded])];

/// CollNet: 2 ranks (one node) under every buffering; 4 ranks (the
/// checker's 2 nodes of 2) unbounded.
const COLLNET_CASES: &[(usize, &[Buffering])] = &[(2, ALL_BUFFERING), (4, &[Buffering::Unbounded])];

/// The NCCL algorithms run two channels at once (the rank-order plan of a
/// fabric without hardware): 2 ranks under every buffering, 3 unbounded.
const NCCL_CASES: &[(usize, &[Buffering])] = &[(2, ALL_BUFFERING), (3, &[Buffering::Unbounded])];

/// The NCCL ring allreduce's two channels of 2(N-1) steps each interleave
/// beyond the checker's bound on 3 ranks (178,838 schedules, incomplete):
/// 2 ranks only.
const NCCL_RING_CASES: &[(usize, &[Buffering])] = &[(2, ALL_BUFFERING)];

/// PAT's per-piece messages on 4 ranks in 2 chunks interleave beyond the
/// checker's bound (about 400,000 schedules, incomplete): 2 and 3 ranks
/// here, 4 ranks in one chunk below.
const PAT_CASES: &[(usize, &[Buffering])] = &[(2, ALL_BUFFERING), (3, ALL_BUFFERING)];

#[test]
fn pat_on_four_ranks_in_one_chunk() {
    for collective in [Collective::Allgather, Collective::ReduceScatter] {
        verify_chunked(
            &catalogue_algorithm(collective, "pat"),
            &[(4, &[Buffering::Unbounded])],
            |_| Some(vec![1]),
        );
    }
}

#[test]
fn every_catalogue_entry_is_checked() {
    let registry = Registry::builtin();
    let catalogue: BTreeSet<(Collective, &str)> = registry
        .iter()
        .map(|e| (e.collective(), e.name()))
        .collect();
    let covered: BTreeSet<(Collective, &str)> = COVERED.iter().copied().collect();
    assert_eq!(covered.len(), COVERED.len(), "no entry twice");
    assert_eq!(covered, catalogue);
}

/// Two chunks per ring segment (`2n` elements in `2n` chunks of one), so
/// that the ring really pipelines: its window is `min(slots, 2) = 2`.
fn two_chunks_per_segment(n: usize) -> Option<Vec<usize>> {
    Some(vec![2 * n])
}

#[test]
fn pipelined_ring_allreduce_is_verified_with_buffered_sends() {
    // One eager slot holds the one chunk the window sends ahead; each
    // point is one schedule (the ring exchanges), so 2 to 4 ranks.
    let one_slot: &[Buffering] = &[Buffering::Unbounded, Buffering::Eager(1)];
    let cases = [(2, one_slot), (3, one_slot), (4, one_slot)];
    verify_chunked(
        &catalogue_algorithm(Collective::Allreduce, "ring"),
        &cases,
        two_chunks_per_segment,
    );
    // The hierarchical allreduce's ring across nodes (2 nodes of 2).
    verify_chunked(
        &catalogue_algorithm(Collective::Allreduce, "hierarchical"),
        &[(4, one_slot)],
        two_chunks_per_segment,
    );
}

/// Under rendezvous sends the checker gives the pipelined ring one slot
/// (`Params::slots`), so its window is one chunk and each rank posts its
/// receive before its next send. Each point is one schedule (the ring
/// exchanges), so 2 to 4 ranks.
#[test]
fn pipelined_ring_allreduce_is_verified_with_rendezvous_sends() {
    let rendezvous: &[Buffering] = &[Buffering::Eager(0)];
    verify_chunked(
        &catalogue_algorithm(Collective::Allreduce, "ring"),
        &[(2, rendezvous), (3, rendezvous), (4, rendezvous)],
        two_chunks_per_segment,
    );
}

/// Regression: the double binary tree on 6 and 10 ranks under rendezvous
/// sends used to deadlock on every schedule (ranks 2 and 3 at N = 6 each
/// waited for the other to take a send before posting the receive that
/// would take it). Its sends now stay in flight while it receives, so no
/// schedule deadlocks; 200 random schedules per point (the old program
/// failed on the first) keep the test cheap, and
/// `scenarios/check/tree6_rendezvous_ok.toml` searches N = 6 exhaustively.
#[test]
fn tree_allreduce_on_six_and_ten_ranks_does_not_deadlock_under_rendezvous() {
    let tree = catalogue_algorithm(Collective::Allreduce, "tree");
    for n in [6, 10] {
        let mut scenario = scenario(&tree, n, &[Buffering::Eager(0)]);
        scenario.axes.count = vec![2];
        scenario.axes.root = vec![0];
        scenario.axes.in_place = vec![true];
        scenario.axes.chunks = vec![1];
        scenario.search = Search::Random {
            schedules: 200,
            seed: 7,
        };
        scenario.expect = None;
        let program = Rc::new(scenario);
        let report = check(&program, Options::default())
            .unwrap_or_else(|e| panic!("{}: the search failed: {e}", program.name));
        if let Some(cex) = &report.counterexample {
            let mut out = Vec::new();
            print_counterexample(&program, cex, &mut out).expect("writing to memory");
            panic!(
                "N={n}: {}\n{}",
                report.verdict,
                String::from_utf8_lossy(&out)
            );
        }
        assert_eq!(report.schedules, 200, "N={n}: every random schedule ran");
    }
}
