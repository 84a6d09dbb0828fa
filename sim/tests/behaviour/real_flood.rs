//! A flood of strangers at a starting 3-rank TCP job of `sim bench`
//! processes: hundreds of idle and junk connections at rank 0's
//! rendezvous port before the other ranks start, and at the data ports
//! (`REALNET_PORTS`) as they open while the job connects. The job
//! completes with 0 wrong, and rank 0's threads and memory stay bounded
//! (it keeps no thread per stranger). How many strangers reach a data port
//! before the ranks dial is a race here; realnet's `tests/tcp_flood.rs`
//! floods the data ports at a fixed point (every rank's listener open, no
//! rank dialled yet), with hundreds each.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::real_support::{alive, free_port, now, spawn, text, wait_within};

/// Idle strangers at the rendezvous (more than rank 0 keeps waiting at
/// once, 256, so some are evicted).
const IDLE: usize = 300;
/// Junk strangers at the rendezvous.
const JUNK: usize = 60;
/// Strangers at most at the data ports.
const DATA_STRANGERS: usize = 300;
/// Strangers sent at once to a data port found listening.
const DATA_BURST: usize = 40;
/// The ports the ranks may listen on for data.
const DATA_PORTS: u16 = 16;
/// Rank 0's threads at most while strangers knock (one per stranger
/// would be hundreds).
const RANK0_THREADS_MAX: u64 = 16;
/// Rank 0's resident memory at most, in KiB.
const RANK0_RSS_MAX_KB: u64 = 128 * 1024;

/// What strangers send: no hello at all, the right magic then garbage, a
/// hello begun and never finished, a rendezvous hello with a wrong token.
const JUNK_BYTES: [&[u8]; 4] = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"rNet\x03\x00\x03\xff\xab\xab\xab\xab\xab\xab\xab\xab",
    b"RNRV\x01\x00\x2a",
    b"RNRV\x01\x00\x07\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x03\x00\x00\x00\x05\x00guess",
];

/// A field of `/proc/PID/status` (`Threads`, `VmRSS` in KiB), if the
/// process is still there.
fn status(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Connects a stranger to `addr` (sending `junk`, if any); `None` if
/// nothing listens there.
fn stranger(addr: SocketAddr, junk: Option<&[u8]>) -> Option<TcpStream> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    if let Some(bytes) = junk {
        // The listener may have dropped it already: that is the point.
        let _ = s.write_all(bytes);
    }
    Some(s)
}

#[test]
fn a_flood_of_strangers_does_not_stop_a_starting_tcp_job() {
    let master = free_port();
    let first_data = free_port().saturating_sub(DATA_PORTS).max(1024);
    let ports = format!("{first_data}-{}", first_data + DATA_PORTS - 1);
    let env = |rank: &'static str| {
        let master = master.to_string();
        let ports = ports.clone();
        move || {
            spawn(
                &[
                    "bench", "--fabric", "tcp", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3",
                    "-w", "1",
                ],
                &[
                    ("RANK", rank),
                    ("WORLD_SIZE", "3"),
                    ("MASTER_ADDR", "127.0.0.1"),
                    ("MASTER_PORT", master.as_str()),
                    ("REALNET_JOB_ID", "7"),
                    ("REALNET_TOKEN", "flood-test-token"),
                    ("REALNET_PORTS", ports.as_str()),
                    ("REALNET_TIMEOUT_MS", "20000"),
                ],
            )
        }
    };
    let zero = env("0")();
    let zero_pid = zero.id();
    let peak = Arc::new(Mutex::new((0u64, 0u64)));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) && alive(zero_pid) {
                if let (Some(t), Some(rss)) =
                    (status(zero_pid, "Threads"), status(zero_pid, "VmRSS"))
                {
                    let mut p = peak.lock().unwrap();
                    *p = (p.0.max(t), p.1.max(rss));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    // Strangers crowd the rendezvous before the other ranks start.
    let rendezvous: SocketAddr = format!("127.0.0.1:{master}").parse().unwrap();
    let start = now();
    let mut at_rendezvous = Vec::new();
    while at_rendezvous.len() < IDLE + JUNK {
        let i = at_rendezvous.len();
        let junk = (i >= IDLE).then(|| JUNK_BYTES[i % JUNK_BYTES.len()]);
        match stranger(rendezvous, junk) {
            Some(s) => at_rendezvous.push(s),
            None => {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "rank 0 never listened at {rendezvous}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    // More knock at every data port while the job connects: a burst at
    // each port found listening (how many get in before the ranks dial is
    // up to the race; the number is printed).
    let flooder = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            while !done.load(Ordering::Relaxed) && kept.len() < DATA_STRANGERS {
                let before = kept.len();
                for port in first_data..first_data + DATA_PORTS {
                    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
                    for i in 0..DATA_BURST {
                        let junk = (i % 3 == 2).then(|| JUNK_BYTES[i % JUNK_BYTES.len()]);
                        match stranger(addr, junk) {
                            Some(s) => kept.push(s),
                            None => break,
                        }
                    }
                }
                if kept.len() == before {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            kept
        })
    };
    let others = [env("1")(), env("2")()];
    let limit = Duration::from_secs(60);
    let zero = wait_within(zero, limit, "rank 0");
    let others: Vec<_> = others
        .into_iter()
        .enumerate()
        .map(|(i, c)| wait_within(c, limit, &format!("rank {}", i + 1)))
        .collect();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let at_data = flooder.join().unwrap();
    drop(at_rendezvous);
    let stdout = text(&zero.stdout);
    let stderr = text(&zero.stderr);
    assert!(zero.status.success(), "rank 0: {stdout}\n{stderr}");
    for (i, out) in others.iter().enumerate() {
        assert!(
            out.status.success(),
            "rank {}: {}",
            i + 1,
            text(&out.stderr)
        );
    }
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    // Rank 0 dropped strangers at the rendezvous, some evicted to make room.
    assert!(stderr.contains("evicted when full"), "{stderr}");
    let (threads, rss) = *peak.lock().unwrap();
    assert!(threads > 0, "rank 0 was never sampled");
    assert!(
        threads <= RANK0_THREADS_MAX,
        "rank 0 had {threads} threads: {stderr}"
    );
    assert!(rss <= RANK0_RSS_MAX_KB, "rank 0 had {rss} KiB resident");
    eprintln!(
        "rank 0 at its peak: {threads} threads, {rss} KiB resident; {} strangers at the data ports",
        at_data.len()
    );
}
