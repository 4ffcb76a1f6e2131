//! The log on real files: faults injected through its storage trait, and recovery from committed
//! corrupt-segment fixtures. One test binary with a module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;
mod fixtures;
mod reserve;
