//! sluice's pipeline: the tokio tasks between the HTTP edge and the stores.
//!
//! # Layout
//!
//! - `pipeline/`: the insert path (decode, split, admit, hand over, wait) and shutdown; the table
//!   registry; the start (tables, stores, the log) and replay.
//! - `writer/`: one task per table that buffers, seals, flushes one batch at a time, retries
//!   with backoff and answers waiters; opening a table whose store was down at start.
//! - `memory.rs`: the byte budget shared by all buffers.
//! - `ack.rs`: acknowledgement modes and the waiter a `committed` insert parks on.
//! - `keys.rs`: insert keys, so a resend of an insert lands once.
//! - `record.rs`: what a write-ahead-log frame holds (an insert as it arrived).
//! - `dead.rs`: batches a store refused for good, kept as NDJSON.
//! - `config.rs`, `error.rs`, `stats.rs`: settings, errors, counters and metric names.
//! - `waits.rs`: rows' waits from arrival to commit, in buckets the console reads quantiles from.
//! - `clock.rs`: the time now, on tokio's clock, which tests pause and move on.
//!
//! Architecture invariants: the pipeline knows no HTTP types; an insert is answered `committed`
//! only after the sink returned `Ok` for every partition piece of it, and `durable` only after its
//! frame's fsync returned; rows enter a batch only once their frame is durable; a frame is
//! released from the log only after every piece of it landed; memory reserved for rows is
//! released only when they land (or are refused for good), never to make room.

mod ack;
mod clock;
mod config;
mod dead;
mod error;
mod keys;
mod memory;
mod pipeline;
mod record;
mod stats;
mod waits;
mod writer;

pub use ack::AckMode;
pub use config::{
    DEFAULT_ACK_TIMEOUT, DEFAULT_EVOLVE_MAX_COLUMNS, DEFAULT_MAX_BUFFER_BYTES,
    DEFAULT_MAX_PARTITIONS_PER_INSERT, DEFAULT_MAX_TABLE_SHARE, DEFAULT_MAX_TABLES,
    DEFAULT_SHUTDOWN_TIMEOUT, PipelineConfig,
};
pub use error::{InsertError, PartitionLimit, StartError};
pub use keys::{
    DEFAULT_KEY_WINDOW, DEFAULT_MAX_KEYS, Held, KEY_OVERHEAD, KeyStatus, KeyWindow, MAX_KEY_LEN,
    check_key,
};
pub use memory::{INSERT_OVERHEAD, MemoryBudget, Reservation};
pub use pipeline::{
    Admission, Insert, Inserted, Pipeline, PipelineBuilder, ReplayReport, ShutdownReport,
};
pub use sluice_wal::{RecoveryMode, SegmentFile, Storage, WalConfig};
pub use stats::{FlushCounts, TableCounters, TableInfo, WalInfo, names};
pub use waits::Waits;
pub use writer::WriterReport;
