//! One writer task per table: buffers, seals, flushes, retries, acknowledges.
//!
//! The writer owns the table's batchers (one per partition) and a FIFO of sealed batches. It runs
//! one flush at a time, in order, so within a partition parts land in insert order. While a flush
//! runs, inserts keep arriving into fresh buffers.
//!
//! A flush that fails with a retriable error goes back to the head of the queue and is tried
//! again after a capped, jittered backoff; its waiters keep waiting and its memory stays
//! reserved. When several sealed batches of one partition are queued (a slow or failing store),
//! they are merged into one flush up to the policy's limits, so an outage does not turn into a
//! burst of small parts when the store returns. A store that asks for a pause after a flush
//! ([`Landed::pause`], ClickHouse with parts piling up) gets the same treatment: no flush of the
//! table until the pause is over, and what queued meanwhile lands as one larger part.
//!
//! With the write-ahead log, an insert may reach the writer before its frame is durable. Such
//! inserts wait, in arrival order, until their group's fsync completes: then they are buffered,
//! or, if the log failed, dropped (their producers were refused). Nothing enters a batch before
//! its frame is on disk, and inserts after it wait behind it, so parts hold inserts in LSN order
//! per partition, which is what makes the stores' per-partition watermarks sound.
//!
//! A table whose store did not answer when sluice started is opened by its writer instead
//! ([`Opening`]): it tries again on the backoff, holding every insert back meanwhile (they are
//! logged, so `durable` ones are answered), and once the store answers it drops the replayed
//! pieces the store already holds, as the start does for every other table, and goes on.
//!
//! On close the writer stops taking messages, drains what was already sent, seals everything and
//! flushes until the queue is empty or the shutdown timeout passes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use metrics::{Counter, Gauge, Histogram};
use sluice_core::retry::Backoff;
use sluice_core::{
    Batcher, Catalog, FlushBatch, FlushId, FlushReason, Landed, PartitionKey, Sealed, Sink,
    SinkError, TableDef,
};
use sluice_wal::{Completion, Wal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::ack::{Failure, Waiter};
use crate::config::PipelineConfig;
use crate::dead;
use crate::error::StartError;
use crate::memory::{INSERT_OVERHEAD, MemoryBudget};
use crate::stats::{TableStats, names};

/// A message to a table's writer.
pub(crate) enum Command {
    /// Rows to buffer.
    Insert(InsertMsg),
    /// Stop taking messages, flush everything, exit.
    Close,
}

/// One accepted insert, split by partition, its memory already reserved.
pub(crate) struct InsertMsg {
    pub(crate) pieces: Vec<Piece>,
    pub(crate) seq: u64,
    pub(crate) arrived: Instant,
    pub(crate) waiter: Option<Arc<Waiter>>,
    /// The fsync of its frame, when it was logged and that fsync may still be running.
    pub(crate) durable: Option<Arc<Completion>>,
    /// Its frame, when it was logged (or replayed): told when every piece has landed.
    pub(crate) frame: Option<Arc<FrameAck>>,
    /// Replayed from the log at start, with the pieces the store holds not yet left out (its
    /// store did not answer then; see [`Opening`]).
    pub(crate) unfiltered: bool,
}

impl InsertMsg {
    /// Leaves out the pieces the store already holds (`held`: its watermark per partition),
    /// releasing their memory and telling their frame. `false` when nothing is left.
    fn keep_unlanded(&mut self, held: &HashMap<PartitionKey, u64>, memory: &MemoryBudget) -> bool {
        let seq = self.seq;
        self.pieces.retain(|piece| {
            let landed = held.get(&piece.key).is_some_and(|w| seq <= *w);
            if landed {
                memory.release(piece.charge());
                if let Some(frame) = &self.frame {
                    frame.piece_done();
                }
            }
            !landed
        });
        self.unfiltered = false;
        !self.pieces.is_empty()
    }
}

/// Prepares a table in its store and reads what the store holds of it, per partition: what the
/// start does for every table, and a writer does for one whose store did not answer then. The
/// table is remembered in the catalog only once its store has made it.
pub(crate) async fn open_table(
    sink: &dyn Sink,
    catalog: &Arc<dyn Catalog>,
    def: &TableDef,
) -> Result<HashMap<PartitionKey, u64>, StartError> {
    // Remembered only once its store has it: a declared table the store refuses (and the
    // config then drops) must not come back from the catalog to stop every start.
    sink.create_table(def).await?;
    let catalog = catalog.clone();
    let (name, layout) = (def.name().clone(), def.layout());
    tokio::task::spawn_blocking(move || catalog.store(&name, &layout))
        .await
        .map_err(|e| sluice_core::CatalogError::new(format!("catalog task failed: {e}")))??;
    Ok(sink.committed(def).await?.into_iter().collect())
}

/// A table whose store has not been opened yet: the writer tries until it is, and flushes
/// nothing before.
pub(crate) struct Opening {
    catalog: Arc<dyn Catalog>,
    /// Why it is not open: the start's error, then the last try's.
    error: String,
    attempt: u32,
    retry_at: Option<Instant>,
}

impl Opening {
    /// A table the start could not open, for `error`.
    pub(crate) fn new(catalog: Arc<dyn Catalog>, error: &impl std::fmt::Display) -> Self {
        Self {
            catalog,
            error: format!("the store cannot open the table yet: {error}"),
            attempt: 0,
            retry_at: None,
        }
    }
}

type OpenResult = Result<HashMap<PartitionKey, u64>, StartError>;

/// A logged insert's frame, landed once every partition piece of it is in the store.
pub(crate) struct FrameAck {
    lsn: u64,
    pieces: std::sync::atomic::AtomicUsize,
    wal: Arc<Wal>,
}

impl FrameAck {
    pub(crate) fn new(wal: Arc<Wal>, lsn: u64, pieces: usize) -> Arc<Self> {
        Arc::new(Self {
            lsn,
            pieces: std::sync::atomic::AtomicUsize::new(pieces),
            wal,
        })
    }

    /// One piece is in the store (or will never be: refused for good, or never logged).
    pub(crate) fn piece_done(&self) {
        if self
            .pieces
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.wal.landed(self.lsn);
        }
    }
}

/// The rows of one insert that fall in one partition.
pub(crate) struct Piece {
    pub(crate) key: PartitionKey,
    pub(crate) batch: RecordBatch,
    /// Its Arrow memory.
    pub(crate) bytes: u64,
}

impl Piece {
    /// What it holds of the memory budget: its Arrow memory and [`INSERT_OVERHEAD`].
    pub(crate) fn charge(&self) -> u64 {
        self.bytes + INSERT_OVERHEAD
    }
}

/// What a sealed batch holds of the memory budget: its Arrow memory and [`INSERT_OVERHEAD`] for
/// each insert piece in it.
fn charge(sealed: &Sealed<Token>) -> u64 {
    sealed.bytes + INSERT_OVERHEAD * sealed.tokens.len() as u64
}

/// What each buffered insert carries until its rows land.
pub(crate) struct Token {
    waiter: Option<Arc<Waiter>>,
    frame: Option<Arc<FrameAck>>,
    arrived: Instant,
    /// Rows of this insert in this partition.
    rows: u64,
}

/// What a writer reports when it exits.
#[derive(Debug, Clone, Default)]
pub struct WriterReport {
    /// The table.
    pub table: String,
    /// Rows that could not be landed before shutdown gave up and are in no log: lost.
    pub rows_lost: u64,
    /// Rows that could not be landed before shutdown gave up but are in the write-ahead log:
    /// they land after the next start.
    pub rows_deferred: u64,
    /// The last store error, if the store was failing.
    pub last_error: Option<String>,
}

type FlushResult = (Result<Landed, SinkError>, Duration);

/// Messages taken from the channel per wake-up: under load the writer drains a burst at once
/// instead of being woken for every insert.
const INBOX: usize = 512;

/// Rows per batch of a sorted flush (a table without a sort key hands its sinks the batches
/// the inserts came in).
const SORTED_BATCH_ROWS: usize = 64 * 1024;

struct Inflight {
    key: PartitionKey,
    sealed: Sealed<Token>,
    task: JoinHandle<FlushResult>,
}

struct Instruments {
    flushes: BTreeMap<&'static str, Counter>,
    parts: Counter,
    rows_written: Counter,
    part_rows: Histogram,
    row_wait: Histogram,
    flush_seconds: Histogram,
    errors_retriable: Counter,
    errors_permanent: Counter,
    rows_dropped: Counter,
    dead_batches: Counter,
    dead_rows: Counter,
    store_pause: Gauge,
    store_pauses: Counter,
}

impl Instruments {
    fn new(table: &str) -> Self {
        let t = || table.to_owned();
        let reasons = [
            FlushReason::Rows,
            FlushReason::Bytes,
            FlushReason::Age,
            FlushReason::Inserts,
            FlushReason::Shutdown,
        ];
        Self {
            flushes: reasons
                .into_iter()
                .map(|r| {
                    (
                        r.as_str(),
                        metrics::counter!(names::FLUSHES, "table" => t(), "reason" => r.as_str()),
                    )
                })
                .collect(),
            parts: metrics::counter!(names::PARTS_WRITTEN, "table" => t()),
            rows_written: metrics::counter!(names::ROWS_WRITTEN, "table" => t()),
            part_rows: metrics::histogram!(names::PART_ROWS, "table" => t()),
            row_wait: metrics::histogram!(names::ROW_WAIT, "table" => t()),
            flush_seconds: metrics::histogram!(names::FLUSH_SECONDS, "table" => t()),
            errors_retriable: metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "retriable"),
            errors_permanent: metrics::counter!(names::FLUSH_ERRORS, "table" => t(), "kind" => "permanent"),
            rows_dropped: metrics::counter!(names::ROWS_DROPPED, "table" => t()),
            dead_batches: metrics::counter!(names::DEAD_LETTER_BATCHES, "table" => t()),
            dead_rows: metrics::counter!(names::DEAD_LETTER_ROWS, "table" => t()),
            store_pause: metrics::gauge!(names::STORE_PAUSE, "table" => t()),
            store_pauses: metrics::counter!(names::STORE_PAUSES, "table" => t()),
        }
    }
}

/// The state of one table's writer task.
pub(crate) struct Writer {
    table: Arc<TableDef>,
    sink: Arc<dyn Sink>,
    memory: Arc<MemoryBudget>,
    stats: Arc<TableStats>,
    backoff: Backoff,
    shutdown_timeout: Duration,
    dead_letters: Option<PathBuf>,
    buffers: BTreeMap<PartitionKey, Batcher<Token>>,
    queue: VecDeque<(PartitionKey, Sealed<Token>)>,
    /// Inserts waiting for the fsync of their frame, in arrival order.
    undurable: VecDeque<InsertMsg>,
    attempt: u32,
    retry_at: Option<Instant>,
    /// The store asked for no flush before this (see [`Landed::pause`]).
    paced_until: Option<Instant>,
    last_error: Option<String>,
    buffered_rows: u64,
    buffered_bytes: u64,
    instruments: Instruments,
    /// Set while the table's store has not been opened.
    opening: Option<Opening>,
}

impl Writer {
    /// The writer of `table`, with the pipeline's retry, shutdown and dead-letter settings;
    /// `opening` when the table's store is still to be opened.
    pub(crate) fn new(
        table: Arc<TableDef>,
        sink: Arc<dyn Sink>,
        memory: Arc<MemoryBudget>,
        stats: Arc<TableStats>,
        config: &PipelineConfig,
        opening: Option<Opening>,
    ) -> Self {
        let instruments = Instruments::new(table.name().as_str());
        let mut writer = Self {
            table,
            sink,
            memory,
            stats,
            backoff: config.backoff,
            shutdown_timeout: config.shutdown_timeout,
            dead_letters: config.dead_letters.clone(),
            buffers: BTreeMap::new(),
            queue: VecDeque::new(),
            undurable: VecDeque::new(),
            attempt: 0,
            retry_at: None,
            paced_until: None,
            last_error: None,
            buffered_rows: 0,
            buffered_bytes: 0,
            instruments,
            opening,
        };
        // Failing from the start: `/health` and `GET /v1/tables` say so before the first retry.
        if let Some(opening) = &writer.opening {
            writer.last_error = Some(opening.error.clone());
            writer.stats.set_error(Some(opening.error.clone()));
        }
        writer
    }

    /// Runs until closed (by [`Command::Close`] or every sender gone) and drained.
    pub(crate) async fn run(mut self, mut rx: UnboundedReceiver<Command>) -> WriterReport {
        let mut inflight: Option<Inflight> = None;
        let mut opening: Option<JoinHandle<OpenResult>> = None;
        let mut inbox = Vec::with_capacity(INBOX);
        let mut draining = false;
        let mut give_up_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if opening.is_none() {
                opening = self.start_open(now);
            }
            if draining {
                self.seal_all(FlushReason::Shutdown);
            }
            if inflight.is_none() {
                inflight = self.start_flush(now);
            }
            if draining
                && inflight.is_none()
                && self.queue.is_empty()
                && self.buffers.is_empty()
                && self.undurable.is_empty()
            {
                if let Some(task) = opening.take() {
                    task.abort();
                }
                break;
            }
            if give_up_at.is_some_and(|t| now >= t) {
                if let Some(task) = opening.take() {
                    task.abort();
                }
                return self.give_up(inflight);
            }
            let wake = self.next_wake(inflight.is_some(), give_up_at);
            // Held-back inserts wait for the store to open before their fsync matters.
            let fsync = match self.opening {
                None => self.undurable.front().and_then(|m| m.durable.clone()),
                Some(_) => None,
            };
            tokio::select! {
                result = async { opening.as_mut().expect("guarded").await }, if opening.is_some() => {
                    opening = None;
                    let result = result.unwrap_or_else(|e| {
                        Err(SinkError::retriable(self.sink.name(), format!("open task failed: {e}")).into())
                    });
                    self.opened(result);
                    self.publish_buffered();
                }
                result = async { (&mut inflight.as_mut().expect("guarded").task).await }, if inflight.is_some() => {
                    let done = inflight.take().expect("guarded");
                    let result = result.unwrap_or_else(|e| {
                        (Err(SinkError::retriable(self.sink.name(), format!("flush task failed: {e}"))), Duration::ZERO)
                    });
                    self.finish(done.key, done.sealed, result);
                }
                received = rx.recv_many(&mut inbox, INBOX), if !draining => {
                    if received == 0 {
                        // Closed and empty: every sender is gone or Close was received.
                        draining = true;
                        give_up_at = Some(Instant::now() + self.shutdown_timeout);
                    }
                    for command in inbox.drain(..) {
                        match command {
                            Command::Insert(msg) => self.receive(msg),
                            // Refuse new messages; what is already queued is still received.
                            Command::Close => rx.close(),
                        }
                    }
                    self.publish_buffered();
                }
                _ = async { fsync.as_ref().expect("guarded").wait().await }, if fsync.is_some() => {
                    self.admit_durable();
                    self.publish_buffered();
                }
                () = sleep_until(wake), if wake.is_some() => {
                    self.seal_due(Instant::now());
                }
            }
        }
        WriterReport {
            table: self.table.name().to_string(),
            rows_lost: 0,
            rows_deferred: 0,
            last_error: self.last_error,
        }
    }

    /// Tries to open the table's store, if it is not open and no try or backoff is pending.
    fn start_open(&mut self, now: Instant) -> Option<JoinHandle<OpenResult>> {
        let opening = self.opening.as_mut()?;
        if opening.retry_at.is_some_and(|t| now < t) {
            return None;
        }
        opening.retry_at = None;
        let (sink, catalog, table) = (
            self.sink.clone(),
            opening.catalog.clone(),
            self.table.clone(),
        );
        Some(tokio::spawn(async move {
            open_table(sink.as_ref(), &catalog, &table).await
        }))
    }

    /// The outcome of a try at opening the store: the held-back inserts go on (without the
    /// replayed pieces the store holds), or the next try is scheduled.
    fn opened(&mut self, result: OpenResult) {
        let Some(opening) = self.opening.as_mut() else {
            return;
        };
        match result {
            Ok(held) => {
                let attempts = opening.attempt + 1;
                self.opening = None;
                let pieces =
                    |q: &VecDeque<InsertMsg>| q.iter().map(|m| m.pieces.len()).sum::<usize>();
                let (before, mut kept) = (pieces(&self.undurable), VecDeque::new());
                for mut msg in self.undurable.drain(..) {
                    if !msg.unfiltered || msg.keep_unlanded(&held, &self.memory) {
                        kept.push_back(msg);
                    }
                }
                self.undurable = kept;
                tracing::info!(
                    table = %self.table.name(), attempts, held_back = self.undurable.len(),
                    pieces_already_landed = before - pieces(&self.undurable),
                    "the table's store answered; its inserts land from now on"
                );
                self.last_error = None;
                self.stats.set_error(None);
                self.admit_durable();
            }
            Err(error) => {
                opening.attempt += 1;
                let delay = self.backoff.delay(opening.attempt, rand::random::<f64>());
                opening.retry_at = Some(Instant::now() + delay);
                let retriable = matches!(&error, StartError::Sink(e) if e.is_retriable());
                opening.error = format!("the store cannot open the table yet: {error}");
                let message = opening.error.clone();
                if retriable {
                    tracing::warn!(
                        table = %self.table.name(), attempt = opening.attempt,
                        retry_in_ms = delay.as_millis() as u64, error = %error,
                        "the table's store does not answer; its inserts are held until it does"
                    );
                } else {
                    tracing::error!(
                        table = %self.table.name(), attempt = opening.attempt,
                        retry_in_ms = delay.as_millis() as u64, error = %error,
                        "the table's store refuses to open it; its inserts are held (and kept in \
                         the write-ahead log) until the store or the config is fixed"
                    );
                }
                self.last_error = Some(message.clone());
                self.stats.set_error(Some(message));
            }
        }
    }

    /// Buffers an insert, or holds it back while its frame (or one before it) is not durable,
    /// or while the store is not open.
    fn receive(&mut self, msg: InsertMsg) {
        let waiting = msg.durable.as_ref().is_some_and(|d| d.result().is_none());
        if waiting || !self.undurable.is_empty() || self.opening.is_some() {
            self.undurable.push_back(msg);
        } else {
            self.admit(msg);
        }
    }

    /// Moves held-back inserts whose fsync finished into the buffers, in order.
    fn admit_durable(&mut self) {
        if self.opening.is_some() {
            return;
        }
        while let Some(front) = self.undurable.front() {
            if front.durable.as_ref().is_some_and(|d| d.result().is_none()) {
                break;
            }
            if let Some(msg) = self.undurable.pop_front() {
                self.admit(msg);
            }
        }
    }

    /// Buffers an insert whose frame is durable; drops one whose frame failed (its producer was
    /// refused, so its rows must not land).
    fn admit(&mut self, msg: InsertMsg) {
        match msg.durable.as_ref().and_then(|d| d.result()) {
            Some(Err(_)) => {
                for piece in &msg.pieces {
                    self.memory.release(piece.charge());
                    if let Some(frame) = &msg.frame {
                        frame.piece_done();
                    }
                }
            }
            _ => self.accept(msg),
        }
    }

    fn accept(&mut self, msg: InsertMsg) {
        let now = Instant::now();
        let policy = *self.table.policy();
        for piece in msg.pieces {
            let rows = piece.batch.num_rows() as u64;
            let buffer = self
                .buffers
                .entry(piece.key.clone())
                .or_insert_with(|| Batcher::new(policy));
            let before = buffer.bytes();
            let token = Token {
                waiter: msg.waiter.clone(),
                frame: msg.frame.clone(),
                arrived: msg.arrived,
                rows,
            };
            let full = buffer.push(piece.batch, msg.seq, token, now);
            let after = buffer.bytes();
            // Coalescing may have shrunk the buffer below what was reserved for it.
            self.rereserve(before + piece.bytes, after);
            self.buffered_rows += rows;
            self.buffered_bytes = self.buffered_bytes + after - before;
            if let Some(reason) = full {
                self.seal(&piece.key, reason);
            }
        }
    }

    /// Brings the budget from `reserved` to `held` bytes for rows whose Arrow memory changed
    /// when they were coalesced.
    fn rereserve(&self, reserved: u64, held: u64) {
        if held < reserved {
            self.memory.release(reserved - held);
        } else {
            self.memory.force(held - reserved);
        }
    }

    fn seal(&mut self, key: &PartitionKey, reason: FlushReason) {
        let Some(mut buffer) = self.buffers.remove(key) else {
            return;
        };
        let before = buffer.bytes();
        if let Some(sealed) = buffer.take(reason) {
            // Sealing coalesces the last small pieces, which may change what they take.
            self.rereserve(before, sealed.bytes);
            self.buffered_bytes = self.buffered_bytes + sealed.bytes - before;
            if let Some(counter) = self.instruments.flushes.get(reason.as_str()) {
                counter.increment(1);
            }
            self.queue.push_back((key.clone(), sealed));
        }
    }

    fn seal_due(&mut self, now: Instant) {
        let due: Vec<PartitionKey> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.due(now).is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.seal(&key, FlushReason::Age);
        }
    }

    fn seal_all(&mut self, reason: FlushReason) {
        let keys: Vec<PartitionKey> = self.buffers.keys().cloned().collect();
        for key in keys {
            self.seal(&key, reason);
        }
    }

    fn next_wake(&self, flushing: bool, give_up_at: Option<Instant>) -> Option<Instant> {
        let ages = self.buffers.values().filter_map(Batcher::deadline);
        let waiting = !flushing && !self.queue.is_empty();
        let retry = self.retry_at.filter(|_| waiting);
        let paced = self.paced_until.filter(|_| waiting);
        let open = self.opening.as_ref().and_then(|o| o.retry_at);
        ages.chain(retry)
            .chain(paced)
            .chain(open)
            .chain(give_up_at)
            .min()
    }

    /// Starts the next flush if none is running and no backoff or pause is pending.
    fn start_flush(&mut self, now: Instant) -> Option<Inflight> {
        if self.retry_at.is_some_and(|t| now < t) || self.paced_until.is_some_and(|t| now < t) {
            return None;
        }
        let (key, mut sealed) = self.queue.pop_front()?;
        self.merge_queued(&key, &mut sealed);
        let id = FlushId {
            table: self.table.name().clone(),
            partition: key.clone(),
            first_seq: sealed.first_seq,
            last_seq: sealed.last_seq,
        };
        let chunks = sealed.chunks.clone();
        let table = self.table.clone();
        let sink = self.sink.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let sorted_table = table.clone();
            let batches = tokio::task::spawn_blocking(move || {
                sorted_table.sort_chunks(&chunks, SORTED_BATCH_ROWS)
            })
            .await;
            let batches = match batches {
                Ok(Ok(batches)) => batches,
                Ok(Err(e)) => {
                    let error = SinkError::permanent(
                        sink.name(),
                        format!("cannot assemble the batch: {e}"),
                    );
                    return (Err(error), started.elapsed());
                }
                Err(e) => {
                    let error =
                        SinkError::retriable(sink.name(), format!("assembly task failed: {e}"));
                    return (Err(error), started.elapsed());
                }
            };
            let flush = FlushBatch {
                table: &table,
                id,
                batches,
            };
            let result = sink.write(flush).await;
            (result, started.elapsed())
        });
        Some(Inflight { key, sealed, task })
    }

    /// Folds queued batches of the same partition into `head`, within the policy's limits.
    fn merge_queued(&mut self, key: &PartitionKey, head: &mut Sealed<Token>) {
        let policy = *self.table.policy();
        let mut i = 0;
        while i < self.queue.len() {
            let (other_key, other) = &self.queue[i];
            let fits = head.rows + other.rows <= policy.max_rows()
                && head.bytes + other.bytes <= policy.max_bytes();
            if other_key != key {
                i += 1;
                continue;
            }
            if !fits {
                // Later batches of this partition must not overtake this one.
                break;
            }
            let Some((_, other)) = self.queue.remove(i) else {
                break;
            };
            head.chunks.extend(other.chunks);
            head.tokens.extend(other.tokens);
            head.rows += other.rows;
            head.bytes += other.bytes;
            head.inserts += other.inserts;
            head.opened_at = head.opened_at.min(other.opened_at);
            head.first_seq = head.first_seq.min(other.first_seq);
            head.last_seq = head.last_seq.max(other.last_seq);
        }
    }

    fn finish(&mut self, key: PartitionKey, sealed: Sealed<Token>, (result, took): FlushResult) {
        match result {
            Ok(landed) => {
                let now = Instant::now();
                self.instruments.flush_seconds.record(took.as_secs_f64());
                self.instruments.parts.increment(landed.parts);
                self.instruments.rows_written.increment(sealed.rows);
                self.instruments.part_rows.record(sealed.rows as f64);
                for token in &sealed.tokens {
                    self.instruments
                        .row_wait
                        .record(now.duration_since(token.arrived).as_secs_f64());
                    if let Some(waiter) = &token.waiter {
                        waiter.landed();
                    }
                    if let Some(frame) = &token.frame {
                        frame.piece_done();
                    }
                }
                self.stats
                    .rows_written
                    .fetch_add(sealed.rows, std::sync::atomic::Ordering::Relaxed);
                self.stats
                    .parts_written
                    .fetch_add(landed.parts, std::sync::atomic::Ordering::Relaxed);
                self.stats
                    .bytes_written
                    .fetch_add(landed.bytes, std::sync::atomic::Ordering::Relaxed);
                self.release(&sealed);
                if self.attempt > 0 {
                    tracing::info!(table = %self.table.name(), attempts = self.attempt + 1, "store recovered");
                }
                self.attempt = 0;
                self.retry_at = None;
                self.last_error = None;
                self.stats.set_error(None);
                self.instruments.store_pause.set(landed.pause.as_secs_f64());
                if landed.pause.is_zero() {
                    self.paced_until = None;
                } else {
                    // Rows keep arriving and queue up meanwhile: the next flush folds them
                    // together (`merge_queued`), so the store gets fewer, larger parts.
                    self.instruments.store_pauses.increment(1);
                    self.paced_until = Some(now + landed.pause);
                }
            }
            Err(error) if error.is_retriable() => {
                self.instruments.errors_retriable.increment(1);
                self.attempt += 1;
                let delay = self.backoff.delay(self.attempt, rand::random::<f64>());
                tracing::warn!(
                    table = %self.table.name(), partition = %key, attempt = self.attempt,
                    retry_in_ms = delay.as_millis() as u64, error = %error, "flush failed; will retry"
                );
                self.retry_at = Some(Instant::now() + delay);
                self.last_error = Some(error.to_string());
                self.stats.set_error(Some(error.to_string()));
                self.queue.push_front((key, sealed));
            }
            Err(error) => {
                self.instruments.errors_permanent.increment(1);
                let id = FlushId {
                    table: self.table.name().clone(),
                    partition: key.clone(),
                    first_seq: sealed.first_seq,
                    last_seq: sealed.last_seq,
                };
                let kept = self.keep_dead_letter(&id, &sealed, &error.to_string());
                let reason = match &kept {
                    Some(Ok(path)) => format!("{error} (the rows are kept in {})", path.display()),
                    _ => error.to_string(),
                };
                for token in &sealed.tokens {
                    if let Some(waiter) = &token.waiter {
                        waiter.failed(Failure::Refused(reason.clone()));
                    }
                    // Replaying a batch the store refuses for good would only refuse it again;
                    // only a dead letter that could not be written leaves the frames to replay.
                    if !matches!(kept, Some(Err(_)))
                        && let Some(frame) = &token.frame
                    {
                        frame.piece_done();
                    }
                }
                self.release(&sealed);
                self.attempt = 0;
                self.retry_at = None;
                self.last_error = Some(reason);
            }
        }
    }

    /// Writes a refused batch to the dead-letter folder, if there is one. `None` when there is no
    /// folder (the rows are dropped and counted).
    fn keep_dead_letter(
        &self,
        id: &FlushId,
        sealed: &Sealed<Token>,
        error: &str,
    ) -> Option<Result<PathBuf, String>> {
        let Some(root) = &self.dead_letters else {
            self.instruments.rows_dropped.increment(sealed.rows);
            tracing::error!(table = %id.table, partition = %id.partition, rows = sealed.rows, error, "the store refused a batch for good; its rows are dropped");
            return None;
        };
        let written = dead::write(root, id, &sealed.chunks, self.sink.name(), error)
            .map_err(|e| e.to_string());
        match &written {
            Ok(path) => {
                self.instruments.dead_batches.increment(1);
                self.instruments.dead_rows.increment(sealed.rows);
                tracing::error!(table = %id.table, partition = %id.partition, rows = sealed.rows, path = %path.display(), error, "the store refused a batch for good; its rows are in the dead-letter folder");
            }
            Err(e) => {
                tracing::error!(table = %id.table, rows = sealed.rows, error, dead_letter_error = %e, "the store refused a batch for good and it could not be kept; logged rows stay in the write-ahead log");
            }
        }
        Some(written)
    }

    fn release(&mut self, sealed: &Sealed<Token>) {
        self.memory.release(charge(sealed));
        self.buffered_rows -= sealed.rows;
        self.buffered_bytes -= sealed.bytes;
        self.publish_buffered();
    }

    fn publish_buffered(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.buffered_rows.store(self.buffered_rows, Relaxed);
        self.stats
            .buffered_bytes
            .store(self.buffered_bytes, Relaxed);
    }

    /// Shutdown timed out: report the rows that did not land, answer waiters, release memory.
    /// Rows of logged inserts stay outstanding in the log, which replays them at the next start.
    fn give_up(mut self, inflight: Option<Inflight>) -> WriterReport {
        self.admit_durable();
        self.seal_all(FlushReason::Shutdown);
        let reason = format!(
            "shutdown gave up after {:?}: {}",
            self.shutdown_timeout,
            self.last_error
                .as_deref()
                .unwrap_or("the store did not answer")
        );
        let (mut lost, mut deferred) = (0, 0);
        let pending = inflight
            .map(|f| {
                f.task.abort();
                f.sealed
            })
            .into_iter()
            .chain(self.queue.drain(..).map(|(_, s)| s))
            .collect::<Vec<_>>();
        for sealed in pending {
            for token in &sealed.tokens {
                if token.frame.is_some() {
                    deferred += token.rows;
                } else {
                    lost += token.rows;
                }
                if let Some(waiter) = &token.waiter {
                    waiter.failed(Failure::Abandoned(reason.clone()));
                }
            }
            self.memory.release(charge(&sealed));
        }
        // Held back (their fsync, or the store's opening, never came): a logged one is replayed
        // at the next start, unless its fsync failed (then its producer was refused).
        for msg in self.undurable.drain(..) {
            let logged = msg.frame.is_some()
                && !msg
                    .durable
                    .as_ref()
                    .is_some_and(|d| matches!(d.result(), Some(Err(_))));
            for piece in &msg.pieces {
                let rows = piece.batch.num_rows() as u64;
                if logged {
                    deferred += rows;
                } else if msg.frame.is_none() {
                    lost += rows;
                }
                self.memory.release(piece.charge());
            }
            if let Some(waiter) = &msg.waiter {
                waiter.failed(Failure::Abandoned(reason.clone()));
            }
        }
        tracing::error!(table = %self.table.name(), lost, deferred, error = %reason, "rows not landed at shutdown");
        WriterReport {
            table: self.table.name().to_string(),
            rows_lost: lost,
            rows_deferred: deferred,
            last_error: Some(reason),
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline.into()).await;
    }
}
