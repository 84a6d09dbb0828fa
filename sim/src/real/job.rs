//! How a rank of a real-fabric command finds its job: the `--fabric`,
//! rendezvous and timeout flags every such command shares ([`JobArgs`]),
//! and what they resolve to ([`JobSetup`]).

use std::time::Duration;

use realnet::connect::FabricKind;
use realnet::launch::{EnvOverrides, RankEnv};

/// How a rank finds its job: the fabric and the rendezvous.
#[derive(Clone, Debug, clap::Args)]
pub struct JobArgs {
    /// The fabric: threads (every rank a thread of this process), shm or
    /// tcp (one rank per process, started by a launcher). Default: the
    /// launcher's REALNET_FABRIC, else threads.
    #[arg(long, value_parser = super::fabric_parser())]
    pub fabric: Option<FabricKind>,
    /// Where rank 0 runs the rendezvous, instead of MASTER_ADDR:MASTER_PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub rendezvous: Option<String>,
    /// How long a rank waits for a silent peer before reporting it
    /// (default: REALNET_TIMEOUT_MS, else 30 s).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub timeout_s: Option<f64>,
    /// With --fabric tcp: the address or interface name (eth0, ib0) to
    /// listen on and advertise; needed when ranks span hosts (default:
    /// loopback).
    #[arg(long, value_name = "IP|NAME")]
    pub interface: Option<String>,
}

impl JobArgs {
    /// This process's rank environment, or the error to print.
    pub fn rank_env(&self) -> Result<RankEnv, String> {
        let overrides = EnvOverrides {
            rendezvous: self.rendezvous.clone(),
            timeout: self.timeout_s.map(Duration::from_secs_f64),
        };
        RankEnv::from_env(&overrides).map_err(|e| e.to_string())
    }

    /// The fabric: `--fabric`, else the launcher's `REALNET_FABRIC`, else
    /// `default`.
    pub fn fabric_kind(&self, env: &RankEnv, default: FabricKind) -> Result<FabricKind, String> {
        match (self.fabric, &env.fabric) {
            (Some(k), _) => Ok(k),
            (None, Some(name)) => {
                FabricKind::parse(name).map_err(|e| format!("REALNET_FABRIC: {e}"))
            }
            (None, None) => Ok(default),
        }
    }
}

/// A timeout in seconds: positive, at most a day.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(s > 0.0 && s <= 86_400.0) {
        return Err(format!(
            "the timeout must be in (0, 86400] seconds, got {text}"
        ));
    }
    Ok(s)
}

/// What a rank's flags and its launcher's environment resolve to.
#[derive(Clone, Debug)]
pub struct JobSetup {
    /// This process's rank environment.
    pub env: RankEnv,
    /// The fabric.
    pub kind: FabricKind,
    /// Ranks in the job: `--ranks` (default 2) with in-process fabrics,
    /// else the launcher's world size.
    pub world_size: usize,
}

impl JobArgs {
    /// The rank environment, the fabric (default threads) and the world
    /// size, with `ranks` the command's `--ranks` (only for in-process
    /// fabrics); or the error to print.
    pub fn setup(&self, ranks: Option<u16>) -> Result<JobSetup, String> {
        let env = self.rank_env()?;
        let kind = self.fabric_kind(&env, FabricKind::Threads)?;
        let world_size = match (kind.in_process(), ranks) {
            (true, r) => usize::from(r.unwrap_or(2)),
            (false, None) => env.world_size,
            (false, Some(_)) => {
                return Err(format!(
                    "--ranks applies to --fabric threads; with {kind} the launcher sets the world size"
                ));
            }
        };
        Ok(JobSetup {
            env,
            kind,
            world_size,
        })
    }
}
