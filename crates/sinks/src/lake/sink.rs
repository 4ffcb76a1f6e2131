//! The lake as a [`Sink`]: Parquet files written on tokio's blocking threads, one Delta commit
//! per flush through the table's [`TableLog`].

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::sink::BoxFuture;
use sluice_core::{
    EmptyValue, FlushBatch, FlushId, Landed, PartitionKey, PartitionParts, Sink, SinkError,
    TableDef, TableName,
};
use tokio::sync::Mutex;

use super::compact::{self, CompactionReport, discard};
use super::config::{LakeConfig, LakeRoot};
use super::log::{PartCounts, TableLog, add_action, check_names, partition_values, table_exists};
use super::parallel::on_every_core;
use super::part::{WrittenPart, write_part};
use super::path::part_name;
use super::storage::{FileSync, TableFiles};
use crate::writer::writer_id;

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
    /// Each open table's active parts per partition, readable on the insert path.
    counts: Arc<std::sync::RwLock<HashMap<TableName, Arc<PartCounts>>>>,
}

/// A table this sink has opened: its definition (the compactor sorts by its key) and its log.
type OpenTable = (TableDef, Arc<Mutex<TableLog>>, TableFiles);

impl std::fmt::Debug for LakeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LakeSink")
            .field("root", &self.config.root)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl LakeSink {
    /// A sink writing under `config.root` (a folder is created if missing). Reads this
    /// writer's identity from `config.state_dir`, creating it on first start.
    pub fn new(config: LakeConfig) -> Result<Self, SinkError> {
        if let LakeRoot::Folder(root) = &config.root {
            std::fs::create_dir_all(root).map_err(|e| {
                SinkError::retriable(SINK, format!("cannot create {}: {e}", root.display()))
            })?;
        }
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
            counts: Arc::default(),
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

    /// Lands `batches` in `table` as one file per batch and partition, committed 1,000 files to
    /// a commit, without flush identities and, unless `sync`, without fsyncs: a bulk load for
    /// data that can be made again (the lab's data sets), never for acknowledged rows. Returns
    /// the files written.
    pub async fn bulk_append(
        &self,
        table: &TableDef,
        batches: Vec<RecordBatch>,
        sync: bool,
    ) -> Result<u64, SinkError> {
        const FILES_PER_COMMIT: usize = 1_000;
        let (log, store) = self.log(table, Purpose::Write).await?;
        let mut files = 0;
        let mut chunks = batches.into_iter().peekable();
        while chunks.peek().is_some() {
            let chunk: Vec<RecordBatch> = chunks.by_ref().take(FILES_PER_COMMIT).collect();
            let config = self.config.clone();
            let def = table.clone();
            let sync = if sync {
                FileSync::Durable
            } else {
                FileSync::Cached
            };
            let target = store.clone();
            let parts = tokio::task::spawn_blocking(move || {
                bulk_write(&config, &def, &target, chunk, sync)
            })
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("write task failed: {e}")))??;
            let mut log = log.lock().await;
            let columns = log.partition_columns().to_vec();
            let adds = parts
                .iter()
                .map(|(key, part)| add_action(part, partition_values(&columns, key)))
                .collect();
            log.commit_files(adds).await?;
            files += parts.len() as u64;
        }
        Ok(files)
    }

    /// Runs one compaction pass over `table`: the merges `policy` picks, each one commit, and
    /// the deletion of what was replaced more than `file_retention` ago. `progress` hears
    /// (input files done, input files planned).
    ///
    /// The deletion runs beside the merges: what it deletes was replaced before this pass (a
    /// file this pass reads is live, one it writes is new), so it ends the same as after them,
    /// without adding its listing of the table to the pass's time. With a zero retention it
    /// runs after them instead, so the pass's own inputs go in the same pass.
    pub async fn compact(
        &self,
        table: &TableDef,
        policy: CompactionPolicy,
        progress: compact::Progress<'_>,
    ) -> Result<CompactionReport, SinkError> {
        // A pass compacts what is there. A table with no log yet has nothing to compact, and
        // a maintenance command must not create it: `sluice compact` pointed at the wrong lake
        // would leave an empty table there for every declared one.
        if !self.is_open(table.name()).await
            && !table_exists(&self.config, &self.config.root.table(table.name().as_str())).await?
        {
            return Ok(CompactionReport::default());
        }
        let (log, _) = self.log(table, Purpose::Compact).await?;
        let retention = self.config.file_retention;
        let merges = compact::compact(&self.config, &log, table, policy, progress);
        if retention.is_zero() {
            let mut report = merges.await?;
            report.files_deleted = compact::vacuum(&log, retention).await?;
            return Ok(report);
        }
        let (compacted, deleted) = tokio::join!(merges, compact::vacuum(&log, retention));
        let mut report = compacted?;
        report.files_deleted = deleted?;
        Ok(report)
    }

    /// Every `interval` until `stop` resolves, for every table this sink has opened: rereads
    /// its log (so part counts, and the throttle, see other writers' commits and compactions)
    /// and, with a `policy`, compacts it. A round in progress when `stop` resolves is
    /// abandoned: a merge not yet committed leaves only a file that the orphan sweep deletes
    /// later. Failures are logged and tried again next round: upkeep is never urgent enough to
    /// stop ingest for. `observe` hears how each table's compaction went (for metrics).
    pub async fn run_upkeep(
        &self,
        policy: Option<CompactionPolicy>,
        interval: std::time::Duration,
        observe: impl Fn(&TableName, &Result<CompactionReport, SinkError>),
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
                () = self.upkeep_round(policy, &observe) => {}
            }
        }
    }

    async fn upkeep_round(
        &self,
        policy: Option<CompactionPolicy>,
        observe: &impl Fn(&TableName, &Result<CompactionReport, SinkError>),
    ) {
        let tables: Vec<OpenTable> = self.logs.lock().await.values().cloned().collect();
        for (table, log, _) in tables {
            let Some(policy) = policy else {
                if let Err(e) = log.lock().await.refresh().await {
                    tracing::warn!(table = %table.name(), error = %e, "cannot reread the table's log");
                }
                continue;
            };
            // A partition over the throttle's first threshold gets every merge possible.
            let pressed = self
                .active_parts(table.name())
                .is_some_and(|parts| parts.iter().any(|p| table.throttle().is_pressed(p.parts)));
            let policy = if pressed { policy.eager() } else { policy };
            let compacted = self.compact(&table, policy, &|_, _| {}).await;
            observe(table.name(), &compacted);
            match compacted {
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

    /// The table's log and its data files, opening (or creating) the table on first use, and
    /// for [`Purpose::Write`] bringing its schema to the layout first.
    async fn log(
        &self,
        table: &TableDef,
        purpose: Purpose,
    ) -> Result<(Arc<Mutex<TableLog>>, TableFiles), SinkError> {
        let mut logs = self.logs.lock().await;
        if let Some((_, log, files)) = logs.get(table.name()) {
            let (log, files) = (log.clone(), files.clone());
            // Not under the sink's lock: another table's flush must not wait for this log.
            drop(logs);
            if purpose == Purpose::Write {
                let mut log = log.lock().await;
                log.relayout(table)?;
                log.conform_schema().await?;
            }
            return Ok((log, files));
        }
        let location = self.config.root.table(table.name().as_str());
        let mut opened = TableLog::open(&self.config, &location, table).await?;
        if purpose == Purpose::Write {
            opened.conform_schema().await?;
        }
        let counts = opened.counts();
        let files = opened.files().clone();
        let log = Arc::new(Mutex::new(opened));
        logs.insert(
            table.name().clone(),
            (table.clone(), log.clone(), files.clone()),
        );
        match self.counts.write() {
            Ok(mut guard) => guard.insert(table.name().clone(), counts),
            Err(poisoned) => poisoned.into_inner().insert(table.name().clone(), counts),
        };
        Ok((log, files))
    }
}

/// What a table's log is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Landing rows: the table's schema takes the layout's new columns first, so readers see
    /// them.
    Write,
    /// Rewriting the files it holds, which needs no change of its schema: `sluice compact` run
    /// with a config that adds a column leaves the table as it is.
    Compact,
}

impl LakeSink {
    /// Whether this sink has opened (or created) `table`'s log.
    async fn is_open(&self, table: &TableName) -> bool {
        self.logs.lock().await.contains_key(table)
    }

    fn table_counts(&self, table: &TableName) -> Option<Arc<PartCounts>> {
        match self.counts.read() {
            Ok(guard) => guard.get(table).cloned(),
            Err(poisoned) => poisoned.into_inner().get(table).cloned(),
        }
    }
}

impl Sink for LakeSink {
    fn name(&self) -> &'static str {
        SINK
    }

    fn partition_parts(&self, table: &TableName, partition: &PartitionKey) -> Option<u64> {
        let counts = self.table_counts(table)?;
        let guard = counts
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(guard.get(partition).map_or(0, |p| p.parts))
    }

    fn active_parts(&self, table: &TableName) -> Option<Vec<PartitionParts>> {
        let counts = self.table_counts(table)?;
        let guard = counts
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut parts: Vec<PartitionParts> = guard.values().cloned().collect();
        parts.sort_by(|a, b| a.partition.cmp(&b.partition));
        Some(parts)
    }

    /// Delta cannot hold an empty partition value: its log writes it as null.
    fn empty_partition_value(&self) -> EmptyValue {
        EmptyValue::ReadAsNull
    }

    /// Creates the table's folder (in a local lake) and Delta table, and removes temporary
    /// files an interrupted write left behind.
    fn create_table<'a>(&'a self, table: &'a TableDef) -> BoxFuture<'a, Result<(), SinkError>> {
        let location = self.config.root.table(table.name().as_str());
        Box::pin(async move {
            // Before the table's folder is made: a refused table leaves nothing behind.
            check_names(table)?;
            if let (LakeRoot::Folder(root), LakeRoot::Folder(dir)) = (&self.config.root, &location)
            {
                let files = TableFiles::Folder {
                    root: root.clone(),
                    dir: dir.clone(),
                };
                tokio::task::spawn_blocking(move || files.remove_temporaries())
                    .await
                    .map_err(|e| SinkError::retriable(SINK, format!("create task failed: {e}")))?
                    .map_err(|e| {
                        SinkError::retriable(SINK, format!("cannot prepare the table folder: {e}"))
                    })?;
            }
            self.log(table, Purpose::Write).await.map(drop)
        })
    }

    /// Reads this writer's application transactions from the table's log.
    fn committed<'a>(
        &'a self,
        table: &'a TableDef,
    ) -> BoxFuture<'a, Result<Vec<(PartitionKey, u64)>, SinkError>> {
        Box::pin(async move {
            let (log, _) = self.log(table, Purpose::Write).await?;
            let mut log = log.lock().await;
            log.watermarks(&self.writer).await
        })
    }

    fn write<'a>(&'a self, flush: FlushBatch<'a>) -> BoxFuture<'a, Result<Landed, SinkError>> {
        Box::pin(async move {
            let (log, files) = self.log(flush.table, Purpose::Write).await?;
            let config = self.config.clone();
            let table = flush.table.clone();
            let id = flush.id.clone();
            let target = files.clone();
            let part = tokio::task::spawn_blocking(move || {
                let name = part_name(id.first_seq, id.last_seq);
                write_part(
                    &config,
                    &table,
                    &target,
                    &id,
                    &name,
                    &flush.batches,
                    FileSync::Durable,
                )
            })
            .await
            .map_err(|e| SinkError::retriable(SINK, format!("write task failed: {e}")))??;

            let mut log = log.lock().await;
            let values = partition_values(log.partition_columns(), &flush.id.partition);
            let add = add_action(&part, values);
            let races_before = log.lost_races();
            let lost_before = log.answers_lost();
            let committed = log
                .commit_flush(&self.writer, &flush.id.partition, flush.id.last_seq, add)
                .await;
            match committed {
                Ok(true) => {
                    tracing::debug!(file = %part.relative, bytes = part.bytes, "part committed");
                    Ok(Landed {
                        parts: 1,
                        bytes: part.bytes,
                        commit_retries: log.lost_races() - races_before,
                        answers_lost: log.answers_lost() - lost_before,
                        ..Landed::default()
                    })
                }
                Ok(false) => {
                    tracing::info!(flush = %flush.id, "the table's log already holds this flush");
                    discard(&files, part.relative);
                    Ok(Landed::default())
                }
                Err(e) => {
                    // A file the log may reference stays; one it cannot is removed.
                    if !log.is_uncertain() {
                        discard(&files, part.relative);
                    }
                    Err(e)
                }
            }
        })
    }
}

/// Writes each batch as one file per partition, spread over one thread per core.
fn bulk_write(
    config: &LakeConfig,
    table: &TableDef,
    files: &TableFiles,
    batches: Vec<RecordBatch>,
    sync: FileSync,
) -> Result<Vec<(PartitionKey, WrittenPart)>, SinkError> {
    let mut pieces = Vec::new();
    for batch in batches {
        let split = table
            .partition()
            .split(&batch, EmptyValue::ReadAsNull)
            .map_err(|e| SinkError::permanent(SINK, e.to_string()))?;
        pieces.extend(split);
    }
    // Bulk files carry no inserts: sequence range 0-0. Named here, in the batches' order, not
    // by the threads as they write: their names then sort as their rows came, as flushes' do.
    let pieces: Vec<_> = pieces
        .into_iter()
        .map(|(key, batch)| (key, batch, part_name(0, 0)))
        .collect();
    on_every_core(&pieces, |(key, batch, name)| {
        let id = FlushId {
            table: table.name().clone(),
            partition: key.clone(),
            first_seq: 0,
            last_seq: 0,
        };
        let part = write_part(
            config,
            table,
            files,
            &id,
            name,
            std::slice::from_ref(batch),
            sync,
        )?;
        Ok(vec![(key.clone(), part)])
    })
}
