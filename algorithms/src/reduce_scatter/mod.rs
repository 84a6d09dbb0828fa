//! Reduce-scatter algorithms; see [`crate::collective`] for the buffer conventions.

pub mod pat;
pub mod recursive_halving;
pub mod ring;
