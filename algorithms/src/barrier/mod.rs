//! Barrier algorithms; see [`crate::collective`] for the buffer conventions.

pub mod dissemination;
