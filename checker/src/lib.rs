//! The model checker behind `sim check` and `sim replay`: every algorithm of
//! a [`Registry`](algorithms::Registry), the user's included, under every
//! message order, send buffering, parameter and fault it can choose.
//!
//! The catalogue's collectives (and a few deliberately broken
//! demonstration algorithms) run unchanged, as async code, over a
//! [`CheckFabric`](fabric::CheckFabric) that completes a send or a receive
//! only when the checker decides. Every nondeterminism is a
//! [`Choice`](world::Choice): which enabled delivery happens next (which
//! also decides when a send waiting for a buffer slot or a rendezvous
//! completes), which message is lost, which rank crashes, which receive
//! times out, when a rank learns that a peer stopped.
//!
//! ```text
//!  scenario.toml --scenario--> CheckScenario --points()--> Point ...
//!                                                            |
//!        run::check: per point, explore::{exhaustive (DPOR), random, PCT}
//!                                                            |
//!        exec::Execution: rank tasks over world::World <-- Choice
//!                                                            |
//!        properties::evaluate (and cost::check_formula) --> Violation
//!                                                            |
//!        shrink: smaller point, shorter schedule, point of no return
//!                                                            |
//!        report: the printed report, NAME.cex.toml (cex), replay, trace
//! ```
//!
//! [`Check`] is the checker for code: a check of any algorithm built with
//! the axes, buffering, faults and search of a check file, run, replayed
//! and saved for `sim replay`.
//!
//! Modules:
//! - [`check`](mod@check): [`Check`], the builder above.
//! - [`spec`]: what a check explores (calls, axes, buffering, faults,
//!   search, bounds, verdicts); [`scenario`] reads it from TOML.
//! - [`world`]: the state of an execution and its transitions; [`fabric`]:
//!   the `Fabric` over it; [`program`]: what each rank runs, on symbolic
//!   inputs; [`demo`]: the demonstration algorithms.
//! - [`exec`]: one execution, driven choice by choice; [`explore`]: the
//!   searches over schedules.
//! - [`properties`]: the properties checked on each schedule; [`cost`]:
//!   the cost-formula property.
//! - [`run`]: a whole check with shrinking; [`cex`]: counterexample files;
//!   [`replay`](mod@replay): a saved counterexample run again;
//!   [`trace`]: Chrome traces of a replay; [`report`]: the report and
//!   counterexample as people read them.

pub mod cex;
pub mod check;
pub mod cost;
pub mod demo;
pub mod effect;
pub mod exec;
pub mod explore;
pub mod fabric;
pub mod program;
pub mod properties;
pub mod replay;
pub mod report;
pub mod run;
pub mod scenario;
pub mod spec;
pub mod trace;
pub mod world;

pub use check::{Check, CheckError};
