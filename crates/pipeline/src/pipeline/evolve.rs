//! New keys as new columns (`evolve = true`).
//!
//! An insert of JSON rows into a table that evolves, refused because its rows carry keys the
//! table has no column for, adds those columns before it is decoded again: nullable, of the
//! types their values infer to, as a first insert's columns are. The store takes them first
//! (one Delta metadata commit, `ALTER TABLE ... ADD COLUMN`), then the catalog, then the table's
//! writer, in that order, so nothing lands in a column the store lacks and a restart finds the
//! columns its logged inserts need.
//!
//! Many inserts bringing the same new key at once add it once: they take the table's
//! `evolving` lock in turn, and each looks again at the columns the one before it added. Two
//! sluice processes adding the same key to one store add it once too: the store's own change
//! is idempotent (the lake plans each schema commit from the newest version of the log).

use std::sync::Arc;

use sluice_core::json::new_columns;
use sluice_core::{DecodeOptions, InputFormat, TableDef};

use super::{Pipeline, TableHandle};
use crate::error::InsertError;
use crate::writer::Command;

impl Pipeline {
    /// Adds the columns `body`'s new keys need, when its table evolves and it is a JSON body
    /// whose unknown keys are not to be skipped: true when the table has them now and the body
    /// is to be decoded again, false when evolution does not apply and the refusal stands.
    ///
    /// `decoded_with` is the definition the body was refused under: another insert may have
    /// added its keys since, and then it is decoded again without adding anything.
    pub(super) async fn evolve(
        &self,
        handle: &TableHandle,
        decoded_with: Arc<TableDef>,
        body: &[u8],
        options: &DecodeOptions,
    ) -> Result<bool, InsertError> {
        let def = decoded_with;
        let applies = def.evolves()
            && options.format == InputFormat::JsonEachRow
            && !options.skip_unknown_fields;
        if !applies {
            return Ok(false);
        }
        // A body inference refuses is refused by its decoding too, which says it better.
        let Ok(new) = new_columns(body, options.dialect, def.schema()) else {
            return Ok(false);
        };
        if new.is_empty() {
            return Ok(false);
        }
        let _evolving = handle.evolving.lock().await;
        // Another insert may have added them while this one waited.
        let def = handle.def();
        let new: Vec<_> = new
            .into_iter()
            .filter(|c| def.schema().column(&c.name).is_none())
            .collect();
        if new.is_empty() {
            return Ok(true);
        }
        let (table, columns) = (def.name().to_string(), def.schema().columns().len());
        let limit = self.inner.config.evolve_max_columns;
        if columns + new.len() > limit {
            return Err(InsertError::TooManyColumns {
                table,
                columns,
                adding: new.len(),
                limit,
            });
        }
        let names: Vec<String> = new.iter().map(|c| format!("{} {}", c.name, c.ty)).collect();
        let evolved = def
            .with_columns(new)
            .map_err(|e| InsertError::TableRefused {
                table: table.clone(),
                reason: e.to_string(),
            })?;
        handle
            .store
            .create_table(&evolved)
            .await
            .map_err(|e| super::registry::store_refusal(&table, e))?;
        self.store_layout(&evolved).await?;
        let evolved = Arc::new(evolved);
        {
            let _order = match handle.order.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            match handle.def.write() {
                Ok(mut current) => *current = evolved.clone(),
                Err(poisoned) => *poisoned.into_inner() = evolved.clone(),
            }
            // The writer is gone only when the pipeline is stopping; the insert then fails
            // when it is handed over.
            let _ = handle.tx.send(Command::Relayout(evolved));
        }
        tracing::info!(table, columns = ?names, "the table took new columns from an insert");
        Ok(true)
    }
}
