//! The contract between the pipeline and the stores: [`Sink`] lands sealed batches, [`Catalog`]
//! remembers table definitions.
//!
//! A sink receives one Arrow batch per (table, partition) flush, already sorted by the table's
//! sort key, with a [`FlushId`] that names it deterministically. It either lands the whole batch
//! or returns an error saying whether trying again can help. It never lands part of a batch.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use arrow::array::RecordBatch;

use crate::name::TableName;
use crate::partition::{EmptyValue, PartitionKey};
use crate::table::{TableDef, TableLayout};

/// A boxed future that can cross threads; what [`Sink`] methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The identity of one flush: which table and partition, and the range of insert sequence
/// numbers whose rows it carries. The same rows flushed again get the same identity, which is what
/// lets a store recognise a batch it already holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlushId {
    /// The table.
    pub table: TableName,
    /// The partition.
    pub partition: PartitionKey,
    /// Lowest insert sequence number in the flush.
    pub first_seq: u64,
    /// Highest insert sequence number in the flush.
    pub last_seq: u64,
}

impl fmt::Display for FlushId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}-{}",
            self.table, self.partition, self.first_seq, self.last_seq
        )
    }
}

/// One flush handed to a sink.
#[derive(Debug)]
pub struct FlushBatch<'a> {
    /// The table's definition.
    pub table: &'a TableDef,
    /// Which flush this is.
    pub id: FlushId,
    /// The rows in order, sorted by the table's sort key: the batches the inserts arrived in
    /// when the table has no sort key, so a flush copies no rows on its way to the sink.
    pub batches: Vec<RecordBatch>,
    /// The keys of the keyed inserts whose rows the flush holds, for a store that keeps them
    /// ([`Sink::keeps_keys`]) in the transaction that lands the rows. Empty for other stores.
    pub keys: KeysToKeep,
}

/// An insert's key as a store keeps it: the key, the hash of the insert's rows, and when it
/// landed. A store keeps it per table and partition, since each partition's rows of an insert
/// land in a flush of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertKey {
    /// The key, 1 to 256 bytes.
    pub key: String,
    /// The hash of the whole insert's rows, stable across processes.
    pub rows_hash: u64,
}

/// The keys a flush asks its store to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeysToKeep {
    /// The keys, each new to the store (or past its window there).
    pub keys: Vec<InsertKey>,
    /// When the flush was made, Unix milliseconds: the keys' landing time.
    pub now_ms: i64,
    /// Keys that landed before this, Unix milliseconds, are past their window: the store may
    /// delete them, and takes one of them as new.
    pub expired_before_ms: i64,
}

/// What a sink reports after landing a flush.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Landed {
    /// Parts (files, transactions, inserts) created.
    pub parts: u64,
    /// Bytes written to the store, when the sink can tell.
    pub bytes: u64,
    /// How long the store asks sluice to wait before the next flush of this table (zero: no
    /// wait). A store whose parts pile up (ClickHouse near `parts_to_delay_insert`) asks for
    /// pauses; rows keep arriving meanwhile, so the next flush is larger and parts fewer.
    pub pause: std::time::Duration,
    /// Times the flush's commit lost a race to another writer of the same table and was tried
    /// again: the lake's Delta commits, when several sluice processes share a table.
    pub commit_retries: u64,
    /// Times the flush's commit was kept by the store but its answer was lost, and the store's
    /// log showed it landed: the lake's Delta commits, on an object store.
    pub answers_lost: u64,
}

/// The active parts of one partition, as a store last saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionParts {
    /// The partition.
    pub partition: PartitionKey,
    /// Active parts (files) in it.
    pub parts: u64,
    /// Rows in them, when the store can tell.
    pub rows: u64,
    /// Bytes in them.
    pub bytes: u64,
}

/// Whether a failed write may succeed if tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkErrorKind {
    /// A passing fault: connection refused, timeout, disk full, too many parts. Try again.
    Retriable,
    /// The batch itself can never land here: schema mismatch, constraint violation.
    Permanent,
}

/// A sink's failure, classified.
#[derive(Debug, thiserror::Error)]
#[error("{sink} sink: {message}")]
pub struct SinkError {
    /// Whether trying again can help.
    pub kind: SinkErrorKind,
    /// The sink's name.
    pub sink: &'static str,
    /// What went wrong, in the store's words where it gave any.
    pub message: String,
    /// The underlying error.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
    /// Some of the flush's rows landed before the failure (on some shards of a cluster), and
    /// the sink remembers which: the retry must bring the same flush, not one with later rows
    /// folded in, or the sink could not tell what is left to land.
    pub partly_landed: bool,
}

impl SinkError {
    /// A failure worth retrying.
    pub fn retriable(sink: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind: SinkErrorKind::Retriable,
            sink,
            message: message.into(),
            source: None,
            partly_landed: false,
        }
    }

    /// A failure retrying cannot fix.
    pub fn permanent(sink: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind: SinkErrorKind::Permanent,
            sink,
            message: message.into(),
            source: None,
            partly_landed: false,
        }
    }

    /// The same error with its cause attached.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The same error, saying that part of the flush landed: see [`SinkError::partly_landed`].
    pub fn with_part_landed(mut self) -> Self {
        self.partly_landed = true;
        self
    }

    /// Whether trying again may help.
    pub fn is_retriable(&self) -> bool {
        self.kind == SinkErrorKind::Retriable
    }
}

/// A store that lands batches.
pub trait Sink: Send + Sync + 'static {
    /// A short name for logs and metrics (`lake`, `sqlite`).
    fn name(&self) -> &'static str;

    /// Makes the store ready for a table (a folder, a `CREATE TABLE`). Idempotent.
    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>>;

    /// Lands one flush, all of it or none of it. When it returns `Ok`, the rows are committed in
    /// the store as durably as the store allows (for the lake: fsynced).
    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>>;

    /// The highest `last_seq` of the flushes this store holds, per partition of `table`: every
    /// insert of that partition with a sequence number up to it is in the store. Replay after a
    /// crash skips what this covers, which is what makes landing exactly once.
    ///
    /// A store that cannot tell answers an empty list (and lands replayed rows again).
    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        let _ = table;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The active parts of one partition of a table this sink has opened, as it last saw them
    /// (kept current by its own commits and its compactor; cheap, called on every insert to
    /// throttle). `None`: the store does not count parts this way, and inserts are not
    /// throttled by them.
    fn partition_parts(&self, table: &TableName, partition: &PartitionKey) -> Option<u64> {
        let _ = (table, partition);
        None
    }

    /// Every partition's active parts, for `/metrics`, `GET /v1/tables` and `sluice parts`.
    fn active_parts(&self, table: &TableName) -> Option<Vec<PartitionParts>> {
        let _ = table;
        None
    }

    /// Whether the store keeps insert keys in the transaction that lands their rows
    /// ([`FlushBatch::keys`]), so that sluice processes writing one table land a keyed insert
    /// once between them. Such a store is asked [`Sink::held_keys`] before each flush with
    /// keys, and refuses a flush (retriably) whose key another process landed meanwhile.
    fn keeps_keys(&self) -> bool {
        false
    }

    /// Which of `keys` the store already holds for `table`'s `partition`, landed at or after
    /// `since_ms` (Unix milliseconds), each with the rows hash it was kept with. Asked only of a
    /// store that [keeps keys](Sink::keeps_keys).
    fn held_keys<'a>(
        &'a self,
        table: &'a TableName,
        partition: &'a PartitionKey,
        keys: &'a [InsertKey],
        since_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<InsertKey>, SinkError>> {
        let _ = (table, partition, keys, since_ms);
        Box::pin(async { Ok(Vec::new()) })
    }

    /// What this store makes of an empty string as a partition value. Inserts with one are
    /// refused at the door when the store would read it back as null.
    fn empty_partition_value(&self) -> EmptyValue {
        EmptyValue::Kept
    }
}

/// A catalog failure: the definitions could not be read or stored.
#[derive(Debug, thiserror::Error)]
#[error("catalog: {message}")]
pub struct CatalogError {
    /// What went wrong and where.
    pub message: String,
    /// The underlying error.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl CatalogError {
    /// A new error.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// The same error with its cause attached.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// Where the layouts of auto-created tables are kept, so a table's schema stays fixed across
/// restarts. Calls are rare (start-up, a table's first insert) and may block.
pub trait Catalog: Send + Sync + 'static {
    /// Every stored table.
    fn load(&self) -> Result<Vec<(TableName, TableLayout)>, CatalogError>;

    /// Stores a table's layout durably before the table takes its first rows.
    fn store(&self, name: &TableName, layout: &TableLayout) -> Result<(), CatalogError>;
}
