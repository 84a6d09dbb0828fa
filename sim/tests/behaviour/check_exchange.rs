//! Soundness of the checker's exchange reduction: an exchange
//! ([`Fabric::exchange`]) wakes its rank once, when both halves are done,
//! and the explorer treats its two halves as commuting. On small
//! programs, including ones written to defeat the reduction (a rank that
//! reacts to whether an exchange or another receive completed first, tag
//! reuse, faults), the DPOR search reaches exactly the naive search's
//! outcomes; and the exchange reaches exactly the outcomes of the same
//! program joining its send and receive futures itself.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;

use algorithms::{
    AnyFabric, Collective, CollectiveAlgorithm, CollectiveError, Fabric, Params, Payload, ReduceOp,
    Running,
};
use checker::demo::{RingPairing, unchunked_ring};
use checker::explore::Reduction;
use checker::spec::{Buffering, Faults};

use super::check_soundness::{
    EAGER1, RENDEZVOUS, assert_sound, demo, faults, outcomes, point, program, ring,
};

/// The unchunked ring allreduce of the checker's demos without its bug
/// (as the catalogue's with one chunk per segment), its send and receive
/// of a step paired as [`RingPairing`] says.
#[derive(Clone, Copy, Debug)]
struct PlainRing(RingPairing);

impl CollectiveAlgorithm for PlainRing {
    fn name(&self) -> &str {
        match self.0 {
            RingPairing::Exchange => "plain_ring_exchange",
            RingPairing::Joined => "plain_ring_joined",
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
        let pairing = self.0;
        Box::pin(async move { unchunked_ring(&fabric, buf, op, params, pairing, false).await })
    }
}

/// A program built to defeat the reduction: rank 0 exchanges with rank 1
/// (sends to it, receives from it) while also receiving from rank 2, and
/// folds what arrives in the order it completes (`acc = first ⊕ acc`,
/// then the other): the result's reduction tree tells whether the
/// exchange or the plain receive completed first. Rank 1 receives from 0
/// and then sends to 0 (so under rendezvous the exchange's send half
/// completes first, its receive half a step later); rank 2 sends to 0.
#[derive(Clone, Copy, Debug)]
struct ExchangeOrReceive;

impl CollectiveAlgorithm for ExchangeOrReceive {
    fn name(&self) -> &str {
        "exchange_or_receive"
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
        Box::pin(async move { exchange_or_receive(&fabric, buf, op, params).await })
    }
}

async fn exchange_or_receive<F: Fabric>(
    fabric: &F,
    buf: &mut Payload,
    op: ReduceOp,
    params: &Params,
) -> Result<(), CollectiveError> {
    let shape = buf.shape();
    let whole = 0..shape.count;
    let tag = params.tag;
    match fabric.rank() {
        0 => {
            let mut exchange = Box::pin(fabric.exchange(1, buf.clone(), 1, shape, tag));
            let mut plain = Box::pin(fabric.recv(2, tag, shape));
            let (first, second) = first_then_other(&mut exchange, &mut plain).await;
            buf.reduce_from(whole.clone(), &first?, op)?;
            buf.reduce_from(whole, &second?, op)?;
        }
        1 => {
            let got = fabric.recv(0, tag, shape).await?;
            fabric.send(0, tag, buf.clone()).await?;
            buf.reduce_from(whole, &got, op)?;
        }
        2 => fabric.send(0, tag, buf.clone()).await?,
        _ => {}
    }
    Ok(())
}

/// Polls both futures until one completes, then the other; returns their
/// outputs in completion order (`a` first when both complete at one
/// poll).
pub(crate) async fn first_then_other<T>(
    a: &mut Pin<Box<impl Future<Output = T>>>,
    b: &mut Pin<Box<impl Future<Output = T>>>,
) -> (T, T) {
    let mut done_a = None;
    let mut done_b = None;
    let mut order = Vec::new();
    std::future::poll_fn(|cx| {
        if done_a.is_none()
            && let Poll::Ready(x) = a.as_mut().poll(cx)
        {
            done_a = Some(x);
            order.push(0);
        }
        if done_b.is_none()
            && let Poll::Ready(x) = b.as_mut().poll(cx)
        {
            done_b = Some(x);
            order.push(1);
        }
        if done_a.is_some() && done_b.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    let (a, b) = (done_a.expect("ready"), done_b.expect("ready"));
    if order[0] == 0 { (a, b) } else { (b, a) }
}

/// The buffering modes every case runs under.
const BUFFERINGS: [Buffering; 3] = [RENDEZVOUS, EAGER1, Buffering::Unbounded];

#[test]
fn exchange_ring_matches_naive_enumeration() {
    for buffering in BUFFERINGS {
        assert_sound(
            &format!("plain exchange ring N=3 {buffering}"),
            program(vec![demo(PlainRing(RingPairing::Exchange))]),
            point(3, 3, 1, buffering),
        );
    }
}

/// The exchange changes what the checker explores, never what can happen:
/// the ring written with an exchange and with joined futures reaches the
/// same outcomes (each searched naively and with DPOR).
#[test]
fn exchange_reaches_the_outcomes_of_joined_futures() {
    let crash = faults(0, None, 1, 0);
    let cases = [
        (RENDEZVOUS, Faults::default()),
        (EAGER1, Faults::default()),
        (Buffering::Unbounded, Faults::default()),
        (RENDEZVOUS, crash),
    ];
    for (buffering, faults) in cases {
        {
            let run = |pairing: RingPairing, reduction: Reduction| {
                let mut p = program(vec![demo(PlainRing(pairing))]);
                p.faults = faults;
                outcomes(&Rc::new(p), point(3, 3, 1, buffering), reduction).0
            };
            let joined: BTreeSet<String> = run(RingPairing::Joined, Reduction::Naive);
            for reduction in [Reduction::Naive, Reduction::Dpor] {
                let exchanged = run(RingPairing::Exchange, reduction);
                assert_eq!(
                    exchanged, joined,
                    "{buffering} {faults:?} {reduction:?}: the exchange's outcomes differ"
                );
            }
        }
    }
}

/// A rank that observes whether its exchange or another receive completed
/// first: both orders are reached, under every buffering.
#[test]
fn an_observer_of_exchange_completion_is_still_caught() {
    for buffering in BUFFERINGS {
        let program = Rc::new(program(vec![demo(ExchangeOrReceive)]));
        let at = point(3, 1, 1, buffering);
        let (reached, _) = outcomes(&program, at, Reduction::Dpor);
        assert_eq!(reached.len(), 2, "{buffering}: {reached:#?}");
        assert_sound(
            &format!("exchange_or_receive N=3 {buffering}"),
            (*program).clone(),
            at,
        );
    }
}

/// Faults striking an exchange's halves (a crash, a timeout, a loss).
#[test]
fn exchange_ring_with_faults_matches_naive_enumeration() {
    let cases = [
        ("crash", faults(0, None, 1, 0), RENDEZVOUS),
        ("timeout", faults(0, None, 0, 1), RENDEZVOUS),
        ("drop", faults(1, None, 0, 0), EAGER1),
    ];
    for (name, faults, buffering) in cases {
        let mut p = program(vec![demo(PlainRing(RingPairing::Exchange))]);
        p.faults = faults;
        assert_sound(
            &format!("plain exchange ring N=3 {name} {buffering}"),
            p,
            point(3, 3, 1, buffering),
        );
    }
}

/// Two rings on one tag (the tag reuse bug), both exchanging, run
/// concurrently: messages of one call can match receives of the other.
#[test]
fn exchange_tag_reuse_matches_naive_enumeration() {
    for buffering in [RENDEZVOUS, EAGER1] {
        let mut p = program(vec![ring(), ring()]);
        p.calls[1].tag = 0;
        p.calls[1].id = "call1".into();
        p.concurrent = true;
        assert_sound(
            &format!("tag_reuse concurrent N=2 {buffering}"),
            p,
            point(2, 2, 1, buffering),
        );
    }
}
