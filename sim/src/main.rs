//! The `sim` command, with the catalogue's algorithms (see the library,
//! `sim::main`, for a `sim` with algorithms of your own).

use std::process::ExitCode;

/// mimalloc keeps freed pages for reuse; with the system allocator, the
/// simulator's stream of large, short-lived message buffers is returned to
/// the kernel and faulted in again, which dominated wall time on real-data
/// runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    sim::main(algorithms::Registry::builtin())
}
