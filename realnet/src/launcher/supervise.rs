//! Supervision of a local job's ranks: waiting for them, stopping the
//! rest after the first failure, and the launcher's summary and exit
//! status.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::Proc;

/// Waits for every rank; after the first failure, gives the others
/// `grace` to exit, then kills them. Returns the launcher's exit status.
pub(super) fn supervise(ranks: &mut [Proc], grace: Duration, name: &str) -> u8 {
    // How long after a rank exits with an error the launcher waits for a
    // rank killed by a signal to show up as the cause.
    const SETTLE: Duration = Duration::from_millis(300);
    let mut first_failure: Option<(usize, Instant)> = None;
    let mut tentative: Option<(usize, Instant)> = None;
    loop {
        let mut running = 0;
        let mut failed_now = Vec::new();
        for (r, rank) in ranks.iter_mut().enumerate() {
            if rank.status.is_some() {
                continue;
            }
            match rank.child.try_wait() {
                Ok(Some(status)) => {
                    rank.status = Some(status);
                    rank.stdin = None;
                    if !status.success() {
                        failed_now.push(r);
                    }
                }
                Ok(None) => running += 1,
                Err(e) => {
                    eprintln!("{name}: cannot wait for rank {r}: {e}");
                    let _ = rank.child.kill();
                }
            }
        }
        // Ranks that noticed a dead peer may be seen exiting before the
        // peer itself (a killed process with much memory takes a while to
        // become reapable): the one killed by a signal is the cause, if it
        // shows up within SETTLE of the first failure.
        let killed = |r: &usize| ranks[*r].status.and_then(|s| s.signal()).is_some();
        #[allow(clippy::disallowed_methods)] // wall-clock grace period
        let now = Instant::now();
        if first_failure.is_none() {
            if let Some(&r) = failed_now.iter().find(|r| killed(r)) {
                first_failure = Some((r, tentative.map_or(now, |(_, at)| at)));
            } else if let Some((r, at)) = tentative
                && at.elapsed() >= SETTLE
            {
                first_failure = Some((r, at));
            } else if tentative.is_none() {
                tentative = failed_now.first().map(|&r| (r, now));
            }
            if let Some((r, _)) = first_failure {
                let status = ranks[r].status.expect("recorded when it exited");
                eprintln!(
                    "{name}: rank {r} {}; the other ranks get {:.1} s to exit",
                    describe(status),
                    grace.as_secs_f64()
                );
                // A rank killed by a signal is its own cause; one that
                // exited with an error may have timed out on a stopped peer.
                let exited = status.signal().is_none();
                name_stopped_ranks(ranks, exited.then_some(r), name);
            }
        }
        // A stopped rank cannot exit on its own: once only stopped ranks
        // are left, the grace period would only be waited out.
        if first_failure.is_some() && running > 0 {
            kill_if_only_stopped_left(ranks, name);
        }
        if running == 0 {
            if first_failure.is_none() {
                first_failure = tentative;
            }
            break;
        }
        if let Some((_, at)) = first_failure
            && at.elapsed() >= grace
        {
            for (r, rank) in ranks.iter_mut().enumerate() {
                if rank.status.is_none() && !rank.killed_by_us {
                    eprintln!("{name}: rank {r} still running after the grace period; killing it");
                    rank.killed_by_us = true;
                    let _ = rank.child.kill();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for rank in ranks.iter_mut() {
        if let Some(h) = rank.stderr_forward.take() {
            let _ = h.join();
        }
    }
    summarise(ranks, first_failure.map(|(r, _)| r), name)
}

/// Finds the ranks still running that are stopped (state `T` or `t` in
/// `/proc/PID/stat`) when a rank failed, marks them and names them; as
/// the likely cause of rank `exited`'s failure if that rank exited with an
/// error (its peers time out waiting on a stopped rank).
fn name_stopped_ranks(ranks: &mut [Proc], exited: Option<usize>, name: &str) {
    for (s, rank) in ranks.iter_mut().enumerate() {
        if rank.status.is_none() && is_stopped(rank.child.id()) {
            rank.stopped = true;
            let cause = exited.map_or(String::new(), |r| {
                format!(": it is the likely cause of rank {r}'s failure")
            });
            eprintln!(
                "{name}: rank {s} is stopped (SIGSTOP or a debugger) and responds to nothing{cause}"
            );
        }
    }
}

/// Kills the ranks still running if every one of them is stopped (they
/// cannot exit on their own), naming any found stopped only now.
fn kill_if_only_stopped_left(ranks: &mut [Proc], name: &str) {
    let running = || {
        ranks
            .iter()
            .filter(|p| p.status.is_none() && !p.killed_by_us)
    };
    if running().any(|p| !p.stopped && !is_stopped(p.child.id())) {
        return;
    }
    for (s, rank) in ranks.iter_mut().enumerate() {
        if rank.status.is_some() || rank.killed_by_us {
            continue;
        }
        if !rank.stopped {
            rank.stopped = true;
            eprintln!(
                "{name}: rank {s} is stopped (SIGSTOP or a debugger) and responds to nothing"
            );
        }
        eprintln!("{name}: rank {s} is stopped and the others have exited; killing it");
        rank.killed_by_us = true;
        let _ = rank.child.kill();
    }
}

/// Whether process `pid` is stopped by a signal or a debugger.
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "T" || state == "t")
    })
}

/// Prints how every failed rank ended and picks the exit status: the
/// first failed rank's.
fn summarise(ranks: &[Proc], first: Option<usize>, name: &str) -> u8 {
    let Some(first) = first else {
        return 0;
    };
    for (r, rank) in ranks.iter().enumerate() {
        let status = rank.status.expect("every rank was waited for");
        if status.success() {
            continue;
        }
        let how = if rank.stopped && rank.killed_by_us {
            format!(
                "was stopped (SIGSTOP or a debugger), responding to nothing, and was killed by {name}"
            )
        } else if rank.killed_by_us {
            format!("was killed by {name} after the grace period")
        } else {
            describe(status)
        };
        eprintln!("{name}: rank {r} {how}");
    }
    let status = ranks[first].status.expect("waited for");
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1).max(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}

/// How a process ended, as a phrase.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        (None, None) => "ended abnormally".to_string(),
    }
}

/// The usual names of the signals a rank dies of.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Kills and reaps every started rank (a start failed part-way).
pub(super) fn stop_all(ranks: &mut [Proc]) {
    for rank in ranks.iter_mut() {
        let _ = rank.child.kill();
        let _ = rank.child.wait();
        if let Some(h) = rank.stderr_forward.take() {
            let _ = h.join();
        }
    }
}
