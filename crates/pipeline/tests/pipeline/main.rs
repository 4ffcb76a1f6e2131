//! The pipeline over a real lake: durability across crashes, and a store that fails and comes
//! back. One test binary with a module per concern, so a clean build links it once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod durability;
mod store_outage;
