//! A flood of strangers at a starting 3-rank TCP job whose ranks are
//! threads of this process meeting through the real rendezvous: hundreds
//! of idle and junk connections at rank 0's rendezvous before ranks 1 and
//! 2 join, then at the data ports of the ranks that accept (1 and 2)
//! before any rank dials. The job connects, its allreduce is right, and
//! the process's threads and memory stay bounded: no thread per stranger.
//! The test is alone in its binary, so the thread count is this job's.
#![cfg(not(loom))]

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use algorithms::{Collective, Fabric, Params, ReduceOp};
use realnet::rendezvous::TcpRendezvous;
use realnet::selftest::input;
use realnet::tcp::{TcpFabric, TcpOptions};
use realnet::{Bootstrap, BootstrapError, CallId, Endpoint, JobOptions};

/// Idle strangers per flooded port (they connect and say nothing): more
/// than a listener keeps waiting at once (256), so some are evicted.
const IDLE: usize = 300;
/// Junk strangers per flooded port (they send bytes that are no hello,
/// half a hello, or a hello with a wrong token).
const JUNK: usize = 60;
/// File descriptors the test needs: its strangers and the listeners'
/// ends of them.
const FILES_NEEDED: u64 = 4 * (IDLE + JUNK) as u64 + 256;
/// Threads the job may add to the process at its peak: 3 ranks, their
/// acceptors, 6 readers, 3 heartbeats, the sampler, with room to spare.
/// A thread per stranger would add hundreds.
const THREADS_ADDED_MAX: u64 = 32;
/// Resident memory the job may add, in KiB.
const RSS_ADDED_MAX_KB: u64 = 32 * 1024;

/// A field of `/proc/self/status` (`Threads`, `VmRSS` in KiB).
fn status(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Raises this process's soft limit on open files to what the test needs,
/// if the hard limit allows (a common soft limit is 1024).
fn room_for_the_strangers() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|soft| soft < FILES_NEEDED) {
        let wanted = limit
            .maximum
            .map_or(FILES_NEEDED, |hard| hard.min(FILES_NEEDED));
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(wanted),
                maximum: limit.maximum,
            },
        )
        .expect("the soft limit of open files can be raised");
    }
}

/// Connections a data port can queue before anything accepts it: its
/// listen backlog (1024, capped by `net.core.somaxconn`), less room for
/// the real ranks. On a kernel with a small cap the flood is smaller
/// rather than stuck waiting for a queue that is full.
fn queue_room() -> usize {
    let cap = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .unwrap_or(128);
    cap.min(1024).saturating_sub(16)
}

/// Opens the strangers' connections to `addr` and keeps them.
fn flood(addr: SocketAddr, token_guess: &[u8]) -> Vec<TcpStream> {
    let strangers = (IDLE + JUNK).min(queue_room());
    let junk: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        // The right magic of either protocol, then garbage.
        b"rNet\x03\x00\x03\xff\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab",
        b"RNRV\x01\x00\x2a",
        token_guess,
    ];
    let idle = IDLE * strangers / (IDLE + JUNK);
    let mut kept = Vec::with_capacity(strangers);
    for i in 0..strangers {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            continue;
        };
        if i >= idle {
            // The listener may have dropped it already: that is the point.
            let _ = s.write_all(junk[i % junk.len()]);
        }
        kept.push(s);
    }
    kept
}

/// Checks that most of a flood got in (after the job, so that a short
/// flood fails the test instead of leaving ranks waiting for each other).
fn assert_flooded(kept: usize, ports: usize) {
    let sent = ports * (IDLE + JUNK).min(queue_room());
    assert!(
        kept >= sent * 9 / 10,
        "only {kept} of {sent} strangers could connect"
    );
}

/// A barrier that gives up after `TIMEOUT` (a rank that failed before it
/// must not leave the others waiting forever).
struct Meeting {
    arrived: Mutex<usize>,
    all_here: Condvar,
    ranks: usize,
}

impl Meeting {
    const TIMEOUT: Duration = Duration::from_secs(30);

    fn new(ranks: usize) -> Meeting {
        Meeting {
            arrived: Mutex::new(0),
            all_here: Condvar::new(),
            ranks,
        }
    }

    /// Waits until every rank arrived; false if that took too long.
    fn wait(&self) -> bool {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.all_here.notify_all();
        let (n, timeout) = self
            .all_here
            .wait_timeout_while(n, Self::TIMEOUT, |n| *n < self.ranks)
            .unwrap();
        drop(n);
        !timeout.timed_out()
    }
}

/// Sets a flag when dropped: stops the sampler even when a rank panics.
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A data-port hello of job 42 to rank `dst` with a wrong token.
fn tcp_hello_with_a_wrong_token(dst: u32) -> Vec<u8> {
    let frame = realnet::frame::Frame {
        job_id: 42,
        src: 0,
        dst,
        tag: algorithms::Tag(0),
        seq: 0,
        call: CallId::NONE,
        body: realnet::frame::Body::Hello {
            world_size: 3,
            token: b"guess".to_vec(),
        },
    };
    let mut bytes = Vec::new();
    frame.encode(&mut bytes);
    bytes
}

/// A rendezvous hello of job 42 with a wrong token (see rendezvous.rs).
fn rendezvous_hello_with_a_wrong_token() -> Vec<u8> {
    let mut h = b"RNRV".to_vec();
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&42u64.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&3u32.to_le_bytes());
    h.extend_from_slice(&5u16.to_le_bytes());
    h.extend_from_slice(b"guess");
    h
}

/// The rendezvous of one rank, which floods the data ports of ranks 1
/// and 2 (rank 0 does, once every rank has advertised its port) and holds
/// every rank back until the flood is in place.
struct Flooding<'a> {
    inner: TcpRendezvous,
    everyone: &'a Meeting,
    strangers: &'a Mutex<Vec<TcpStream>>,
}

impl Bootstrap for Flooding<'_> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn world_size(&self) -> usize {
        self.inner.world_size()
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let all = self.inner.allgather(mine)?;
        if self.rank() == 0 {
            for (rank, bytes) in all.iter().enumerate().skip(1) {
                let addr: SocketAddr = std::str::from_utf8(bytes).unwrap().parse().unwrap();
                let hello = tcp_hello_with_a_wrong_token(rank as u32);
                self.strangers.lock().unwrap().extend(flood(addr, &hello));
            }
        }
        if !self.everyone.wait() {
            return Err(BootstrapError {
                rank: self.rank(),
                reason: "a rank never reached the flooded round".into(),
            });
        }
        Ok(all)
    }
}

#[test]
fn a_flood_of_strangers_neither_stops_the_job_nor_costs_a_thread_each() {
    let job = JobOptions {
        job_id: 42,
        token: "flood-test".into(),
        timeout: Duration::from_secs(20),
    };
    let options = TcpOptions {
        job: job.clone(),
        connect_timeout: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(5),
        ..TcpOptions::default()
    };
    room_for_the_strangers();
    let threads_before = status("Threads");
    let rss_before = status("VmRSS");
    let peak = Mutex::new((threads_before, rss_before));
    let done = AtomicBool::new(false);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let addr = address.to_string();
    let everyone = Meeting::new(3);
    let strangers = Mutex::new(Vec::new());
    let sums: Vec<Vec<i32>> = std::thread::scope(|s| {
        let _done = Done(&done);
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let mut p = peak.lock().unwrap();
                p.0 = p.0.max(status("Threads"));
                p.1 = p.1.max(status("VmRSS"));
                drop(p);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let zero = s.spawn(|| TcpRendezvous::serve(listener, 3, &job).unwrap());
        // Strangers crowd rank 0's rendezvous before the real ranks come.
        let hello = rendezvous_hello_with_a_wrong_token();
        let at_rendezvous = flood(address, &hello);
        let others: Vec<_> = (1..3)
            .map(|r| {
                let (addr, job) = (&addr, &job);
                s.spawn(move || TcpRendezvous::join(addr, r, 3, job).unwrap())
            })
            .collect();
        let mut rendezvous = vec![zero.join().unwrap()];
        rendezvous.extend(others.into_iter().map(|h| h.join().unwrap()));
        let flooded_rendezvous = at_rendezvous.len();
        drop(at_rendezvous);
        let ranks: Vec<_> = rendezvous
            .into_iter()
            .map(|inner| {
                let (everyone, strangers, options) = (&everyone, &strangers, &options);
                s.spawn(move || {
                    let boot = Flooding {
                        inner,
                        everyone,
                        strangers,
                    };
                    let fabric = TcpFabric::connect(&boot, options).expect("the job connects");
                    let ring = algorithms::catalogue_algorithm(Collective::Allreduce, "ring");
                    fabric.begin_call(CallId::new(1, &ring)).unwrap();
                    let mut buf = input(fabric.rank(), 999);
                    fabric
                        .block_on(ring.run(&fabric, &mut buf, ReduceOp::Sum, &Params::default()))
                        .expect("the allreduce completes");
                    fabric.finish().expect("every rank finishes");
                    for line in fabric.refusals() {
                        assert!(line.ends_with("wrong job token"), "{line}");
                    }
                    let refused = fabric.refusal_count();
                    (
                        fabric.rank(),
                        buf.as_slice::<i32>().unwrap().to_vec(),
                        refused,
                    )
                })
            })
            .collect();
        let mut sums: Vec<(usize, Vec<i32>, u64)> =
            ranks.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        sums.sort_by_key(|(r, _, _)| *r);
        // The strangers with a wrong token at the ranks that accept were
        // refused (the others were dropped unanswered).
        for (rank, _, refused) in &sums[1..] {
            assert!(*refused > 0, "rank {rank} refused nobody");
        }
        assert_flooded(flooded_rendezvous, 1);
        sums.into_iter().map(|(_, v, _)| v).collect()
    });
    // Rank r's element k is r * 1000 + k: the sum over 3 ranks is 3000 + 3k.
    let want: Vec<i32> = (0..999).map(|k| 3000 + 3 * k).collect();
    for (rank, sum) in sums.iter().enumerate() {
        let wrong = sum.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "rank {rank}: {wrong} wrong elements");
    }
    assert_flooded(strangers.lock().unwrap().len(), 2);
    let (threads, rss) = *peak.lock().unwrap();
    assert!(
        threads - threads_before <= THREADS_ADDED_MAX,
        "the job went from {threads_before} to {threads} threads"
    );
    assert!(
        rss.saturating_sub(rss_before) <= RSS_ADDED_MAX_KB,
        "the job went from {rss_before} to {rss} KiB resident"
    );
    eprintln!(
        "threads: {threads_before} before, {threads} at the peak; resident: {rss_before} KiB before, {rss} KiB at the peak"
    );
}
