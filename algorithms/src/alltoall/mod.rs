//! Alltoall algorithms; see [`crate::collective`] for the buffer conventions.

pub mod bruck;
pub mod pairwise;
