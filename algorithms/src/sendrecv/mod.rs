//! Sendrecv algorithms (nccl-tests' `sendrecv_perf`: every rank sends its
//! buffer to `r+1` and receives `r-1`'s); see [`crate::collective`] for
//! the buffer conventions.

pub mod direct;
