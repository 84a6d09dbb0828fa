//! [`LocalJob`]: starts `N` local processes of a program (by default the
//! running one) as the ranks of one job, and supervises them.
//!
//! Each rank gets torchrun's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR=127.0.0.1`, `MASTER_PORT` a free port)
//! plus `REALNET_JOB_ID` and `REALNET_TOKEN` (random per launch) and
//! `REALNET_FABRIC`; other launchers' rank variables are removed, so a
//! launch inside an `sbatch` step is not mistaken for that step's ranks.
//! A rank finds all of it with [`RankEnv::from_env`](crate::launch::RankEnv::from_env)
//! and connects with [`with_fabric`].
//!
//! Rank 0's stdout is the launcher's stdout (the other ranks' is
//! discarded: they print no tables); every rank's stderr is forwarded line
//! by line, prefixed with `[rank R]`. When a rank fails (a non-zero exit or
//! a signal), the launcher says which and how, gives the others a grace
//! period to notice and exit on their own (they report the failed peer),
//! then kills those still running, and ends with the first failed rank's
//! status (128 + the signal number for a signal). A rank that is stopped
//! (SIGSTOP, a debugger) when another fails is named as the likely cause
//! (its peers time out on it), and killed as soon as it is the only kind
//! left running, since it cannot exit on its own. Each rank's stdin is a
//! pipe from the launcher: a rank that calls [`watch_launcher`] stops when
//! the pipe closes, so no rank outlives a launcher that died.
//!
//! [`LocalJob::run_or_join`] is the whole job from one program: the same
//! call launches the ranks (in the process started by hand) or runs one
//! rank (in the processes it starts). Two processes benchmark and check a
//! ring allreduce over shared memory:
//!
//! ```standalone_crate
//! use algorithms::Registry;
//! use realnet::Endpoint;
//! use realnet::bench::{BenchOptions, run_bench};
//! use realnet::connect::{FabricKind, RankJob};
//! use realnet::launcher::{LocalJob, Role};
//!
//! /// What every rank runs: the benchmark, then a goodbye to its peers.
//! struct Bench(BenchOptions);
//!
//! impl RankJob for Bench {
//!     /// Wrong elements over all ranks.
//!     type Output = u64;
//!     fn run<E: Endpoint>(&self, endpoint: &E) -> u64 {
//!         let (rows, _) = run_bench(endpoint, &self.0, 1, |_| {}).expect("the benchmark runs");
//!         endpoint.finish().expect("the peers finish too");
//!         rows.iter().filter_map(|r| r.wrong).sum()
//!     }
//! }
//!
//! fn main() {
//!     let options = BenchOptions {
//!         min_bytes: 1 << 10,
//!         max_bytes: 1 << 16,
//!         step_factor: 8,
//!         iters: 2,
//!         warmup: 1,
//!         ..BenchOptions::default()
//!     };
//!     let mut job = LocalJob::new(2, Vec::new());
//!     job.fabric = Some(FabricKind::Shm);
//!     match job.run_or_join(&Registry::builtin(), &Bench(options)).expect("the job runs") {
//!         Role::Launcher(status) => assert_eq!(status, 0, "every rank succeeded"),
//!         Role::Rank(wrong) => assert_eq!(wrong, 0, "every element right"),
//!     }
//! }
//! ```

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use algorithms::Registry;

use crate::connect::{FabricKind, RankJob, SetupError, with_fabric};
use crate::launch::{EnvError, EnvOverrides, RankEnv};

/// The most ranks a launcher starts on one host.
pub const LOCAL_RANKS_MAX: u16 = 256;

/// Set by the launcher in its ranks' environment: the rank's stdin is a
/// pipe from the launcher, and its end means the launcher is gone.
pub const LAUNCH_WATCH_VAR: &str = "SIM_LAUNCH_WATCH";

/// The exit status of a rank that stops because its launcher went away.
pub const LAUNCHER_GONE_STATUS: i32 = 5;

/// Under a launcher, exits this rank when the launcher goes away (even if
/// it was killed with SIGKILL), so that no rank outlives it. Call it first
/// thing in a rank's `main`; later calls do nothing.
pub fn watch_launcher() {
    static WATCHING: std::sync::Once = std::sync::Once::new();
    if std::env::var_os(LAUNCH_WATCH_VAR).is_none() {
        return;
    }
    WATCHING.call_once(start_watching);
}

/// Starts the thread that waits for the launcher's end of stdin to close.
fn start_watching() {
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        // Not eprintln!: with the launcher gone, stderr may be a pipe
        // nobody reads, and eprintln! would panic instead of exiting.
        let _ = writeln!(
            std::io::stderr(),
            "error: the launcher went away; this rank stops"
        );
        std::process::exit(LAUNCHER_GONE_STATUS);
    });
}

/// Variables of other launchers, removed from the ranks' environment.
const FOREIGN_VARS: [&str; 7] = [
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "REALNET_LAUNCHER",
];

/// A job of local processes: what to start and how to supervise it.
/// Shared-memory ranks get a core each when there are enough (see
/// [`BIND_VAR`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalJob {
    /// Number of ranks (processes), `1..=LOCAL_RANKS_MAX`.
    pub ranks: usize,
    /// The fabric the ranks use (passed as `REALNET_FABRIC`); `None` leaves
    /// it to their own flags.
    pub fabric: Option<FabricKind>,
    /// How long the other ranks get to exit on their own after one fails,
    /// before they are killed.
    pub grace: Duration,
    /// The program every rank runs (`None`: the running executable).
    pub program: Option<PathBuf>,
    /// Its arguments.
    pub args: Vec<String>,
    /// How the launcher names itself in what it prints ("sim launch").
    pub name: String,
}

impl LocalJob {
    /// `ranks` processes of the running executable with `args`, a 10 s
    /// grace period, named "launcher".
    pub fn new(ranks: usize, args: Vec<String>) -> LocalJob {
        LocalJob {
            ranks,
            fabric: None,
            grace: Duration::from_secs(10),
            program: None,
            args,
            name: "launcher".to_string(),
        }
    }
}

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The number of ranks is out of range, or the fabric cannot span
    /// processes.
    #[error("{0}")]
    Invalid(String),
    /// The program or the job's identity (a port, random bytes) could not
    /// be had.
    #[error("{what}: {error}")]
    Setup {
        /// What was needed.
        what: String,
        /// Why it failed.
        error: io::Error,
    },
    /// A rank's process could not be started (the ranks already started
    /// were stopped).
    #[error("cannot start rank {rank}: {error}")]
    Start {
        /// The rank.
        rank: usize,
        /// Why.
        error: io::Error,
    },
}

/// One started rank.
struct Proc {
    child: Child,
    /// Held open until the rank exits; closing it tells the rank that the
    /// launcher is gone.
    stdin: Option<ChildStdin>,
    stderr_forward: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
    /// Whether the launcher killed it after another rank failed.
    killed_by_us: bool,
    /// Whether it was found stopped (SIGSTOP, a debugger) after another
    /// rank failed.
    stopped: bool,
}

/// The allocator setting the ranks start with unless the caller set it:
/// keep freed memory instead of returning it to the system after a second
/// (mimalloc's default), so that a rank receiving large messages reuses
/// its pages instead of faulting in and zeroing fresh ones on every
/// benchmark iteration (measured on a 2-rank 64 MiB shared-memory
/// allreduce: page faults over 25 iterations fell from 4380 to 849, about
/// as many as for 5). Like nccl-tests and MPI, which allocate or cache
/// their buffers once. On a cluster, set `MIMALLOC_PURGE_DELAY=-1` the
/// same way.
const KEEP_FREED_MEMORY: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "-1");

impl LocalJob {
    /// Starts the ranks, waits for all of them and returns the job's exit
    /// status: 0 when every rank succeeded, else the first failed rank's
    /// (128 + the signal number for a signal). What happens is reported
    /// on stderr as it happens.
    pub fn run(&self) -> Result<u8, LaunchError> {
        let n = self.ranks;
        if n == 0 || n > usize::from(LOCAL_RANKS_MAX) {
            return Err(LaunchError::Invalid(format!(
                "{n} ranks: a local job has 1 to {LOCAL_RANKS_MAX}"
            )));
        }
        if self.fabric == Some(FabricKind::Threads) && n > 1 {
            return Err(LaunchError::Invalid(format!(
                "--fabric threads runs every rank in one process; use `sim bench --fabric threads --ranks {n}` without launch, or --fabric shm or tcp"
            )));
        }
        let exe = match &self.program {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|error| LaunchError::Setup {
                what: "cannot find the running executable".into(),
                error,
            })?,
        };
        let (port, job_id, token) = job_identity().map_err(|error| LaunchError::Setup {
            what: "cannot choose a rendezvous port and job id".into(),
            error,
        })?;
        let cores = self.cores_to_bind();
        let mut ranks: Vec<Proc> = Vec::with_capacity(n);
        for r in 0..n {
            let mut cmd = Command::new(&exe);
            cmd.args(&self.args)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("LOCAL_WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("REALNET_JOB_ID", job_id.to_string())
                .env("REALNET_TOKEN", &token)
                .env(LAUNCH_WATCH_VAR, "1")
                .stdin(Stdio::piped())
                .stdout(if r == 0 {
                    Stdio::inherit()
                } else {
                    Stdio::null()
                })
                .stderr(Stdio::piped());
            for v in FOREIGN_VARS {
                cmd.env_remove(v);
            }
            if std::env::var_os(KEEP_FREED_MEMORY.0).is_none() {
                cmd.env(KEEP_FREED_MEMORY.0, KEEP_FREED_MEMORY.1);
            }
            match self.fabric {
                Some(k) => cmd.env("REALNET_FABRIC", k.name()),
                None => cmd.env_remove("REALNET_FABRIC"),
            };
            match cmd.spawn() {
                Ok(mut child) => {
                    if let Some(core) = cores.get(r) {
                        bind_to_core(&child, *core);
                    }
                    let stdin = child.stdin.take();
                    let stderr_forward = child.stderr.take().map(|e| forward(r, e));
                    ranks.push(Proc {
                        child,
                        stdin,
                        stderr_forward,
                        status: None,
                        killed_by_us: false,
                        stopped: false,
                    });
                }
                Err(error) => {
                    supervise::stop_all(&mut ranks);
                    return Err(LaunchError::Start { rank: r, error });
                }
            }
        }
        Ok(supervise::supervise(&mut ranks, self.grace, &self.name))
    }
}

/// Set to `none` to keep `sim launch` from binding shared-memory ranks to
/// a core each.
pub const BIND_VAR: &str = "REALNET_BIND";

impl LocalJob {
    /// The cores the ranks are bound to, rank `r` to the `r`-th: for a
    /// shared-memory job with at most one rank per core this process may
    /// run on (unless [`BIND_VAR`] is `none`), as `mpirun --bind-to core`
    /// does, so that two ranks never share a core while another idles and
    /// a polling rank keeps its caches; otherwise none.
    fn cores_to_bind(&self) -> Vec<usize> {
        if self.fabric != Some(FabricKind::Shm)
            || std::env::var(BIND_VAR).is_ok_and(|v| v == "none")
        {
            return Vec::new();
        }
        let Ok(mine) = rustix::thread::sched_getaffinity(None) else {
            return Vec::new();
        };
        let allowed: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|c| mine.is_set(*c))
            .collect();
        if self.ranks > allowed.len() {
            return Vec::new();
        }
        allowed
    }
}

/// Binds `child`'s main thread, and so the threads it starts later, to
/// `core` (the rank starts its threads once connected, long after this).
/// Advisory: a refusal leaves the rank unbound.
fn bind_to_core(child: &Child, core: usize) {
    let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) else {
        return;
    };
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    let _ = rustix::thread::sched_setaffinity(Some(pid), &set);
}

/// What this process is in a local job (see [`LocalJob::run_or_join`]).
#[derive(Debug, PartialEq)]
pub enum Role<T> {
    /// The launcher: the job ended with this exit status (0: every rank
    /// succeeded; else the first failed rank's).
    Launcher(u8),
    /// One of the ranks: what the job returned on it.
    Rank(T),
}

/// Why a local job could not run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The launcher could not start the ranks.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A rank could not read its place in the job.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A rank could not connect its fabric (or the ranks disagree).
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl LocalJob {
    /// The whole of a local job in one call, made at the same point of the
    /// program's `main` in the launcher and in the ranks it starts: in the
    /// launcher it starts [`ranks`](Self::ranks) processes of this program
    /// and returns [`Role::Launcher`] with the job's exit status; in a rank
    /// (which the launcher's environment marks) it connects the fabric
    /// (the job's [`fabric`](Self::fabric), threads meaning one process),
    /// agrees with its peers on the arguments and on `registry`, runs `job`
    /// and returns [`Role::Rank`] with its output.
    pub fn run_or_join<J: RankJob>(
        &self,
        registry: &Registry,
        job: &J,
    ) -> Result<Role<J::Output>, JobError> {
        if std::env::var_os(LAUNCH_WATCH_VAR).is_none() {
            return Ok(Role::Launcher(self.run()?));
        }
        watch_launcher();
        let env = RankEnv::from_env(&EnvOverrides::default())?;
        let kind = match (self.fabric, &env.fabric) {
            (Some(k), _) => k,
            (None, Some(name)) => FabricKind::parse(name).map_err(|e| {
                JobError::Launch(LaunchError::Invalid(format!("REALNET_FABRIC: {e}")))
            })?,
            (None, None) => FabricKind::Tcp,
        };
        let command = self.args.join(" ");
        let mut outputs = with_fabric(kind, &env, 1, None, (&command, registry), job)?;
        Ok(Role::Rank(outputs.remove(0)))
    }
}

/// A free port for the rendezvous, a job id and a token, all fresh.
fn job_identity() -> io::Result<(u16, u64, String)> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut random = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
    let job_id = u64::from_le_bytes(random[..8].try_into().expect("8 bytes")) >> 1;
    let token: String = random[8..].iter().map(|b| format!("{b:02x}")).collect();
    Ok((port, job_id, token))
}

/// Forwards a rank's stderr line by line, prefixed with its rank.
fn forward(rank: usize, stderr: impl Read + Send + 'static) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let mut err = io::stderr().lock();
                    let _ = writeln!(err, "[rank {rank}] {}", text.trim_end_matches(['\n', '\r']));
                }
            }
        }
    })
}

mod supervise;
#[cfg(test)]
mod tests;
