//! SQLite: one transaction per flush, a prepared statement reused across rows, and a ledger row
//! in the same transaction that makes landing exactly once.
//!
//! # Types
//!
//! | Arrow / sluice | SQLite |
//! |---|---|
//! | `bool` | `INTEGER` (0 or 1) |
//! | `int8`..`int64`, `uint8`..`uint32` | `INTEGER` |
//! | `uint64` | `INTEGER` (values above 2^63-1 are refused) |
//! | `float32`, `float64` | `REAL` |
//! | `string` | `TEXT` |
//! | `date` | `TEXT`, `YYYY-MM-DD` |
//! | `timestamp` | `TEXT`, `YYYY-MM-DD HH:MM:SS.ffffff` in UTC (what SQLite's date functions read) |
//! | `decimal(p, s)` | `TEXT`, the exact decimal (`-12.50`): a `REAL` would round it |
//! | `uuid` | `TEXT`, hyphenated in lower case |
//! | `json` | `TEXT`, as sent |
//! | `list<T>`, `struct<...>`, `map<string, T>` | `TEXT`, the value's JSON (`crate::values`) |
//!
//! Non-nullable columns are `NOT NULL`. A missing table is created; an existing one is used as it
//! is, and a flush that does not fit it fails for good (the error is SQLite's). An existing
//! column for a decimal, JSON or a nested value must keep text as text (`TEXT` affinity, or
//! none), or the table is refused when opened.
//!
//! # Durability
//!
//! The defaults are `journal_mode = WAL` and `synchronous = FULL`: a transaction is on disk when
//! its COMMIT returns, so a `committed` acknowledgement means the rows survive power loss.
//! `synchronous = NORMAL` is faster and may lose the last transactions on power loss (not on a
//! crash of sluice): say so to your users if you choose it.
//!
//! # Exactly once
//!
//! `_sluice_ledger (table_name, partition, last_seq)` holds the highest sequence number landed per
//! table and partition, updated in the flush's own transaction. A flush whose range the ledger
//! already covers is skipped, and [`sluice_core::Sink::committed`] reads the ledger at start.
//!
//! # Layout
//!
//! - `config.rs`: settings. `types.rs`: the type mapping and binding Arrow values. `sink.rs`: the
//!   `Sink`, the ledger, error classification.

mod config;
mod sink;
mod types;

pub use config::{JournalMode, SqliteConfig, Synchronous};
pub use sink::SqliteSink;
