//! What the pipeline reports about itself: metric names, and per-table counters for
//! `GET /v1/tables`, `/health` and the console.
//!
//! A figure the console reads is counted in a plain atomic here, beside its Prometheus metric:
//! a [`Tally`] or a [`WaitTally`] feeds both from one call, so the two never disagree and nobody
//! parses the exporter's text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use metrics::{Counter, Histogram};
use sluice_core::{FlushPolicy, FlushReason, PartsThrottle};

use crate::waits::{WaitCounts, Waits};

/// Metric names. The server's exporter describes them; everything that records one uses these.
pub mod names {
    /// Counter: rows accepted into buffers. Label `table`.
    pub const ROWS_RECEIVED: &str = "sluice_rows_received_total";
    /// Counter: request body bytes of accepted inserts. Label `table`.
    pub const BYTES_RECEIVED: &str = "sluice_bytes_received_total";
    /// Counter: accepted inserts. Label `table`.
    pub const INSERTS: &str = "sluice_inserts_total";
    /// Counter: flushes started, by what filled the batch. Labels `table`, `reason`.
    pub const FLUSHES: &str = "sluice_flushes_total";
    /// Counter: parts landed in a store. Label `table`.
    pub const PARTS_WRITTEN: &str = "sluice_parts_written_total";
    /// Counter: rows landed in a store. Label `table`.
    pub const ROWS_WRITTEN: &str = "sluice_rows_written_total";
    /// Histogram: rows per landed part. Label `table`.
    pub const PART_ROWS: &str = "sluice_part_rows";
    /// Histogram: seconds from an insert's arrival to the commit of its rows. Label `table`.
    pub const ROW_WAIT: &str = "sluice_row_wait_seconds";
    /// Histogram: seconds a sink took to land one flush. Label `table`.
    pub const FLUSH_SECONDS: &str = "sluice_flush_duration_seconds";
    /// Gauge: rows buffered and not yet landed. Label `table`.
    pub const BUFFERED_ROWS: &str = "sluice_buffered_rows";
    /// Gauge: Arrow bytes buffered and not yet landed. Label `table`.
    pub const BUFFERED_BYTES: &str = "sluice_buffered_bytes";
    /// Gauge: bytes reserved in the shared memory budget.
    pub const MEMORY_USED: &str = "sluice_memory_used_bytes";
    /// Gauge: the shared memory budget.
    pub const MEMORY_LIMIT: &str = "sluice_memory_limit_bytes";
    /// Counter: failed flush attempts. Labels `table`, `kind` (`retriable`, `permanent`).
    pub const FLUSH_ERRORS: &str = "sluice_flush_errors_total";
    /// Counter: rows dropped because a store refused them for good and there was no dead-letter
    /// folder. Label `table`.
    pub const ROWS_DROPPED: &str = "sluice_rows_dropped_total";
    /// Counter: batches a store refused for good, kept in the dead-letter folder. Label `table`.
    pub const DEAD_LETTER_BATCHES: &str = "sluice_dead_letter_batches_total";
    /// Counter: rows of those batches. Label `table`.
    pub const DEAD_LETTER_ROWS: &str = "sluice_dead_letter_rows_total";
    /// Gauge, by table: the pause the store asked for after the last flush, in seconds (0: none).
    pub const STORE_PAUSE: &str = "sluice_store_pause_seconds";
    /// Counter, by table: times a flush's commit lost a race to another writer of the table
    /// (another sluice process on the same lake table) and was tried again.
    pub const COMMIT_RETRIES: &str = "sluice_commit_retries_total";
    /// Counter, by table: commits the store kept but whose answer was lost, found in its log
    /// and counted as landed (flushes and merges of a lake table on an object store).
    pub const COMMIT_ANSWERS_LOST: &str = "sluice_commit_answers_lost_total";
    /// Counter, by table: flushes after which the store asked for a pause.
    pub const STORE_PAUSES: &str = "sluice_store_pauses_total";
    /// Counter: inserts delayed because a partition held more than `parts_to_delay_insert`
    /// active parts. Label `table`.
    pub const DELAYED_INSERTS: &str = "sluice_delayed_inserts_total";
    /// Gauge: active parts (files) per partition, as the store last saw them. Labels `table`,
    /// `partition`. Only stores that count parts (the lake) report it.
    pub const ACTIVE_PARTS: &str = "sluice_active_parts";
    /// Counter: merges the background compactor committed. Label `table`.
    pub const COMPACTION_MERGES: &str = "sluice_compaction_merges_total";
    /// Counter: merges given up because another compactor (another sluice on the same table)
    /// got their inputs first. Label `table`.
    pub const COMPACTION_LOST_RACES: &str = "sluice_compaction_lost_races_total";
    /// Counter: files merged away and written by compaction. Labels `table`, `direction`
    /// (`in`, `out`).
    pub const COMPACTION_FILES: &str = "sluice_compaction_files_total";
    /// Counter: bytes of those files. Labels `table`, `direction` (`in`, `out`).
    pub const COMPACTION_BYTES: &str = "sluice_compaction_bytes_total";
    /// Counter: rows compaction rewrote. Label `table`.
    pub const COMPACTION_ROWS: &str = "sluice_compaction_rows_total";
    /// Counter: replaced or orphaned files compaction deleted. Label `table`.
    pub const COMPACTION_FILES_DELETED: &str = "sluice_compaction_files_deleted_total";
    /// Counter: compaction rounds that failed (tried again next round). Label `table`.
    pub const COMPACTION_ERRORS: &str = "sluice_compaction_errors_total";
    /// Histogram: seconds a background compaction round spent on its merges (planning,
    /// reading, writing, committing; not deleting replaced files), for rounds that merged
    /// something (committed a merge or lost one to another compactor). Label `table`.
    pub const COMPACTION_SECONDS: &str = "sluice_compaction_duration_seconds";
    /// Counter: inserts refused, by reason. Label `reason`.
    pub const REJECTED: &str = "sluice_rejected_inserts_total";
    /// Counter: resends answered from an earlier insert with the same key. Label `table`.
    pub const DUPLICATES: &str = "sluice_insert_duplicates_total";
    /// Gauge: insert keys a table remembers. Label `table`.
    pub const KEYS_HELD: &str = "sluice_insert_keys";
    /// Gauge: bytes those keys take, text and bookkeeping. Label `table`.
    pub const KEYS_BYTES: &str = "sluice_insert_keys_bytes";
    /// Counter: frames written to the write-ahead log.
    pub const WAL_FRAMES: &str = "sluice_wal_frames_total";
    /// Counter: bytes written to the write-ahead log.
    pub const WAL_BYTES: &str = "sluice_wal_bytes_total";
    /// Counter: fsyncs of the write-ahead log (one per group commit).
    pub const WAL_FSYNCS: &str = "sluice_wal_fsyncs_total";
    /// Gauge: logged inserts whose rows have not all landed.
    pub const WAL_OUTSTANDING: &str = "sluice_wal_outstanding_frames";
    /// Gauge: 1 while the write-ahead log is poisoned by a failed fsync.
    pub const WAL_POISONED: &str = "sluice_wal_poisoned";
}

/// A snapshot of the write-ahead log.
#[derive(Debug, Clone)]
pub struct WalInfo {
    /// Frames written since start.
    pub frames: u64,
    /// Bytes written since start.
    pub bytes: u64,
    /// Fsyncs since start.
    pub fsyncs: u64,
    /// Logged inserts not yet landed.
    pub outstanding: u64,
    /// Why the log refuses writes, if it does.
    pub poisoned: Option<String>,
}

/// Every reason a batch is flushed for, in the order [`FlushCounts`] lists them.
pub(crate) const FLUSH_REASONS: [FlushReason; 5] = [
    FlushReason::Rows,
    FlushReason::Bytes,
    FlushReason::Age,
    FlushReason::Inserts,
    FlushReason::Shutdown,
];

/// What a table counts in [`TableStats`], each beside a metric of the same meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    RowsReceived,
    BytesReceived,
    Inserts,
    Delayed,
    FlushRows,
    FlushBytes,
    FlushAge,
    FlushInserts,
    FlushShutdown,
    ErrorsRetriable,
    ErrorsPermanent,
    DeadBatches,
    DeadRows,
    RowsDropped,
}

impl Count {
    const N: usize = 14;

    /// The count of flushes for `reason`.
    pub(crate) fn flush(reason: FlushReason) -> Count {
        match reason {
            FlushReason::Rows => Count::FlushRows,
            FlushReason::Bytes => Count::FlushBytes,
            FlushReason::Age => Count::FlushAge,
            FlushReason::Inserts => Count::FlushInserts,
            FlushReason::Shutdown => Count::FlushShutdown,
        }
    }
}

/// Live counters of one table, updated by its writer and its insert path.
#[derive(Debug, Default)]
pub(crate) struct TableStats {
    pub(crate) buffered_rows: AtomicU64,
    pub(crate) buffered_bytes: AtomicU64,
    pub(crate) rows_written: AtomicU64,
    pub(crate) parts_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) failing_since: Mutex<Option<(SystemTime, String)>>,
    /// The last error, kept after the store recovers.
    last_error: Mutex<Option<(SystemTime, String)>>,
    counts: [AtomicU64; Count::N],
    row_wait: WaitCounts,
}

/// Locks `mutex`, poisoned or not: the values behind these locks are whole at every moment.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TableStats {
    pub(crate) fn set_error(&self, error: Option<String>) {
        let mut guard = lock(&self.failing_since);
        match error {
            None => *guard = None,
            Some(message) => {
                let since = guard.as_ref().map_or_else(SystemTime::now, |(t, _)| *t);
                *lock(&self.last_error) = Some((SystemTime::now(), message.clone()));
                *guard = Some((since, message));
            }
        }
    }

    /// Keeps `message` as the table's last error without calling the table failing: a batch
    /// the store refused for good while it takes the others.
    pub(crate) fn note_error(&self, message: String) {
        *lock(&self.last_error) = Some((SystemTime::now(), message));
    }

    pub(crate) fn error(&self) -> Option<(SystemTime, String)> {
        lock(&self.failing_since).clone()
    }

    pub(crate) fn last_error(&self) -> Option<(SystemTime, String)> {
        lock(&self.last_error).clone()
    }

    pub(crate) fn load(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    fn add(&self, count: Count, n: u64) {
        self.counts[count as usize].fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, count: Count) -> u64 {
        self.counts[count as usize].load(Ordering::Relaxed)
    }

    /// What the table has counted so far.
    pub(crate) fn counters(&self) -> TableCounters {
        TableCounters {
            rows_received: self.get(Count::RowsReceived),
            bytes_received: self.get(Count::BytesReceived),
            inserts: self.get(Count::Inserts),
            delayed_inserts: self.get(Count::Delayed),
            flushes: FlushCounts {
                rows: self.get(Count::FlushRows),
                bytes: self.get(Count::FlushBytes),
                age: self.get(Count::FlushAge),
                inserts: self.get(Count::FlushInserts),
                shutdown: self.get(Count::FlushShutdown),
            },
            flush_errors_retriable: self.get(Count::ErrorsRetriable),
            flush_errors_permanent: self.get(Count::ErrorsPermanent),
            dead_letter_batches: self.get(Count::DeadBatches),
            dead_letter_rows: self.get(Count::DeadRows),
            rows_dropped: self.get(Count::RowsDropped),
        }
    }

    pub(crate) fn row_wait(&self) -> Waits {
        self.row_wait.snapshot()
    }
}

/// A counter kept twice from one call: its Prometheus metric, and a plain atomic of the
/// table's [`TableStats`] that the console reads.
pub(crate) struct Tally {
    metric: Counter,
    stats: Arc<TableStats>,
    count: Count,
}

impl Tally {
    pub(crate) fn new(metric: Counter, stats: &Arc<TableStats>, count: Count) -> Self {
        Self {
            metric,
            stats: stats.clone(),
            count,
        }
    }

    pub(crate) fn increment(&self, n: u64) {
        self.metric.increment(n);
        self.stats.add(self.count, n);
    }
}

/// The rows' wait from arrival to commit, kept twice from one call: the Prometheus histogram
/// and the table's bucketed [`WaitCounts`].
pub(crate) struct WaitTally {
    metric: Histogram,
    stats: Arc<TableStats>,
}

impl WaitTally {
    pub(crate) fn new(metric: Histogram, stats: &Arc<TableStats>) -> Self {
        Self {
            metric,
            stats: stats.clone(),
        }
    }

    pub(crate) fn record(&self, seconds: f64) {
        self.metric.record(seconds);
        self.stats.row_wait.record(seconds);
    }
}

/// Flushes by what filled the batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushCounts {
    /// It reached `max_rows`.
    pub rows: u64,
    /// It reached `max_bytes`.
    pub bytes: u64,
    /// Its oldest row reached `max_age`.
    pub age: u64,
    /// It reached `max_inserts`.
    pub inserts: u64,
    /// sluice was shutting down.
    pub shutdown: u64,
}

impl FlushCounts {
    /// Every reason with its count, in a fixed order, by the names the metrics use.
    pub fn by_reason(&self) -> [(&'static str, u64); 5] {
        [
            (FlushReason::Rows.as_str(), self.rows),
            (FlushReason::Bytes.as_str(), self.bytes),
            (FlushReason::Age.as_str(), self.age),
            (FlushReason::Inserts.as_str(), self.inserts),
            (FlushReason::Shutdown.as_str(), self.shutdown),
        ]
    }

    /// Flushes for any reason.
    pub fn total(&self) -> u64 {
        self.rows + self.bytes + self.age + self.inserts + self.shutdown
    }
}

/// What a table has counted since start besides what landed: what it received, why its batches
/// flushed, and what could not land.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCounters {
    /// Rows accepted into its buffers.
    pub rows_received: u64,
    /// Request body bytes of those inserts.
    pub bytes_received: u64,
    /// Accepted inserts.
    pub inserts: u64,
    /// Inserts the parts throttle delayed.
    pub delayed_inserts: u64,
    /// Flushes by what filled the batch.
    pub flushes: FlushCounts,
    /// Flush attempts that failed and are tried again.
    pub flush_errors_retriable: u64,
    /// Flushes the store refused for good.
    pub flush_errors_permanent: u64,
    /// Refused batches kept in the dead-letter folder.
    pub dead_letter_batches: u64,
    /// Rows of those batches.
    pub dead_letter_rows: u64,
    /// Rows refused for good with no dead-letter folder to keep them.
    pub rows_dropped: u64,
}

/// A snapshot of one table for `GET /v1/tables`.
#[derive(Debug, Clone)]
pub struct TableInfo {
    /// The table's name.
    pub name: String,
    /// The sink it lands in.
    pub sink: &'static str,
    /// Its layout: columns, partitioning, sort key.
    pub layout: sluice_core::TableLayout,
    /// Rows buffered, not yet landed.
    pub buffered_rows: u64,
    /// Arrow bytes buffered, not yet landed.
    pub buffered_bytes: u64,
    /// Rows landed since start.
    pub rows_written: u64,
    /// Parts landed since start.
    pub parts_written: u64,
    /// Bytes landed since start.
    pub bytes_written: u64,
    /// When the store started failing for this table and its last error, while it fails.
    pub failing: Option<(SystemTime, String)>,
    /// Active parts per partition, when the store counts them (the lake).
    pub active_parts: Option<Vec<sluice_core::PartitionParts>>,
    /// The last error its store gave, kept after the store recovers.
    pub last_error: Option<(SystemTime, String)>,
    /// What it received, why it flushed, what could not land.
    pub counters: TableCounters,
    /// How long its rows waited from arrival to commit.
    pub row_wait: Waits,
    /// Its flush policy.
    pub policy: FlushPolicy,
    /// Its parts throttle.
    pub throttle: PartsThrottle,
}
