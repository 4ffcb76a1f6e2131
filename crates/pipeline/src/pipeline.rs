//! The pipeline: a registry of tables, each with a writer task, and the insert path into them.
//!
//! An insert is decoded against its table's schema, split by partition, admitted against the
//! memory budget, numbered, logged (unless `async` or the log is off) and handed to the table's
//! writer. `async` inserts are answered once handed over, `durable` ones once their frame is
//! fsynced, `committed` ones once every partition piece has landed.
//!
//! Numbering, logging and handing over happen under one lock per table, so each writer receives
//! its inserts in LSN order (see `writer.rs` for why that matters).
//!
//! # Start and replay
//!
//! Each store says which sequence numbers it already holds, per partition
//! ([`sluice_core::Sink::committed`]). The log is opened so new LSNs start above all of them,
//! above its own frames and above its reservation (every LSN it ever handed out); then every
//! frame is replayed into its table's writer, partition by partition, except the pieces the
//! store already holds. Replayed rows go through the same FIFO as new inserts, so no new insert
//! is acknowledged `committed` before them.
//!
//! With the log on, a store that does not answer at start (a retriable error, or no answer
//! within [`START_OPEN_TIMEOUT`]) does not stop it: its tables' writers open them later
//! (`writer::Opening`), and leave out then the replayed pieces the store holds. This is sound
//! because of the reservation: every new LSN is above anything any store can hold, whether or
//! not the store was asked. So it needs a reservation made at an earlier start: the first start
//! of a log, which has none, asks every store, and so does every start without the log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use std::time::Instant;

use arrow::array::RecordBatch;
use metrics::Counter;
use sluice_core::{
    Catalog, Column, ColumnType, DecodeOptions, EmptyValue, PartitionKey, TableDef, TableName,
    TableSchema, Verdict, conform, decode_ndjson, infer_schema,
};
use sluice_wal::{FsStorage, Storage, Wal};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::task::JoinHandle;

use crate::ack::{AckMode, Failure, Waiter};
use crate::config::PipelineConfig;
use crate::error::{InsertError, PartitionLimit, StartError};
use crate::memory::MemoryBudget;
use crate::record::{self, Record};
use crate::stats::{TableInfo, TableStats, WalInfo, names};
use crate::writer::{
    Command, FrameAck, InsertMsg, Opening, Piece, Writer, WriterReport, open_table,
};

/// How long the start waits for a store to open a table (with the log on) before it goes on
/// without it and leaves the opening to the table's writer.
pub const START_OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a store that is down stops a start without the log.
const NO_LOG: &str = "with the write-ahead log on, sluice starts anyway and lands the table's \
                      inserts once its store answers";

/// Why it stops the first start with a log.
const FIRST_START: &str = "this write-ahead log has never numbered inserts with every store \
     answering (a new data directory, or one an older sluice kept), so every store must answer \
     once; later starts go on without a store that is down";

/// Bodies larger than this are decoded on a blocking thread, off the async workers.
const DECODE_INLINE_MAX: usize = 1024 * 1024;

/// What to do when the memory budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Wait until memory is released (the library API).
    Wait,
    /// Refuse at once with [`InsertError::Overloaded`] (the HTTP edge answers 503).
    Refuse,
}

/// One NDJSON insert.
#[derive(Debug, Clone)]
pub struct Insert<'a> {
    /// The table name as the client sent it.
    pub table: &'a str,
    /// The NDJSON body, already decompressed.
    pub body: &'a [u8],
    /// Decoding options (column list, unknown fields).
    pub options: DecodeOptions,
    /// When to answer.
    pub ack: AckMode,
    /// What to do when the buffer is full.
    pub admission: Admission,
    /// A lower limit than the pipeline's `max_partitions_per_insert` on the partitions this
    /// insert may span (ClickHouse's `max_partitions_per_insert_block` setting). `None`, `0`
    /// or a higher one: the pipeline's, which a request cannot raise.
    pub max_partitions: Option<usize>,
}

/// An accepted insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inserted {
    /// The table.
    pub table: TableName,
    /// Rows accepted.
    pub rows: u64,
    /// How safe they are now.
    pub ack: AckMode,
}

/// What shutdown reports.
#[derive(Debug, Clone, Default)]
pub struct ShutdownReport {
    /// One report per table.
    pub tables: Vec<WriterReport>,
}

impl ShutdownReport {
    /// Rows that were accepted but could not be landed before shutdown gave up, and are in no
    /// log: lost.
    pub fn rows_lost(&self) -> u64 {
        self.tables.iter().map(|t| t.rows_lost).sum()
    }

    /// Rows that could not be landed before shutdown gave up but are in the write-ahead log:
    /// they land after the next start.
    pub fn rows_deferred(&self) -> u64 {
        self.tables.iter().map(|t| t.rows_deferred).sum()
    }
}

/// What replay found and did at start.
#[derive(Debug, Clone, Default)]
pub struct ReplayReport {
    /// Frames read from the log.
    pub frames: u64,
    /// Rows handed back to writers.
    pub rows: u64,
    /// Partition pieces skipped because the store already held them.
    pub pieces_already_landed: u64,
}

struct TableHandle {
    def: Arc<TableDef>,
    /// The table's share of the pipeline's memory budget.
    memory: Arc<MemoryBudget>,
    sink: &'static str,
    /// The store, asked for the partitions' active parts before each insert (the throttle).
    store: Arc<dyn sluice_core::Sink>,
    tx: UnboundedSender<Command>,
    /// Held while an insert is numbered, logged and handed to the writer.
    order: Mutex<()>,
    stats: Arc<TableStats>,
    rows_received: Counter,
    bytes_received: Counter,
    inserts: Counter,
    delayed: Counter,
}

struct Inner {
    config: PipelineConfig,
    catalog: Arc<dyn Catalog>,
    default_sink: Arc<dyn sluice_core::Sink>,
    tables: RwLock<HashMap<TableName, Arc<TableHandle>>>,
    creating: tokio::sync::Mutex<()>,
    memory: Arc<MemoryBudget>,
    /// Sequence numbers when there is no log.
    seq: AtomicU64,
    wal: Option<Arc<Wal>>,
    replay: std::sync::OnceLock<ReplayReport>,
    accepting: AtomicBool,
    writers: Mutex<Vec<JoinHandle<WriterReport>>>,
}

/// The running pipeline. Cheap to clone; every clone is the same pipeline.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<Inner>,
}

/// Collects the declared tables before the pipeline starts.
pub struct PipelineBuilder {
    config: PipelineConfig,
    catalog: Arc<dyn Catalog>,
    default_sink: Arc<dyn sluice_core::Sink>,
    declared: Vec<(TableDef, Option<Arc<dyn sluice_core::Sink>>)>,
    wal_storage: Arc<dyn Storage>,
}

impl PipelineBuilder {
    /// Declares a table (from the config file), landing in `sink` or the default sink.
    pub fn table(mut self, def: TableDef, sink: Option<Arc<dyn sluice_core::Sink>>) -> Self {
        self.declared.push((def, sink));
        self
    }

    /// The file access the write-ahead log uses: real files unless a test injects faults.
    pub fn wal_storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.wal_storage = storage;
        self
    }

    /// Loads the catalog, prepares every table in its sink and starts the writers.
    /// Must be called inside a tokio runtime.
    pub async fn start(self) -> Result<Pipeline, StartError> {
        let config = self.config;
        config.check_policy("flush", &config.default_policy)?;
        for (def, _) in &self.declared {
            config.check_policy(&format!("tables.{}.flush", def.name()), def.policy())?;
        }
        let catalog = self.catalog.clone();
        let stored = tokio::task::spawn_blocking(move || catalog.load())
            .await
            .map_err(|e| sluice_core::CatalogError::new(format!("catalog task failed: {e}")))??;

        let mut tables: Vec<(TableDef, Arc<dyn sluice_core::Sink>)> = Vec::new();
        for (def, sink) in self.declared {
            if let Some((_, layout)) = stored.iter().find(|(n, _)| n == def.name())
                && *layout != def.layout()
            {
                tracing::warn!(
                    table = %def.name(),
                    "the config changes the table's layout; its store fits the table to it as it \
                     opens it (rows landed before read added columns as null)"
                );
            }
            tables.push((def, sink.unwrap_or_else(|| self.default_sink.clone())));
        }
        for (name, layout) in stored {
            if tables.iter().any(|(d, _)| d.name() == &name) {
                continue;
            }
            let def = TableDef::new(name.clone(), layout, config.default_policy)
                .map_err(|e| e.within(&format!("stored table {name}")))?
                .with_throttle(config.default_throttle);
            tables.push((def, self.default_sink.clone()));
        }

        // Each store says what it holds; the log's numbering starts above all of it. With a log
        // whose reservation is above everything (see `sluice_wal::reserve`), a store that does
        // not answer is opened later by its tables' writers.
        let deferrable = match &config.wal {
            None => Err(NO_LOG),
            Some(wal) if sluice_wal::reserve::exists(self.wal_storage.as_ref(), &wal.dir) => Ok(()),
            Some(_) => Err(FIRST_START),
        };
        let mut watermarks: HashMap<TableName, HashMap<PartitionKey, u64>> = HashMap::new();
        let mut unopened: HashMap<TableName, String> = HashMap::new();
        // Stores that did not answer: their other tables are not tried again now, so a store
        // that times out costs the start one timeout, not one per table.
        let mut down: Vec<&Arc<dyn sluice_core::Sink>> = Vec::new();
        let mut highest = 0;
        for (def, sink) in &tables {
            if down.iter().any(|d| Arc::ptr_eq(d, sink)) {
                tracing::warn!(
                    table = %def.name(), sink = sink.name(),
                    "the table's store did not answer for another table; sluice starts without it"
                );
                let error = "it did not answer for another table at start".to_owned();
                unopened.insert(def.name().clone(), error);
                continue;
            }
            let open = open_table(sink.as_ref(), &self.catalog, def);
            let opened = match deferrable {
                Err(_) => open.await,
                Ok(()) => tokio::time::timeout(START_OPEN_TIMEOUT, open)
                    .await
                    .unwrap_or_else(|_| {
                        let reason = format!("no answer within {START_OPEN_TIMEOUT:?}");
                        Err(sluice_core::SinkError::retriable(sink.name(), reason).into())
                    }),
            };
            match opened {
                Ok(held) => {
                    highest = held.values().copied().fold(highest, u64::max);
                    watermarks.insert(def.name().clone(), held);
                }
                Err(StartError::Sink(error)) if error.is_retriable() && deferrable.is_ok() => {
                    tracing::warn!(
                        table = %def.name(), sink = sink.name(), error = %error,
                        "the table's store does not answer; sluice starts without it: the \
                         table's inserts are logged and held, and land once the store answers"
                    );
                    unopened.insert(def.name().clone(), error.to_string());
                    down.push(sink);
                }
                Err(StartError::Sink(error)) if error.is_retriable() => {
                    return Err(StartError::StoreDown {
                        table: def.name().to_string(),
                        error,
                        why: deferrable.err().unwrap_or_default(),
                    });
                }
                Err(error) => return Err(error),
            }
        }
        let (wal, replay) = match &config.wal {
            None => (None, None),
            Some(wal_config) => {
                let (wal, replay, recovered) =
                    Wal::open(wal_config.clone(), self.wal_storage.clone(), highest + 1)?;
                tracing::info!(
                    dir = %wal_config.dir.display(),
                    segments = recovered.segments,
                    frames = recovered.frames,
                    last_lsn = recovered.last_lsn,
                    "write-ahead log recovered"
                );
                (Some(Arc::new(wal)), Some(replay))
            }
        };

        let pipeline = Pipeline {
            inner: Arc::new(Inner {
                memory: Arc::new(MemoryBudget::new(config.max_buffer_bytes)),
                config,
                catalog: self.catalog,
                default_sink: self.default_sink,
                tables: RwLock::new(HashMap::new()),
                creating: tokio::sync::Mutex::new(()),
                seq: AtomicU64::new(highest + 1),
                wal,
                replay: std::sync::OnceLock::new(),
                accepting: AtomicBool::new(true),
                writers: Mutex::new(Vec::new()),
            }),
        };
        for (def, sink) in tables {
            let opening = unopened
                .get(def.name())
                .map(|error| Opening::new(pipeline.inner.catalog.clone(), error));
            pipeline.register(def, sink, opening);
        }
        if let (Some(replay), Some(wal)) = (replay, pipeline.inner.wal.clone()) {
            let handles = pipeline.read_tables().clone();
            let report = tokio::task::spawn_blocking(move || {
                replay_frames(&replay, &wal, &handles, &watermarks)
            })
            .await
            .map_err(|e| StartError::Replay {
                lsn: 0,
                reason: format!("replay task failed: {e}"),
            })??;
            if report.frames > 0 {
                tracing::info!(
                    frames = report.frames,
                    rows = report.rows,
                    already_landed = report.pieces_already_landed,
                    "replayed the write-ahead log"
                );
            }
            let _ = pipeline.inner.replay.set(report);
        }
        Ok(pipeline)
    }
}

/// What an insert asked for besides its rows.
struct Terms {
    ack: AckMode,
    admission: Admission,
    max_partitions: Option<usize>,
}

/// The limit on the partitions one insert may span, and whose it is: the pipeline's
/// (`configured`, 0 for none), or a request's lower one.
fn partition_limit(configured: usize, requested: Option<usize>) -> (usize, PartitionLimit) {
    match requested {
        Some(asked) if asked > 0 && (configured == 0 || asked < configured) => {
            (asked, PartitionLimit::Request)
        }
        _ => (configured, PartitionLimit::Server),
    }
}

/// The decoding options of a logged insert, replayed against the table's columns as they are
/// now: keys and listed columns the table no longer has are left out.
fn replay_options(schema: &TableSchema, logged: &DecodeOptions) -> DecodeOptions {
    DecodeOptions {
        dialect: logged.dialect,
        skip_unknown_fields: true,
        columns: logged.columns.as_ref().map(|listed| {
            listed
                .iter()
                .filter(|name| schema.column(name).is_some())
                .cloned()
                .collect()
        }),
    }
}

/// Hands every logged insert the stores do not hold yet back to its table's writer.
fn replay_frames(
    replay: &sluice_wal::Replay,
    wal: &Arc<Wal>,
    tables: &HashMap<TableName, Arc<TableHandle>>,
    watermarks: &HashMap<TableName, HashMap<PartitionKey, u64>>,
) -> Result<ReplayReport, StartError> {
    let mut report = ReplayReport::default();
    let mut failure: Option<StartError> = None;
    replay.for_each(|lsn, payload| {
        if failure.is_some() {
            return;
        }
        report.frames += 1;
        let fail = |reason: String| StartError::Replay { lsn, reason };
        let record = match record::decode(payload) {
            Ok(record) => record,
            Err(reason) => {
                failure = Some(fail(reason));
                return;
            }
        };
        let Some(handle) = TableName::new(record.table())
            .ok()
            .and_then(|name| tables.get(&name))
        else {
            // Its folder (and remembered layout) was deleted with inserts still logged: they
            // were acknowledged, so the start stops rather than drop them.
            let table = sluice_core::name::printable(record.table());
            failure = Some(fail(format!(
                "table '{table}' no longer exists, and the log holds inserts into it that have \
                 not landed: declare it in the config ([tables.{table}]) to land them, or move \
                 the log away to drop every insert in it that has not landed"
            )));
            return;
        };
        // The insert lands in the table as it is now, which the config may have changed since
        // it was logged: a column dropped since is left out of its rows (as of any insert
        // after the change), and a nullable one added since is null in them.
        let schema = handle.def.schema();
        let batch = match &record {
            Record::Ndjson { options, body, .. } => {
                decode_ndjson(schema, body, &replay_options(schema, options))
                    .map_err(|e| e.to_string())
            }
            Record::Arrow { ipc, .. } => {
                record::read_arrow(ipc).and_then(|batch| conform(schema.arrow(), &batch))
            }
        };
        // Every logged insert passed the door's checks when it was taken. Should the table
        // have moved since from a store that keeps an empty partition value to a Delta table,
        // refusing such a row now would stop the start: it lands, and reads back as null.
        let pieces = batch.and_then(|b| {
            handle
                .def
                .partition()
                .split(&b, EmptyValue::Kept)
                .map_err(|e| e.to_string())
        });
        let pieces = match pieces {
            Ok(pieces) => pieces,
            Err(reason) => {
                failure = Some(fail(format!("table '{}': {reason}", record.table())));
                return;
            }
        };
        // A table whose store did not answer has no watermarks yet: its writer leaves out what
        // the store holds once it opens the table.
        let held = watermarks.get(handle.def.name());
        let total = pieces.len();
        let pieces: Vec<Piece> = pieces
            .into_iter()
            .filter(|(key, _)| held.and_then(|h| h.get(key)).is_none_or(|w| lsn > *w))
            .map(|(key, batch)| Piece {
                bytes: batch.get_array_memory_size() as u64,
                key,
                batch,
            })
            .collect();
        report.pieces_already_landed += (total - pieces.len()) as u64;
        if pieces.is_empty() {
            wal.landed(lsn);
            return;
        }
        report.rows += pieces
            .iter()
            .map(|p| p.batch.num_rows() as u64)
            .sum::<u64>();
        // Replayed rows were accepted before the crash: they are admitted even over the budget.
        handle.memory.force(pieces.iter().map(Piece::charge).sum());
        let msg = InsertMsg {
            frame: Some(FrameAck::new(wal.clone(), lsn, pieces.len())),
            pieces,
            seq: lsn,
            arrived: Instant::now(),
            waiter: None,
            durable: None,
            unfiltered: held.is_none(),
        };
        let _ = handle.tx.send(Command::Insert(msg));
    })?;
    match failure {
        Some(error) => Err(error),
        None => Ok(report),
    }
}

impl Pipeline {
    /// Starts building a pipeline over `catalog`, landing tables in `default_sink` unless
    /// declared otherwise.
    pub fn builder(
        config: PipelineConfig,
        catalog: Arc<dyn Catalog>,
        default_sink: Arc<dyn sluice_core::Sink>,
    ) -> PipelineBuilder {
        PipelineBuilder {
            config,
            catalog,
            default_sink,
            declared: Vec::new(),
            wal_storage: Arc::new(FsStorage),
        }
    }

    /// The settings it runs with.
    pub fn config(&self) -> &PipelineConfig {
        &self.inner.config
    }

    /// Bytes buffered and the limit.
    pub fn memory(&self) -> (u64, u64) {
        (self.inner.memory.used(), self.inner.memory.limit())
    }

    /// Whether new inserts are taken.
    pub fn is_accepting(&self) -> bool {
        self.inner.accepting.load(Ordering::Acquire)
    }

    /// Decodes, buffers and (by its ack mode) waits for one NDJSON insert.
    pub async fn insert_ndjson(&self, insert: Insert<'_>) -> Result<Inserted, InsertError> {
        let name = self.precheck(insert.table, insert.ack, insert.admission)?;
        let handle = self
            .table_for(&name, || {
                infer_schema(insert.body, insert.options.dialect).map_err(InsertError::from)
            })
            .await?;
        let batch = if insert.body.len() > DECODE_INLINE_MAX {
            let schema = handle.def.schema().clone();
            let body = insert.body.to_vec();
            let options = insert.options.clone();
            tokio::task::spawn_blocking(move || decode_ndjson(&schema, &body, &options))
                .await
                .map_err(|e| InsertError::NotCommitted(format!("decode task failed: {e}")))??
        } else {
            decode_ndjson(handle.def.schema(), insert.body, &insert.options)?
        };
        let record = || {
            Ok(record::encode_ndjson(
                insert.table,
                &insert.options,
                insert.body,
            ))
        };
        let terms = Terms {
            ack: insert.ack,
            admission: insert.admission,
            max_partitions: insert.max_partitions,
        };
        self.submit(&handle, batch, insert.body.len() as u64, terms, record)
            .await
    }

    /// Buffers and (by its ack mode) waits for one Arrow batch: the library API.
    ///
    /// The batch must have exactly the table's columns. A missing table is created from the
    /// batch's schema when auto-create is on.
    pub async fn insert_batch(
        &self,
        table: &str,
        batch: RecordBatch,
        ack: AckMode,
        admission: Admission,
    ) -> Result<Inserted, InsertError> {
        let name = self.precheck(table, ack, admission)?;
        let handle = self.table_for(&name, || schema_of(table, &batch)).await?;
        if batch.schema().fields() != handle.def.schema().arrow().fields() {
            return Err(InsertError::SchemaMismatch {
                table: table.to_owned(),
                reason: format!(
                    "the batch has {:?}, the table has {:?}",
                    batch.schema().fields(),
                    handle.def.schema().arrow().fields()
                ),
            });
        }
        let bytes = batch.get_array_memory_size() as u64;
        let logged = batch.clone();
        let record = move || record::encode_arrow(table, &logged).map_err(InsertError::WalFailed);
        let terms = Terms {
            ack,
            admission,
            max_partitions: None,
        };
        self.submit(&handle, batch, bytes, terms, record).await
    }

    /// A snapshot of every table.
    pub fn tables(&self) -> Vec<TableInfo> {
        let tables = self.read_tables();
        let mut infos: Vec<TableInfo> = tables
            .values()
            .map(|h| TableInfo {
                name: h.def.name().to_string(),
                sink: h.sink,
                layout: h.def.layout(),
                buffered_rows: TableStats::load(&h.stats.buffered_rows),
                buffered_bytes: TableStats::load(&h.stats.buffered_bytes),
                rows_written: TableStats::load(&h.stats.rows_written),
                parts_written: TableStats::load(&h.stats.parts_written),
                bytes_written: TableStats::load(&h.stats.bytes_written),
                failing: h.stats.error(),
                active_parts: h.store.active_parts(h.def.name()),
            })
            .collect();
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        infos
    }

    /// Stops taking inserts, flushes everything buffered and waits for the writers to finish.
    /// Calling it again waits for nothing and reports nothing.
    pub async fn shutdown(&self) -> ShutdownReport {
        {
            let _creating = self.inner.creating.lock().await;
            self.inner.accepting.store(false, Ordering::Release);
            for handle in self.read_tables().values() {
                let _ = handle.tx.send(Command::Close);
            }
        }
        let writers = match self.inner.writers.lock() {
            Ok(mut guard) => std::mem::take(&mut *guard),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        let mut report = ShutdownReport::default();
        for writer in writers {
            match writer.await {
                Ok(table) => report.tables.push(table),
                Err(e) => tracing::error!(error = %e, "a table writer failed"),
            }
        }
        if let Some(wal) = &self.inner.wal {
            wal.close();
        }
        report
    }

    /// The write-ahead log's state, when there is one.
    pub fn wal(&self) -> Option<WalInfo> {
        self.inner.wal.as_ref().map(|wal| {
            let stats = wal.stats();
            WalInfo {
                frames: stats.frames.load(Ordering::Relaxed),
                bytes: stats.bytes.load(Ordering::Relaxed),
                fsyncs: stats.fsyncs.load(Ordering::Relaxed),
                outstanding: wal.outstanding() as u64,
                poisoned: wal.poisoned(),
            }
        })
    }

    /// What replay did at start (nothing, without a log).
    pub fn replayed(&self) -> ReplayReport {
        self.inner.replay.get().cloned().unwrap_or_default()
    }

    fn precheck(
        &self,
        table: &str,
        ack: AckMode,
        admission: Admission,
    ) -> Result<TableName, InsertError> {
        if !self.is_accepting() {
            return Err(InsertError::ShuttingDown);
        }
        match (&self.inner.wal, ack) {
            (None, AckMode::Durable) => return Err(InsertError::DurableNeedsWal),
            (Some(wal), AckMode::Durable | AckMode::Committed) => {
                if let Some(reason) = wal.poisoned() {
                    return Err(InsertError::WalFailed(format!(
                        "the write-ahead log refuses writes until restart: {reason}"
                    )));
                }
            }
            _ => {}
        }
        let name = TableName::new(table)?;
        if admission == Admission::Refuse
            && let Some(full) = self.inner.memory.full()
        {
            return Err(full.into());
        }
        Ok(name)
    }

    /// Delays or refuses an insert whose partitions hold too many active parts (the table's
    /// [`sluice_core::PartsThrottle`]), before it takes any memory. The longest delay of its
    /// partitions applies; one partition over `parts_to_throw_insert` refuses the whole insert.
    async fn throttle(&self, handle: &TableHandle, pieces: &[Piece]) -> Result<(), InsertError> {
        let throttle = handle.def.throttle();
        let mut delay = std::time::Duration::ZERO;
        for piece in pieces {
            let Some(parts) = handle.store.partition_parts(handle.def.name(), &piece.key) else {
                continue;
            };
            match throttle.verdict(parts) {
                Verdict::Go => {}
                Verdict::Delay(d) => delay = delay.max(d),
                Verdict::Refuse => {
                    return Err(InsertError::TooManyParts {
                        table: handle.def.name().to_string(),
                        partition: piece.key.to_string(),
                        parts,
                        limit: throttle.parts_to_throw_insert,
                    });
                }
            }
        }
        if !delay.is_zero() {
            handle.delayed.increment(1);
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    async fn submit(
        &self,
        handle: &TableHandle,
        batch: RecordBatch,
        body_bytes: u64,
        terms: Terms,
        record: impl FnOnce() -> Result<Vec<u8>, InsertError>,
    ) -> Result<Inserted, InsertError> {
        let Terms {
            ack,
            admission,
            max_partitions,
        } = terms;
        let rows = batch.num_rows() as u64;
        let inserted = Inserted {
            table: handle.def.name().clone(),
            rows,
            ack,
        };
        if rows == 0 {
            return Ok(inserted);
        }
        // Counted before the rows are copied out per partition: an insert spread over a
        // partition per row is refused without building a batch for each.
        let grouped = handle
            .def
            .partition()
            .group(&batch, handle.store.empty_partition_value())?;
        let (limit, set_by) =
            partition_limit(self.inner.config.max_partitions_per_insert, max_partitions);
        if limit > 0 && grouped.len() > limit {
            return Err(InsertError::TooManyPartitions {
                table: handle.def.name().to_string(),
                partitions: grouped.len(),
                limit,
                set_by,
            });
        }
        let pieces: Vec<Piece> = grouped
            .split()?
            .into_iter()
            .map(|(key, batch)| Piece {
                bytes: batch.get_array_memory_size() as u64,
                key,
                batch,
            })
            .collect();
        self.throttle(handle, &pieces).await?;
        let bytes: u64 = pieces.iter().map(Piece::charge).sum();
        let memory = &handle.memory;
        match admission {
            Admission::Refuse => memory.try_reserve(bytes)?,
            Admission::Wait => memory.reserve(bytes).await,
        }
        let wal = self.inner.wal.as_ref();
        let payload = match wal {
            Some(_) if ack != AckMode::Async => match record() {
                Ok(payload) => Some(payload),
                Err(e) => {
                    memory.release(bytes);
                    return Err(e);
                }
            },
            _ => None,
        };
        let (waiter, outcome) = match ack {
            AckMode::Committed => {
                let (waiter, rx) = Waiter::new(pieces.len());
                (Some(Arc::new(waiter)), Some(rx))
            }
            AckMode::Async | AckMode::Durable => (None, None),
        };
        let durable = {
            let _order = match handle.order.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            let (seq, frame, durable) = match (wal, payload) {
                (Some(wal), Some(payload)) => match wal.append(&payload) {
                    Ok(appended) => (
                        appended.lsn,
                        Some(FrameAck::new(wal.clone(), appended.lsn, pieces.len())),
                        Some(appended.durable),
                    ),
                    Err(e) => {
                        memory.release(bytes);
                        return Err(InsertError::WalFailed(e.to_string()));
                    }
                },
                (Some(wal), None) => match wal.next_lsn() {
                    Ok(lsn) => (lsn, None, None),
                    Err(e) => {
                        memory.release(bytes);
                        return Err(InsertError::WalFailed(e.to_string()));
                    }
                },
                (None, _) => (self.inner.seq.fetch_add(1, Ordering::Relaxed), None, None),
            };
            let msg = InsertMsg {
                pieces,
                seq,
                arrived: Instant::now(),
                waiter,
                durable: durable.clone(),
                frame,
                unfiltered: false,
            };
            if handle.tx.send(Command::Insert(msg)).is_err() {
                // Shutting down. A logged frame stays in the log and lands after the next start.
                memory.release(bytes);
                return Err(InsertError::ShuttingDown);
            }
            durable
        };
        handle.inserts.increment(1);
        handle.rows_received.increment(rows);
        handle.bytes_received.increment(body_bytes);
        if let Some(durable) = durable {
            durable
                .wait()
                .await
                .map_err(|e| InsertError::WalFailed(e.to_string()))?;
        }
        let Some(outcome) = outcome else {
            return Ok(inserted);
        };
        let timeout = self.inner.config.ack_timeout;
        match tokio::time::timeout(timeout, outcome).await {
            Ok(Ok(Ok(()))) => Ok(inserted),
            Ok(Ok(Err(Failure::Refused(reason)))) => Err(InsertError::StoreRefused(reason)),
            Ok(Ok(Err(Failure::Abandoned(reason)))) => Err(InsertError::NotCommitted(reason)),
            Ok(Err(_)) => Err(InsertError::NotCommitted(
                "the pipeline stopped before the batch landed".to_owned(),
            )),
            Err(_) => Err(InsertError::NotCommittedInTime(timeout)),
        }
    }

    /// The table called `name`, created from `schema()` if it is missing and auto-create is on.
    async fn table_for(
        &self,
        name: &TableName,
        schema: impl FnOnce() -> Result<TableSchema, InsertError>,
    ) -> Result<Arc<TableHandle>, InsertError> {
        if let Some(handle) = self.read_tables().get(name) {
            return Ok(handle.clone());
        }
        if !self.inner.config.auto_create {
            return Err(InsertError::UnknownTable(name.to_string()));
        }
        let _creating = self.inner.creating.lock().await;
        if let Some(handle) = self.read_tables().get(name) {
            return Ok(handle.clone());
        }
        if !self.is_accepting() {
            return Err(InsertError::ShuttingDown);
        }
        let limit = self.inner.config.max_tables;
        if self.read_tables().len() >= limit {
            return Err(InsertError::TooManyTables {
                table: name.to_string(),
                limit,
            });
        }
        let def = TableDef::inferred(name.clone(), schema()?, self.inner.config.default_policy)
            .with_throttle(self.inner.config.default_throttle);
        let create_failed = |reason: String| InsertError::CreateFailed {
            table: name.to_string(),
            reason,
        };
        // The store first: a table it cannot make is never remembered, so it cannot stop the
        // next start. A crash between the two leaves a table the store holds and the catalog
        // does not; the next insert creates it again (creating is idempotent).
        let sink = self.inner.default_sink.clone();
        sink.create_table(&def).await.map_err(|e| {
            let (table, reason) = (name.to_string(), e.to_string());
            if e.is_retriable() {
                InsertError::StoreUnavailable { table, reason }
            } else {
                InsertError::TableRefused { table, reason }
            }
        })?;
        let catalog = self.inner.catalog.clone();
        let (stored_name, layout) = (name.clone(), def.layout());
        tokio::task::spawn_blocking(move || catalog.store(&stored_name, &layout))
            .await
            .map_err(|e| create_failed(e.to_string()))?
            .map_err(|e| create_failed(e.to_string()))?;
        tracing::info!(table = %name, columns = def.schema().columns().len(), "table created from its first insert");
        Ok(self.register(def, sink, None))
    }

    fn register(
        &self,
        def: TableDef,
        sink: Arc<dyn sluice_core::Sink>,
        opening: Option<Opening>,
    ) -> Arc<TableHandle> {
        let def = Arc::new(def);
        let stats = Arc::new(TableStats::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let memory = Arc::new(MemoryBudget::share(
            self.inner.memory.clone(),
            self.inner.config.table_buffer_bytes(),
        ));
        let writer = Writer::new(
            def.clone(),
            sink.clone(),
            memory.clone(),
            stats.clone(),
            &self.inner.config,
            opening,
        );
        let task = tokio::spawn(writer.run(rx));
        match self.inner.writers.lock() {
            Ok(mut guard) => guard.push(task),
            Err(poisoned) => poisoned.into_inner().push(task),
        }
        let table = def.name().to_string();
        let handle = Arc::new(TableHandle {
            rows_received: metrics::counter!(names::ROWS_RECEIVED, "table" => table.clone()),
            bytes_received: metrics::counter!(names::BYTES_RECEIVED, "table" => table.clone()),
            inserts: metrics::counter!(names::INSERTS, "table" => table.clone()),
            delayed: metrics::counter!(names::DELAYED_INSERTS, "table" => table),
            sink: sink.name(),
            store: sink.clone(),
            def,
            memory,
            tx,
            order: Mutex::new(()),
            stats,
        });
        let mut tables = match self.inner.tables.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        tables.insert(handle.def.name().clone(), handle.clone());
        handle
    }

    fn read_tables(&self) -> std::sync::RwLockReadGuard<'_, HashMap<TableName, Arc<TableHandle>>> {
        match self.inner.tables.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The table schema for an Arrow batch given to [`Pipeline::insert_batch`].
fn schema_of(table: &str, batch: &RecordBatch) -> Result<TableSchema, InsertError> {
    let mismatch = |reason: String| InsertError::SchemaMismatch {
        table: table.to_owned(),
        reason,
    };
    let columns = batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let ty = ColumnType::from_arrow(f.data_type()).ok_or_else(|| {
                mismatch(format!(
                    "column '{}' has type {}, which sluice has no column type for",
                    f.name(),
                    f.data_type()
                ))
            })?;
            Ok(Column {
                name: f.name().clone(),
                ty,
                nullable: f.is_nullable(),
            })
        })
        .collect::<Result<Vec<_>, InsertError>>()?;
    TableSchema::new(columns).map_err(|e| mismatch(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_lowers_the_partition_limit_and_never_raises_or_lifts_it() {
        use PartitionLimit::{Request, Server};
        // (configured, requested) -> (limit, whose)
        let cases = [
            ((100, None), (100, Server)),
            ((100, Some(0)), (100, Server)),
            ((100, Some(5)), (5, Request)),
            ((100, Some(100)), (100, Server)),
            ((100, Some(1000)), (100, Server)),
            // No limit configured: a request may set one.
            ((0, None), (0, Server)),
            ((0, Some(0)), (0, Server)),
            ((0, Some(7)), (7, Request)),
        ];
        for ((configured, requested), expected) in cases {
            assert_eq!(
                partition_limit(configured, requested),
                expected,
                "{configured} {requested:?}"
            );
        }
    }
}
