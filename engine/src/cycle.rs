//! Cycle search in a small directed graph: the wait-for graph of ranks in
//! a deadlock report, the buffer-dependency graph of a stuck network.

/// A cycle of `edges` (adjacency lists: `edges[a]` holds the nodes `a`
/// waits for), searching depth first from each node of `starts` in turn
/// and following edges in the order given; written from its lowest node.
/// Deterministic for a given graph.
pub fn find_cycle(
    edges: &[Vec<usize>],
    starts: impl IntoIterator<Item = usize>,
) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    for start in starts {
        if mark[start] != Mark::New {
            continue;
        }
        // Stack of (node, index of the next edge to follow).
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::OnPath;
        while let Some(&mut (a, ref mut next)) = path.last_mut() {
            let Some(&b) = edges[a].get(*next) else {
                mark[a] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match mark[b] {
                Mark::New => {
                    mark[b] = Mark::OnPath;
                    path.push((b, 0));
                }
                Mark::OnPath => {
                    let from = path
                        .iter()
                        .position(|&(q, _)| q == b)
                        .expect("b is on the path");
                    let mut cycle: Vec<usize> = path[from..].iter().map(|&(q, _)| q).collect();
                    let lowest = (0..cycle.len())
                        .min_by_key(|&i| cycle[i])
                        .expect("a cycle is not empty");
                    cycle.rotate_left(lowest);
                    return Some(cycle);
                }
                Mark::Done => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn finds_the_cycle_not_the_tail_and_none_in_a_dag() {
        // 0 -> 1 -> 2 -> 3 -> 1
        let edges = vec![vec![1], vec![2], vec![3], vec![1]];
        assert_eq!(find_cycle(&edges, 0..4), Some(vec![1, 2, 3]));
        let dag = vec![vec![1, 2], vec![2], vec![]];
        assert_eq!(find_cycle(&dag, 0..3), None);
        // A self-loop is a cycle of one.
        assert_eq!(find_cycle(&[vec![0]], 0..1), Some(vec![0]));
    }
}
