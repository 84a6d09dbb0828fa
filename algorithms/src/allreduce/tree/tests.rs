//! Tests of the tree allreduce: the two trees span all ranks and complement each other, a chunk's path, generated programs against the sorted plan, NCCL's double binary tree of fourteen.

use super::*;

/// The in-order traversal of tree `tree`'s subtree at `v`.
fn in_order(n: usize, tree: u8, v: Rank, out: &mut Vec<Rank>) {
    let node = node(n, tree, v);
    if let Some(l) = node.left {
        assert_eq!(super::node(n, tree, l).parent, Some(v));
        in_order(n, tree, l, out);
    }
    out.push(v);
    if let Some(r) = node.right {
        assert_eq!(super::node(n, tree, r).parent, Some(v));
        in_order(n, tree, r, out);
    }
}

#[test]
fn trees_span_all_ranks_in_order_and_complement_each_other() {
    for n in 2..=70 {
        for tree in 0..2 {
            let mut seen = Vec::new();
            in_order(n, tree, root(n, tree), &mut seen);
            let mut want: Vec<Rank> = (0..n).collect();
            if tree == 1 && n % 2 == 0 {
                want.reverse();
            }
            assert_eq!(seen, want, "n={n} tree={tree}");
            assert_eq!(node(n, tree, root(n, tree)).parent, None);
        }
        for r in 0..n {
            let interior = (0..2)
                .filter(|&t| node(n, t, r).children().next().is_some())
                .count();
            assert_eq!(interior, 1, "n={n} rank={r}");
        }
    }
}

#[test]
fn one_chunk_goes_up_and_down_the_deeper_tree() {
    for latency_ps in [1_000_000, 5_000, 0] {
        let model = CostModel {
            latency_ps,
            bandwidth_bytes_per_s: 1e11,
            reduce_bytes_per_s: None,
        };
        let params = Params {
            chunk_bytes: u64::MAX,
            ..Params::default()
        };
        for n in 2..=64 {
            let h = (0..2).map(|t| height(n, t, root(n, t))).max().unwrap() as u64;
            for count in [1, n, 64 * n + 1] {
                let t = model.wire_ps(4 * count.div_ceil(2) as u64);
                let want = 2 * h * (latency_ps + t);
                assert_eq!(
                    cost_ps(&model, n, count, DType::F32, &params),
                    want,
                    "n={n}"
                );
            }
        }
    }
}

/// The program as first written: every group generated in order of
/// chunk, tree and direction, then stably sorted by planned time.
fn sorted_program(plan: &Plan, rank: Rank) -> Vec<Op> {
    let n = plan.world_size;
    let mut timed: Vec<(usize, Op)> = Vec::new();
    for c in 0..plan.chunks {
        for t in 0..2u8 {
            let place = Place::new(n, t, rank);
            let height = plan.heights[usize::from(t)];
            let mut group = Vec::new();
            Up {
                node: place.node,
                tree: t,
                chunk: c,
                window: plan.window,
                chunks: plan.chunks,
            }
            .ops(&mut group);
            let key = plan.key(c, height - place.depth);
            timed.extend(group.drain(..).map(|op| (key, op)));
            if place.node.parent.is_some() {
                down_chunk(place.node, t, c, &mut group);
                let key = plan.key(c, height + place.depth);
                timed.extend(group.drain(..).map(|op| (key, op)));
            }
        }
    }
    timed.sort_by_key(|&(key, _)| key);
    timed.into_iter().map(|(_, op)| op).collect()
}

#[test]
fn generated_programs_are_the_stably_sorted_groups() {
    for n in [2, 3, 5, 8, 13, 16, 24] {
        for (chunks, slots) in [(1, 8), (3, 8), (20, 8), (20, 2), (7, 1)] {
            let params = Params {
                chunk_bytes: 4,
                slots,
                ..Params::default()
            };
            let plan = Plan::new(2 * chunks, n, 4, &params);
            assert_eq!(plan.chunks, chunks);
            for rank in 0..n {
                let lazy: Vec<Op> = Program::new(&plan, rank).collect();
                assert_eq!(
                    lazy,
                    sorted_program(&plan, rank),
                    "n={n} K={chunks} rank={rank}"
                );
            }
        }
    }
}

#[test]
fn nccl_btree_of_fourteen() {
    // The illustration in NCCL's trees.cc.
    assert_eq!(btree(14, 0).right, Some(8));
    assert_eq!(btree(14, 8).left, Some(4));
    assert_eq!(btree(14, 8).right, Some(12));
    assert_eq!(btree(14, 12).right, Some(13));
    assert_eq!(btree(14, 13).parent, Some(12));
    assert_eq!(btree(14, 5).parent, Some(6));
}
