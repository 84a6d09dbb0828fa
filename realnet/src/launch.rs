//! [`RankEnv`]: who this process is in its job, read from the environment
//! its launcher set.
//!
//! A rank learns its rank and the world size from the variables users
//! already have on clusters:
//!
//! | launcher | rank | world size |
//! | --- | --- | --- |
//! | torchrun (and `sim launch`) | `RANK` | `WORLD_SIZE` |
//! | Open MPI (`mpirun`) | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` |
//! | PMI (MPICH's hydra, `srun --mpi=pmi2`) | `PMI_RANK` | `PMI_SIZE` |
//! | Slurm (`srun`) | `SLURM_PROCID` | `SLURM_NTASKS` |
//!
//! When several launchers' variables are present (`srun --mpi=pmi2` sets
//! both PMI's and Slurm's) they must agree; if they do not (an `mpirun`
//! inside an `sbatch` step inherits the batch step's `SLURM_PROCID`), the
//! error says so and `REALNET_LAUNCHER=torchrun|openmpi|pmi|slurm` picks
//! the one to trust. With no launcher variables at all the process is the
//! only rank of its job.
//!
//! A job of several ranks also needs:
//! - the rendezvous address, where rank 0 listens: `MASTER_ADDR` and
//!   `MASTER_PORT` (as torchrun sets them), or a command-line flag;
//! - `REALNET_JOB_ID`, a number naming the job (under Slurm it defaults to
//!   `SLURM_JOB_ID`), and `REALNET_TOKEN`, a secret every rank shares; a
//!   connection that does not present both is refused.
//!
//! `REALNET_TIMEOUT_MS` optionally sets how long a rank waits for a silent
//! peer (default 30 s). Every problem is an [`EnvError`] naming the
//! variables and their values.

use std::fmt;
use std::time::Duration;

use algorithms::Rank;

use crate::job::JobOptions;

/// The largest world size accepted from the environment (keeps a typo from
/// making the rendezvous wait for a million ranks).
pub const WORLD_SIZE_MAX: usize = 1 << 20;

/// The longest token accepted (the rendezvous hello carries it).
pub const TOKEN_BYTES_MAX: usize = 1024;

/// A launcher whose variables give a rank and world size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Launcher {
    /// `RANK` and `WORLD_SIZE` (torchrun, `sim launch`).
    Torchrun,
    /// `OMPI_COMM_WORLD_RANK` and `OMPI_COMM_WORLD_SIZE`.
    OpenMpi,
    /// `PMI_RANK` and `PMI_SIZE`.
    Pmi,
    /// `SLURM_PROCID` and `SLURM_NTASKS`.
    Slurm,
}

impl Launcher {
    /// Every launcher, in the order they are reported.
    pub const ALL: [Launcher; 4] = [
        Launcher::Torchrun,
        Launcher::OpenMpi,
        Launcher::Pmi,
        Launcher::Slurm,
    ];

    /// The name `REALNET_LAUNCHER` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Torchrun => "torchrun",
            Launcher::OpenMpi => "openmpi",
            Launcher::Pmi => "pmi",
            Launcher::Slurm => "slurm",
        }
    }

    /// The variables holding the rank and the world size.
    pub fn vars(self) -> (&'static str, &'static str) {
        match self {
            Launcher::Torchrun => ("RANK", "WORLD_SIZE"),
            Launcher::OpenMpi => ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
            Launcher::Pmi => ("PMI_RANK", "PMI_SIZE"),
            Launcher::Slurm => ("SLURM_PROCID", "SLURM_NTASKS"),
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the environment does not describe a rank of a job.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A variable is needed but not set.
    #[error("{var} is not set: {why}")]
    Missing {
        /// The variable.
        var: &'static str,
        /// Why it is needed and how to provide it.
        why: String,
    },
    /// A variable's value cannot be used.
    #[error("{var}={value:?}: {why}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        why: String,
    },
    /// Two launchers' variables disagree.
    #[error(
        "the launchers disagree: {a} says rank {a_rank} of {a_size} ({a_vars}) but {b} says rank {b_rank} of {b_size} ({b_vars}); \
         set REALNET_LAUNCHER={a} or REALNET_LAUNCHER={b} to say which started this process"
    )]
    Contradiction {
        /// The first launcher.
        a: Launcher,
        /// Its rank.
        a_rank: Rank,
        /// Its world size.
        a_size: usize,
        /// Its variables, as `NAME=value NAME=value`.
        a_vars: String,
        /// The second launcher.
        b: Launcher,
        /// Its rank.
        b_rank: Rank,
        /// Its world size.
        b_size: usize,
        /// Its variables.
        b_vars: String,
    },
}

/// This process's place in its job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnv {
    /// This rank.
    pub rank: Rank,
    /// The number of ranks.
    pub world_size: usize,
    /// The launcher whose variables were used (`None`: a single-rank job
    /// without launcher variables).
    pub launcher: Option<Launcher>,
    /// Where rank 0 runs the rendezvous, `host:port` (`None` for a single
    /// rank, which needs none).
    pub rendezvous: Option<String>,
    /// The job id, token and timeout.
    pub job: JobOptions,
    /// The fabric the launcher asked for (`REALNET_FABRIC`), if any.
    pub fabric: Option<String>,
}

/// How to read the environment: the rendezvous address may come from the
/// command line instead of `MASTER_ADDR`/`MASTER_PORT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvOverrides {
    /// `host:port` of the rendezvous, overriding `MASTER_ADDR`/`MASTER_PORT`.
    pub rendezvous: Option<String>,
    /// The peer timeout, overriding `REALNET_TIMEOUT_MS`.
    pub timeout: Option<Duration>,
}

impl RankEnv {
    /// Reads the process environment (see the module documentation).
    pub fn from_env(overrides: &EnvOverrides) -> Result<RankEnv, EnvError> {
        RankEnv::from_vars(|name| std::env::var(name).ok(), overrides)
    }

    /// Reads the variables `get` returns (`None`: not set), for tests and
    /// for callers with their own environment.
    pub fn from_vars(
        get: impl Fn(&str) -> Option<String>,
        overrides: &EnvOverrides,
    ) -> Result<RankEnv, EnvError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let (rank, world_size, launcher) = rank_and_size(&get)?;
        let timeout = match overrides.timeout {
            Some(t) => t,
            None => match get("REALNET_TIMEOUT_MS") {
                Some(v) => Duration::from_millis(parse_number(
                    "REALNET_TIMEOUT_MS",
                    &v,
                    1,
                    u64::MAX,
                    "a timeout in milliseconds, at least 1",
                )?),
                None => JobOptions::default().timeout,
            },
        };
        let multi = world_size > 1;
        let rendezvous = match &overrides.rendezvous {
            Some(addr) => Some(addr.clone()),
            None if multi => Some(master_address(&get, launcher)?),
            None => None,
        };
        let job_id = match (get("REALNET_JOB_ID"), get("SLURM_JOB_ID")) {
            (Some(v), _) => parse_number("REALNET_JOB_ID", &v, 0, u64::MAX, "a job number")?,
            (None, Some(v)) => parse_number("SLURM_JOB_ID", &v, 0, u64::MAX, "a job number")?,
            (None, None) if multi => {
                return Err(EnvError::Missing {
                    var: "REALNET_JOB_ID",
                    why: format!(
                        "a job of {world_size} ranks needs a job number every rank shares \
                         (Slurm's SLURM_JOB_ID is used when present)"
                    ),
                });
            }
            (None, None) => 0,
        };
        let token = match get("REALNET_TOKEN") {
            Some(t) if t.len() > TOKEN_BYTES_MAX => {
                return Err(EnvError::Invalid {
                    var: "REALNET_TOKEN",
                    value: format!("{}...", t.chars().take(16).collect::<String>()),
                    why: format!("the token is longer than {TOKEN_BYTES_MAX} bytes"),
                });
            }
            Some(t) => t,
            None if multi => {
                return Err(EnvError::Missing {
                    var: "REALNET_TOKEN",
                    why: format!(
                        "a job of {world_size} ranks needs a secret every rank shares, so that \
                         stray connections are refused (e.g. export REALNET_TOKEN=$(head -c 16 \
                         /dev/urandom | od -An -tx1 | tr -d ' \\n') before launching)"
                    ),
                });
            }
            None => String::new(),
        };
        Ok(RankEnv {
            rank,
            world_size,
            launcher,
            rendezvous,
            job: JobOptions {
                job_id,
                token,
                timeout,
            },
            fabric: get("REALNET_FABRIC"),
        })
    }

    /// One line saying where the rank and world size came from.
    pub fn describe(&self) -> String {
        match self.launcher {
            Some(l) => {
                let (r, s) = l.vars();
                format!(
                    "rank {} of {} ({l}: {r}, {s}), job {}",
                    self.rank, self.world_size, self.job.job_id
                )
            }
            None => "a single rank (no launcher variables)".to_string(),
        }
    }
}

/// The rank and world size, and whose variables gave them.
fn rank_and_size(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<(Rank, usize, Option<Launcher>), EnvError> {
    let chosen = match get("REALNET_LAUNCHER") {
        Some(name) => Some(
            Launcher::ALL
                .into_iter()
                .find(|l| l.name() == name.trim().to_ascii_lowercase())
                .ok_or_else(|| EnvError::Invalid {
                    var: "REALNET_LAUNCHER",
                    value: name.clone(),
                    why: "expected torchrun, openmpi, pmi or slurm".to_string(),
                })?,
        ),
        None => None,
    };
    let candidates: Vec<Launcher> = match chosen {
        Some(l) => vec![l],
        None => Launcher::ALL.to_vec(),
    };
    let mut found: Vec<(Launcher, Rank, usize)> = Vec::new();
    for l in candidates {
        if let Some((rank, size)) = launcher_vars(get, l)? {
            found.push((l, rank, size));
        } else if chosen == Some(l) {
            let (r, s) = l.vars();
            return Err(EnvError::Missing {
                var: r,
                why: format!("REALNET_LAUNCHER={l} names a launcher that sets {r} and {s}"),
            });
        }
    }
    let Some(&(first, rank, size)) = found.first() else {
        return Ok((0, 1, None));
    };
    for &(other, o_rank, o_size) in &found[1..] {
        if (o_rank, o_size) != (rank, size) {
            let show = |l: Launcher| {
                let (r, s) = l.vars();
                format!(
                    "{r}={} {s}={}",
                    get(r).unwrap_or_default(),
                    get(s).unwrap_or_default()
                )
            };
            return Err(EnvError::Contradiction {
                a: first,
                a_rank: rank,
                a_size: size,
                a_vars: show(first),
                b: other,
                b_rank: o_rank,
                b_size: o_size,
                b_vars: show(other),
            });
        }
    }
    Ok((rank, size, Some(first)))
}

/// One launcher's rank and world size: `None` if neither variable is set.
fn launcher_vars(
    get: &impl Fn(&str) -> Option<String>,
    l: Launcher,
) -> Result<Option<(Rank, usize)>, EnvError> {
    let (rank_var, size_var) = l.vars();
    let (rank, size) = match (get(rank_var), get(size_var)) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(EnvError::Missing {
                var: size_var,
                why: format!("{rank_var} is set, so {l} must also say the world size"),
            });
        }
        (None, Some(_)) => {
            return Err(EnvError::Missing {
                var: rank_var,
                why: format!("{size_var} is set, so {l} must also say this process's rank"),
            });
        }
        (Some(r), Some(s)) => (r, s),
    };
    let size = parse_number(
        size_var,
        &size,
        1,
        WORLD_SIZE_MAX as u64,
        &format!("a world size from 1 to {WORLD_SIZE_MAX}"),
    )? as usize;
    let rank = parse_number(
        rank_var,
        &rank,
        0,
        size as u64 - 1,
        &format!("a rank below the world size ({size_var}={size})"),
    )? as usize;
    Ok(Some((rank, size)))
}

/// The rendezvous address from `MASTER_ADDR` and `MASTER_PORT`.
fn master_address(
    get: &impl Fn(&str) -> Option<String>,
    launcher: Option<Launcher>,
) -> Result<String, EnvError> {
    let from = launcher.map_or(String::new(), |l| format!(" ({l} did not set it)"));
    let addr = get("MASTER_ADDR").ok_or_else(|| EnvError::Missing {
        var: "MASTER_ADDR",
        why: format!(
            "a job of several ranks needs the host where rank 0 runs the rendezvous{from}; \
             set MASTER_ADDR and MASTER_PORT or pass --rendezvous HOST:PORT"
        ),
    })?;
    let port = get("MASTER_PORT").ok_or_else(|| EnvError::Missing {
        var: "MASTER_PORT",
        why: format!(
            "a job of several ranks needs the port where rank 0 runs the rendezvous{from}; \
             set MASTER_PORT or pass --rendezvous HOST:PORT"
        ),
    })?;
    let port = parse_number("MASTER_PORT", &port, 1, 65535, "a TCP port from 1 to 65535")?;
    let host = addr.trim();
    Ok(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}") // an IPv6 literal
    } else {
        format!("{host}:{port}")
    })
}

/// Parses a decimal number in `min..=max`.
fn parse_number(
    var: &'static str,
    value: &str,
    min: u64,
    max: u64,
    expected: &str,
) -> Result<u64, EnvError> {
    let invalid = || EnvError::Invalid {
        var,
        value: value.to_string(),
        why: format!("expected {expected}"),
    };
    let n: u64 = value.trim().parse().map_err(|_| invalid())?;
    if n < min || n > max {
        return Err(invalid());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(vars: &[(&str, &str)]) -> Result<RankEnv, EnvError> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RankEnv::from_vars(|k| map.get(k).cloned(), &EnvOverrides::default())
    }

    const JOB: [(&str, &str); 4] = [
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("REALNET_JOB_ID", "77"),
        ("REALNET_TOKEN", "s3cret"),
    ];

    fn with_job(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        JOB.iter().chain(extra).copied().collect()
    }

    #[test]
    fn no_launcher_is_a_single_rank() {
        let e = env(&[]).unwrap();
        assert_eq!((e.rank, e.world_size, e.launcher), (0, 1, None));
        assert_eq!(e.rendezvous, None);
        assert_eq!(e.job.timeout, Duration::from_secs(30));
    }

    #[test]
    fn each_launcher_is_read() {
        for l in Launcher::ALL {
            let (r, s) = l.vars();
            let e = env(&with_job(&[(r, "2"), (s, "4")])).unwrap();
            assert_eq!((e.rank, e.world_size, e.launcher), (2, 4, Some(l)), "{l}");
            assert_eq!(e.rendezvous.as_deref(), Some("10.0.0.1:29500"));
            assert_eq!(e.job.job_id, 77);
            assert_eq!(e.job.token, "s3cret");
        }
    }

    #[test]
    fn agreeing_launchers_are_fine_and_disagreeing_ones_are_named() {
        let e = env(&with_job(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
        ]))
        .unwrap();
        assert_eq!(e.launcher, Some(Launcher::Pmi));
        let err = env(&with_job(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("OMPI_COMM_WORLD_RANK=3"), "{err}");
        assert!(err.contains("SLURM_PROCID=0 SLURM_NTASKS=1"), "{err}");
        assert!(err.contains("REALNET_LAUNCHER=openmpi"), "{err}");
        // REALNET_LAUNCHER settles it.
        let e = env(&with_job(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("REALNET_LAUNCHER", "openmpi"),
        ]))
        .unwrap();
        assert_eq!((e.rank, e.world_size), (3, 4));
    }

    #[test]
    fn bad_values_are_named() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[("RANK", "4"), ("WORLD_SIZE", "4")],
                &["RANK=\"4\"", "WORLD_SIZE=4"],
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "0")],
                &["WORLD_SIZE=\"0\"", "from 1"],
            ),
            (&[("RANK", "x"), ("WORLD_SIZE", "2")], &["RANK=\"x\""]),
            (&[("RANK", "1")], &["WORLD_SIZE is not set", "RANK is set"]),
            (&[("PMI_SIZE", "3")], &["PMI_RANK is not set"]),
            (
                &[("REALNET_LAUNCHER", "mpich")],
                &["REALNET_LAUNCHER=\"mpich\""],
            ),
            (
                &[
                    ("REALNET_LAUNCHER", "slurm"),
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                ],
                &["SLURM_PROCID is not set"],
            ),
        ];
        for (vars, wanted) in cases {
            let err = env(&with_job(vars)).unwrap_err().to_string();
            for w in *wanted {
                assert!(err.contains(w), "{vars:?}: {err} lacks {w}");
            }
        }
    }

    #[test]
    fn a_multi_rank_job_needs_its_rendezvous_job_and_token() {
        let ranks = [("RANK", "0"), ("WORLD_SIZE", "2")];
        let all: Vec<_> = with_job(&ranks);
        for missing in [
            "MASTER_ADDR",
            "MASTER_PORT",
            "REALNET_JOB_ID",
            "REALNET_TOKEN",
        ] {
            let vars: Vec<_> = all.iter().copied().filter(|(k, _)| *k != missing).collect();
            let err = env(&vars).unwrap_err();
            assert!(
                matches!(&err, EnvError::Missing { var, .. } if *var == missing),
                "{missing}: {err}"
            );
        }
        // Slurm's job id is the default.
        let vars: Vec<_> = all
            .iter()
            .copied()
            .filter(|(k, _)| *k != "REALNET_JOB_ID")
            .chain([("SLURM_JOB_ID", "123456")])
            .collect();
        assert_eq!(env(&vars).unwrap().job.job_id, 123456);
        let err = env(&with_job(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_PORT", "0"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("MASTER_PORT=\"0\""), "{err}");
    }

    #[test]
    fn overrides_win_and_ipv6_is_bracketed() {
        let map: BTreeMap<&str, &str> = with_job(&[("RANK", "1"), ("WORLD_SIZE", "2")])
            .into_iter()
            .chain([("MASTER_ADDR", "::1"), ("REALNET_TIMEOUT_MS", "1500")])
            .collect();
        let get = |k: &str| map.get(k).map(|v| v.to_string());
        let e = RankEnv::from_vars(get, &EnvOverrides::default()).unwrap();
        assert_eq!(e.rendezvous.as_deref(), Some("[::1]:29500"));
        assert_eq!(e.job.timeout, Duration::from_millis(1500));
        let o = EnvOverrides {
            rendezvous: Some("127.0.0.1:5000".into()),
            timeout: Some(Duration::from_secs(2)),
        };
        let e = RankEnv::from_vars(get, &o).unwrap();
        assert_eq!(e.rendezvous.as_deref(), Some("127.0.0.1:5000"));
        assert_eq!(e.job.timeout, Duration::from_secs(2));
    }
}
