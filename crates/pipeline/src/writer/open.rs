//! Opening a table in its store: at start for every table, later by the writer of one whose
//! store did not answer then.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use sluice_core::{Catalog, PartitionKey, Sink, TableDef};
use tokio::task::JoinHandle;

use crate::error::StartError;

use super::{InsertMsg, Writer};

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
    pub(super) catalog: Arc<dyn Catalog>,
    /// Why it is not open: the start's error, then the last try's.
    pub(super) error: String,
    pub(super) attempt: u32,
    pub(super) retry_at: Option<Instant>,
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

pub(super) type OpenResult = Result<HashMap<PartitionKey, u64>, StartError>;

impl Writer {
    /// Tries to open the table's store, if it is not open and no try or backoff is pending.
    pub(super) fn start_open(&mut self, now: Instant) -> Option<JoinHandle<OpenResult>> {
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
    pub(super) fn opened(&mut self, result: OpenResult) {
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
                    if !msg.unfiltered || msg.keep_unlanded(&held, &self.keys) {
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
                opening.retry_at = Some(crate::clock::now() + delay);
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
}
