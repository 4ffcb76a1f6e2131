//! The stores on real files: the lake (Delta commits, compaction, vacuum) and SQLite. One test
//! binary with a module per store, so a clean build links the stores' dependencies once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lake;
mod sqlite;
