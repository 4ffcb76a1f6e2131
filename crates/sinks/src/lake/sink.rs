//! The lake as a [`Sink`]: part writes run on tokio's blocking threads.

use std::sync::Arc;

use std::fs;
use std::path::Path;

use sluice_core::sink::BoxFuture;
use sluice_core::{FlushBatch, Landed, PartitionKey, Sink, SinkError, TableDef};

use super::config::LakeConfig;
use super::part::{is_temporary, parse_part_name, write_part};
use super::path::parse_partition_dir_name;
use crate::fsio;

const SINK: &str = "lake";

/// Lands each flush as one Parquet part per partition under the lake's root.
#[derive(Debug, Clone)]
pub struct LakeSink {
    config: Arc<LakeConfig>,
}

impl LakeSink {
    /// A sink writing under `config.root`, which is created if missing.
    pub fn new(config: LakeConfig) -> Result<Self, SinkError> {
        std::fs::create_dir_all(&config.root).map_err(|e| {
            SinkError::retriable(
                SINK,
                format!("cannot create {}: {e}", config.root.display()),
            )
        })?;
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// The sink's settings.
    pub fn config(&self) -> &LakeConfig {
        &self.config
    }
}

impl Sink for LakeSink {
    fn name(&self) -> &'static str {
        SINK
    }

    /// Creates the table's folder and removes temporary parts an interrupted write left behind.
    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        let config = self.config.clone();
        let dir = config.root.join(table.name().as_str());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                fsio::create_dir_durably(&config.root, &dir)?;
                remove_temporaries(&dir)
            })
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("create task failed: {e}")))?
            .map_err(|e| {
                SinkError::retriable(SINK, format!("cannot prepare the table folder: {e}"))
            })
        })
    }

    /// Reads the sequence ranges from the part file names: no part is opened.
    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        let dir = self.config.root.join(table.name().as_str());
        let key_name = table.partition().key_name();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || committed_in(&dir, key_name.as_deref()))
                .await
                .map_err(|e| SinkError::retriable(SINK, format!("scan task failed: {e}")))?
                .map_err(|e| {
                    SinkError::retriable(SINK, format!("cannot list the table's parts: {e}"))
                })
        })
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        let config = self.config.clone();
        let table = flush.table.clone();
        Box::pin(async move {
            let part = tokio::task::spawn_blocking(move || {
                write_part(&config, &table, &flush.id, flush.batch)
            })
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("write task failed: {e}")))??;
            tracing::debug!(path = %part.path.display(), bytes = part.bytes, "part written");
            Ok(Landed {
                parts: 1,
                bytes: part.bytes,
                ..Landed::default()
            })
        })
    }
}

/// The highest last sequence number of the parts in `dir`, if there are parts.
fn max_last_seq(dir: &Path) -> std::io::Result<Option<u64>> {
    let mut max = None;
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some((_, last)) = name.to_str().and_then(parse_part_name) {
            max = max.max(Some(last));
        }
    }
    Ok(max)
}

fn committed_in(dir: &Path, key_name: Option<&str>) -> std::io::Result<Vec<(PartitionKey, u64)>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let Some(key_name) = key_name else {
        return Ok(max_last_seq(dir)?
            .map(|last| (PartitionKey::Whole, last))
            .into_iter()
            .collect());
    };
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(key) = entry
            .file_name()
            .to_str()
            .and_then(|name| parse_partition_dir_name(key_name, name))
        else {
            continue;
        };
        if let Some(last) = max_last_seq(&entry.path())? {
            out.push((key, last));
        }
    }
    Ok(out)
}

/// Removes `.part-*.tmp` files in a table's folder and its partition folders.
fn remove_temporaries(dir: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() && !name.starts_with('_') {
            remove_temporaries(&path)?;
        } else if is_temporary(&name) {
            tracing::info!(path = %path.display(), "removing a part an interrupted write left behind");
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}
