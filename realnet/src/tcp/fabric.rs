//! `TcpFabric`'s `Fabric` and `Endpoint` implementations: sends written
//! from the caller's buffer, receives from the mailbox the reader threads
//! fill, progress, the call bookkeeping and the goodbye.

use std::net::Shutdown;
use std::ops::Range;
use std::time::{Duration, Instant};

use algorithms::{
    CollectiveError, Fabric, FabricError, Payload, Rank, ReduceOp, Shape, Tag, Time, Work,
};

use super::TcpFabric;
use crate::call::CallId;
use crate::endpoint::Endpoint;
use crate::executor::IdlePolicy;
use crate::frame::{Body, Kind};
use crate::heartbeat::PeerSilence;
use crate::mailbox::Mailbox;

impl Fabric for TcpFabric {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn now(&self) -> Time {
        crate::endpoint::time_since(self.start)
    }

    async fn send(&self, to: Rank, tag: Tag, payload: Payload) -> Result<(), FabricError> {
        self.send_now(to, tag, payload)
    }

    async fn recv(&self, from: Rank, tag: Tag, expect: Shape) -> Result<Payload, FabricError> {
        self.shared.mailbox.recv(from, tag, expect).await
    }

    async fn compute(&self, _work: Work) -> Result<(), FabricError> {
        Ok(())
    }

    /// The copy goes into a recycled buffer when the pool has one.
    fn send_copy(&self, buf: &Payload, range: Range<usize>) -> Payload {
        crate::pool::copy_for_send(buf, range, |shape| self.shared.pool().take(shape))
    }

    /// Keeps a received buffer the caller is done with for the reader
    /// threads' next receives.
    fn recycle(&self, payload: Payload) {
        self.shared.pool().give(payload);
    }

    /// Writes `buf[range]` straight from the caller's buffer (no copy: a
    /// send is a blocking write, done before this returns).
    async fn send_from(
        &self,
        to: Rank,
        tag: Tag,
        buf: &Payload,
        range: Range<usize>,
    ) -> Result<(), FabricError> {
        let Some(bytes) = crate::pool::lendable(self.rank, to, buf, &range) else {
            let part = self.send_copy(buf, range);
            return self.send_now(to, tag, part);
        };
        if let Some(e) = self.shared.mailbox.fatal() {
            return Err(e);
        }
        let kind = Kind::Data(buf.shape().dtype);
        self.write_frame(to, tag, kind, range.len() as u64, bytes, false)
    }

    /// Writes `buf[send]` straight from the caller's buffer (a send is a
    /// blocking write, done before this returns, so the buffer is only
    /// lent for the write and `recv` may overlap `send`), then receives
    /// and combines into `buf[recv]`.
    async fn exchange_in_place(
        &self,
        to: Rank,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        send: Range<usize>,
        recv: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<(), CollectiveError> {
        let dtype = buf.shape().dtype;
        if let Some(bytes) = crate::pool::lendable(self.rank, to, buf, &send) {
            if let Some(e) = self.shared.mailbox.fatal() {
                return Err(e.into());
            }
            self.write_frame(to, tag, Kind::Data(dtype), send.len() as u64, bytes, false)?;
        } else {
            // A send is a blocking write: sending then receiving is the
            // default's exchange.
            let part = self.send_copy(buf, send);
            self.send_now(to, tag, part)?;
        }
        let expect = Shape::new(dtype, recv.len());
        let incoming = self.shared.mailbox.recv(from, tag, expect).await?;
        crate::pool::combine(buf, recv, &incoming, op)?;
        self.shared.pool().give(incoming);
        Ok(())
    }

    /// Combines as the default does, then keeps the received buffer for
    /// the reader threads' next receives.
    async fn recv_combine(
        &self,
        from: Rank,
        tag: Tag,
        buf: &mut Payload,
        range: Range<usize>,
        op: Option<ReduceOp>,
    ) -> Result<(), CollectiveError> {
        let expect = Shape::new(buf.shape().dtype, range.len());
        let incoming = self.shared.mailbox.recv(from, tag, expect).await?;
        crate::pool::combine(buf, range, &incoming, op)?;
        self.shared.pool().give(incoming);
        Ok(())
    }
}

impl Endpoint for TcpFabric {
    fn mailbox(&self) -> &Mailbox {
        &self.shared.mailbox
    }

    /// Reader threads deliver on their own. What is left: once a peer
    /// died, the rank's call cannot complete (every collective needs every
    /// rank), so when the rank waits again after consuming what had
    /// arrived, it fails naming the dead peer, even when it was waiting on
    /// another (live) rank, rather than wait for the timeout.
    fn progress(&self) -> bool {
        match self.shared.dead() {
            Some(e) if self.shared.mailbox.fatal().is_none() => {
                self.shared.mailbox.fail_all(e);
                true
            }
            _ => false,
        }
    }

    /// Readers wake the executor, so it parks soon rather than spin.
    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy {
            spin: 200,
            yields: 50,
            park: Duration::from_millis(2),
        }
    }

    /// Peers that said bye or failed are left out.
    fn peer_silence(&self) -> PeerSilence {
        let now = Instant::now();
        let byes = self.shared.byes();
        let silences: Vec<(Rank, Duration)> = (0..self.world_size)
            .filter(|&p| p != self.rank && !byes[p])
            .filter(|&p| self.shared.mailbox.peer_failure(p).is_none())
            .map(|p| (p, self.shared.silent_for(p, now)))
            .collect();
        PeerSilence::judge(silences, self.silence_threshold)
    }

    fn begin_call(&self, call: CallId) -> Result<(), FabricError> {
        *self.call.lock().unwrap_or_else(|e| e.into_inner()) = call;
        self.shared.mailbox.begin_call(call)
    }

    fn finish(&self) -> Result<(), FabricError> {
        if let Some(e) = self.shared.mailbox.fatal().or_else(|| self.shared.dead()) {
            return Err(e);
        }
        for peer in 0..self.world_size {
            if peer != self.rank {
                self.send_body(peer, Tag(0), Body::Bye)?;
            }
        }
        self.wait_for_byes()?;
        for link in self.links.iter().flatten() {
            let link = link.lock().unwrap_or_else(|e| e.into_inner());
            let _ = link.stream.shutdown(Shutdown::Write);
        }
        Ok(())
    }
}
