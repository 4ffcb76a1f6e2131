//! The lake: Delta Lake tables of Parquet files, the embedded default.
//!
//! ```text
//! LAKE ROOT (the data directory unless [lake] root says otherwise; a folder or an object-store
//! prefix, laid out the same)/
//!   events/                          one Delta table per sluice table
//!     _delta_log/                    the table's log: one JSON entry per commit, checkpoints
//!     _sluice/table.json             the table's layout (catalog; skipped by readers)
//!     service=api/                   one folder per partition value (hive style)
//!       part-<first>-<last>-<uuid v7>.parquet
//!                                    one file per flush: zstd (LZ4 when small), statistics,
//!                                    sorted by the sort key;
//!                                    <first>-<last> is the range of insert sequence numbers in it
//!   logs/                            an unpartitioned table keeps its files at the top
//! DATA DIR/_sluice/writer-id         this writer's identity in the tables' logs
//! ```
//!
//! A flush lands in two steps: its Parquet file is written and fsynced under a temporary name
//! and renamed into place, then one Delta commit adds it, with partition values, per-file
//! statistics and an application transaction that names the flush (see `log/`). Readers
//! (Spark, Trino, DuckDB, Polars, the Python `deltalake` package) see a flush's rows from the
//! commit on, all at once; a file no commit references is invisible to them.
//!
//! Exactly once: [`sluice_core::Sink::committed`] reads this writer's application transaction
//! versions from the log; replay after a crash skips the flushes they cover.
//!
//! Partition values are percent-escaped in folder names (`a/b` becomes `a%2Fb`) and null is
//! `__HIVE_DEFAULT_PARTITION__`, as Hive, Spark and Delta write them; the log records the values
//! themselves. A column used for partitioning by value is not repeated inside the files.
//!
//! # Layout
//!
//! In layers: each file imports only from the layers above it (`scripts/check-cycles.py`
//! checks that no two files import each other, directly or around a cycle).
//!
//! 1. Settings and names, importing nothing of the lake:
//!    - `config.rs`: the sink's settings with their defaults.
//!    - `path.rs`: partition folder names and part file names.
//!    - `files.rs`: a file as the log describes it ([`LiveFile`]), and the order rows landed in.
//!    - `footer.rs`: a Parquet file's footer size, from its last bytes.
//!    - `parallel.rs`: per-file work spread over one thread per core.
//! 2. Storage: `storage.rs`, where a table's files live (a folder, or an object store for an
//!    `s3://`, `gs://` or `az://` root): durable writes, reads, listing, deletion.
//! 3. Files:
//!    - `schema.rs`: a table's Delta columns, and the cast of a batch to what its files store.
//!    - `stats.rs`: per-file statistics for the log.
//!    - `encoding.rs`: how a file's columns are encoded (codec, dictionaries, delta values),
//!      fitted to a sample of its rows.
//!    - `part.rs`: encoding one Parquet file: name, settings, footer.
//!    - `stream.rs`: encoding one Parquet file as its rows are read, in pieces (a merge's).
//!    - `input.rs`: reading parts back for a merge, packed into large batches.
//! 4. The log: `log/`, one table's Delta log: open or create (`open.rs`), bring its schema to
//!    the layout (`evolve.rs`), commit with the flush's identity and fsync, read back what it
//!    holds, keep it short (`commit.rs`), count active parts (`counts.rs`).
//! 5. Compaction: `shrink.rs` estimates how much small parts shrink when merged, so that a
//!    backlog's merges are packed by their output's size; `compact.rs` executes the merges (the
//!    policy is `sluice_core::compaction`) and deletes replaced and orphaned files.
//! 6. Entry points: `read.rs`, the files a table's log holds now, for readers outside the sink;
//!    `sink.rs`, the [`sluice_core::Sink`] implementation.
//!
//! The writer's identity is `crate::writer`'s, shared with the database sinks' ledgers.

mod compact;
mod config;
mod encoding;
mod files;
mod footer;
mod input;
mod log;
mod parallel;
mod part;
mod path;
mod read;
mod schema;
mod shrink;
mod sink;
mod stats;
mod storage;
mod stream;

pub use compact::CompactionReport;
pub use config::{
    DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_FILE_RETENTION, DEFAULT_LOG_RETENTION, DEFAULT_LZ4_BELOW,
    DEFAULT_ZSTD_LEVEL, LakeConfig, LakeRoot, ORPHAN_GRACE,
};
pub use files::{LiveFile, in_landing_order, part_sizes};
pub use footer::footer_bytes;
pub use read::{LakeTable, live_files, live_files_blocking};
pub use sink::LakeSink;
pub use storage::{
    DEFAULT_MAX_RETRIES, DEFAULT_RETRY_TIMEOUT, check_storage_options, retry_config,
};
