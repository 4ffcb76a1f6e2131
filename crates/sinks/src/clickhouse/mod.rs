//! ClickHouse over its HTTP interface: one `INSERT ... FORMAT JSONEachRow` (gzipped) per flush,
//! paced by the table's part count. Tested against Debian's ClickHouse 18.16.
//!
//! # Types
//!
//! | Arrow / sluice | ClickHouse |
//! |---|---|
//! | `bool` | `UInt8` |
//! | `int8` .. `int64` | `Int8` .. `Int64` |
//! | `uint8` .. `uint64` | `UInt8` .. `UInt64` |
//! | `float32`, `float64` | `Float32`, `Float64` |
//! | `string` | `String` |
//! | `date` | `Date` (1970-01-01 to 2149-06-06) |
//! | `timestamp` | `DateTime('UTC')`: whole seconds, the fraction is dropped (18.16 has no `DateTime64`); 1970 to 2106 |
//! | `decimal(p, s)` | `Decimal(p, s)`, sent as a JSON number with every digit |
//! | `uuid` | `UUID` |
//! | `json` | `String`, the text as sent (18.16 has no JSON type) |
//! | `list<T>` | `Array(Nullable(T))`; a null list lands empty |
//! | `struct<...>` | a named `Tuple`; a null struct lands as a tuple of nulls |
//! | `map<string, T>` | `Map(String, Nullable(T))` where the server has `Map`, else a `String` of its JSON |
//!
//! On a server without `Map` and without JSON objects for named tuples, ClickHouse 18.16 among
//! them, a map and a list that holds a struct are a `String` of their JSON (`nested.rs`).
//! Nullable columns are `Nullable(T)`; ClickHouse cannot partition or sort by them, so such a
//! table is refused at start with the column's name. A missing table is created as
//! `MergeTree() PARTITION BY <the table's partitioning> ORDER BY <its sort key>`, so that one
//! flush (one sluice partition) is one ClickHouse part; an existing table is used as it is, and a
//! batch it cannot take (an unknown column, a value that does not parse) fails for good with
//! ClickHouse's message and goes to the dead-letter folder.
//!
//! # At least once
//!
//! ClickHouse 18.16 has no transactions and no insert deduplication for plain MergeTree, so the
//! exactly-once ledger of the SQL sinks is not possible: the rows and the ledger entry are two
//! inserts. sluice appends the flush's sequence number to `_sluice_ledger` (a `Log` table: no
//! parts, nothing to merge) right after the rows landed, and replay after a crash skips what it
//! covers. What can land twice: a flush whose insert succeeded but whose answer was lost
//! (timeout, reset), retried; and the flush of each table that was landing when sluice crashed.
//! Nothing acknowledged is lost. The ledger is compacted to one row per table and partition at
//! start once it passes [`LEDGER_COMPACT_ROWS`] rows.
//!
//! # Pacing
//!
//! After a flush the sink reads the table's active parts per partition from `system.parts` (at
//! most once a second) and, when the fullest partition nears `parts_to_delay_insert` (the
//! table's own setting, else the server's), asks the writer to pause the table's flushes
//! (`Landed::pause`, see `pacing.rs`). Rows gather meanwhile, so parts get larger and fewer. A
//! `Code: 252` (too many parts) answer is retried with backoff, never dropped.
//!
//! # A cluster
//!
//! With `shards`, rows land straight in each shard's table of sluice's name (see `sharding.rs`):
//! each flush whole on the next shard, or row by row by `sipHash64(shard_key)`. A flush that
//! lands on some shards and fails on another is reported `partly_landed`: the sink remembers
//! the shards done, and the writer retries the same batch, so the retry sends only the rest.
//! The ledger stays on `url`.
//!
//! # Errors
//!
//! Retried: no answer (refused, reset, timeout), server errors without a code, and the codes in
//! `client.rs` that say nothing about the batch (too many parts, memory limit, timeouts,
//! credentials). `Code: 60` (unknown table: dropped behind sluice's back) re-creates the table and
//! retries. Every other code is the batch's fault.
//!
//! # Layout
//!
//! - `config.rs`: settings. `types.rs`: the scalar type mapping. `nested.rs`: list, struct and
//!   map columns by what the server can take, and their JSON. `rows.rs`: batch preparation and
//!   `JSONEachRow`. `client.rs`: HTTP, gzip, error codes. `pacing.rs`: the pause rule.
//!   `sharding.rs`: which shard rows go to. `sink.rs`: the `Sink`, ledger and pacing state.

mod client;
mod config;
mod nested;
mod pacing;
mod rows;
mod sharding;
mod sink;
mod types;

pub use config::{
    ClickHouseConfig, DEFAULT_MAX_PAUSE, DEFAULT_TIMEOUT, PACING_START, SettingValue,
};
pub use sink::{ClickHouseSink, LEDGER_COMPACT_ROWS};

const SINK: &str = "clickhouse";
