//! The model checker behind `sim check`: runs the same collective code
//! under a controlling fabric that decides every delivery, how sends are
//! buffered and where faults strike, and explores those choices.

pub mod scenario;
pub mod spec;
