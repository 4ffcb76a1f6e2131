//! Why an insert was not accepted, and why the pipeline could not start.

use std::time::Duration;

use sluice_core::{CatalogError, ConfigError, DecodeError, NameError, SinkError};
use sluice_wal::WalError;

/// Why an insert was refused or not confirmed. The server maps each kind to one HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InsertError {
    /// The table name is not allowed.
    #[error("bad table name: {0}")]
    BadTableName(#[from] NameError),
    /// The table does not exist and auto-create is off.
    #[error("table '{0}' does not exist and auto_create is off; declare it in the config")]
    UnknownTable(String),
    /// The table does not exist and sluice already holds `max_tables` tables.
    #[error(
        "table '{table}' does not exist, and sluice already holds {limit} tables, the most \
         max_tables allows; declare it in the config or raise max_tables"
    )]
    TooManyTables {
        /// The table.
        table: String,
        /// `max_tables`.
        limit: usize,
    },
    /// The insert's new keys would give a table that takes them as columns (`evolve`) more
    /// columns than `evolve_max_columns`.
    #[error(
        "table '{table}' has {columns} columns and this insert's new keys would add {adding}; \
         evolution gives a table at most {limit} (evolve_max_columns): declare the columns, or \
         raise the limit"
    )]
    TooManyColumns {
        /// The table.
        table: String,
        /// Its columns now.
        columns: usize,
        /// The new keys.
        adding: usize,
        /// `evolve_max_columns`.
        limit: usize,
    },
    /// The rows do not fit the table; nothing of the insert was kept.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// A batch given through the library API has other columns than the table.
    #[error("the batch does not match table '{table}': {reason}")]
    SchemaMismatch {
        /// The table.
        table: String,
        /// What differs.
        reason: String,
    },
    /// `ack=durable` was asked for but there is no write-ahead log.
    #[error("ack=durable needs the write-ahead log, which is not enabled")]
    DurableNeedsWal,
    /// The write-ahead log could not take the insert (a full disk, or poisoned by a failed
    /// fsync). The insert was not accepted.
    #[error("{0}")]
    WalFailed(String),
    /// The buffer, or the table's share of it, is full; the client should retry after a short
    /// wait.
    #[error(
        "{} is full ({used} of {limit} bytes); retry shortly",
        if *.table_share { "this table's share of sluice's buffer" } else { "sluice's buffer" }
    )]
    Overloaded {
        /// Bytes buffered.
        used: u64,
        /// The limit.
        limit: u64,
        /// Whether the table's share was full, rather than the whole buffer.
        table_share: bool,
    },
    /// The insert spans more partitions than `max_partitions_per_insert` (or its request's
    /// lower `max_partitions_per_insert_block`). In ClickHouse's words.
    #[error(
        "Too many partitions for single INSERT block (more than {limit}): this insert into table \
         '{table}' spans {partitions}. {set_by}. Every partition becomes a part of its own at \
         every flush; partition coarsely (by day, not by id)"
    )]
    TooManyPartitions {
        /// The table.
        table: String,
        /// Partitions the insert spans.
        partitions: usize,
        /// The limit.
        limit: usize,
        /// Whose limit it is.
        set_by: PartitionLimit,
    },
    /// The insert holds more rows than its limit.
    #[error(
        "the insert holds {rows} rows, more than the limit of {limit} rows per insert \
         (max_rows_per_insert); split it"
    )]
    TooManyRows {
        /// Rows the insert holds.
        rows: usize,
        /// The limit.
        limit: usize,
    },
    /// The partition holds more active parts than the table's `parts_to_throw_insert`: inserts
    /// into it wait for compaction to catch up. In ClickHouse's words.
    #[error(
        "Too many parts ({parts}) in table '{table}' partition {partition} (more than \
         parts_to_throw_insert = {limit}). Merges are processing significantly slower than \
         inserts; retry shortly"
    )]
    TooManyParts {
        /// The table.
        table: String,
        /// The partition.
        partition: String,
        /// Its active parts.
        parts: u64,
        /// The table's `parts_to_throw_insert`.
        limit: u64,
    },
    /// sluice is shutting down and takes no new rows.
    #[error("sluice is shutting down")]
    ShuttingDown,
    /// The rows were accepted but their batch did not land in time. They stay buffered and will
    /// land when the store recovers; sending them again may store them twice.
    #[error(
        "the rows were accepted but not committed within {0:?}; they stay buffered and will land \
         when the store recovers (sending them again may store them twice)"
    )]
    NotCommittedInTime(Duration),
    /// The store refused the batch holding these rows for good.
    #[error("the store refused the batch holding these rows: {0}")]
    StoreRefused(String),
    /// The pipeline stopped before the rows were committed.
    #[error("the rows were not committed: {0}")]
    NotCommitted(String),
    /// The insert key is not one sluice takes.
    #[error("{0}")]
    BadKey(String),
    /// The insert key was used, within the window, for other rows.
    #[error(
        "insert key '{key}' was used for other rows within the last {window_s} s: a resend \
         must carry the same rows; use a new key for new rows"
    )]
    KeyConflict {
        /// The key.
        key: String,
        /// The window, in seconds.
        window_s: u64,
    },
    /// The store did not answer when asked to create a new table: nothing was taken, and the
    /// same insert may be sent again later.
    #[error("cannot create table '{table}' now, its store does not answer: {reason}")]
    StoreUnavailable {
        /// The table.
        table: String,
        /// The store's error.
        reason: String,
    },
    /// The store refused to create a new table (a table of that name it already holds cannot
    /// take rows of this layout, say): nothing was taken.
    #[error("the store refused to create table '{table}': {reason}")]
    TableRefused {
        /// The table.
        table: String,
        /// The store's words.
        reason: String,
    },
    /// A new table could not be remembered (the catalog failed).
    #[error("cannot create table '{table}': {reason}")]
    CreateFailed {
        /// The table.
        table: String,
        /// Why.
        reason: String,
    },
}

/// Why the pipeline could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The catalog could not be read or written.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A sink could not prepare a table or say what it holds.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A table's store did not answer, and sluice cannot start without it: it would not know
    /// which sequence numbers the store holds (no write-ahead log, or one that has never
    /// numbered inserts with every store answering).
    #[error("table {table}: {error} ({why})")]
    StoreDown {
        /// The table.
        table: String,
        /// The store's error.
        error: SinkError,
        /// Why that stops the start, and when it would not.
        why: &'static str,
    },
    /// The write-ahead log could not be opened or recovered.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// A logged insert cannot be replayed (its table is gone, or its rows no longer fit the
    /// table's schema). Nothing was dropped: restore the table or move the log away.
    #[error("cannot replay the write-ahead log: frame {lsn}: {reason}")]
    Replay {
        /// The frame.
        lsn: u64,
        /// Why.
        reason: String,
    },
}

impl From<crate::memory::Full> for InsertError {
    fn from(full: crate::memory::Full) -> Self {
        InsertError::Overloaded {
            used: full.used,
            limit: full.limit,
            table_share: full.share,
        }
    }
}

/// Whose limit on the partitions of one insert refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionLimit {
    /// The server's `max_partitions_per_insert`.
    Server,
    /// The request's `max_partitions_per_insert_block`, lower than the server's.
    Request,
}

impl std::fmt::Display for PartitionLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Server => {
                "The limit is the server's max_partitions_per_insert (0 lifts it); a ClickHouse \
                 request's max_partitions_per_insert_block can lower it, not raise it"
            }
            Self::Request => "The limit is this request's max_partitions_per_insert_block",
        })
    }
}
