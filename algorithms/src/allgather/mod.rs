//! Allgather algorithms; see [`crate::collective`] for the buffer conventions.

pub mod bruck;
pub mod pat;
pub mod recursive_doubling;
pub mod ring;
