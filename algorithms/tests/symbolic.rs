//! Symbolic elements through the real algorithms: every reducing entry of
//! the catalogue, run on buffers of [`Sym`] on one thread, must produce
//! exactly the reduction trees its sequential `reference` documents, and
//! every output element must combine each rank's input exactly once.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use algorithms::collective::defined_output;
use algorithms::symbolic::{self, Node, Sym, leaf};
use algorithms::{
    Algorithm, Collective, CollectiveError, DType, Element, Fabric, FabricError, Params, Payload,
    Rank, ReduceOp, Registry, Shape, Tag, Time, Work,
};

/// Messages in flight, keyed by (source, destination, tag), in send order.
#[derive(Default)]
struct Network {
    queues: RefCell<HashMap<(Rank, Rank, Tag), VecDeque<Payload>>>,
    /// Sends and receives so far: a round of polls that changes nothing
    /// here and finishes no rank is a deadlock.
    moves: Cell<u64>,
    /// Receives waiting for a message, woken by every send (so futures
    /// joined under a combinator that polls only woken ones progress).
    waiting: RefCell<Vec<Waker>>,
}

/// One rank of an in-process, single-threaded world: sends are eager and
/// unbounded, a receive is ready once its message is queued.
struct TestFabric<'a> {
    rank: Rank,
    world_size: usize,
    network: &'a Network,
}

impl Fabric for TestFabric<'_> {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn now(&self) -> Time {
        Time::ZERO
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        if to >= self.world_size {
            return Err(FabricError::PeerOutOfRange {
                rank: self.rank,
                peer: to,
                world_size: self.world_size,
            });
        }
        let mut queues = self.network.queues.borrow_mut();
        queues
            .entry((self.rank, to, tag))
            .or_default()
            .push_back(payload);
        self.network.moves.set(self.network.moves.get() + 1);
        for w in self.network.waiting.borrow_mut().drain(..) {
            w.wake();
        }
        Ok(())
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        let key = (from, self.rank, tag);
        let payload = std::future::poll_fn(|cx| {
            let mut queues = self.network.queues.borrow_mut();
            match queues.get_mut(&key).and_then(VecDeque::pop_front) {
                Some(p) => Poll::Ready(p),
                None => {
                    self.network.waiting.borrow_mut().push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        self.network.moves.set(self.network.moves.get() + 1);
        if payload.shape() != expect {
            return Err(FabricError::ShapeMismatch {
                rank: self.rank,
                from,
                tag,
                expected: expect,
                got: payload.shape(),
            });
        }
        Ok(payload)
    }

    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }

    /// Every group is served: the switch as each member's contribution
    /// sent to every other member, folded in member order by each (as
    /// the model checker does).
    fn can_reduce_in_network(&self, _group: &[Rank]) -> Result<(), FabricError> {
        Ok(())
    }

    async fn reduce_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Payload, FabricError> {
        for &r in group.iter().filter(|&&r| r != self.rank) {
            self.send(r, tag, payload.clone()).await?;
        }
        let mut parts = Vec::with_capacity(group.len());
        for &r in group {
            parts.push(if r == self.rank {
                payload.clone()
            } else {
                self.recv(r, tag, payload.shape()).await?
            });
        }
        Ok(
            algorithms::in_network::reduce_in_member_order(parts.iter(), op)
                .expect("contributions of one shape"),
        )
    }

    /// The contributions sent to the root, which folds them.
    async fn reduce_to_in_network(
        &self,
        group: &[Rank],
        root: Rank,
        tag: Tag,
        payload: Payload,
        op: ReduceOp,
    ) -> Result<Option<Payload>, FabricError> {
        if root != self.rank {
            self.send(root, tag, payload).await?;
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(group.len());
        for &r in group {
            parts.push(if r == self.rank {
                payload.clone()
            } else {
                self.recv(r, tag, payload.shape()).await?
            });
        }
        Ok(Some(
            algorithms::in_network::reduce_in_member_order(parts.iter(), op)
                .expect("contributions of one shape"),
        ))
    }

    /// Every group is served: the source's payload sent to the others.
    fn can_multicast_in_network(&self, _group: &[Rank]) -> Result<(), FabricError> {
        Ok(())
    }

    async fn multicast_in_network(
        &self,
        group: &[Rank],
        tag: Tag,
        payload: Payload,
    ) -> Result<Payload, FabricError> {
        if group[0] != self.rank {
            return self.recv(group[0], tag, payload.shape()).await;
        }
        for &r in &group[1..] {
            self.send(r, tag, payload.clone()).await?;
        }
        Ok(payload)
    }
}

type RankFuture<'a> = Pin<Box<dyn Future<Output = Result<Payload, CollectiveError>> + 'a>>;

/// Runs one call of `algorithm` on every rank, polling the ranks
/// round-robin on this thread; returns each rank's buffer.
fn run_world(
    algorithm: &Algorithm,
    inputs: &[Payload],
    op: ReduceOp,
    params: &Params,
) -> Vec<Payload> {
    let n = inputs.len();
    let collective = algorithm.collective();
    let network = Network::default();
    let fabrics: Vec<TestFabric> = (0..n)
        .map(|rank| TestFabric {
            rank,
            world_size: n,
            network: &network,
        })
        .collect();
    let mut tasks: Vec<Option<RankFuture>> = fabrics
        .iter()
        .zip(inputs)
        .map(|(fabric, input)| {
            let mut buf = input.clone();
            let task: RankFuture = Box::pin(async move {
                algorithm.run(fabric, &mut buf, op, params).await?;
                Ok(buf)
            });
            Some(task)
        })
        .collect();
    let mut outputs: Vec<Option<Payload>> = vec![None; n];
    let mut cx = Context::from_waker(Waker::noop());
    while outputs.iter().any(Option::is_none) {
        let moves = network.moves.get();
        let mut finished = false;
        for (rank, slot) in tasks.iter_mut().enumerate() {
            let Some(task) = slot else { continue };
            if let Poll::Ready(result) = task.as_mut().poll(&mut cx) {
                let out = result.unwrap_or_else(|e| {
                    panic!("{collective} {algorithm} N={n} {op}: rank {rank} failed: {e}")
                });
                outputs[rank] = Some(out);
                *slot = None;
                finished = true;
            }
        }
        assert!(
            finished || network.moves.get() != moves,
            "{collective} {algorithm} N={n} {op}: deadlock"
        );
    }
    assert!(
        network.queues.borrow().values().all(VecDeque::is_empty),
        "{collective} {algorithm} N={n} {op}: messages left undelivered"
    );
    outputs
        .into_iter()
        .map(|o| o.expect("every rank finished"))
        .collect()
}

/// The leaf id of rank `rank`'s element `i`: unique per (rank, element).
fn leaf_id(rank: Rank, i: usize) -> u64 {
    ((rank as u64) << 32) | i as u64
}

fn symbolic_inputs(n: usize, count: usize) -> Vec<Payload> {
    (0..n)
        .map(|r| Payload::from_vec((0..count).map(|i| leaf(leaf_id(r, i))).collect::<Vec<_>>()))
        .collect()
}

fn name(id: u64) -> String {
    format!("r{}[{}]", id >> 32, id & 0xffff_ffff)
}

#[test]
fn every_reducing_algorithm_builds_its_documented_trees() {
    let mut checked = 0;
    let registry = Registry::builtin();
    for a in registry.iter().filter(|a| a.collective().reduces()) {
        let c = a.collective();
        for n in 2..=5usize {
            for count in [0, 1, n - 1, 3 * n + 1, 37] {
                for op in ReduceOp::ALL {
                    // One element per chunk and default chunks; two ranks
                    // per node (hierarchical: split for even N, flat for odd).
                    for (chunk_bytes, root) in [(4, 0), (512 * 1024, n - 1)] {
                        let params = Params {
                            chunk_bytes,
                            slots: 2,
                            root,
                            ranks_per_node: 2,
                            ..Params::default()
                        };
                        let inputs = symbolic_inputs(n, count);
                        let got = run_world(a, &inputs, op, &params);
                        // The NCCL algorithms' order depends on the
                        // fabric's plan: no reference, the leaves and the
                        // operators are still checked.
                        let want = a.reference(&inputs, op, &params);
                        for r in 0..n {
                            let range = defined_output(c, r, n, count, root);
                            let out = got[r].as_slice::<Sym>().expect("symbols stay symbols");
                            let reference = want
                                .as_ref()
                                .map(|w| w[r].as_slice::<Sym>().expect("symbols"));
                            for i in range {
                                let at = || {
                                    format!(
                                        "{c} {a} N={n} count={count} {op} chunk={chunk_bytes} root={root} rank {r} element {i}"
                                    )
                                };
                                if let Some(reference) = reference {
                                    assert_eq!(
                                        out[i],
                                        reference[i],
                                        "{}: got {}, reference {}",
                                        at(),
                                        symbolic::describe(out[i], &name),
                                        symbolic::describe(reference[i], &name),
                                    );
                                }
                                let every_rank: Vec<u64> = (0..n).map(|s| leaf_id(s, i)).collect();
                                assert_eq!(symbolic::leaves(out[i]), every_rank, "{}", at());
                                let combined = if op == ReduceOp::Avg {
                                    ReduceOp::Sum
                                } else {
                                    op
                                };
                                assert_eq!(symbolic::ops(out[i]), vec![combined], "{}", at());
                                let divided = matches!(symbolic::node(out[i]), Node::Divide { ranks, .. } if ranks == n);
                                assert_eq!(divided, op == ReduceOp::Avg, "{}", at());
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "only {checked} elements were checked");
}

#[test]
fn the_ring_allreduce_tree_reads_as_documented() {
    // Ring allreduce of 3 ranks, one element: segment 0 starts at rank 0
    // and travels 0, 1, 2, each rank computing `received ⊕ local`.
    let inputs = symbolic_inputs(3, 1);
    let params = Params::default();
    let ring = Registry::builtin()
        .get(Collective::Allreduce, "ring")
        .expect("the catalogue's ring");
    let out = run_world(&ring, &inputs, ReduceOp::Max, &params);
    let s = out[2].as_slice::<Sym>().expect("symbols")[0];
    assert_eq!(
        symbolic::describe(s, &name),
        "max(max(r0[0], r1[0]), r2[0])"
    );
    for buf in &out {
        assert_eq!(buf.as_slice::<Sym>().expect("symbols")[0], s);
    }
}

#[test]
fn a_wrong_order_is_a_different_symbol() {
    // The check above is not vacuous: a rank-order fold differs from the
    // ring's cyclic order for min, as it may for floats.
    let n = 3;
    let inputs = symbolic_inputs(n, n);
    let ring = Registry::builtin()
        .get(Collective::Allreduce, "ring")
        .expect("the catalogue's ring")
        .reference(&inputs, ReduceOp::Min, &Params::default())
        .expect("ring has a reference");
    let rank_order = algorithms::reference::rank_order_reference(&inputs, ReduceOp::Min);
    assert_eq!(
        ring[0].count_wrong(&rank_order),
        2,
        "segments 1 and 2 start elsewhere"
    );
}

#[test]
fn zeroed_symbol_buffers_hold_the_zero_symbol() {
    let p = Payload::zeros(DType::Sym, 3, false);
    assert_eq!(p.as_slice::<Sym>().expect("symbols"), &[Sym::ZERO; 3]);
    assert_eq!(symbolic::node(Sym::ZERO), Node::Zero);
    let bytes = p.as_bytes().expect("real data").to_vec();
    assert_eq!(bytes, vec![0u8; 12]);
    let x = Payload::from_vec(vec![leaf(5), Sym::from_i64(6)]);
    let back =
        Payload::from_bytes(DType::Sym, x.as_bytes().expect("real data")).expect("whole elements");
    assert_eq!(back, x);
    assert_eq!(
        symbolic::node(back.as_slice::<Sym>().expect("symbols")[1]),
        Node::Leaf(6)
    );
}
