//! The lake as a [`Sink`]: part writes run on tokio's blocking threads.

use std::sync::Arc;

use sluice_core::sink::BoxFuture;
use sluice_core::{FlushBatch, Landed, Sink, SinkError, TableDef};

use super::config::LakeConfig;
use super::part::write_part;
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

    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        let config = self.config.clone();
        let dir = config.root.join(table.name().as_str());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || fsio::create_dir_durably(&config.root, &dir))
                .await
                .map_err(|e| SinkError::retriable(SINK, format!("create task failed: {e}")))?
                .map_err(|e| SinkError::retriable(SINK, format!("cannot create table folder: {e}")))
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
            })
        })
    }
}
