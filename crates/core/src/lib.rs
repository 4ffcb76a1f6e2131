//! sluice's core: everything about batching that needs no clock, no files and no network.
//!
//! # Layout
//!
//! - [`name`]: validated table names (they become folder names and SQL identifiers).
//! - [`schema`]: column types, table schemas, schema inference from a first insert.
//! - `text`: values written as text, read by ClickHouse's rules, for the formats and for the
//!   values inside JSON's lists, structs and maps.
//! - [`options`]: how an insert's body is to be read: its format, and for JSON the door's
//!   dialect.
//! - [`formats`]: ClickHouse's other input formats to Arrow (`RowBinary`, `TabSeparated`, `CSV`,
//!   `Values`, `JSONCompactEachRow`), and the one entry point for every format.
//! - [`json`]: JSON bodies to Arrow, all or nothing, with errors naming line and column: framed
//!   by each door's dialect, judged by serde_json, built by arrow-json; schema inference.
//! - [`partition`]: which partition each row belongs to, and splitting a batch by partition.
//! - [`table`]: a table's validated definition and sort key.
//! - [`policy`]: when a batch is full, as configured and as validated.
//! - [`batcher`]: the per-(table, partition) state machine; time is passed in.
//! - [`rate`]: a table's recent row rate, which the adaptive flush age follows.
//! - [`sink`]: the contract every store implements, and the catalog of table definitions.
//! - [`retry`]: capped exponential backoff with jitter, as arithmetic.
//! - [`compaction`]: which parts of a partition to merge (size-tiered), as arithmetic.
//! - [`throttle`]: delaying and refusing inserts by a partition's active parts, as MergeTree does.
//! - [`merge_sim`]: seed 000's model of one merge thread against a stream of small parts.
//! - [`estimate`]: seed 000's insert batching estimator, with and without sluice, on that model;
//!   `sluice estimate` and the console's `GET /v1/estimate` both run it.
//!
//! Architecture invariant: this crate does no I/O and knows no tokio. Everything here is
//! deterministic given its inputs, which is what makes it testable with controlled time.

pub mod batcher;
pub mod compaction;
pub mod error;
pub mod estimate;
pub mod formats;
pub mod json;
pub mod merge_sim;
pub mod name;
pub mod options;
pub mod partition;
pub mod policy;
pub mod rate;
pub mod retry;
pub mod schema;
pub mod sink;
pub mod table;
mod text;
pub mod throttle;
pub mod values;

pub use batcher::{Batcher, Sealed};
pub use error::{ConfigError, DecodeError, NameError};
pub use formats::{decode, infer_table_schema};
pub use json::{conform, decode_ndjson, infer_schema};
pub use name::TableName;
pub use options::{DecodeOptions, Header, InputFormat, JsonDialect};
pub use partition::{EmptyValue, Grouped, PartitionKey, PartitionSpec};
pub use policy::{ByteSize, FlushPolicy, FlushPolicyConfig, FlushReason};
pub use rate::RateMeter;
pub use schema::{Column, ColumnType, TableSchema};
pub use sink::{
    Catalog, CatalogError, FlushBatch, FlushId, InsertKey, KeysToKeep, Landed, PartitionParts,
    Sink, SinkError, SinkErrorKind,
};
pub use table::{SortOrder, TableDef, TableLayout};
pub use throttle::{PartsThrottle, ThrottleConfig, Verdict};
