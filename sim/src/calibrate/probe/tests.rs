//! Tests of the calibration probes (`super`).

use super::*;
use realnet::{CallId, Endpoint, JobOptions, LocalFabric};

/// The shift forwards what it received, as a ring's steps do: on 3
/// ranks, after [`ROUNDS`] rounds the buffer first sent holds the
/// bytes of the rank `ROUNDS` hops back and the other those of the
/// rank `ROUNDS - 1` hops back (re-sending one buffer would leave a
/// rank's own bytes in the first and its left neighbour's in the
/// other).
#[test]
fn the_shift_forwards_what_it_received() {
    let n = 3;
    let fabrics = LocalFabric::group(n, &JobOptions::default());
    let got: Vec<(u8, u8)> = std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .iter()
            .map(|f| {
                s.spawn(move || {
                    let mut bytes = vec![f.rank() as u8 + 1; 64];
                    bytes.extend([0; 64]);
                    let mut buf = Payload::from_vec(bytes);
                    f.begin_call(CallId {
                        seq: 1,
                        kind: super::super::PROBE_CALL_KIND,
                    })
                    .unwrap();
                    f.block_on(shift(f, &mut buf)).unwrap();
                    f.finish().unwrap();
                    let b = buf.as_slice::<u8>().unwrap();
                    (b[0], b[64])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rounds = ROUNDS as usize;
    for (rank, &(first, other)) in got.iter().enumerate() {
        let from = |hops: usize| ((rank + n * rounds - hops) % n) as u8 + 1;
        assert_eq!(
            (first, other),
            (from(rounds), from(rounds - 1)),
            "rank {rank}"
        );
    }
}

/// Counts a fabric's exchanges and its other sends and receives.
struct Counting<'a> {
    inner: &'a LocalFabric,
    exchanges: std::cell::Cell<u32>,
    alone: std::cell::Cell<u32>,
}

impl Fabric for Counting<'_> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world_size(&self) -> usize {
        self.inner.world_size()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn send(
        &self,
        to: usize,
        tag: Tag,
        payload: Payload,
    ) -> impl Future<Output = Result<(), FabricError>> {
        self.alone.set(self.alone.get() + 1);
        self.inner.send(to, tag, payload)
    }
    fn recv(
        &self,
        from: usize,
        tag: Tag,
        expect: Shape,
    ) -> impl Future<Output = Result<Payload, FabricError>> {
        self.alone.set(self.alone.get() + 1);
        self.inner.recv(from, tag, expect)
    }
    fn compute(&self, work: Work) -> impl Future<Output = Result<(), FabricError>> {
        self.inner.compute(work)
    }
    fn exchange_in_place(
        &self,
        to: usize,
        from: usize,
        tag: Tag,
        buf: &mut Payload,
        send: std::ops::Range<usize>,
        recv: std::ops::Range<usize>,
        op: Option<ReduceOp>,
    ) -> impl Future<Output = Result<(), CollectiveError>> {
        self.exchanges.set(self.exchanges.get() + 1);
        self.inner
            .exchange_in_place(to, from, tag, buf, send, recv, op)
    }
}

/// Every round of the shift, and every call of the `calls` probe, is
/// one exchange (a send and a receive as one operation), as a
/// collective's step is, and nothing else is sent or received: a send
/// awaited before its receive (the probe before) costs more per
/// message than the collectives' steps pay.
#[test]
fn a_shift_round_is_one_exchange_as_a_collectives_step() {
    let fabrics = LocalFabric::group(2, &JobOptions::default());
    let counts: Vec<(u32, u32)> = std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .iter()
            .map(|f| {
                s.spawn(move || {
                    let c = Counting {
                        inner: f,
                        exchanges: 0.into(),
                        alone: 0.into(),
                    };
                    f.begin_call(CallId {
                        seq: 1,
                        kind: super::super::PROBE_CALL_KIND,
                    })
                    .unwrap();
                    let buf = &mut halves(8, false);
                    f.block_on(async {
                        shift(&c, buf).await?;
                        for call in 0..CALLS {
                            shift_round(&c, buf, call).await?;
                        }
                        Ok::<(), FabricError>(())
                    })
                    .unwrap();
                    f.finish().unwrap();
                    (c.exchanges.get(), c.alone.get())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, &got) in counts.iter().enumerate() {
        assert_eq!(got, (ROUNDS + CALLS, 0), "rank {rank}");
    }
}
