//! One flush at a time: starting it, merging queued batches of its partition, its outcome.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arrow::array::RecordBatch;
use sluice_core::{FlushBatch, FlushId, KeysToKeep, Landed, Sealed, SinkError, TableDef};
use tokio::task::JoinHandle;

use crate::ack::Failure;
use crate::dead;
use crate::keys::{KeyTable, KeyedInsert};

use super::held::{self, Kept};
use super::message::Token;
use super::{Queued, Writer};

/// A flush's outcome and how long it took.
pub(super) struct FlushResult {
    pub(super) result: Result<Landed, SinkError>,
    pub(super) took: Duration,
    /// Whether the keys of the flush's keyed inserts are in the table's journal (or there is
    /// no journal). When not, their frames are kept in the log, whose records hold the keys.
    pub(super) keys_kept: bool,
    /// Rows left out because their keyed inserts were already in the store.
    pub(super) left_out: u64,
}

impl FlushResult {
    pub(super) fn failed(error: SinkError, took: Duration) -> Self {
        Self {
            result: Err(error),
            took,
            keys_kept: true,
            left_out: 0,
        }
    }
}

/// Rows per batch of a sorted flush (a table without a sort key hands its sinks the batches
/// the inserts came in).
const SORTED_BATCH_ROWS: usize = 64 * 1024;

pub(super) struct Inflight {
    pub(super) batch: Queued,
    pub(super) task: JoinHandle<FlushResult>,
}

impl Writer {
    /// Starts the next flush if none is running and no backoff or pause is pending.
    pub(super) fn start_flush(&mut self, now: Instant) -> Option<Inflight> {
        if self.retry_at.is_some_and(|t| now < t) || self.paced_until.is_some_and(|t| now < t) {
            return None;
        }
        let mut batch = self.queue.pop_front()?;
        if !batch.as_is {
            self.merge_queued(&mut batch);
        }
        conform_chunks(&self.table, &mut batch.sealed.chunks);
        let id = self.flush_id(&batch);
        let chunks = batch.sealed.chunks.clone();
        let (flush_name, landed) = (id.to_string(), keyed_inserts(&batch));
        let keyed = held::keyed_rows(self.sink.as_ref(), &batch);
        let (table, sink, keys) = (self.table.clone(), self.sink.clone(), self.keys.clone());
        let task = tokio::spawn(async move {
            let started = crate::clock::now();
            let Kept {
                chunks,
                keys: to_keep,
                left_out,
            } = if keyed.is_empty() {
                Kept {
                    chunks,
                    keys: KeysToKeep::default(),
                    left_out: 0,
                }
            } else {
                match held::leave_out_held(sink.as_ref(), &id, chunks, keyed, keys.window()).await {
                    Ok(kept) => kept,
                    Err(error) => return FlushResult::failed(error, started.elapsed()),
                }
            };
            if left_out > 0 {
                tracing::info!(flush = %id, rows = left_out, "left out the rows of keyed inserts another sluice landed");
            }
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
                    return FlushResult::failed(error, started.elapsed());
                }
                Err(e) => {
                    let error =
                        SinkError::retriable(sink.name(), format!("assembly task failed: {e}"));
                    return FlushResult::failed(error, started.elapsed());
                }
            };
            let flush = FlushBatch {
                table: &table,
                id,
                batches,
                keys: to_keep,
            };
            let result = sink.write(flush).await;
            let keys_kept = match &result {
                Ok(_) => journal(keys, flush_name, landed).await,
                Err(_) => true,
            };
            FlushResult {
                result,
                took: started.elapsed(),
                keys_kept,
                left_out,
            }
        });
        Some(Inflight { batch, task })
    }

    /// The identity of the flush of `batch`.
    fn flush_id(&self, batch: &Queued) -> FlushId {
        FlushId {
            table: self.table.name().clone(),
            partition: batch.key.clone(),
            first_seq: batch.sealed.first_seq,
            last_seq: batch.sealed.last_seq,
        }
    }

    /// Folds queued batches of the same partition into `head`, within the policy's limits.
    pub(super) fn merge_queued(&mut self, batch: &mut Queued) {
        let policy = *self.table.policy();
        let mut i = 0;
        while i < self.queue.len() {
            let (head, other) = (&batch.sealed, &self.queue[i].sealed);
            let fits = head.rows + other.rows <= policy.max_rows()
                && head.bytes + other.bytes <= policy.max_bytes();
            if self.queue[i].key != batch.key {
                i += 1;
                continue;
            }
            if !fits || self.queue[i].as_is {
                // Later batches of this partition must not overtake this one.
                break;
            }
            let Some(Queued {
                sealed: other,
                held,
                ..
            }) = self.queue.remove(i)
            else {
                break;
            };
            batch.held.absorb(held);
            let head = &mut batch.sealed;
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

    /// Takes a flush's outcome: answers its waiters and gives back its memory when it landed or
    /// was refused for good; queues it again, after a backoff, when it may land later.
    pub(super) fn finish(&mut self, batch: Queued, flush: FlushResult) {
        match flush.result {
            Ok(ref landed) => self.landed(batch, landed, &flush),
            Err(error) if error.is_retriable() => self.retry(batch, &error),
            Err(error) => self.refused(batch, &error),
        }
    }

    /// A flush landed: its rows are counted, its waiters, keys and frames told, its memory
    /// given back. When the flush's keys could not be journaled, the frames of its keyed
    /// inserts stay in the log.
    fn landed(&mut self, batch: Queued, landed: &Landed, outcome: &FlushResult) {
        let sealed = &batch.sealed;
        let now = crate::clock::now();
        // Named as a key's status shows where it landed: table, partition, lowest and highest LSN.
        let flush: Arc<str> = Arc::from(self.flush_id(&batch).to_string());
        let written = sealed.rows.saturating_sub(outcome.left_out);
        let keys_kept = outcome.keys_kept;
        self.instruments
            .flush_seconds
            .record(outcome.took.as_secs_f64());
        self.instruments.parts.increment(landed.parts);
        self.instruments.rows_written.increment(written);
        self.instruments.part_rows.record(written as f64);
        let mut landed_keys = Vec::new();
        for token in &sealed.tokens {
            self.instruments
                .row_wait
                .record(now.duration_since(token.arrived).as_secs_f64());
            if let Some(waiter) = &token.waiter {
                waiter.landed();
            }
            if let Some(keyed) = &token.keyed
                && keyed.piece_landed()
            {
                landed_keys.push(&*keyed.key);
            }
            if let Some(frame) = &token.frame
                && (keys_kept || token.keyed.is_none())
            {
                frame.piece_done();
            }
        }
        if !landed_keys.is_empty() {
            self.keys.landed(landed_keys, Some(&flush));
        }
        self.stats
            .rows_written
            .fetch_add(written, std::sync::atomic::Ordering::Relaxed);
        self.stats
            .parts_written
            .fetch_add(landed.parts, std::sync::atomic::Ordering::Relaxed);
        self.stats
            .bytes_written
            .fetch_add(landed.bytes, std::sync::atomic::Ordering::Relaxed);
        self.done_with(batch);
        if self.attempt > 0 {
            tracing::info!(table = %self.table.name(), attempts = self.attempt + 1, "store recovered");
        }
        self.attempt = 0;
        self.retry_at = None;
        self.last_error = None;
        self.stats.set_error(None);
        self.instruments
            .commit_retries
            .increment(landed.commit_retries);
        self.instruments.answers_lost.increment(landed.answers_lost);
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

    /// A flush failed and may land later: it goes back to the head of the queue, to be folded
    /// together with the batches behind it unless the store landed part of it.
    fn retry(&mut self, mut batch: Queued, error: &SinkError) {
        batch.as_is |= error.partly_landed;
        self.instruments.errors_retriable.increment(1);
        self.attempt += 1;
        let delay = self.backoff.delay(self.attempt, rand::random::<f64>());
        tracing::warn!(
            table = %self.table.name(), partition = %batch.key, attempt = self.attempt,
            retry_in_ms = delay.as_millis() as u64, error = %error, "flush failed; will retry"
        );
        self.retry_at = Some(crate::clock::now() + delay);
        self.last_error = Some(error.to_string());
        self.stats.set_error(Some(error.to_string()));
        self.queue.push_front(batch);
    }

    /// A store refused a flush for good: its rows go to the dead letters, its waiters are told.
    fn refused(&mut self, batch: Queued, error: &SinkError) {
        self.instruments.errors_permanent.increment(1);
        let sealed = &batch.sealed;
        let id = self.flush_id(&batch);
        let kept = self.keep_dead_letter(&id, sealed, &error.to_string());
        let reason = match &kept {
            Some(Ok(path)) => format!("{error} (the rows are kept in {})", path.display()),
            _ => error.to_string(),
        };
        for token in &sealed.tokens {
            if let Some(waiter) = &token.waiter {
                waiter.failed(Failure::Refused(reason.clone()));
            }
            if let Some(keyed) = &token.keyed {
                self.keys.store_refused(&keyed.key, &reason);
            }
            // Replaying a batch the store refuses for good would only refuse it again;
            // only a dead letter that could not be written leaves the frames to replay.
            if !matches!(kept, Some(Err(_)))
                && let Some(frame) = &token.frame
            {
                frame.piece_done();
            }
        }
        self.done_with(batch);
        self.attempt = 0;
        self.retry_at = None;
        self.stats.note_error(reason.clone());
        self.last_error = Some(reason);
    }

    /// Writes a refused batch to the dead-letter folder, if there is one. `None` when there is no
    /// folder (the rows are dropped and counted).
    pub(super) fn keep_dead_letter(
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

    /// A batch that landed or was refused for good leaves the writer; dropping it gives back
    /// its memory.
    fn done_with(&mut self, batch: Queued) {
        self.buffered_rows -= batch.sealed.rows;
        self.buffered_bytes -= batch.sealed.bytes;
        self.publish_buffered();
    }

    pub(super) fn publish_buffered(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.buffered_rows.store(self.buffered_rows, Relaxed);
        self.stats
            .buffered_bytes
            .store(self.buffered_bytes, Relaxed);
    }
}

/// The keyed inserts of a flush.
fn keyed_inserts(batch: &Queued) -> Vec<Arc<KeyedInsert>> {
    (batch.sealed.tokens.iter())
        .filter_map(|token| token.keyed.clone())
        .collect()
}

/// Writes the keys of `inserts`, landed in `flush`, to the table's journal, off the runtime;
/// whether they are in it (or need not be: none, or no journal).
async fn journal(keys: Arc<KeyTable>, flush: String, inserts: Vec<Arc<KeyedInsert>>) -> bool {
    if inserts.is_empty() || keys.journal().is_none() {
        return true;
    }
    let written = tokio::task::spawn_blocking(move || match keys.journal() {
        Some(journal) => journal.append(&flush, &inserts, SystemTime::now()),
        None => Ok(()),
    })
    .await;
    match written {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot journal the keys of a landed flush; their log records are kept");
            false
        }
        Err(e) => {
            tracing::error!(error = %e, "the key journal task failed; the flush's log records are kept");
            false
        }
    }
}

/// Brings chunks taken under an earlier layout of `table` to its layout now: the columns added
/// since (`evolve`) are null in them. A chunk that cannot be brought is left as it is, for the
/// store to refuse with its reason.
fn conform_chunks(table: &TableDef, chunks: &mut [RecordBatch]) {
    let schema = table.schema().arrow();
    for chunk in chunks {
        let same = Arc::ptr_eq(&chunk.schema(), schema) || chunk.schema() == *schema;
        if same {
            continue;
        }
        match sluice_core::conform(schema, chunk) {
            Ok(conformed) => *chunk = conformed,
            Err(e) => {
                tracing::warn!(table = %table.name(), error = %e, "rows of an earlier layout do not fit the table's")
            }
        }
    }
}
