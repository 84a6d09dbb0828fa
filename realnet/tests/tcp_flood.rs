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
use std::sync::{Barrier, Mutex};
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

/// Opens the strangers' connections to `addr` and keeps them.
fn flood(addr: SocketAddr, token_guess: &[u8]) -> Vec<TcpStream> {
    let junk: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        // The right magic of either protocol, then garbage.
        b"rNet\x03\x00\x03\xff\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab\xab",
        b"RNRV\x01\x00\x2a",
        token_guess,
    ];
    let mut strangers = Vec::with_capacity(IDLE + JUNK);
    for i in 0..IDLE + JUNK {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
            continue;
        };
        if i >= IDLE {
            // The listener may have dropped it already: that is the point.
            let _ = s.write_all(junk[i % junk.len()]);
        }
        strangers.push(s);
    }
    assert!(
        strangers.len() >= (IDLE + JUNK) * 9 / 10,
        "only {} strangers could connect to {addr}",
        strangers.len()
    );
    strangers
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
    everyone: &'a Barrier,
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
            for bytes in &all[1..] {
                let addr: SocketAddr = std::str::from_utf8(bytes).unwrap().parse().unwrap();
                let hello = rendezvous_hello_with_a_wrong_token();
                self.strangers.lock().unwrap().extend(flood(addr, &hello));
            }
        }
        self.everyone.wait();
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
    let everyone = Barrier::new(3);
    let strangers = Mutex::new(Vec::new());
    let sums: Vec<Vec<i32>> = std::thread::scope(|s| {
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
                    (fabric.rank(), buf.as_slice::<i32>().unwrap().to_vec())
                })
            })
            .collect();
        let mut sums: Vec<(usize, Vec<i32>)> =
            ranks.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        sums.sort_by_key(|(r, _)| *r);
        sums.into_iter().map(|(_, v)| v).collect()
    });
    // Rank r's element k is r * 1000 + k: the sum over 3 ranks is 3000 + 3k.
    let want: Vec<i32> = (0..999).map(|k| 3000 + 3 * k).collect();
    for (rank, sum) in sums.iter().enumerate() {
        let wrong = sum.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "rank {rank}: {wrong} wrong elements");
    }
    assert!(strangers.lock().unwrap().len() >= 2 * (IDLE + JUNK) * 9 / 10);
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
