//! The stores sluice lands batches in, one folder per store.
//!
//! # Layout
//!
//! - [`lake`]: the embedded default, Delta Lake tables of Parquet files (`DATA_DIR/<table>/...`).
//! - [`sqlite`]: one transaction per flush with a ledger row, exactly once.
//! - [`postgres`]: binary COPY in a transaction with the same ledger, exactly once.
//! - [`clickhouse`]: `INSERT ... FORMAT JSONEachRow` over HTTP, paced by the part count; at least
//!   once.
//! - [`ledger`]: the ledger the database sinks keep.
//! - [`catalog`]: table layouts kept as files beside the data, for auto-created tables.
//! - `fit`: how the database sinks fit a table that exists to its layout (columns added, the
//!   types of decimal, uuid and json columns checked).
//! - `values`: the check of a flush's decimals, the text of dates and timestamps, and nested
//!   values as JSON, for every database sink.
//! - [`fsio`]: the fsync discipline shared by everything that writes files.
//! - `writer`: this data directory's writer identity (`_sluice/writer-id`), which the lake's
//!   commits and the database sinks' ledgers go by.
//!
//! Every sink implements [`sluice_core::Sink`] and classifies its errors as retriable or not.
//! Architecture invariant: sinks know nothing of HTTP or of write-ahead-log offsets.

pub mod catalog;
pub mod clickhouse;
pub(crate) mod fit;
pub mod fsio;
pub mod keys;
pub mod lake;
pub mod ledger;
pub mod postgres;
pub mod sqlite;
pub(crate) mod values;
pub(crate) mod writer;

pub use catalog::FileCatalog;
pub use clickhouse::{ClickHouseConfig, ClickHouseSink};
pub use keys::KEYS_TABLE;
pub use lake::{LakeConfig, LakeSink};
pub use ledger::{LEDGER_TABLE, LedgerWriter};
pub use postgres::{PostgresConfig, PostgresSink};
pub use sqlite::{SqliteConfig, SqliteSink};
