//! The receive future of [`SimFabric`]: a posted receive that waits for
//! its message, records its span and checks the message's shape, or
//! fails when the transport gave up on the peer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use algorithms::{Fabric, FabricError, Payload, Rank, Shape, Tag, Time};

use super::SimFabric;
use crate::trace::SpanKind;

/// Receives the next message from `from` with `tag`: checks the peer on
/// the first poll, waits, then records the receive's span and checks the
/// message's shape.
pub(super) struct Recv<'a> {
    pub(super) fabric: &'a SimFabric,
    pub(super) from: Rank,
    pub(super) tag: Tag,
    pub(super) expect: Shape,
    /// When the receive was first polled (posted).
    pub(super) posted: Option<Time>,
    /// Its entry among the world's waiting receives, once it waited.
    pub(super) wait: Option<u32>,
}

impl Recv<'_> {
    /// The received `payload`, its span recorded, if it has the expected
    /// shape.
    fn arrived(&self, payload: Payload) -> Result<Payload, FabricError> {
        let posted = self.posted.expect("set on the first poll");
        let got = payload.shape();
        self.fabric
            .record(SpanKind::Recv, Some(self.from), got.bytes(), posted);
        if got != self.expect {
            return Err(FabricError::ShapeMismatch {
                rank: self.fabric.rank,
                from: self.from,
                tag: self.tag,
                expected: self.expect,
                got,
            });
        }
        Ok(payload)
    }
}

impl Future for Recv<'_> {
    type Output = Result<Payload, FabricError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.posted.is_none() {
            self.fabric.check_peer(self.from)?;
            self.posted = Some(self.fabric.now());
        }
        let rank = self.fabric.rank;
        let mut world = self.fabric.world.borrow_mut();
        if let Some(id) = self.wait
            && world.wait_unchanged(id, cx.waker())
        {
            // Woken for another receive: nothing new for this one.
            return Poll::Pending;
        }
        if let Some(payload) = world.take_message(rank, self.from, self.tag) {
            if let Some(id) = self.wait.take() {
                world.remove_wait(rank, id);
            }
            drop(world);
            return Poll::Ready(self.arrived(payload));
        }
        if let Some(failure) = world.broken(rank, self.from) {
            let error = FabricError::Timeout {
                rank,
                peer: self.from,
                reason: format!("{}; {}", failure.summary(), failure.cause()),
            };
            if let Some(id) = self.wait.take() {
                world.remove_wait(rank, id);
            }
            return Poll::Ready(Err(error));
        }
        let id = world.register_wait(
            rank,
            self.wait,
            self.from,
            self.tag,
            self.expect,
            cx.waker(),
        );
        drop(world);
        self.wait = Some(id);
        Poll::Pending
    }
}

impl Drop for Recv<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.wait
            && let Ok(mut world) = self.fabric.world.try_borrow_mut()
        {
            world.remove_wait(self.fabric.rank, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use algorithms::{DType, Fabric, Payload, Shape, Tag};
    use topologies::LinkSpec;

    use crate::network::NetworkConfig;
    use crate::world::WorldConfig;

    /// Receives waiting at once, woken by messages for one another: two
    /// receives of the same sender and tag each get one of its messages
    /// (the first arrival signals both, only one takes it, the other
    /// waits on for the second), and a receive of another tag, polled at
    /// every wake-up of its rank, completes when its own message comes.
    #[test]
    fn concurrent_receives_wait_for_their_own_messages() {
        // 1 us latency, 1000 B at 1 GB/s: 2 us per message, back to back.
        let link = LinkSpec::new(1_000_000, 1e9).expect("a valid link");
        let exec = crate::run(
            WorldConfig::new(2, NetworkConfig::Ideal(link)),
            |f| async move {
                let shape = Shape::new(DType::U8, 1000);
                if f.rank() == 0 {
                    for tag in [5, 5, 5, 7] {
                        let payload = Payload::phantom(DType::U8, 1000);
                        f.send(1, Tag(tag), payload).await.expect("a peer");
                    }
                    return Vec::new();
                }
                let timed = |tag| {
                    let f = &f;
                    async move {
                        f.recv(0, Tag(tag), shape).await.expect("sent");
                        f.now().as_ps()
                    }
                };
                let (a, b, c, d) = futures_util::join!(timed(5), timed(7), timed(5), timed(5));
                vec![a, b, c, d]
            },
        );
        let done = exec.outputs[1].clone().expect("rank 1 finished");
        // Messages arrive at 2, 3, 4 and 5 us (the link sends them one
        // after another); tag 5's three receives take them in turn.
        assert_eq!(done, vec![2_000_000, 5_000_000, 3_000_000, 4_000_000]);
    }

    /// When rank 0 has both messages of a fan-in from ranks 1 and 2 (1000
    /// B each at 1 GB/s, 1 us latency), having first slept `sleep_ps`,
    /// with a receive overhead of `receive_ps`.
    fn fan_in_done_ps(receive_ps: u64, sleep_ps: u64) -> u64 {
        let link = LinkSpec::new(1_000_000, 1e9)
            .expect("a valid link")
            .with_receive_overhead_ps(receive_ps);
        let exec = crate::run(
            WorldConfig::new(3, NetworkConfig::Ideal(link)),
            |f| async move {
                let shape = Shape::new(DType::U8, 1000);
                if f.rank() == 0 {
                    f.sleep_ps(sleep_ps).await;
                    f.recv(1, Tag(0), shape).await.expect("sent");
                    f.recv(2, Tag(0), shape).await.expect("sent");
                } else {
                    let payload = Payload::phantom(DType::U8, 1000);
                    f.send(0, Tag(0), payload).await.expect("a peer");
                }
                f.now().as_ps()
            },
        );
        exec.outputs[0].expect("rank 0 finished")
    }

    #[test]
    fn the_receiver_handles_its_messages_one_at_a_time_in_arrival_order() {
        // Without a receive overhead both arrive at 2 us.
        assert_eq!(fan_in_done_ps(0, 0), 2_000_000);
        // With 3 us each: handled at 5 and 8 us.
        assert_eq!(fan_in_done_ps(3_000_000, 0), 8_000_000);
        // Messages that arrive before the receive is posted are handled
        // meanwhile: a rank busy until 20 us finds both ready.
        assert_eq!(fan_in_done_ps(3_000_000, 20_000_000), 20_000_000);
    }
}
