//! The table registry: looking tables up, creating one from its first insert, registering a
//! table with its writer task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_core::{TableDef, TableName, TableSchema};
use tokio::sync::mpsc;

use super::{Pipeline, TableHandle};
use crate::error::InsertError;
use crate::keys::KeyTable;
use crate::memory::MemoryBudget;
use crate::stats::{Count, TableStats, Tally, names};
use crate::writer::{Opening, Writer};

impl Pipeline {
    /// The table called `name`, created from `schema()` if it is missing and auto-create is on.
    pub(super) async fn table_for(
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
            .with_throttle(self.inner.config.default_throttle)
            .with_evolve(self.inner.config.evolve);
        // The store first: a table it cannot make is never remembered, so it cannot stop the
        // next start. A crash between the two leaves a table the store holds and the catalog
        // does not; the next insert creates it again (creating is idempotent).
        let sink = self.inner.default_sink.clone();
        sink.create_table(&def)
            .await
            .map_err(|e| store_refusal(name.as_str(), e))?;
        self.store_layout(&def).await?;
        tracing::info!(table = %name, columns = def.schema().columns().len(), "table created from its first insert");
        Ok(self.register(def, sink, None))
    }

    /// Stores `def`'s layout in the catalog, durably, off the async workers.
    pub(super) async fn store_layout(&self, def: &TableDef) -> Result<(), InsertError> {
        let create_failed = |reason: String| InsertError::CreateFailed {
            table: def.name().to_string(),
            reason,
        };
        let catalog = self.inner.catalog.clone();
        let (name, layout) = (def.name().clone(), def.layout());
        tokio::task::spawn_blocking(move || catalog.store(&name, &layout))
            .await
            .map_err(|e| create_failed(e.to_string()))?
            .map_err(|e| create_failed(e.to_string()))
    }

    pub(super) fn register(
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
        let table = def.name().to_string();
        let journal = (self.inner.config.key_journal.as_ref()).map(|dir| dir.join(&table));
        let keys = Arc::new(KeyTable::new(
            &table,
            self.inner.config.keys,
            &memory,
            journal,
        ));
        let writer = Writer::new(
            def.clone(),
            sink.clone(),
            keys.clone(),
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
        let handle = Arc::new(TableHandle {
            rows_received: Tally::new(
                metrics::counter!(names::ROWS_RECEIVED, "table" => table.clone()),
                &stats,
                Count::RowsReceived,
            ),
            bytes_received: Tally::new(
                metrics::counter!(names::BYTES_RECEIVED, "table" => table.clone()),
                &stats,
                Count::BytesReceived,
            ),
            inserts: Tally::new(
                metrics::counter!(names::INSERTS, "table" => table.clone()),
                &stats,
                Count::Inserts,
            ),
            delayed: Tally::new(
                metrics::counter!(names::DELAYED_INSERTS, "table" => table.clone()),
                &stats,
                Count::Delayed,
            ),
            keys,
            duplicates: metrics::counter!(names::DUPLICATES, "table" => table),
            combiner: Default::default(),
            sink: sink.name(),
            store: sink.clone(),
            def: std::sync::RwLock::new(def),
            evolving: tokio::sync::Mutex::new(()),
            memory,
            tx,
            order: Mutex::new(()),
            stats,
        });
        let mut tables = match self.inner.tables.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        tables.insert(handle.def().name().clone(), handle.clone());
        handle
    }

    pub(super) fn read_tables(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, HashMap<TableName, Arc<TableHandle>>> {
        match self.inner.tables.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A store's refusal to make or change `table`: unavailable when it may answer later.
pub(super) fn store_refusal(table: &str, error: sluice_core::SinkError) -> InsertError {
    let (table, reason) = (table.to_owned(), error.to_string());
    if error.is_retriable() {
        InsertError::StoreUnavailable { table, reason }
    } else {
        InsertError::TableRefused { table, reason }
    }
}
