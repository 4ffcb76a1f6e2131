//! The stores on real files and servers: the lake (Delta commits, compaction, vacuum), SQLite,
//! the decimal, UUID and JSON columns of every store, and the list, struct and map columns of
//! SQLite, PostgreSQL and ClickHouse, on servers started by scripts/services/. One test binary
//! with a module per store, so a clean build links the stores' dependencies once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod clickhouse;
mod lake;
mod nested_types;
mod new_types;
mod postgres;
mod sqlite;
