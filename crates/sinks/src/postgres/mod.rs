//! PostgreSQL: binary COPY per flush inside a transaction that also moves a ledger row, so a
//! replayed flush is recognised and skipped: exactly once.
//!
//! # Types
//!
//! | Arrow / sluice | PostgreSQL |
//! |---|---|
//! | `bool` | `boolean` |
//! | `int8`, `int16`, `uint8` | `smallint` |
//! | `int32`, `uint16` | `integer` |
//! | `int64`, `uint32` | `bigint` |
//! | `uint64` | `bigint` (values above 2^63-1 are refused) |
//! | `float32` | `real` |
//! | `float64` | `double precision` |
//! | `string` | `text` |
//! | `date` | `date` |
//! | `timestamp` | `timestamptz` |
//! | `decimal(p, s)` | `numeric(p,s)` |
//! | `uuid` | `uuid` |
//! | `json` | `jsonb` |
//! | `list<T>` of a scalar `T` | an array of `T`'s type: `bigint[]`, `numeric(p,s)[]`, `jsonb[]` |
//! | a list of lists, structs or maps, `struct<...>`, `map<string, T>` | `jsonb`, the value's JSON |
//!
//! Non-nullable columns are `NOT NULL`; identifiers are always double-quoted. A missing table is
//! created; an existing one is used as it is, and a flush that does not fit it fails for good with
//! PostgreSQL's message. An existing table may hold a decimal in `numeric` or `text`, a UUID in
//! `text` and JSON in `json` or `text`: each column is sent over COPY in its own type's form
//! (`types.rs`), and one that would not keep every value exactly is refused when opened. A list
//! fits an array of exactly the element type sluice sends, and any nested value `jsonb`, `json`
//! or `text`, as its JSON.
//!
//! # Exactly once
//!
//! `_sluice_ledger (table_name, partition, last_seq)`: the flush locks its row (`FOR UPDATE`),
//! skips if `last_seq` already covers it, COPYs the rows, moves `last_seq`, and commits, all in one
//! transaction. Two sluice processes writing one table serialise on that row.
//!
//! # Connections
//!
//! A small pool (deadpool). A connection that broke (the server restarted) is dropped from the
//! pool; the flush fails as retriable and the retry gets a fresh connection. Every exchange
//! (connecting, a flush's transaction, a read of the ledger, creating a table) has `timeout`
//! (60 s by default): a server that hung, or a network that drops packets, leaves no flush
//! waiting for the kernel's TCP timeouts (hours with keepalives, forever without traffic), and
//! no shutdown either. A connection that did not answer in time is closed, never reused. A lock
//! another session holds on the table or the ledger row (a `LOCK TABLE`, an `ALTER TABLE`, a long
//! transaction) is waited for half of `timeout` (`lock_timeout`), then the flush fails, retriable,
//! with PostgreSQL's error 55P03 and a message naming the lock. Plain TCP, no TLS.
//!
//! # Layout
//!
//! - `config.rs`: settings. `types.rs`: the type mapping and Arrow values as PostgreSQL values.
//!   `numeric.rs`: binary `numeric`, written by hand (38 digits; tokio-postgres has 28).
//!   `sink.rs`: the `Sink`, the ledger, error classification.

mod config;
mod numeric;
mod sink;
mod types;

pub use config::{DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT, PostgresConfig};
pub use sink::PostgresSink;
