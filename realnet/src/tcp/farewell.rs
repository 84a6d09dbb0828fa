//! How a [`TcpFabric`] ends: a rank that stops on an error first tells its
//! live peers why, then closes every connection and joins its readers.
//!
//! # Why the farewell waits
//! Each peer's reader names the first death it sees as the cause. A rank
//! that leaves because another rank died must therefore say so before its
//! connections close, or a peer that has not yet read the first death
//! (its reader still draining earlier frames, or simply not scheduled on
//! a loaded host) blames the rank that merely left. The farewell frame can
//! only wait behind data the peer has not read yet: a live peer takes it
//! as soon as its reader runs, so it gets up to [`FAREWELL_LIMIT`] in all,
//! for every peer together; a frozen peer holds this rank's exit no longer.
//! Within the same limit the rank then half-closes its connections and
//! drains them until each peer has closed its end (see
//! [`TcpFabric::linger`]), so that no reset discards the farewell.

use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use algorithms::Tag;

use super::TcpFabric;
use crate::frame::Body;

/// The longest a rank that stops on an error waits, for all its peers
/// together, to hand them the frame that says why. A reader starved of CPU
/// for a few hundred milliseconds is common on a shared host; a peer that
/// takes nothing for this long is frozen, and its own timeout names it.
pub const FAREWELL_LIMIT: Duration = Duration::from_secs(3);

/// The longest reason a farewell carries, in bytes.
const REASON_BYTES: usize = 4096;

impl Drop for TcpFabric {
    /// Tells live peers why this rank stops (if it stops on an error),
    /// closes every connection (without a bye, peers take this as a crash)
    /// and joins the readers.
    fn drop(&mut self) {
        // No heartbeat may interleave with what follows.
        drop(self.beater.take());
        let error = self.shared.mailbox.fatal().or_else(|| self.shared.dead());
        let deadline = Instant::now() + FAREWELL_LIMIT.min(self.timeout);
        if let Some(e) = &error {
            let mut reason = e.to_string();
            let mut cut = reason.len().min(REASON_BYTES);
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
            self.say_why(&reason, deadline);
        }
        // From here the readers stop without reporting.
        self.shared.closing.store(true, Ordering::Release);
        if error.is_some() {
            self.linger(deadline);
        }
        for link in self.links.iter().flatten() {
            let link = link.lock().unwrap_or_else(|e| e.into_inner());
            let _ = link.stream.shutdown(Shutdown::Both);
        }
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|e| e.into_inner()));
        for handle in readers {
            let _ = handle.join();
        }
    }
}

impl TcpFabric {
    /// Half-closes every connection and lets the readers drain until each
    /// peer closes its end (having read the farewell), up to `deadline`.
    /// Closing a socket that still holds unread data resets the
    /// connection, and a reset can discard the farewell before the peer
    /// reads it; a peer that read it closes its end, which ends the
    /// reader here.
    fn linger(&self, deadline: Instant) {
        for link in self.links.iter().flatten() {
            let link = link.lock().unwrap_or_else(|e| e.into_inner());
            let _ = link.stream.shutdown(Shutdown::Write);
        }
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        while readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends `reason` to every peer not known to have failed, each write
    /// allowed what is left until `deadline`.
    fn say_why(&self, reason: &str, deadline: Instant) {
        for peer in (0..self.world_size).filter(|p| *p != self.rank) {
            if self.shared.mailbox.peer_failure(peer).is_some() {
                continue;
            }
            let Some(Some(link)) = self.links.get(peer) else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            {
                let link = link.lock().unwrap_or_else(|e| e.into_inner());
                let _ = link.stream.set_write_timeout(Some(left));
            }
            let _ = self.send_body(peer, Tag(0), Body::Refuse(reason.to_string()));
        }
    }
}
