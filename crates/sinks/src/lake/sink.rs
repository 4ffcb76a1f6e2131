//! The lake as a [`Sink`]: Parquet files written on tokio's blocking threads, one Delta commit
//! per flush through the table's [`TableLog`].

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use deltalake_core::kernel::Add;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::sink::BoxFuture;
use sluice_core::{FlushBatch, Landed, PartitionKey, Sink, SinkError, TableDef, TableName};
use tokio::sync::Mutex;

use super::compact::{self, CompactionReport};
use super::config::LakeConfig;
use super::delta::{TableLog, partition_values};
use super::part::{WrittenPart, is_temporary, write_part};
use super::schema::file_schema;
use super::writer::writer_id;
use crate::fsio;

const SINK: &str = "lake";

/// Lands each flush as one Parquet file and one Delta commit per partition, under the lake's
/// root.
#[derive(Clone)]
pub struct LakeSink {
    config: Arc<LakeConfig>,
    writer: Arc<str>,
    /// Each table's definition and log, opened on first use. One commit at a time per table in
    /// this process: committers to one table starve each other.
    logs: Arc<Mutex<HashMap<TableName, OpenTable>>>,
}

/// A table this sink has opened: its definition (the compactor sorts by its key) and its log.
type OpenTable = (TableDef, Arc<Mutex<TableLog>>);

impl std::fmt::Debug for LakeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LakeSink")
            .field("root", &self.config.root)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl LakeSink {
    /// A sink writing under `config.root`, which is created if missing. Reads this writer's
    /// identity from `config.state_dir`, creating it on first start.
    pub fn new(config: LakeConfig) -> Result<Self, SinkError> {
        std::fs::create_dir_all(&config.root).map_err(|e| {
            SinkError::retriable(
                SINK,
                format!("cannot create {}: {e}", config.root.display()),
            )
        })?;
        let writer = writer_id(&config.state_dir).map_err(|e| {
            SinkError::retriable(
                SINK,
                format!(
                    "cannot read or create the writer identity in {}: {e}",
                    config.state_dir.display()
                ),
            )
        })?;
        Ok(Self {
            config: Arc::new(config),
            writer: writer.into(),
            logs: Arc::default(),
        })
    }

    /// The sink's settings.
    pub fn config(&self) -> &LakeConfig {
        &self.config
    }

    /// This writer's identity in the tables' logs.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// Runs one compaction pass over `table`: the merges `policy` picks, each one commit, then
    /// deletes what earlier passes replaced more than `file_retention` ago. `progress` hears
    /// (input files done, input files planned).
    pub async fn compact(
        &self,
        table: &TableDef,
        policy: CompactionPolicy,
        progress: compact::Progress<'_>,
    ) -> Result<CompactionReport, SinkError> {
        let log = self.log(table).await?;
        let mut report = compact::compact(&self.config, &log, table, policy, progress).await?;
        report.files_deleted = compact::vacuum(&log, self.config.file_retention).await?;
        Ok(report)
    }

    /// Compacts every table this sink has opened, every `interval`, until `stop` resolves (a
    /// round in progress is abandoned: a merge not yet committed leaves only a file that the
    /// orphan sweep deletes later). Failures are logged and tried again at the next round:
    /// compaction is never urgent enough to stop ingest for.
    pub async fn run_compactor(
        &self,
        policy: CompactionPolicy,
        interval: std::time::Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(interval) => {}
            }
            tokio::select! {
                () = &mut stop => return,
                () = self.compaction_round(policy) => {}
            }
        }
    }

    async fn compaction_round(&self, policy: CompactionPolicy) {
        let tables: Vec<TableDef> = self
            .logs
            .lock()
            .await
            .values()
            .map(|(def, _)| def.clone())
            .collect();
        for table in tables {
            match self.compact(&table, policy, &|_, _| {}).await {
                Ok(report) if report.merges > 0 || report.files_deleted > 0 => {
                    tracing::info!(
                        table = %table.name(),
                        merges = report.merges,
                        files_in = report.files_in,
                        bytes_in = report.bytes_in,
                        bytes_out = report.bytes_out,
                        deleted = report.files_deleted,
                        seconds = report.elapsed_s,
                        "compacted"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(table = %table.name(), error = %e, "compaction failed");
                }
            }
        }
    }

    async fn log(&self, table: &TableDef) -> Result<Arc<Mutex<TableLog>>, SinkError> {
        let mut logs = self.logs.lock().await;
        if let Some((_, log)) = logs.get(table.name()) {
            return Ok(log.clone());
        }
        let dir = self.config.root.join(table.name().as_str());
        let log = Arc::new(Mutex::new(TableLog::open(&self.config, &dir, table).await?));
        logs.insert(table.name().clone(), (table.clone(), log.clone()));
        Ok(log)
    }
}

impl Sink for LakeSink {
    fn name(&self) -> &'static str {
        SINK
    }

    /// Creates the table's folder and Delta table, and removes temporary files an interrupted
    /// write left behind.
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
            })?;
            self.log(table).await.map(drop)
        })
    }

    /// Reads this writer's application transactions from the table's log.
    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        Box::pin(async move {
            let log = self.log(table).await?;
            let mut log = log.lock().await;
            log.watermarks(&self.writer).await
        })
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        Box::pin(async move {
            let log = self.log(flush.table).await?;
            let config = self.config.clone();
            let table = flush.table.clone();
            let id = flush.id.clone();
            let part = tokio::task::spawn_blocking(move || {
                let schema = file_schema(&table);
                write_part(&config, &table, &schema, &id, flush.batch)
            })
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("write task failed: {e}")))??;

            let mut log = log.lock().await;
            let add = add_action(&part, log.partition_columns(), &flush.id.partition);
            let committed = log
                .commit_flush(&self.writer, &flush.id.partition, flush.id.last_seq, add)
                .await;
            match committed {
                Ok(true) => {
                    tracing::debug!(path = %part.path.display(), bytes = part.bytes, "part committed");
                    Ok(Landed {
                        parts: 1,
                        bytes: part.bytes,
                        ..Landed::default()
                    })
                }
                Ok(false) => {
                    tracing::info!(flush = %flush.id, "the table's log already holds this flush");
                    remove_orphan(&part.path);
                    Ok(Landed::default())
                }
                Err(e) => {
                    // A file the log may reference stays; one it cannot is removed.
                    if !log.is_uncertain() {
                        remove_orphan(&part.path);
                    }
                    Err(e)
                }
            }
        })
    }
}

/// The Delta `add` action for a part just written.
fn add_action(part: &WrittenPart, partition_columns: &[String], partition: &PartitionKey) -> Add {
    Add {
        path: part.relative.clone(),
        partition_values: partition_values(partition_columns, partition),
        size: i64::try_from(part.bytes).unwrap_or(i64::MAX),
        modification_time: chrono::Utc::now().timestamp_millis(),
        data_change: true,
        stats: Some(part.stats.clone()),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    }
}

fn remove_orphan(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove a file no commit references");
    }
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
