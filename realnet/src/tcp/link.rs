//! The sending half of one connection and the heartbeats written on it.

use std::net::TcpStream;
use std::sync::Mutex;

use algorithms::Tag;

use crate::call::CallId;
use crate::frame::{Body, Frame};

/// The sending half of one connection.
pub(super) struct Link {
    pub(super) stream: TcpStream,
    /// The number of the next frame (the hello was 0).
    pub(super) seq: u64,
    /// Reused buffer for small frames.
    pub(super) buf: Vec<u8>,
    /// The part of a heartbeat frame the socket did not take yet: written
    /// before anything else.
    pub(super) unsent: Vec<u8>,
    /// A bye went out: nothing more may follow, heartbeats included.
    pub(super) closed: bool,
}

impl Link {
    /// Sends a heartbeat (or the rest of one) without ever blocking: a
    /// peer that does not read gets none, which is right, as it is the one
    /// that stopped responding.
    pub(super) fn beat(&mut self, job_id: u64, src: u32, dst: u32) {
        if self.closed {
            return;
        }
        if self.unsent.is_empty() {
            let frame = Frame {
                job_id,
                src,
                dst,
                tag: Tag(0),
                seq: self.seq,
                call: CallId::NONE,
                body: Body::Heartbeat,
            };
            self.seq += 1;
            frame.encode(&mut self.unsent);
        }
        let sock = socket2::SockRef::from(&self.stream);
        // A failed send leaves the bytes for the next send, which reports
        // a broken connection (and so does the reader).
        if let Ok(n) = sock.send_with_flags(&self.unsent, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) {
            self.unsent.drain(..n);
        }
    }
}

/// One heartbeat to every peer whose link is not busy (a link busy with a
/// send is being heard from already, or its peer does not read).
pub(super) fn beat_all(links: &[Option<Mutex<Link>>], job_id: u64, rank: u32) {
    for (peer, link) in links.iter().enumerate() {
        if let Some(Ok(mut link)) = link.as_ref().map(Mutex::try_lock) {
            link.beat(job_id, rank, peer as u32);
        }
    }
}
