//! Soundness of the checker's joint operations beyond the plain exchange:
//! a framed exchange ([`Fabric::exchange_framed`], what the NCCL-style
//! algorithms reach through `Framed`) and the in-network operations, each
//! one operation that wakes its rank once. On small programs, including
//! one written to defeat the reduction (a rank that reacts to whether an
//! in-network reduction or another receive completed first), the DPOR
//! search reaches exactly the naive search's outcomes; the framed
//! exchange reaches exactly the outcomes of the same program joining its
//! framed send and its receive itself.

use std::collections::BTreeSet;
use std::rc::Rc;

use algorithms::layout::block_range;
use algorithms::nccl::{Framed, Framing, NcclAlgorithm, Protocol};
use algorithms::{
    AnyFabric, Collective, CollectiveAlgorithm, CollectiveError, Fabric, Params, Payload, ReduceOp,
    Running, Shape, catalogue_algorithm,
};
use checker::explore::Reduction;
use checker::spec::{Buffering, Faults};

use super::check_exchange::first_then_other;
use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_sound, call, demo, faults, outcomes, point, program,
};

/// The buffering modes every case runs under.
const BUFFERINGS: [Buffering; 3] = [RENDEZVOUS, EAGER1, Buffering::Unbounded];

/// The framing every framed ring sends with.
const FRAMING: Framing = Framing {
    protocol: Protocol::Simple,
    algorithm: NcclAlgorithm::Ring,
    channel: 0,
};

/// The unchunked ring allreduce over [`Framed`]: each step one framed
/// exchange (`joined` false) or the framed send's and the receive's
/// futures joined by the algorithm.
#[derive(Clone, Copy, Debug)]
struct FramedRing {
    joined: bool,
}

impl CollectiveAlgorithm for FramedRing {
    fn name(&self) -> &str {
        if self.joined {
            "framed_ring_joined"
        } else {
            "framed_ring_exchange"
        }
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        let joined = self.joined;
        Box::pin(async move {
            let framed = Framed::new(&fabric, FRAMING);
            framed_ring(&framed, buf, op, params, joined).await
        })
    }
}

async fn framed_ring<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
    joined: bool,
) -> Result<(), CollectiveError> {
    let shape = buf.shape();
    let n = fabric.world_size();
    let r = fabric.rank();
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let block = |j: usize| block_range(shape.count, n, j % n);
    for s in 0..2 * (n - 1) {
        let outgoing = buf.extract(block(r + 2 * n - s));
        let range = block(r + 2 * n - s - 1);
        let expect = Shape::new(shape.dtype, range.len());
        let incoming = if joined {
            let (sent, received) = futures_util::join!(
                fabric.send(next, params.tag, outgoing),
                fabric.recv(prev, params.tag, expect)
            );
            sent?;
            received?
        } else {
            fabric
                .exchange(next, outgoing, prev, expect, params.tag)
                .await?
        };
        if s < n - 1 {
            buf.reduce_from(range, &incoming, op)?;
        } else {
            buf.copy_from(range, &incoming)?;
        }
    }
    Ok(())
}

#[test]
fn framed_exchange_ring_matches_naive_enumeration() {
    for buffering in BUFFERINGS {
        assert_sound(
            &format!("framed exchange ring N=3 {buffering}"),
            program(vec![demo(FramedRing { joined: false })]),
            point(3, 3, 1, buffering),
        );
    }
}

/// The framed exchange changes what the checker explores, never what can
/// happen: the same outcomes as the framed send and receive joined, with
/// and without a crash.
#[test]
fn framed_exchange_reaches_the_outcomes_of_joined_framed_futures() {
    let cases = [
        (RENDEZVOUS, Faults::default()),
        (EAGER1, Faults::default()),
        (Buffering::Unbounded, Faults::default()),
        (RENDEZVOUS, faults(0, None, 1, 0)),
    ];
    for (buffering, faults) in cases {
        let run = |joined: bool, reduction: Reduction| {
            let mut p = program(vec![demo(FramedRing { joined })]);
            p.faults = faults;
            outcomes(&Rc::new(p), point(3, 3, 1, buffering), reduction)
        };
        let (joined, _) = run(true, Reduction::Naive);
        let (exchanged, stats) = run(false, Reduction::Dpor);
        assert!(stats.complete(), "{buffering} {faults:?}: {stats:?}");
        assert_eq!(
            exchanged, joined,
            "{buffering} {faults:?}: the framed exchange's outcomes differ"
        );
    }
}

/// The catalogue's NCCL ring and PAT (framed exchanges through `Framed`)
/// and NVLS (one in-network reduction per rank): the naive search's
/// outcomes on as many ranks as the naive search finishes (the NCCL ring
/// on 3 ranks has more than 400,000 interleavings). NVLS is one schedule
/// on 4 ranks too: no rank can observe an order. (The ring's and PAT's
/// two channels are futures of one call that the checker still orders
/// against each other.)
#[test]
fn nccl_algorithms_on_joint_operations_match_naive_enumeration() {
    let cases = [
        (Collective::Allreduce, "nccl_ring", RENDEZVOUS, 2),
        (Collective::Allgather, "nccl_ring", EAGER1, 2),
        (Collective::Allgather, "nccl_pat", RENDEZVOUS, 2),
        (Collective::Allreduce, "nccl_nvls", RENDEZVOUS, 3),
        (Collective::Allreduce, "nccl_nvls", Buffering::Unbounded, 3),
    ];
    for (collective, name, buffering, n) in cases {
        let calls = vec![call(0, catalogue_algorithm(collective, name))];
        assert_sound(
            &format!("{} {name} N={n} {buffering}", collective.name()),
            program(calls),
            point(n, n, 1, buffering),
        );
    }
    for buffering in BUFFERINGS {
        let nvls = vec![call(
            0,
            catalogue_algorithm(Collective::Allreduce, "nccl_nvls"),
        )];
        let (_, stats) = outcomes(
            &Rc::new(program(nvls)),
            point(4, 4, 1, buffering),
            Reduction::Dpor,
        );
        assert_eq!(stats.schedules, 1, "nccl_nvls N=4 {buffering}: {stats:?}");
    }
}

/// Built to defeat the joint in-network operation: rank 0 reduces in the
/// network with rank 1 while also receiving from rank 2, and folds what
/// completes first on the left; rank 1 receives rank 0's message only
/// after its own reduction, rank 2 sends to 0. The result's tree tells
/// which completed first, and both orders are reached.
#[derive(Clone, Copy, Debug)]
struct ReductionOrReceive;

impl CollectiveAlgorithm for ReductionOrReceive {
    fn name(&self) -> &str {
        "reduction_or_receive"
    }

    fn collective(&self) -> Collective {
        Collective::Allreduce
    }

    fn run<'a>(
        &'a self,
        fabric: AnyFabric<'a>,
        buf: &'a mut Payload,
        op: ReduceOp,
        params: &'a Params,
    ) -> Running<'a> {
        Box::pin(async move {
            let shape = buf.shape();
            let whole = 0..shape.count;
            let (tag, pair) = (params.tag, [0, 1]);
            match fabric.rank() {
                0 => {
                    let mut reduce =
                        Box::pin(fabric.reduce_in_network(&pair, tag.phase(0), buf.clone(), op));
                    let mut plain = Box::pin(fabric.recv(2, tag, shape));
                    let (first, second) = first_then_other(&mut reduce, &mut plain).await;
                    buf.reduce_from(whole.clone(), &first?, op)?;
                    buf.reduce_from(whole, &second?, op)?;
                }
                1 => {
                    let sum = fabric
                        .reduce_in_network(&pair, tag.phase(0), buf.clone(), op)
                        .await?;
                    buf.copy_from(whole, &sum)?;
                }
                2 => fabric.send(0, tag, buf.clone()).await?,
                _ => {}
            }
            Ok(())
        })
    }
}

#[test]
fn an_observer_of_in_network_completion_is_still_caught() {
    for buffering in BUFFERINGS {
        let program = Rc::new(program(vec![demo(ReductionOrReceive)]));
        let at = point(3, 1, 1, buffering);
        let (reached, _) = outcomes(&program, at, Reduction::Dpor);
        let distinct: BTreeSet<_> = reached.iter().collect();
        assert_eq!(distinct.len(), 2, "{buffering}: {reached:#?}");
        assert_sound(
            &format!("reduction_or_receive N=3 {buffering}"),
            (*program).clone(),
            at,
        );
    }
}

/// Faults striking a joint in-network operation's parts.
#[test]
fn in_network_operations_with_faults_match_naive_enumeration() {
    let nvls = || call(0, catalogue_algorithm(Collective::Allreduce, "nccl_nvls"));
    let cases = [
        ("crash", faults(0, None, 1, 0), RENDEZVOUS),
        ("timeout", faults(0, None, 0, 1), RENDEZVOUS),
        ("drop", faults(1, None, 0, 0), EAGER1),
    ];
    for (name, faults, buffering) in cases {
        let mut p = program(vec![nvls()]);
        p.faults = faults;
        assert_sound(
            &format!("nccl_nvls N=3 {name} {buffering}"),
            p,
            point(3, 3, 1, buffering),
        );
    }
}
