//! The `sim` commands that run on real fabrics instead of the simulator:
//! `sim bench`, `sim launch` and `sim run --fabric`.
//!
//! - `fabric`: `FabricKind` and `with_fabric`,
//!   the one place where a fabric kind becomes a connected endpoint.
//! - [`bench_cmd`]: `sim bench`, nccl-tests on a real fabric.
//! - [`run_cmd`]: `sim run SCENARIO --fabric`, a scenario's collectives on a
//!   real fabric.
//! - [`launch_cmd`]: `sim launch`, local processes with the rank environment.
//! - [`table`]: the simulator's table and CSV for real rows.
//! - [`memory`]: refuses sizes whose buffers this process cannot hold.
//!
//! Exit statuses are the simulator's (see `sim`'s main): 2 invalid input,
//! 4 wrong results, 5 a rank failed, 6 a transport timed out; `sim launch`
//! exits with its first failed rank's status.

pub mod bench_cmd;
pub mod fabric;
pub mod launch_cmd;
pub mod memory;
pub mod run_cmd;
pub mod table;

pub use fabric::{FabricKind, RankJob, with_fabric};

/// Exit status when the tool itself failed (an output cannot be written).
pub const EXIT_IO: u8 = 1;
/// Exit status for invalid input (command line, environment, scenario).
pub const EXIT_INPUT: u8 = 2;
/// Exit status when a collective's result was wrong.
pub const EXIT_WRONG: u8 = 4;
/// Exit status when a rank's collective failed with an error.
pub const EXIT_RANK_ERROR: u8 = 5;
/// Exit status when a transport timed out (a peer died or hung).
pub const EXIT_TIMEOUT: u8 = 6;

/// Set by `sim launch` in its ranks' environment: the rank's stdin is a
/// pipe from the launcher, and its end means the launcher is gone.
pub const LAUNCH_WATCH_VAR: &str = "SIM_LAUNCH_WATCH";

/// Under `sim launch`, exits this rank when the launcher goes away (even
/// if it was killed with SIGKILL), so that no rank outlives it. `sim`'s
/// main calls it for every subcommand; later calls do nothing.
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
        use std::io::{Read, Write};
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        // Not eprintln!: with the launcher gone, stderr may be a pipe
        // nobody reads, and eprintln! would panic instead of exiting.
        let _ = writeln!(
            std::io::stderr(),
            "error: sim launch went away; this rank stops"
        );
        std::process::exit(i32::from(EXIT_RANK_ERROR));
    });
}
