//! How `sim` writes what it writes, whatever goes wrong:
//!
//! - [`file`](mod@file): [`OutputFile`], written beside its destination and renamed
//!   onto it when complete (never a truncated old result), errors naming
//!   the path.
//! - [`paths`]: [`check_paths`], outputs that are inputs or each other
//!   refused before anything runs.
//! - [`stdout`]: [`Stdout`], a closed reader tolerated so the verdict
//!   still decides the exit status.
//!
//! Messages to stderr go through the crate's `report!` macro, which drops
//! a message stderr cannot take instead of panicking as `eprintln!` does.

pub mod file;
pub mod paths;
pub mod stdout;

pub use file::{OutputError, OutputFile};
pub use paths::{Named, check_paths};
pub use stdout::Stdout;
