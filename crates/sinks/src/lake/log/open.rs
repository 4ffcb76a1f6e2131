//! Opening a table's log, creating the table when there is none.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::SaveMode;
use deltalake_core::{DeltaTable, DeltaTableBuilder, TableProperty};
use sluice_core::{SinkError, TableDef};
use url::Url;

use crate::fsio;
use crate::lake::config::{LakeConfig, LakeRoot};
use crate::lake::schema::delta_columns;
use crate::lake::storage::{TableFiles, register_object_stores, storage_options};

use super::*;

/// Whether there is a Delta table at `location`. Creates nothing.
pub(crate) async fn table_exists(
    config: &LakeConfig,
    location: &LakeRoot,
) -> Result<bool, SinkError> {
    Ok(existing_table(config, location).await?.is_some())
}

/// The Delta table at `location`, built but not loaded; `None` when there is none. Creates
/// nothing.
pub(crate) async fn existing_table(
    config: &LakeConfig,
    location: &LakeRoot,
) -> Result<Option<DeltaTable>, SinkError> {
    if let Some(dir) = location.folder()
        && !dir.join(DELTA_LOG_DIR).is_dir()
    {
        return Ok(None);
    }
    let (url, options) = table_url(location, &config.storage_options)?;
    let table = DeltaTableBuilder::from_url(url)
        .map(|b| b.with_storage_options(options))
        .and_then(|b| b.build())
        .map_err(|e| delta_error(location, "open", e))?;
    let exists = table
        .verify_deltatable_existence()
        .await
        .map_err(|e| delta_error(location, "open", e))?;
    Ok(exists.then_some(table))
}

/// A table's location as the URL deltalake-core takes, with the options its store opens with.
pub(crate) fn table_url(
    location: &LakeRoot,
    configured: &HashMap<String, String>,
) -> Result<(Url, HashMap<String, String>), SinkError> {
    match location {
        LakeRoot::Folder(dir) => {
            let absolute = std::path::absolute(dir).map_err(|e| io_error(dir, e))?;
            let url = Url::from_directory_path(&absolute).map_err(|()| {
                SinkError::permanent(
                    SINK,
                    format!("{} cannot be a table location", absolute.display()),
                )
            })?;
            Ok((url, HashMap::new()))
        }
        LakeRoot::Url(url) => {
            register_object_stores();
            Ok((url.clone(), storage_options(url, configured)))
        }
    }
}

/// Refuses a table with column names that differ only in case, which a Delta table takes for
/// one column. (deltalake-core's own refusal repeats itself three times and names one column.)
pub(crate) fn check_names(table: &TableDef) -> Result<(), SinkError> {
    match table.schema().case_clash() {
        Some((earlier, later)) => Err(SinkError::permanent(
            SINK,
            format!(
                "table {}: columns '{earlier}' and '{later}' differ only in case, and a Delta \
                 table takes them for one column: rename one",
                table.name()
            ),
        )),
        None => Ok(()),
    }
}

impl TableLog {
    /// Opens the table's log at `location`, creating the table when there is none. An
    /// existing table must hold the columns `table` describes with their types, or, for a
    /// declared table, be one [`TableLog::conform_schema`] can bring to them; it changes
    /// nothing yet.
    pub(crate) async fn open(
        config: &LakeConfig,
        location: &LakeRoot,
        table: &TableDef,
    ) -> Result<Self, SinkError> {
        check_names(table)?;
        let target = table_url(location, &config.storage_options)?;
        let (fields, partition_columns) = delta_columns(table)?;
        let mut delta = DeltaTableBuilder::from_url(target.0.clone())
            .map(|b| b.with_storage_options(target.1.clone()))
            .and_then(|b| b.build())
            .map_err(|e| delta_error(location, "open", e))?;
        let exists = delta
            .verify_deltatable_existence()
            .await
            .map_err(|e| delta_error(location, "open", e))?;
        if exists {
            delta
                .load()
                .await
                .map_err(|e| delta_error(location, "load", e))?;
        } else {
            let columns = (fields.as_slice(), partition_columns.as_slice());
            delta = create(config, location, table, delta, &target, columns).await?;
        }
        let state = delta
            .snapshot()
            .map_err(|e| delta_error(location, "load", e))?
            .clone();
        let change = schema_change(location, &Current::of(&state), &fields, &partition_columns)?;
        if !change.is_empty() && !table.may_add_columns() {
            return Err(SinkError::permanent(
                SINK,
                format!(
                    "the Delta table at {location} does not match the table's layout: it \
                     would have to {change}, and sluice changes a table to fit only a layout \
                     declared in the config, or one that evolves"
                ),
            ));
        }
        let log_store = delta.log_store();
        let log = Self {
            location: location.clone(),
            files: TableFiles::new(&config.root, location, log_store.object_store(None)),
            log_store,
            state,
            partition_columns,
            log_retention: config.log_retention,
            uncertain: false,
            behind: false,
            counts: Arc::default(),
            watermarks: HashMap::new(),
            fields,
            conformed: false,
            lost_races: 0,
            answers_lost: 0,
        };
        Ok(log.counted())
    }
}

/// Creates the table at `location` with `fields`, its log's first entry fsynced in a folder;
/// `delta` is the unloaded table, loaded instead when another writer created it first.
async fn create(
    config: &LakeConfig,
    location: &LakeRoot,
    table: &TableDef,
    mut delta: DeltaTable,
    (url, options): &(Url, HashMap<String, String>),
    (fields, partition_columns): (&[StructField], &[String]),
) -> Result<DeltaTable, SinkError> {
    let created = CreateBuilder::new()
        .with_location(url.as_str())
        .with_storage_options(options.clone())
        .with_table_name(table.name().as_str())
        .with_columns(fields.to_vec())
        .with_partition_columns(partition_columns.to_vec())
        .with_configuration_property(
            TableProperty::CheckpointInterval,
            Some(config.checkpoint_interval.to_string()),
        )
        // Checkpoints carry each file's statistics parsed (as well as the JSON every
        // reader knows), so a reader loading the log skips parsing them: a table opens
        // faster, for a larger checkpoint.
        .with_configuration_property(
            TableProperty::CheckpointWriteStatsAsStruct,
            Some("true".to_owned()),
        )
        .with_configuration_property(
            TableProperty::LogRetentionDuration,
            Some(format!(
                "interval {} seconds",
                config.log_retention.as_secs()
            )),
        )
        .with_configuration_property(
            TableProperty::DeletedFileRetentionDuration,
            Some(format!(
                "interval {} seconds",
                (config.file_retention * 2)
                    .max(crate::lake::config::ORPHAN_GRACE)
                    .as_secs()
            )),
        )
        .with_save_mode(SaveMode::Ignore)
        .await;
    let delta = match created {
        Ok(created) => created,
        // Another writer created it first.
        Err(_) if delta.verify_deltatable_existence().await.unwrap_or(false) => {
            delta
                .load()
                .await
                .map_err(|e| delta_error(location, "load", e))?;
            delta
        }
        Err(e) => return Err(delta_error(location, "create", e)),
    };
    if let Some(dir) = location.folder() {
        let log_dir = dir.join(DELTA_LOG_DIR);
        sync_log(&log_dir, &[commit_file(0)])
            .and_then(|()| fsio::sync_dir(dir))
            .map_err(|e| io_error(&log_dir, e))?;
    }
    Ok(delta)
}
