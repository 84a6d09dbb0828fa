//! [`FabricKind`] and [`with_fabric`]: from a fabric's name and the rank
//! environment to a connected [`Endpoint`] running a job.
//!
//! Multi-process fabrics first meet through the TCP rendezvous (rank 0 at
//! `MASTER_ADDR:MASTER_PORT`), where the ranks also check that they were
//! started with the same command (a rank benchmarking other sizes than its
//! peers would otherwise hang or mismatch), then connect the fabric over
//! it.

use std::fmt;

use algorithms::{FabricError, Registry};

use crate::job::{Disagreement, agree_on_command, agree_on_registry};
use crate::launch::RankEnv;
use crate::rendezvous::TcpRendezvous;
use crate::{Endpoint, LocalFabric};

/// Which real fabric carries the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricKind {
    /// Every rank is a thread of this process (no launcher needed; `--ranks`
    /// says how many): for trying the commands and testing drivers.
    Threads,
    /// Shared memory between processes of one host.
    Shm,
    /// TCP between processes on one host or several.
    Tcp,
    /// RDMA verbs (InfiniBand, RoCE); needs a `sim` built with
    /// `--features verbs` and an RDMA device (see realnet/VERBS.md).
    Verbs,
}

impl FabricKind {
    /// Every kind, in the order `--fabric` lists them.
    pub const ALL: [FabricKind; 4] = [
        FabricKind::Threads,
        FabricKind::Shm,
        FabricKind::Tcp,
        FabricKind::Verbs,
    ];

    /// The name `--fabric` and `REALNET_FABRIC` use.
    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Threads => "threads",
            FabricKind::Shm => "shm",
            FabricKind::Tcp => "tcp",
            FabricKind::Verbs => "verbs",
        }
    }

    /// Parses a `--fabric` or `REALNET_FABRIC` value.
    pub fn parse(text: &str) -> Result<FabricKind, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "threads" => Ok(FabricKind::Threads),
            "shm" => Ok(FabricKind::Shm),
            "tcp" => Ok(FabricKind::Tcp),
            "verbs" => Ok(FabricKind::Verbs),
            _ => Err(format!(
                "unknown fabric `{text}`; expected threads, shm, tcp or verbs"
            )),
        }
    }

    /// Whether every rank of the job is in this process.
    pub fn in_process(self) -> bool {
        self == FabricKind::Threads
    }

    /// A rough alpha-beta model of the fabric, for the tuner when no
    /// algorithm is named: threads and shared memory a 2 us latency and
    /// 10 GB/s, TCP a 30 us latency and 1.25 GB/s (10 GbE). Guesses, not
    /// measurements; `--algorithm` or `NCCL_ALGO` override the tuner.
    pub fn tuner_model(self) -> algorithms::CostModel {
        let (latency_ps, bandwidth_bytes_per_s) = match self {
            FabricKind::Threads | FabricKind::Shm => (2_000_000, 10e9),
            FabricKind::Tcp => (30_000_000, 1.25e9),
            // HDR InfiniBand: 200 Gb/s, a few microseconds end to end.
            FabricKind::Verbs => (3_000_000, 25e9),
        };
        algorithms::CostModel {
            latency_ps,
            bandwidth_bytes_per_s,
            reduce_bytes_per_s: None,
        }
    }
}

impl fmt::Display for FabricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one rank runs once its endpoint is connected.
pub trait RankJob: Sync {
    /// What a rank's run returns (typically its exit status).
    type Output: Send;

    /// Runs on one rank's endpoint (rank 0 prints the results).
    fn run<E: Endpoint>(&self, endpoint: &E) -> Self::Output;
}

/// What kind of problem kept a rank from a connected endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupFailure {
    /// The job was started wrongly (a bad fabric, environment or
    /// command; ranks that disagree).
    Input,
    /// A peer or the transport failed.
    Rank,
    /// A peer did not answer in time.
    Timeout,
}

/// Why a rank could not get a connected endpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SetupError {
    /// What kind of problem.
    pub failure: SetupFailure,
    /// What went wrong, naming ranks and addresses.
    pub message: String,
}

impl SetupError {
    fn input(message: String) -> SetupError {
        SetupError {
            failure: SetupFailure::Input,
            message,
        }
    }
}

impl From<FabricError> for SetupError {
    fn from(e: FabricError) -> SetupError {
        let failure = match e {
            FabricError::Timeout { .. } => SetupFailure::Timeout,
            _ => SetupFailure::Rank,
        };
        SetupError {
            failure,
            message: e.to_string(),
        }
    }
}

impl From<Disagreement> for SetupError {
    fn from(e: Disagreement) -> SetupError {
        let failure = match e {
            Disagreement::Bootstrap(_) => SetupFailure::Rank,
            _ => SetupFailure::Input,
        };
        SetupError {
            failure,
            message: e.to_string(),
        }
    }
}

// ======================================================================
// INTEGRATION POINT: the one place where a fabric kind becomes a connected
// endpoint (a verbs arm goes in `connect_and_run` beside shm and tcp).
// ======================================================================

/// Connects this process's rank(s) of the job on `kind` and runs `job` on
/// each: with [`FabricKind::Threads`], `threads` ranks as threads of this
/// process (returning every rank's output, by rank); with a multi-process
/// fabric, this process's rank of the job `env` describes, after checking
/// through the rendezvous that every rank runs the same `command` on the
/// same fabric with the same algorithms registered (`registry`).
/// `interface` is where TCP listens (an address or interface name; `None`:
/// loopback, for ranks on one host).
pub fn with_fabric<J: RankJob>(
    kind: FabricKind,
    env: &RankEnv,
    threads: usize,
    interface: Option<&str>,
    (command, registry): (&str, &Registry),
    job: &J,
) -> Result<Vec<J::Output>, SetupError> {
    match kind {
        FabricKind::Threads => {
            if env.world_size > 1 {
                return Err(SetupError::input(format!(
                    "--fabric threads runs every rank as a thread of one process, but this \
                     process is {}; use --fabric shm or tcp under a launcher",
                    env.describe()
                )));
            }
            Ok(run_threads(threads, env, job))
        }
        FabricKind::Shm | FabricKind::Tcp | FabricKind::Verbs => {
            if kind == FabricKind::Verbs && !cfg!(feature = "verbs") {
                return Err(SetupError::input(
                    "this program was built without RDMA verbs; rebuild it with the `verbs` \
                     feature (`cargo build --release -p sim --features verbs`, see realnet/VERBS.md)"
                        .to_string(),
                ));
            }
            let bootstrap = TcpRendezvous::connect(env, &env.job).map_err(|e| SetupError {
                failure: SetupFailure::Rank,
                message: e.to_string(),
            })?;
            // The fabric is agreed as resolved (from --fabric or
            // REALNET_FABRIC): ranks on different fabrics would otherwise
            // fail obscurely, each misreading the other's endpoint.
            agree_on_command(&bootstrap, &format!("--fabric {kind} {command}"))?;
            agree_on_registry(&bootstrap, registry)?;
            connect_and_run(kind, &bootstrap, env, interface, job).map(|out| vec![out])
        }
    }
}

/// Connects `kind` over `bootstrap` and runs `job` on this rank.
fn connect_and_run<J: RankJob>(
    kind: FabricKind,
    bootstrap: &TcpRendezvous,
    env: &RankEnv,
    interface: Option<&str>,
    job: &J,
) -> Result<J::Output, SetupError> {
    match kind {
        FabricKind::Shm => {
            let options = crate::shm::ShmOptions {
                job: env.job.clone(),
                ..Default::default()
            };
            let fabric = crate::shm::ShmFabric::connect(bootstrap, &options)?;
            Ok(job.run(&fabric))
        }
        FabricKind::Tcp => {
            let mut options = crate::tcp::TcpOptions {
                job: env.job.clone(),
                interface: interface.map(str::to_string),
                ..Default::default()
            };
            if let Ok(text) = std::env::var("REALNET_PORTS") {
                options.ports = parse_ports(&text).map_err(SetupError::input)?;
            }
            let fabric = crate::tcp::TcpFabric::connect(bootstrap, &options)?;
            Ok(job.run(&fabric))
        }
        #[cfg(feature = "verbs")]
        FabricKind::Verbs => {
            let options =
                crate::verbs::VerbsOptions::from_env(env.job.clone()).map_err(SetupError::input)?;
            let fabric = crate::verbs::VerbsFabric::connect(bootstrap, &options)?;
            Ok(job.run(&fabric))
        }
        #[cfg(not(feature = "verbs"))]
        FabricKind::Verbs => unreachable!("refused in with_fabric without the verbs feature"),
        FabricKind::Threads => unreachable!("threads never connect through a rendezvous"),
    }
}

// ======================================================================

/// Runs `job` on `n` thread ranks; every rank's output, by rank.
fn run_threads<J: RankJob>(n: usize, env: &RankEnv, job: &J) -> Vec<J::Output> {
    let fabrics = LocalFabric::group(n, &env.job);
    std::thread::scope(|s| {
        let handles: Vec<_> = fabrics
            .iter()
            .map(|f| s.spawn(move || job.run(f)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank thread does not panic"))
            .collect()
    })
}

/// Parses `REALNET_PORTS`, the ports TCP ranks may listen on: `FIRST-LAST`
/// or one port (the first free one in the range is taken; a firewall that
/// opens only a range needs it).
fn parse_ports(text: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let bad = || format!("REALNET_PORTS=`{text}`: expected FIRST-LAST or PORT, ports 1 to 65535");
    let port = |t: &str| {
        t.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(bad)
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => (port(text)?, port(text)?),
    };
    if first > last {
        return Err(format!(
            "REALNET_PORTS=`{text}`: the first port is above the last"
        ));
    }
    Ok(first..=last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobOptions;

    #[test]
    fn port_ranges_parse_or_say_why_not() {
        assert_eq!(parse_ports("47000-47010"), Ok(47000..=47010));
        assert_eq!(parse_ports("5000"), Ok(5000..=5000));
        for bad in ["", "0", "70000", "10-x", "9-8"] {
            let e = parse_ports(bad).unwrap_err();
            assert!(e.starts_with("REALNET_PORTS="), "{e}");
        }
    }

    struct Ranks;

    impl RankJob for Ranks {
        type Output = (usize, usize);
        fn run<E: Endpoint>(&self, e: &E) -> (usize, usize) {
            (e.rank(), e.world_size())
        }
    }

    #[test]
    fn threads_run_every_rank_and_refuse_a_launcher() {
        let single = RankEnv {
            rank: 0,
            world_size: 1,
            launcher: None,
            rendezvous: None,
            job: JobOptions::default(),
            fabric: None,
        };
        let out = with_fabric(
            FabricKind::Threads,
            &single,
            3,
            None,
            ("x", &Registry::builtin()),
            &Ranks,
        )
        .unwrap();
        assert_eq!(out, vec![(0, 3), (1, 3), (2, 3)]);
        let launched = RankEnv {
            world_size: 2,
            ..single
        };
        let e = with_fabric(
            FabricKind::Threads,
            &launched,
            3,
            None,
            ("x", &Registry::builtin()),
            &Ranks,
        )
        .unwrap_err();
        assert!(
            e.message.contains("use --fabric shm or tcp"),
            "{}",
            e.message
        );
        assert_eq!(e.failure, SetupFailure::Input);
        assert_eq!(FabricKind::parse("TCP"), Ok(FabricKind::Tcp));
        assert!(
            FabricKind::parse("ib")
                .unwrap_err()
                .contains("threads, shm, tcp or verbs")
        );
    }

    #[test]
    fn ranks_that_disagree_on_the_registry_are_refused_at_the_rendezvous() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let env = |rank| RankEnv {
            rank,
            world_size: 2,
            launcher: None,
            rendezvous: Some(format!("127.0.0.1:{port}")),
            job: JobOptions {
                job_id: 7,
                token: "t".into(),
                timeout: std::time::Duration::from_secs(10),
            },
            fabric: None,
        };
        let errors: Vec<SetupError> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|rank| {
                    let env = env(rank);
                    s.spawn(move || {
                        let mut registry = Registry::builtin();
                        if rank == 1 {
                            let only_here = algorithms::Algorithm::from_fn(
                                "only_here",
                                algorithms::Collective::Allreduce,
                                |_, _, _, _| Box::pin(async { Ok(()) }),
                            );
                            registry.insert(only_here).unwrap();
                        }
                        with_fabric(FabricKind::Tcp, &env, 1, None, ("bench", &registry), &Ranks)
                            .unwrap_err()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in &errors {
            assert_eq!(e.failure, SetupFailure::Input, "{e}");
            assert!(
                e.message
                    .contains("rank 1 has allreduce only_here, rank 0 does not"),
                "{e}"
            );
        }
    }
}
