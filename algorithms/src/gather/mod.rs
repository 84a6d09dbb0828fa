//! Gather algorithms; see [`crate::collective`] for the buffer conventions.

pub mod binomial;
pub mod linear;
