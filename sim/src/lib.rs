//! The `sim` command line, as a library.
//!
//! The `sim` binary is `sim::main(Registry::builtin())`. A program with
//! algorithms of its own registers them and hands its registry to the same
//! entry point, and every subcommand (`run`, `sweep`, `check`, `replay`,
//! `bench`, `launch`, `algorithms`) then accepts their names in scenario
//! files and flags, with every output the built-in algorithms get:
//!
//! ```no_run
//! use algorithms::Registry;
//!
//! fn main() -> std::process::ExitCode {
//!     let registry = Registry::builtin();
//!     // registry.register(MyAlgorithm).expect("a new name");
//!     sim::main(registry)
//! }
//! ```
//!
//! # Map of the crate
//! - [`cli`]: the clap definitions and [`run`], the dispatch to the
//!   subcommands below.
//! - [`exit`]: [`ExitStatus`], the one place exit statuses are defined.
//! - [`run_cmd`]: `sim run` on the simulator (table, CSV, links CSV,
//!   timeline, trace, failure reports).
//! - [`sweep_cmd`]: `sim sweep` and `sim merge`.
//! - [`compare_cmd`]: `sim compare`, nccl-tests measurements beside the
//!   simulator's predictions.
//! - [`check_cmd`]: `sim check` and `sim replay`.
//! - [`output`]: output files written whole (a temporary file renamed onto
//!   the destination), outputs that are inputs refused, a closed stdout
//!   tolerated.
//! - [`interrupt`]: SIGINT and SIGTERM caught by `sim run` and `sim
//!   sweep`, which then close their outputs marked partial.
//! - [`bench_engine_cmd`]: `sim bench-engine`.
//! - [`calibrate`]: `sim calibrate`, microbenchmarks on a real fabric and
//!   the simulator's parameters fitted to them.
//! - [`validate_cmd`]: `sim validate`, a calibrated scenario on the
//!   simulator and the real fabric side by side.
//! - [`real`]: `sim bench`, `sim launch` and `sim run --fabric` on the real
//!   fabrics of the `realnet` crate.
//!
//! Below it: `engine` (the simulator), `checker` (the model checker),
//! `realnet` (the real fabrics), `algorithms` (the `Fabric` trait, the
//! algorithms and their registry); none of them knows about this crate.

/// `eprintln!` that never panics: a message stderr cannot take (closed,
/// full) is dropped, and the command's exit status still says what
/// happened.
#[macro_export]
macro_rules! report {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod bench_engine_cmd;
pub mod calibrate;
pub mod check_bench_cmd;
pub mod check_cmd;
pub mod cli;
pub mod compare_cmd;
pub mod exit;
pub mod interrupt;
pub mod output;
pub mod real;
pub mod run_cmd;
pub mod sweep_cmd;
pub mod validate_cmd;

use std::process::ExitCode;

use algorithms::Registry;

pub use cli::run;
pub use exit::ExitStatus;

/// Runs the `sim` command line on this process's arguments with the
/// algorithms of `registry`: the whole `main` of a program that adds its
/// own algorithms to `sim`.
pub fn main(registry: Registry) -> ExitCode {
    cli::run(std::env::args_os(), &registry)
}
