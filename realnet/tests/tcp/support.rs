//! Helpers of the TCP tests: groups of thread ranks over loopback, and a
//! raw peer that speaks the wire format by hand (to corrupt it).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::Sender;
use std::time::Duration;

use algorithms::{Rank, Tag};
use realnet::frame::{self, Body, Frame};
use realnet::tcp::{TcpFabric, TcpOptions};
use realnet::{Bootstrap, BootstrapError, CallId, JobOptions, LocalBootstrap};

/// The job every test group belongs to.
pub const JOB_ID: u64 = 42;
/// Its token.
pub const TOKEN: &str = "s3cret";

/// Options for a test job whose receives time out after `timeout_ms`.
pub fn options(timeout_ms: u64) -> TcpOptions {
    TcpOptions {
        job: JobOptions {
            job_id: JOB_ID,
            token: TOKEN.into(),
            timeout: Duration::from_millis(timeout_ms),
        },
        connect_timeout: Duration::from_secs(10),
        handshake_timeout: Duration::from_secs(2),
        ..TcpOptions::default()
    }
}

/// Connects `bootstraps.len()` ranks, one thread each.
pub fn connect_all<B: Bootstrap + Sync>(bootstraps: &[B], options: &TcpOptions) -> Vec<TcpFabric> {
    std::thread::scope(|s| {
        let handles: Vec<_> = bootstraps
            .iter()
            .map(|b| s.spawn(move || TcpFabric::connect(b, options)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().expect("the group connects"))
            .collect()
    })
}

/// A connected group of `n` ranks.
pub fn group(n: usize, options: &TcpOptions) -> Vec<TcpFabric> {
    connect_all(&LocalBootstrap::group(n), options)
}

/// The bootstrap of the one real rank of a job whose other ranks are raw
/// peers driven by the test: it reports the real rank's address on `tx`
/// and tells the real rank nothing useful about the others (a real rank
/// only dials higher ranks, so give it the highest rank).
pub struct Lonely {
    /// The real rank.
    pub rank: Rank,
    /// The job's size.
    pub world_size: usize,
    /// Where the real rank's address goes.
    pub tx: Sender<String>,
}

impl Bootstrap for Lonely {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        self.tx
            .send(String::from_utf8(mine.to_vec()).unwrap())
            .unwrap();
        let mut all = vec![b"127.0.0.1:9".to_vec(); self.world_size];
        all[self.rank] = mine.to_vec();
        Ok(all)
    }
}

/// A peer that speaks the wire format by hand.
pub struct RawPeer {
    /// Its connection.
    pub stream: TcpStream,
    /// The rank it claims.
    pub rank: u32,
    /// The rank it talks to.
    pub dst: u32,
    /// The number of its next frame.
    pub seq: u64,
}

impl RawPeer {
    /// A frame from this peer with the next sequence number.
    pub fn frame(&mut self, tag: u64, call: CallId, body: Body) -> Frame {
        let f = Frame {
            job_id: JOB_ID,
            src: self.rank,
            dst: self.dst,
            tag: Tag(tag),
            seq: self.seq,
            call,
            body,
        };
        self.seq += 1;
        f
    }

    /// Writes raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }
}

/// Connects to `addr` as `rank` of `world_size` and says hello with
/// `job_id` and `token`; returns the connection and every frame the other
/// side sent back until it answered or closed.
pub fn hello(
    addr: &str,
    rank: u32,
    dst: u32,
    world_size: u64,
    job_id: u64,
    token: &str,
) -> (TcpStream, Vec<Frame>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let hello = Frame {
        job_id,
        src: rank,
        dst,
        tag: Tag(0),
        seq: 0,
        call: CallId::NONE,
        body: Body::Hello {
            world_size,
            token: token.as_bytes().to_vec(),
        },
    };
    let mut bytes = Vec::new();
    hello.encode(&mut bytes);
    stream.write_all(&bytes).unwrap();
    let replies = read_frames(&mut stream, 1);
    (stream, replies)
}

/// Reads frames until `want` arrived or the stream ended.
pub fn read_frames(stream: &mut TcpStream, want: usize) -> Vec<Frame> {
    let mut decoder = frame::Decoder::new(frame::DEFAULT_FRAME_CAP);
    let mut frames = Vec::new();
    let mut buf = [0u8; 4096];
    while frames.len() < want {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => decoder.push(&buf[..n]),
        }
        while let Ok(Some(f)) = decoder.next_frame() {
            frames.push(f);
        }
    }
    frames
}

/// A job of two ranks: a real rank 1 and a raw peer as rank 0 that
/// completed a valid handshake with it.
pub fn real_and_raw(options: &TcpOptions) -> (TcpFabric, RawPeer) {
    let world_size = 2;
    let (tx, rx) = std::sync::mpsc::channel();
    let boot = Lonely {
        rank: world_size - 1,
        world_size,
        tx,
    };
    std::thread::scope(|s| {
        let real = s.spawn(|| TcpFabric::connect(&boot, options));
        let addr = rx.recv().unwrap();
        let (stream, replies) = hello(&addr, 0, 1, world_size as u64, JOB_ID, TOKEN);
        assert!(
            matches!(replies.first().map(|f| &f.body), Some(Body::Hello { .. })),
            "{replies:?}"
        );
        let fabric = real
            .join()
            .unwrap()
            .expect("the real rank accepts the raw peer");
        (
            fabric,
            RawPeer {
                stream,
                rank: 0,
                dst: 1,
                seq: 1,
            },
        )
    })
}
