//! Allreduce algorithms; see [`crate::collective`] for the buffer conventions.

pub mod hierarchical;
pub mod rabenseifner;
pub mod recursive_doubling;
pub mod ring;
pub mod tree;
