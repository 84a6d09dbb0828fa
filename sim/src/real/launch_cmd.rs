//! `sim launch -n N --fabric KIND -- SUBCOMMAND ARGS...`: starts `N` local
//! processes of this executable as the ranks of one job
//! ([`realnet::launcher::LocalJob`]); `run` must say `--fabric` (without
//! it every rank would simulate).

use std::io;
use std::time::Duration;

use realnet::connect::FabricKind;
use realnet::launcher::{LOCAL_RANKS_MAX, LaunchError, LocalJob};

use crate::exit::ExitStatus;

/// `sim launch`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct LaunchArgs {
    /// Number of ranks (processes) to start.
    #[arg(short = 'n', long = "nprocs", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=i64::from(LOCAL_RANKS_MAX)))]
    pub nprocs: u16,
    /// The fabric the ranks use (passed as REALNET_FABRIC); threads only
    /// with -n 1.
    #[arg(long, value_parser = super::fabric_parser())]
    pub fabric: Option<FabricKind>,
    /// Seconds the other ranks get to exit on their own after one fails,
    /// before they are killed.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse_grace)]
    pub grace_s: f64,
    /// The sim subcommand and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "SUBCOMMAND")]
    pub command: Vec<String>,
}

/// A grace period in seconds: 0 to an hour.
fn parse_grace(text: &str) -> Result<f64, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(0.0..=3600.0).contains(&s) {
        return Err(format!("the grace period must be 0 to 3600 s, got {text}"));
    }
    Ok(s)
}

/// Runs `sim launch`; returns the first failed rank's exit status (0 when
/// every rank succeeded).
pub fn launch(args: &LaunchArgs) -> io::Result<u8> {
    if let Err(e) = check_run_has_fabric(&args.command, args.fabric) {
        crate::report!("error: sim launch: {e}");
        return Ok(ExitStatus::InvalidInput.code());
    }
    let job = LocalJob {
        ranks: usize::from(args.nprocs),
        fabric: args.fabric,
        grace: Duration::from_secs_f64(args.grace_s),
        program: None,
        args: args.command.clone(),
        name: "sim launch".to_string(),
    };
    match job.run() {
        Ok(status) => Ok(status),
        Err(e) => {
            crate::report!("error: sim launch: {e}");
            Ok(match e {
                LaunchError::Invalid(_) => ExitStatus::InvalidInput,
                LaunchError::Setup { .. } | LaunchError::Start { .. } => ExitStatus::ToolFailed,
            }
            .code())
        }
    }
}

/// Refuses `run` without `--fabric`: it would run the simulator in every
/// rank, and rank 0 would print simulated times as if measured.
fn check_run_has_fabric(command: &[String], fabric: Option<FabricKind>) -> Result<(), String> {
    let is_run = command.first().is_some_and(|c| c == "run");
    let has_fabric = command
        .iter()
        .any(|a| a == "--fabric" || a.starts_with("--fabric="));
    if is_run && !has_fabric {
        return Err(format!(
            "`run` without --fabric runs the simulator in every rank; add --fabric {} after \
             the scenario to run it on a real fabric",
            fabric.map_or("shm|tcp", FabricKind::name)
        ));
    }
    Ok(())
}
