//! A process killed with SIGKILL in the middle of an allreduce: the other
//! processes report it by rank, exit non-zero and do not hang.
//!
//! The test re-executes its own binary as the ranks (the environment
//! variable [`CHILD`] tells a child its rank), and the ranks meet through
//! [`FileBootstrap`], an allgather over files in a directory.
#![cfg(not(loom))]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use algorithms::{Collective, Params, ReduceOp};
use realnet::shm::{ShmFabric, ShmOptions};
use realnet::{Bootstrap, BootstrapError, CallId, Endpoint, JobOptions};

/// Set in a child: `<rank> <world> <directory>`.
const CHILD: &str = "REALNET_SHM_KILL_CHILD";
/// A child's exit status when its collective failed.
const FAILED: i32 = 3;
const TEST: &str = "a_process_killed_mid_allreduce_is_reported_by_the_others";

/// An allgather through files `<dir>/<round>-<rank>` (written under a
/// temporary name, then renamed, so a reader never sees half a file).
struct FileBootstrap {
    rank: usize,
    world: usize,
    dir: PathBuf,
    round: std::cell::Cell<u32>,
}

impl Bootstrap for FileBootstrap {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let round = self.round.get() + 1;
        self.round.set(round);
        let name = |r: usize| self.dir.join(format!("{round}-{r}"));
        let tmp = self.dir.join(format!("{round}-{}.tmp", self.rank));
        let fail = |reason: String| BootstrapError {
            rank: self.rank,
            reason,
        };
        std::fs::write(&tmp, mine).map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&tmp, name(self.rank)).map_err(|e| fail(e.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        (0..self.world)
            .map(|r| {
                loop {
                    match std::fs::read(name(r)) {
                        Ok(bytes) => return Ok(bytes),
                        Err(_) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(1))
                        }
                        Err(e) => {
                            return Err(fail(format!("rank {r} never wrote round {round}: {e}")));
                        }
                    }
                }
            })
            .collect()
    }
}

/// A child: connect, then allreduce 1 MiB until something fails.
fn child(spec: &str) -> ! {
    let parts: Vec<&str> = spec.split(' ').collect();
    let (rank, world, dir) = (
        parts[0].parse().unwrap(),
        parts[1].parse().unwrap(),
        PathBuf::from(parts[2]),
    );
    let boot = FileBootstrap {
        rank,
        world,
        dir: dir.clone(),
        round: std::cell::Cell::new(0),
    };
    let options = ShmOptions {
        job: JobOptions {
            job_id: 0x4b11,
            timeout: Duration::from_secs(20),
            ..JobOptions::default()
        },
        dir: std::env::temp_dir(),
        ..ShmOptions::default()
    };
    let f = ShmFabric::connect(&boot, &options).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(FAILED)
    });
    let start = Instant::now();
    for seq in 1.. {
        let mut buf = realnet::selftest::input(rank, 1 << 18);
        let r = f
            .begin_call(CallId::new(
                seq,
                &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
            ))
            .map_err(algorithms::CollectiveError::from)
            .and_then(|()| {
                f.block_on(
                    algorithms::catalogue_algorithm(Collective::Allreduce, "ring").run(
                        &f,
                        &mut buf,
                        ReduceOp::Sum,
                        &Params::default(),
                    ),
                )
            });
        if let Err(e) = r {
            eprintln!("{e}");
            std::process::exit(FAILED);
        }
        if seq == 1 {
            std::fs::write(dir.join(format!("running-{rank}")), b"").unwrap();
        }
        if start.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let _ = f.finish();
    std::process::exit(0)
}

fn wait_for(path: &Path, deadline: Instant) {
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_process_killed_mid_allreduce_is_reported_by_the_others() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
    }
    let world = 4;
    let victim = 1;
    let dir = std::env::temp_dir().join(format!("realnet-shm-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<Child> = (0..world)
        .map(|rank| {
            Command::new(&exe)
                .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
                .env(CHILD, format!("{rank} {world} {}", dir.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    for rank in 0..world {
        wait_for(&dir.join(format!("running-{rank}")), deadline);
    }
    std::thread::sleep(Duration::from_millis(50));
    children[victim].kill().unwrap();
    let killed_at = Instant::now();
    let mut reports = Vec::new();
    for (rank, c) in children.iter_mut().enumerate() {
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            if killed_at.elapsed() > Duration::from_secs(15) {
                let _ = c.kill();
                panic!("rank {rank} still running 15 s after rank {victim} was killed");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        if rank != victim {
            assert_eq!(status.code(), Some(FAILED), "rank {rank}: {stderr}");
            assert!(
                stderr.contains(&format!("rank {victim}")),
                "rank {rank}: {stderr}"
            );
            reports.push(stderr);
        }
    }
    let took = killed_at.elapsed();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        took < Duration::from_secs(10),
        "reported after {took:?}: {reports:?}"
    );
    eprintln!("reported within {took:?}:\n{}", reports.join(""));
}
