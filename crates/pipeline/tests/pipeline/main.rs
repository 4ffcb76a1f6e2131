//! The pipeline over a real lake: durability across crashes, a store that fails and comes back,
//! and one that is down when the pipeline starts. One test binary with a module per concern, so a clean build links it once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod age;

mod durability;
mod rounds;
mod store_down_at_start;
mod store_outage;
