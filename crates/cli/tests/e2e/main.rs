//! sluice's end-to-end tests: real `sluice` processes on 127.0.0.1, real stores (the Parquet
//! lake on disk, SQLite, PostgreSQL and ClickHouse servers from `scripts/services/`, S3 and Azure
//! emulators), real HTTP. One test binary, one module per concern: each binary links all of
//! sluice and its stores, so one binary instead of many keeps a clean build's time and disk down.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod access;
mod bad_input;
mod clickhouse_clients;
mod clickhouse_cluster;
mod clickhouse_compat;
mod clickhouse_formats;
mod clickhouse_native;
mod clickhouse_nested;
mod clickhouse_sink;
mod config_errors;
mod console;
mod crash_recovery;
mod drain;
mod evolve;
mod fleet;
mod ingest_end_to_end;
mod insert_keys;
mod lab_commands;
mod lake_azure;
mod lake_compaction;
mod lake_delta;
mod lake_layout;
mod lake_s3;
mod lake_throttle;
mod nested_types;
mod postgres_sink;
mod resend_crash;
mod shutdown_mid_load;
mod sqlite_sink;
mod strict_json;
mod tls;
mod types;
