//! sluice's workloads, as a library shared by the CLI (`sluice load`, `sluice lab`) and tests.
//!
//! # Layout
//!
//! - [`events`]: seed 000's synthetic API events, deterministic from a seed.
//! - [`load`]: the HTTP load generator: N producers, each on its own keep-alive connection,
//!   sending inserts of R rows at a target rate or as fast as possible.
//!
//! Architecture invariant: the lab knows nothing of sluice's internals; `load` speaks HTTP only.

pub mod events;
pub mod load;
