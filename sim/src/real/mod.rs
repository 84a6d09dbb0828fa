//! The `sim` commands that run on real fabrics instead of the simulator:
//! `sim bench`, `sim launch` and `sim run --fabric`, over the `realnet`
//! crate (which connects fabrics, launches local jobs and drives the
//! benchmark).
//!
//! - [`bench_cmd`]: `sim bench`, nccl-tests on a real fabric.
//! - [`job`]: the flags that find a rank's job, shared by every such command.
//! - [`run_cmd`]: `sim run SCENARIO --fabric`, a scenario's collectives on a
//!   real fabric.
//! - [`launch_cmd`]: `sim launch`, local processes with the rank environment.
//! - [`table`]: the simulator's table and CSV for real rows.
//!
//! Exit statuses are [`ExitStatus`](crate::ExitStatus)es; `sim launch`
//! exits with its first failed rank's status.

pub mod bench_cmd;
pub mod job;
pub mod launch_cmd;
pub mod run_cmd;
pub mod table;

use realnet::connect::FabricKind;

/// The `--fabric` flag's parser: one of [`FabricKind::ALL`]'s names, with
/// clap listing them in `--help` and in its error.
pub fn fabric_parser() -> impl clap::builder::TypedValueParser<Value = FabricKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(FabricKind::ALL.map(FabricKind::name))
        .map(|name| FabricKind::parse(&name).expect("the possible values are FabricKind names"))
}
