//! sluice's workloads, as a library shared by the CLI (`sluice load`, `sluice lab`) and tests.
//!
//! # Layout
//!
//! - [`events`]: seed 000's synthetic API events, deterministic from a seed, in ClickHouse's
//!   input formats. [`otel`]: OpenTelemetry-shaped log records, with `json` resource and
//!   attributes.
//! - [`load`]: the HTTP load generator: N producers, each on its own keep-alive connection,
//!   sending inserts of R rows at a target rate or as fast as possible.
//! - [`crash`]: SIGKILL a loaded server again and again; check every durable row landed once.
//! - [`resend`]: producers that resend until answered, across SIGKILLs: once with keys, and the
//!   duplicates without.
//! - [`acks`]: async, durable and committed acknowledgements side by side, with fsyncs/s.
//! - [`age`]: the adaptive flush age against a fixed one: a trickle's latency, a busy load's
//!   parts per second.
//! - [`http`]: `GET /ping` against 1-row async and durable inserts: what a row costs beyond the
//!   HTTP exchange.
//! - [`clickhouse`]: single-row inserts into a real ClickHouse, straight in and through sluice.
//! - [`shards`]: a ClickHouse cluster of two shards: parts per shard through a `Distributed`
//!   table and straight into the shards.
//! - [`overload`]: the store down under ten times the buffer: peak memory, drain, audit.
//! - [`formats`]: the same rows through the ClickHouse door in each input format: rows/s.
//! - [`decode`]: nested events (`json` columns) against flat ones, decoded in-process.
//! - [`writers`]: several sluice processes landing in one Delta table: lost commit races and
//!   flush times by number of writers.
//! - [`process`]: a `sluice serve` child process; [`verify`]: reading back what it wrote.
//! - [`services`]: real PostgreSQL and ClickHouse servers from the project's scripts.
//!
//! Architecture invariant: the lab knows nothing of the server's internals: it speaks HTTP to a
//! `sluice serve` process and reads the files it leaves, or (the knee's last row) uses the
//! pipeline's public library API, as any embedding program would.

pub mod acks;
pub mod age;
pub mod clickhouse;
pub mod compaction;
pub mod crash;
pub mod decode;
pub mod events;
pub mod formats;
pub mod http;
pub mod knee;
pub mod layouts;
pub mod load;
pub mod native_client;
pub mod otel;
pub mod overload;
pub mod plot;
pub mod process;
pub mod resend;
pub mod services;
pub mod shards;
pub mod verify;
pub mod writers;
