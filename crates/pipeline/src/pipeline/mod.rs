//! The pipeline: a registry of tables, each with a writer task, and the insert path into them.
//!
//! An insert is decoded against its table's schema, split by partition, admitted against the
//! memory budget, numbered, logged (unless `async` or the log is off) and handed to the table's
//! writer. `async` inserts are answered once handed over, `durable` ones once their frame is
//! fsynced, `committed` ones once every partition piece has landed.
//!
//! Small NDJSON inserts that arrive for a table together go through these steps in rounds, as
//! one insert of many when each would get the same alone ([`combine`]).
//!
//! Numbering, logging and handing over happen under one lock per table, so each writer receives
//! its inserts in LSN order (see the writer's module for why that matters).
//!
//! # Layout
//!
//! - `mod.rs`: the pipeline's types and the insert path: decode, split, admit, number, log, hand
//!   over, wait; shutdown.
//! - `registry.rs`: the tables, and creating one from its first insert.
//! - `evolve.rs`: an insert's new keys as new columns, for a table that evolves.
//! - `start.rs`: the builder and the start: tables, stores, the log.
//! - `replay.rs`: the log's inserts handed back to the writers at start.
//! - `combine.rs`: small NDJSON inserts of a table taken in rounds, decoded together and, when
//!   they may be, handed over together.

mod combine;
mod evolve;
mod registry;
mod replay;
mod start;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arrow::array::RecordBatch;
use combine::{Answer, RoundTerms};
use metrics::Counter;
use sluice_core::formats::may_join;
use sluice_core::{
    Catalog, Column, ColumnType, DecodeOptions, Header, InputFormat, TableDef, TableName,
    TableSchema, Verdict, decode, infer_table_schema,
};
use sluice_wal::{Completion, Wal};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use crate::ack::{AckMode, Failure, Outcome, Waiter};
use crate::clock;
use crate::config::PipelineConfig;
use crate::error::{InsertError, PartitionLimit};
use crate::keys::{Begin, Held, KeyStatus, KeyTable, KeyedInsert, Settling, check_key};
use crate::memory::MemoryBudget;
use crate::record;
use crate::record::{Encoded, LoggedKey};
use crate::stats::{TableInfo, TableStats, Tally, WalInfo};
use crate::writer::{Command, FrameAck, InsertMsg, Measured, Piece, Split, WriterReport};

pub use replay::ReplayReport;
pub use start::PipelineBuilder;

/// Bodies larger than this are decoded on a blocking thread, off the async workers.
const DECODE_INLINE_MAX: usize = 1024 * 1024;

/// Bodies up to this size and without a key are decoded in rounds with the table's other small
/// bodies of the same options ([`combine`]).
const DECODE_TOGETHER_MAX: usize = 16 * 1024;

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
    /// The body, already decompressed, in the format `options` names.
    pub body: &'a [u8],
    /// Decoding options (format, column list, unknown fields).
    pub options: DecodeOptions,
    /// When to answer.
    pub ack: AckMode,
    /// What to do when the buffer is full.
    pub admission: Admission,
    /// A lower limit than the pipeline's `max_partitions_per_insert` on the partitions this
    /// insert may span (ClickHouse's `max_partitions_per_insert_block` setting). `None`, `0`
    /// or a higher one: the pipeline's, which a request cannot raise.
    pub max_partitions: Option<usize>,
    /// The most rows the insert may hold (the server's `max_rows_per_insert`), checked once its
    /// rows are decoded. `None`: no limit.
    pub max_rows: Option<usize>,
    /// The insert's key: a resend with it, within the table's key window, lands once.
    pub key: Option<&'a str>,
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
    /// Whether this was a resend of an accepted insert with the same key, answered from it:
    /// nothing was stored again.
    pub duplicate: bool,
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

struct TableHandle {
    /// The table's definition, replaced when it takes new columns (`evolve`).
    def: RwLock<Arc<TableDef>>,
    /// Held while the table takes new columns, so each is added once.
    evolving: tokio::sync::Mutex<()>,
    /// The table's share of the pipeline's memory budget.
    memory: Arc<MemoryBudget>,
    sink: &'static str,
    /// The store, asked for the partitions' active parts before each insert (the throttle).
    store: Arc<dyn sluice_core::Sink>,
    tx: UnboundedSender<Command>,
    /// Held while an insert is numbered, logged and handed to the writer.
    order: Mutex<()>,
    stats: Arc<TableStats>,
    rows_received: Tally,
    bytes_received: Tally,
    inserts: Tally,
    delayed: Tally,
    /// The keys of recent inserts.
    keys: Arc<KeyTable>,
    duplicates: Counter,
    /// Small bodies waiting to be decoded together.
    combiner: combine::Combiner,
}

impl TableHandle {
    /// The table's definition now.
    fn def(&self) -> Arc<TableDef> {
        match self.def.read() {
            Ok(def) => def.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
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

/// What an insert asked for besides its rows.
struct Terms {
    ack: AckMode,
    admission: Admission,
    max_partitions: Option<usize>,
    /// The Arrow memory the rows take, when the batch is a slice of arrays decoded for several
    /// inserts (whose size it would report whole); measured from the batch otherwise.
    arrow_bytes: Option<u64>,
}

/// What an insert hands its table's writer.
struct Handed<'a> {
    pieces: Vec<Piece>,
    /// Its log record, when it is to be logged.
    payload: Option<Encoded<'a>>,
    /// What a `committed` insert waits on.
    waiter: Option<Arc<Waiter>>,
    keyed: Option<Arc<KeyedInsert>>,
}

/// `options` with the column names a positional body's values are read by: a body in a format
/// without a header and an insert without a column list fills the table's columns in order, as
/// they are now. Logged with the insert, they keep its values in place should a column be added
/// before it is replayed.
fn with_positions(mut options: DecodeOptions, schema: &TableSchema) -> DecodeOptions {
    let positional = matches!(
        options.format,
        InputFormat::Values
            | InputFormat::JsonCompactEachRow(Header::None)
            | InputFormat::TabSeparated(Header::None)
            | InputFormat::Csv(Header::None)
            | InputFormat::RowBinary(Header::None)
    );
    if positional && options.columns.is_none() {
        options.columns = Some(schema.columns().iter().map(|c| c.name.clone()).collect());
    }
    options
}

/// An insert's body, decoded.
enum Decoded {
    /// Its rows, for the insert to submit, with the Arrow memory they take when they are a
    /// slice of arrays decoded for several inserts.
    Rows(RecordBatch, Option<u64>),
    /// Its `rows` were handed to the writer with other inserts of a round
    /// ([`combine`]), and logged in the frame whose fsync is `durable` when it asks for that.
    HandedOver {
        rows: u64,
        durable: Option<Arc<Completion>>,
    },
}

/// Decodes an insert's body into `def`'s schema, on a blocking thread when it is large, and
/// refuses it past `terms.max_rows` rows. A small body goes into the table's next round when
/// `together` and it [may join](may_join) others ([`combine`]).
async fn decode_body(
    pipeline: &Pipeline,
    handle: &TableHandle,
    def: Arc<TableDef>,
    body: &[u8],
    options: &DecodeOptions,
    (terms, together): (RoundTerms, bool),
) -> Result<Decoded, InsertError> {
    if together && body.len() <= DECODE_TOGETHER_MAX && may_join(body, options) {
        return match combine::take_in(pipeline, handle, (def, options), body, terms).await {
            Answer::Decoded(decoded) => {
                let (batch, bytes) = decoded?;
                Ok(Decoded::Rows(batch, Some(bytes)))
            }
            Answer::HandedOver { rows, durable } => Ok(Decoded::HandedOver { rows, durable }),
        };
    }
    let batch = if body.len() > DECODE_INLINE_MAX {
        let schema = def.schema().clone();
        let (body, options) = (body.to_vec(), options.clone());
        tokio::task::spawn_blocking(move || decode(&schema, &body, &options))
            .await
            .map_err(|e| InsertError::NotCommitted(format!("decode task failed: {e}")))??
    } else {
        decode(def.schema(), body, options)?
    };
    within(terms.max_rows, batch.num_rows())?;
    Ok(Decoded::Rows(batch, None))
}

/// Refuses an insert of more than `max_rows` rows.
fn within(max_rows: Option<usize>, rows: usize) -> Result<(), InsertError> {
    match max_rows {
        Some(limit) if rows > limit => Err(InsertError::TooManyRows { rows, limit }),
        _ => Ok(()),
    }
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

impl Pipeline {
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

    /// Decodes, buffers and (by its ack mode) waits for one insert's body, in the format its
    /// options name.
    pub async fn insert_body(&self, insert: Insert<'_>) -> Result<Inserted, InsertError> {
        let name = self.precheck(insert.table, insert.ack, insert.admission)?;
        let handle = self
            .table_for(&name, || {
                infer_table_schema(insert.body, &insert.options).map_err(InsertError::from)
            })
            .await?;
        let options = with_positions(insert.options, handle.def().schema());
        if let Some(key) = insert.key {
            check_key(key).map_err(InsertError::BadKey)?;
        }
        let terms = RoundTerms {
            ack: insert.ack,
            admission: insert.admission,
            max_partitions: insert.max_partitions,
            max_rows: insert.max_rows,
        };
        let limits = (terms, insert.key.is_none());
        let def = handle.def();
        let mut decoded =
            decode_body(self, &handle, def.clone(), insert.body, &options, limits).await;
        if matches!(decoded, Err(InsertError::Decode(_))) {
            match self.evolve(&handle, def, insert.body, &options).await {
                Ok(true) => {
                    let def = handle.def();
                    decoded = decode_body(self, &handle, def, insert.body, &options, limits).await;
                }
                Ok(false) => {}
                Err(error) => decoded = Err(error),
            }
        }
        let (batch, arrow_bytes) = match decoded {
            Ok(Decoded::Rows(batch, arrow_bytes)) => (batch, arrow_bytes),
            Ok(Decoded::HandedOver { rows, durable }) => {
                let inserted = Inserted {
                    table: handle.def().name().clone(),
                    rows,
                    ack: insert.ack,
                    duplicate: false,
                };
                return self.answer(inserted, durable, None).await;
            }
            Err(error) => {
                if let Some(key) = insert.key {
                    handle
                        .keys
                        .refused_unread(key, error.to_string(), clock::now());
                }
                return Err(error);
            }
        };
        let record = |key: Option<LoggedKey<'_>>| {
            Ok(record::encode_body(
                insert.table,
                key,
                &options,
                insert.body,
            ))
        };
        let terms = Terms {
            ack: insert.ack,
            admission: insert.admission,
            max_partitions: insert.max_partitions,
            arrow_bytes,
        };
        let bytes = insert.body.len() as u64;
        let Some(key) = insert.key else {
            return self
                .submit(&handle, batch, bytes, terms, None, record)
                .await;
        };
        self.submit_keyed(&handle, key, batch, bytes, terms, record)
            .await
    }

    /// Submits an insert with `key`, unless an insert with the key and the same rows was
    /// accepted within the window and is as safe as this one asks (answered from it), or is in
    /// flight or less safe (waited for first, up to the ack timeout).
    async fn submit_keyed<'body>(
        &self,
        handle: &TableHandle,
        key: &str,
        batch: RecordBatch,
        bytes: u64,
        terms: Terms,
        record: impl FnOnce(Option<LoggedKey<'_>>) -> Result<Encoded<'body>, InsertError>,
    ) -> Result<Inserted, InsertError> {
        let rows_hash = crate::keys::rows_hash(&batch);
        let timeout = self.inner.config.ack_timeout;
        // Set by the first wait: most keyed inserts never wait.
        let mut deadline = None;
        let held = loop {
            match handle.keys.begin(key, rows_hash, terms.ack, clock::now()) {
                Begin::New(held) => break held,
                Begin::Duplicate { rows } => {
                    handle.duplicates.increment(1);
                    return Ok(Inserted {
                        table: handle.def().name().clone(),
                        rows,
                        ack: terms.ack,
                        duplicate: true,
                    });
                }
                Begin::Wait(mut changed) => {
                    let at = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + timeout);
                    if tokio::time::timeout_at(at, changed.changed())
                        .await
                        .is_err()
                    {
                        return Err(InsertError::NotCommittedInTime(timeout));
                    }
                }
                Begin::Conflict => {
                    return Err(InsertError::KeyConflict {
                        key: key.to_owned(),
                        window_s: self.inner.config.keys.window.as_secs(),
                    });
                }
            }
        };
        let rows = batch.num_rows() as u64;
        let insert = KeyedInsert::new(held, rows_hash, rows, 0);
        let settling = Settling::new(&handle.keys, insert);
        let result = self
            .submit(handle, batch, bytes, terms, Some(settling.insert()), record)
            .await;
        let outcome = match &result {
            Ok(inserted) => Ok((inserted.rows, Held::of(inserted.ack))),
            // Not committed in time, but taken: its rows stay buffered (and logged, with a
            // log) and will land, so a resend must not store them again.
            Err(InsertError::NotCommittedInTime(_)) => {
                let held = match self.inner.wal {
                    Some(_) => Held::Durable,
                    None => Held::Buffered,
                };
                Ok((rows, held))
            }
            Err(error) => Err(error.to_string()),
        };
        settling.settle(outcome);
        result
    }

    /// What became of the insert with `key` into `table`.
    pub fn key_status(&self, table: &str, key: &str) -> KeyStatus {
        let Ok(name) = TableName::new(table) else {
            return KeyStatus::Unknown;
        };
        match self.read_tables().get(&name) {
            Some(handle) => handle.keys.status(key, clock::now()),
            None => KeyStatus::Unknown,
        }
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
        if batch.schema().fields() != handle.def().schema().arrow().fields() {
            return Err(InsertError::SchemaMismatch {
                table: table.to_owned(),
                reason: format!(
                    "the batch has {:?}, the table has {:?}",
                    batch.schema().fields(),
                    handle.def().schema().arrow().fields()
                ),
            });
        }
        let bytes = batch.get_array_memory_size() as u64;
        let logged = batch.clone();
        let record = move |_: Option<LoggedKey<'_>>| {
            record::encode_arrow(table, &logged).map_err(InsertError::WalFailed)
        };
        let terms = Terms {
            ack,
            admission,
            max_partitions: None,
            arrow_bytes: None,
        };
        self.submit(&handle, batch, bytes, terms, None, record)
            .await
    }

    /// The layout of `table`, when sluice knows the table.
    pub fn layout(&self, table: &str) -> Option<sluice_core::TableLayout> {
        let name = TableName::new(table).ok()?;
        self.read_tables().get(&name).map(|h| h.def().layout())
    }

    /// A snapshot of every table.
    pub fn tables(&self) -> Vec<TableInfo> {
        let tables = self.read_tables();
        let mut infos: Vec<TableInfo> = tables
            .values()
            .map(|h| TableInfo {
                name: h.def().name().to_string(),
                sink: h.sink,
                layout: h.def().layout(),
                buffered_rows: TableStats::load(&h.stats.buffered_rows),
                buffered_bytes: TableStats::load(&h.stats.buffered_bytes),
                rows_written: TableStats::load(&h.stats.rows_written),
                parts_written: TableStats::load(&h.stats.parts_written),
                bytes_written: TableStats::load(&h.stats.bytes_written),
                failing: h.stats.error(),
                active_parts: h.store.active_parts(h.def().name()),
                last_error: h.stats.last_error(),
                counters: h.stats.counters(),
                row_wait: h.stats.row_wait(),
                policy: *h.def().policy(),
                throttle: *h.def().throttle(),
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
    async fn throttle(&self, handle: &TableHandle, split: &Split) -> Result<(), InsertError> {
        let delay = self.throttle_delay(handle, split)?;
        if !delay.is_zero() {
            handle.delayed.increment(1);
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    /// How long the throttle delays an insert of `split`'s partitions, or its refusal.
    fn throttle_delay(
        &self,
        handle: &TableHandle,
        split: &Split,
    ) -> Result<std::time::Duration, InsertError> {
        let throttle = *handle.def().throttle();
        let mut delay = std::time::Duration::ZERO;
        for (key, _) in split {
            let Some(parts) = handle.store.partition_parts(handle.def().name(), key) else {
                continue;
            };
            match throttle.verdict(parts) {
                Verdict::Go => {}
                Verdict::Delay(d) => delay = delay.max(d),
                Verdict::Refuse => {
                    return Err(InsertError::TooManyParts {
                        table: handle.def().name().to_string(),
                        partition: key.to_string(),
                        parts,
                        limit: throttle.parts_to_throw_insert,
                    });
                }
            }
        }
        Ok(delay)
    }

    /// Splits, throttles, admits, numbers, logs (with `key`, when it has one) and hands over
    /// one insert, then waits as its ack mode says.
    async fn submit<'body>(
        &self,
        handle: &TableHandle,
        batch: RecordBatch,
        body_bytes: u64,
        terms: Terms,
        keyed: Option<&Arc<KeyedInsert>>,
        record: impl FnOnce(Option<LoggedKey<'_>>) -> Result<Encoded<'body>, InsertError>,
    ) -> Result<Inserted, InsertError> {
        let Terms {
            ack,
            admission,
            max_partitions,
            arrow_bytes,
        } = terms;
        let rows = batch.num_rows() as u64;
        let inserted = Inserted {
            table: handle.def().name().clone(),
            rows,
            ack,
            duplicate: false,
        };
        if rows == 0 {
            return Ok(inserted);
        }
        let split = self.split_by_partition(handle, &batch, max_partitions)?;
        self.throttle(handle, &split).await?;
        let measured = match arrow_bytes {
            Some(bytes) if split.len() == 1 && split[0].1.num_rows() as u64 == rows => {
                Measured::sized(split, bytes)
            }
            _ => Measured::new(split),
        };
        let bytes = measured.charge();
        let memory = &handle.memory;
        let reserved = match admission {
            Admission::Refuse => memory.try_reserve(bytes)?,
            Admission::Wait => memory.reserve(bytes).await,
        };
        let pieces = measured.reserved(reserved);
        let logged = keyed.map(|keyed| LoggedKey {
            key: &keyed.key,
            rows_hash: keyed.rows_hash,
        });
        let payload = match self.inner.wal {
            Some(_) if ack != AckMode::Async => Some(record(logged)?),
            _ => None,
        };
        if let Some(keyed) = keyed {
            keyed.split_in(pieces.len());
        }
        let keyed = keyed.cloned();
        let (waiter, outcome) = match ack {
            AckMode::Committed => {
                let (waiter, rx) = Waiter::new(pieces.len());
                (Some(Arc::new(waiter)), Some(rx))
            }
            AckMode::Async | AckMode::Durable => (None, None),
        };
        let durable = self.hand_over(
            handle,
            Handed {
                pieces,
                payload,
                waiter,
                keyed,
            },
        )?;
        handle.inserts.increment(1);
        handle.rows_received.increment(rows);
        handle.bytes_received.increment(body_bytes);
        self.answer(inserted, durable, outcome).await
    }

    /// The insert's rows split by partition, refused when they span more partitions than the
    /// pipeline's limit or the request's lower one.
    fn split_by_partition(
        &self,
        handle: &TableHandle,
        batch: &RecordBatch,
        max_partitions: Option<usize>,
    ) -> Result<Split, InsertError> {
        // Counted before the rows are copied out per partition: an insert spread over a
        // partition per row is refused without building a batch for each.
        let grouped = handle
            .def()
            .partition()
            .group(batch, handle.store.empty_partition_value())?;
        let (limit, set_by) =
            partition_limit(self.inner.config.max_partitions_per_insert, max_partitions);
        if limit > 0 && grouped.len() > limit {
            return Err(InsertError::TooManyPartitions {
                table: handle.def().name().to_string(),
                partitions: grouped.len(),
                limit,
                set_by,
            });
        }
        Ok(grouped.split()?)
    }

    /// Numbers the insert, logs it (when `payload` is the log's frame for it) and hands it to
    /// the table's writer, all under the table's lock, so each writer receives its inserts in
    /// LSN order. The fsync to wait for, for a logged insert. When it cannot, the pieces are
    /// dropped, which gives their memory back.
    fn hand_over(
        &self,
        handle: &TableHandle,
        handed: Handed<'_>,
    ) -> Result<Option<Arc<Completion>>, InsertError> {
        let Handed {
            pieces,
            payload,
            waiter,
            keyed,
        } = handed;
        let wal = self.inner.wal.as_ref();
        let _order = match handle.order.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (seq, frame, durable) = match (wal, payload) {
            (Some(wal), Some(payload)) => match wal.append_pieces(&payload.pieces()) {
                Ok(appended) => (
                    appended.lsn,
                    Some(FrameAck::new(wal.clone(), appended.lsn, pieces.len())),
                    Some(appended.durable),
                ),
                Err(e) => return Err(InsertError::WalFailed(e.to_string())),
            },
            (Some(wal), None) => match wal.next_lsn() {
                Ok(lsn) => (lsn, None, None),
                Err(e) => return Err(InsertError::WalFailed(e.to_string())),
            },
            (None, _) => (self.inner.seq.fetch_add(1, Ordering::Relaxed), None, None),
        };
        if let Some(keyed) = &keyed {
            keyed.handed_over();
        }
        let msg = InsertMsg {
            pieces,
            seq,
            arrived: crate::clock::now(),
            waiter,
            durable: durable.clone(),
            frame,
            keyed,
            unfiltered: false,
        };
        if handle.tx.send(Command::Insert(msg)).is_err() {
            // Shutting down. A logged frame stays in the log and lands after the next start.
            return Err(InsertError::ShuttingDown);
        }
        Ok(durable)
    }

    /// Waits as the insert's ack mode says: for its frame's fsync, then for its pieces to land.
    async fn answer(
        &self,
        inserted: Inserted,
        durable: Option<Arc<Completion>>,
        outcome: Option<tokio::sync::oneshot::Receiver<Outcome>>,
    ) -> Result<Inserted, InsertError> {
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
            let ty = ColumnType::from_field(f).ok_or_else(|| {
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
