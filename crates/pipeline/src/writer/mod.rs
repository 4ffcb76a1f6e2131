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
//! ([`sluice_core::Landed::pause`], ClickHouse with parts piling up) gets the same treatment: no flush of the
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
//!
//! # Layout
//!
//! - `mod.rs`: the writer's state, its loop, taking inserts in and sealing batches.
//! - `message.rs`: what the pipeline sends a writer: inserts, their pieces, their frames.
//! - `open.rs`: opening a table in its store, at start or later by the writer.
//! - `flush.rs`: one flush at a time, its outcome, retries, dead letters.
//! - `held.rs`: the rows of keyed inserts a store already holds, left out of a flush.
//! - `instruments.rs`: the writer's metrics.

mod flush;
mod held;
mod instruments;
mod message;
mod open;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::retry::Backoff;
use sluice_core::{
    Batcher, FlushReason, PartitionKey, RateMeter, Sealed, Sink, SinkError, TableDef,
};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::ack::Failure;
use crate::config::PipelineConfig;
use crate::keys::KeyTable;
use crate::memory::{MemoryBudget, Reservation};
use crate::stats::TableStats;

use flush::Inflight;
use instruments::Instruments;
use message::charge;
pub(crate) use message::{Command, FrameAck, InsertMsg, Measured, Piece, Split, Token};
use open::OpenResult;
pub(crate) use open::{Opening, open_table};

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

/// Messages taken from the channel per wake-up: under load the writer drains a burst at once
/// instead of being woken for every insert.
const INBOX: usize = 512;

/// How far back the table's row rate looks, for a policy with `min_age`: long enough that a
/// steady trickle reads as steady, short enough that a burst is seen within its first second.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// A partition's open buffer and the memory its rows hold.
struct Buffer {
    rows: Batcher<Token>,
    held: Reservation,
}

/// A sealed batch waiting for its flush (or in it), holding its memory until it lands, is
/// refused for good, or is given up.
pub(super) struct Queued {
    pub(super) key: PartitionKey,
    pub(super) sealed: Sealed<Token>,
    pub(super) held: Reservation,
    /// The store landed part of this batch and wants it again as it is, with nothing folded in
    /// ([`sluice_core::SinkError::partly_landed`]).
    pub(super) as_is: bool,
}

/// The state of one table's writer task.
pub(crate) struct Writer {
    table: Arc<TableDef>,
    sink: Arc<dyn Sink>,
    /// The table's insert keys: told when a keyed insert's rows land.
    keys: Arc<KeyTable>,
    memory: Arc<MemoryBudget>,
    stats: Arc<TableStats>,
    backoff: Backoff,
    shutdown_timeout: Duration,
    dead_letters: Option<PathBuf>,
    buffers: BTreeMap<PartitionKey, Buffer>,
    queue: VecDeque<Queued>,
    /// Inserts waiting for the fsync of their frame, in arrival order.
    undurable: VecDeque<InsertMsg>,
    attempt: u32,
    retry_at: Option<Instant>,
    /// The store asked for no flush before this (see [`sluice_core::Landed::pause`]).
    paced_until: Option<Instant>,
    last_error: Option<String>,
    buffered_rows: u64,
    buffered_bytes: u64,
    /// Rows buffered per second, which the age limit follows when the policy has `min_age`.
    rate: RateMeter,
    /// How old a batch may get: the policy's age limit at the rate of the last insert. It
    /// changes only when an insert arrives, so the writer's wake-up is exact; a batch filled
    /// while the table was busy keeps the long limit until the next insert finds it light.
    age_limit: Duration,
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
        keys: Arc<KeyTable>,
        memory: Arc<MemoryBudget>,
        stats: Arc<TableStats>,
        config: &PipelineConfig,
        opening: Option<Opening>,
    ) -> Self {
        let instruments = Instruments::new(table.name().as_str(), &stats);
        let age_limit = table.policy().age_limit(0.0);
        let mut writer = Self {
            table,
            sink,
            keys,
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
            rate: RateMeter::new(RATE_WINDOW),
            age_limit,
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
    // Long because: one select loop over the inbox, the flush in flight, the store being
    // opened and the next deadline; its arms share the loop's state.
    pub(crate) async fn run(mut self, mut rx: UnboundedReceiver<Command>) -> WriterReport {
        let mut inflight: Option<Inflight> = None;
        let mut opening: Option<JoinHandle<OpenResult>> = None;
        let mut inbox = Vec::with_capacity(INBOX);
        let mut draining = false;
        let mut give_up_at: Option<Instant> = None;
        loop {
            let now = crate::clock::now();
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
                        let error = SinkError::retriable(self.sink.name(), format!("flush task failed: {e}"));
                        flush::FlushResult::failed(error, Duration::ZERO)
                    });
                    self.finish(done.batch, result);
                }
                received = rx.recv_many(&mut inbox, INBOX), if !draining => {
                    if received == 0 {
                        // Closed and empty: every sender is gone or Close was received.
                        draining = true;
                        give_up_at = Some(crate::clock::now() + self.shutdown_timeout);
                    }
                    for command in inbox.drain(..) {
                        match command {
                            Command::Insert(msg) => self.receive(msg),
                            Command::Relayout(table) => self.table = table,
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
                    self.seal_due(crate::clock::now());
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
            Some(Err(e)) => {
                if let Some(keyed) = &msg.keyed {
                    let reason = format!("the write-ahead log could not write it: {e}");
                    self.keys.store_refused(&keyed.key, &reason);
                }
                if let Some(frame) = &msg.frame {
                    for _ in &msg.pieces {
                        frame.piece_done();
                    }
                }
            }
            _ => self.accept(msg),
        }
    }

    fn accept(&mut self, msg: InsertMsg) {
        let now = crate::clock::now();
        let policy = *self.table.policy();
        let rows: u64 = msg.pieces.iter().map(|p| p.batch.num_rows() as u64).sum();
        self.rate.record(rows, now);
        self.age_limit = policy.age_limit(self.rate.per_second(now));
        for piece in msg.pieces {
            let rows = piece.batch.num_rows() as u64;
            let buffer = self
                .buffers
                .entry(piece.key.clone())
                .or_insert_with(|| Buffer {
                    rows: Batcher::new(policy),
                    held: Reservation::empty(&self.memory),
                });
            let before = buffer.rows.bytes();
            let token = Token {
                waiter: msg.waiter.clone(),
                frame: msg.frame.clone(),
                keyed: msg.keyed.clone(),
                arrived: msg.arrived,
                rows,
            };
            let full = buffer.rows.push_sized(
                piece.batch,
                piece.bytes,
                (msg.seq, piece.inserts),
                token,
                now,
            );
            let after = buffer.rows.bytes();
            buffer.held.absorb(piece.held);
            // Coalescing may have shrunk the buffer below what was reserved for it.
            let held = (buffer.held.bytes() + after).saturating_sub(before + piece.bytes);
            buffer.held.resize(held);
            self.buffered_rows += rows;
            self.buffered_bytes = self.buffered_bytes + after - before;
            if let Some(reason) = full {
                self.seal(&piece.key, reason);
            }
        }
    }

    fn seal(&mut self, key: &PartitionKey, reason: FlushReason) {
        let Some(Buffer { mut rows, mut held }) = self.buffers.remove(key) else {
            return;
        };
        let before = rows.bytes();
        if let Some(sealed) = rows.take(reason) {
            // Sealing coalesces the last small pieces, which may change what they take.
            held.resize((held.bytes() + sealed.bytes).saturating_sub(before));
            debug_assert_eq!(held.bytes(), charge(&sealed), "a batch holds its charge");
            self.buffered_bytes = self.buffered_bytes + sealed.bytes - before;
            if let Some(counter) = self.instruments.flushes.get(reason.as_str()) {
                counter.increment(1);
            }
            self.queue.push_back(Queued {
                key: key.clone(),
                sealed,
                held,
                as_is: false,
            });
        }
    }

    fn seal_due(&mut self, now: Instant) {
        let age_limit = self.age_limit;
        let due: Vec<PartitionKey> = self
            .buffers
            .iter()
            .filter(|(_, b)| b.rows.due(now, age_limit).is_some())
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
        let ages = self
            .buffers
            .values()
            .filter_map(|b| b.rows.deadline(self.age_limit));
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

    /// Shutdown timed out: report the rows that did not land, answer waiters, give back memory.
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
                f.batch
            })
            .into_iter()
            .chain(self.queue.drain(..))
            .collect::<Vec<_>>();
        for Queued { sealed, .. } in pending {
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
