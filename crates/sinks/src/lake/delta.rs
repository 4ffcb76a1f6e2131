//! A lake table's Delta log: create or open it, commit a flush's file with the flush's identity,
//! read back which flushes it holds, and make each commit durable.
//!
//! # Exactly once
//!
//! Each commit carries a Delta application transaction (`txn`): app id
//! `sluice/<writer>/<partition>` and version = the flush's last insert sequence number. A
//! writer is one sluice data directory (its write-ahead log numbers the inserts); several
//! writers can share a table, each with its own app ids. After a crash, the versions of this
//! writer's app ids say what the table already holds, and replay skips it. A commit whose
//! outcome is unknown (an error after the log entry may have been written) is checked against
//! the log before it is tried again.
//!
//! # Durability
//!
//! The local object store never fsyncs, so after each commit to a table in a folder the new log
//! entry (and a checkpoint, when one was made) and the `_delta_log` folder are fsynced here
//! before the flush counts as landed. In an object store a PUT that returned is durable.
//!
//! # Log size
//!
//! Every commit lists `_delta_log`, so its length is kept short: a checkpoint every
//! `checkpoint_interval` commits, and after each checkpoint the entries older than
//! `log_retention` are removed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deltalake_core::checkpoints::cleanup_expired_logs_for;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{
    Action, Add, LogicalFileView, MetadataExt, Remove, StructField, StructType, Transaction,
};
use deltalake_core::logstore::LogStoreRef;
use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::table::config::TablePropertiesExt;
use deltalake_core::table::state::DeltaTableState;
use deltalake_core::{DeltaTable, DeltaTableBuilder, DeltaTableError, TableProperty};
use sluice_core::{PartitionKey, PartitionParts, SinkError, TableDef};
use url::Url;

use super::config::{LakeConfig, LakeRoot};
use super::files::{LiveFile, files_of};
use super::part::WrittenPart;
use super::schema::delta_columns;
use super::storage::{TableFiles, register_object_stores, storage_options};
use crate::{fsio, ledger};

const SINK: &str = "lake";

/// The folder of a Delta table's log.
pub(crate) const DELTA_LOG_DIR: &str = "_delta_log";

/// One table's log, as this process last saw it.
pub(crate) struct TableLog {
    location: LakeRoot,
    files: TableFiles,
    log_store: LogStoreRef,
    state: DeltaTableState,
    partition_columns: Vec<String>,
    log_retention: Duration,
    /// Set when a commit failed in a way that may have written it anyway.
    uncertain: bool,
    /// Set when `state` is older than this process's last commit ([`Then::Defer`]): the
    /// next commit reads the log first. The published counts are kept current meanwhile.
    behind: bool,
    /// Active parts per partition as of `state`, published for the insert path's throttle.
    counts: Arc<PartCounts>,
    /// The transaction versions of this process's app ids, read from the log once each and
    /// moved by its own commits: every flush is checked against them, so a flush the log
    /// holds is never committed again, whatever asks for it.
    watermarks: HashMap<String, u64>,
    /// The table's columns as the layout describes them.
    fields: Vec<StructField>,
    /// Whether the table's schema has been brought to `fields` ([`TableLog::conform_schema`]).
    conformed: bool,
}

/// Active parts per partition of one table, readable without the log's lock.
pub(crate) type PartCounts = std::sync::RwLock<HashMap<PartitionKey, PartitionParts>>;

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
        let (url, options) = table_url(location, &config.storage_options)?;
        let (fields, partition_columns) = delta_columns(table);
        let mut delta = DeltaTableBuilder::from_url(url.clone())
            .map(|b| b.with_storage_options(options.clone()))
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
            let created = CreateBuilder::new()
                .with_location(url.as_str())
                .with_storage_options(options.clone())
                .with_table_name(table.name().as_str())
                .with_columns(fields.clone())
                .with_partition_columns(partition_columns.clone())
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
                            .max(super::config::ORPHAN_GRACE)
                            .as_secs()
                    )),
                )
                .with_save_mode(SaveMode::Ignore)
                .await;
            delta = match created {
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
        }
        let state = delta
            .snapshot()
            .map_err(|e| delta_error(location, "load", e))?
            .clone();
        let change = schema_change(location, &Current::of(&state), &fields, &partition_columns)?;
        if !change.is_empty() && !table.is_declared() {
            return Err(SinkError::permanent(
                SINK,
                format!(
                    "the Delta table at {location} does not match the table's layout: it \
                     would have to {change}, and sluice changes a table to fit only a layout \
                     declared in the config"
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
        };
        Ok(log.counted())
    }

    /// Brings the table's schema to the layout's columns, one metadata commit per change:
    /// columns the config added are added (nullable: the rows the table holds have no value for
    /// them), columns the config made nullable lose their `NOT NULL`. Anything else that
    /// differs (a column's type, the partitioning, a new column that may not be null) is
    /// refused, and nothing is changed. A change that races with another writer's is planned
    /// again from the newest version: when both add the same column, the second finds it there.
    /// Done once per opening; rows are landed only after it.
    pub(crate) async fn conform_schema(&mut self) -> Result<(), SinkError> {
        if self.conformed {
            return Ok(());
        }
        if self.behind {
            self.refresh().await?;
        }
        // Each change is one commit; a few more tries cover commits lost to other writers.
        let mut attempts = self.fields.len() + SCHEMA_RETRIES;
        loop {
            let change = schema_change(
                &self.location,
                &Current::of(&self.state),
                &self.fields,
                &self.partition_columns,
            )?;
            let Some((schema, operation)) = change.next(&self.state.schema())? else {
                self.conformed = true;
                return Ok(());
            };
            let mapping = self
                .state
                .metadata()
                .configuration()
                .get(COLUMN_MAPPING_KEY);
            if mapping.is_some_and(|mode| !mode.eq_ignore_ascii_case("none")) {
                return Err(SinkError::permanent(
                    SINK,
                    format!(
                        "the Delta table at {} maps its column names, and sluice cannot {} \
                         there: {change}",
                        self.location,
                        operation.name().to_lowercase()
                    ),
                ));
            }
            let metadata = self
                .state
                .metadata()
                .clone()
                .with_schema(&schema)
                .map_err(|e| delta_error(&self.location, "change the schema of", e.into()))?;
            let properties = CommitProperties::default().with_cleanup_expired_logs(Some(false));
            match self
                .commit(
                    properties,
                    vec![Action::Metadata(metadata)],
                    operation,
                    Then::Update,
                )
                .await
            {
                Ok(()) => tracing::info!(table = %self.location, %change, "table schema changed"),
                Err(e) if attempts == 0 => return Err(e),
                // Lost to another writer's commit, or landed without our knowing: read the
                // log again and see what is still to do.
                Err(e) => {
                    tracing::debug!(table = %self.location, error = %e, "schema change retried");
                    self.refresh().await?;
                }
            }
            attempts = attempts.saturating_sub(1);
        }
    }

    /// Whether the last commit failed in a way that may have written it anyway.
    pub(crate) fn is_uncertain(&self) -> bool {
        self.uncertain
    }

    /// The partition columns, in log order.
    pub(crate) fn partition_columns(&self) -> &[String] {
        &self.partition_columns
    }

    /// The highest sequence number `writer` has committed, per partition.
    pub(crate) async fn watermarks(
        &mut self,
        writer: &str,
    ) -> Result<Vec<(PartitionKey, u64)>, SinkError> {
        self.refresh().await?;
        let mut partitions: BTreeMap<PartitionKey, ()> = BTreeMap::new();
        for file in self.state.log_data().iter() {
            partitions.insert(self.partition_of_file(&file), ());
        }
        let mut out = Vec::new();
        for key in partitions.into_keys() {
            if let Some(version) = self.version_of(&app_id(writer, &key)).await? {
                out.push((key, version));
            }
        }
        Ok(out)
    }

    /// Commits files in one commit, with no flush identity (bulk loads).
    pub(crate) async fn commit_files(&mut self, adds: Vec<Add>) -> Result<(), SinkError> {
        let properties = CommitProperties::default().with_cleanup_expired_logs(Some(false));
        let actions = adds.into_iter().map(Action::Add).collect();
        self.append(properties, actions).await
    }

    /// Commits one flush's file, unless the log already holds the flush. Returns whether it
    /// committed.
    pub(crate) async fn commit_flush(
        &mut self,
        writer: &str,
        partition: &PartitionKey,
        last_seq: u64,
        add: Add,
    ) -> Result<bool, SinkError> {
        let app = app_id(writer, partition);
        if self.uncertain {
            // A commit may have landed without our knowing: read the log again.
            self.refresh().await?;
            self.watermarks.remove(&app);
        }
        // Sequence numbers start at 1: 0 means "nothing yet".
        let held = match self.watermarks.get(&app) {
            Some(&held) => held,
            None => self.version_of(&app).await?.unwrap_or(0),
        };
        self.watermarks.insert(app.clone(), held);
        if held >= last_seq {
            self.uncertain = false;
            return Ok(false);
        }
        let version = i64::try_from(last_seq).map_err(|_| {
            SinkError::permanent(SINK, format!("sequence number {last_seq} is out of range"))
        })?;
        let properties = CommitProperties::default()
            .with_application_transaction(Transaction::new(app.clone(), version))
            .with_cleanup_expired_logs(Some(false));
        self.append(properties, vec![Action::Add(add)]).await?;
        self.watermarks.insert(app, last_seq);
        Ok(true)
    }

    /// Commits new files (no removals), planned again on the newest version when the commit
    /// conflicts. Appends conflict only with a change of the table's metadata (another writer
    /// added a column), and with every try planned on the version before that change, so
    /// without reading the log again a writer could never commit after it. A conflict leaves
    /// nothing written, so the next try cannot land the files twice.
    async fn append(
        &mut self,
        properties: CommitProperties,
        actions: Vec<Action>,
    ) -> Result<(), SinkError> {
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: (!self.partition_columns.is_empty())
                .then(|| self.partition_columns.clone()),
            predicate: None,
        };
        let mut retries = 0;
        loop {
            let committed = self
                .commit(
                    properties.clone(),
                    actions.clone(),
                    operation.clone(),
                    Then::Update,
                )
                .await;
            match committed {
                Err(e) if !self.uncertain && retries < APPEND_RETRIES => {
                    tracing::debug!(table = %self.location, error = %e, "append retried");
                    retries += 1;
                    self.refresh().await?;
                }
                done => return done,
            }
        }
    }

    /// Commits `actions` on the state's version (deltalake-core checks a lost race against the
    /// commits that won it and tries the next version). With [`Then::Update`] the state is
    /// brought to the new version at once; with [`Then::Defer`] (and no checkpoint due) it is
    /// left behind and the next use of it reads the log again: the last commit of a compaction
    /// pass replays the log since the checkpoint (every flush's file statistics) for a state
    /// that `sluice compact` then never reads.
    async fn commit(
        &mut self,
        properties: CommitProperties,
        actions: Vec<Action>,
        operation: DeltaOperation,
        then: Then,
    ) -> Result<(), SinkError> {
        if self.behind {
            self.refresh().await?;
        }
        let builder = CommitBuilder::from(properties).with_actions(actions).build(
            Some(&self.state),
            self.log_store.clone(),
            operation,
        );
        let written = match builder.into_prepared_commit_future().await {
            Ok(prepared) => prepared.await,
            Err(e) => Err(e),
        };
        let post = match written {
            Ok(post) => post,
            Err(e) => {
                // A conflict means the entry was not written; anything else may have been.
                self.uncertain = !matches!(
                    &e,
                    DeltaTableError::Transaction {
                        source: TransactionError::CommitConflict(_)
                    }
                );
                return Err(delta_error(&self.location, "commit to", e));
            }
        };
        // The entry is in the log: what follows cannot undo it.
        self.uncertain = false;
        let version = post.version;
        let interval = self.state.table_config().checkpoint_interval().get();
        let checkpoint_due = (version + 1).is_multiple_of(interval);
        let mut hook_failed = false;
        let checkpoint = if then == Then::Defer && !checkpoint_due {
            self.behind = true;
            false
        } else {
            match post.await {
                Ok(finalized) => {
                    self.state = finalized.snapshot();
                    self.publish_counts();
                    finalized.metrics.new_checkpoint_created
                }
                Err(e) => {
                    // Reading the new version or writing the checkpoint failed: the log is
                    // only longer, and the next use reads it again.
                    tracing::warn!(table = %self.location, version, error = %e, "committed, but cannot update the table's state or write its checkpoint");
                    self.behind = true;
                    hook_failed = true;
                    false
                }
            }
        };
        if let Some(dir) = self.location.folder() {
            let log_dir = dir.join(DELTA_LOG_DIR);
            let mut files = vec![commit_file(version)];
            // A checkpoint a failed hook may have left is made durable too (or a crash could
            // leave a torn one that readers would load).
            if checkpoint || hook_failed {
                files.push(format!("{version:020}.checkpoint.parquet"));
                files.push("_last_checkpoint".to_owned());
            }
            sync_log(&log_dir, &files).map_err(|e| {
                self.uncertain = true;
                io_error(&log_dir, e)
            })?;
        }
        if checkpoint {
            self.clean_log(version).await;
        }
        Ok(())
    }

    /// Removes log entries older than the retention that the newest checkpoint covers. A
    /// failure only leaves the log longer; it is logged, not returned.
    async fn clean_log(&self, version: u64) {
        let cutoff = chrono::Utc::now().timestamp_millis()
            - i64::try_from(self.log_retention.as_millis()).unwrap_or(i64::MAX);
        match cleanup_expired_logs_for(version, self.log_store.as_ref(), cutoff, None).await {
            Ok(removed) => {
                tracing::debug!(table = %self.location, removed, "old log entries removed");
            }
            Err(e) => {
                tracing::warn!(table = %self.location, error = %e, "cannot clean the Delta log");
            }
        }
    }

    /// The files the table holds, as of the newest version, and that version.
    pub(crate) async fn live_files(&mut self) -> Result<(Vec<LiveFile>, u64), SinkError> {
        self.refresh().await?;
        Ok((files_of(&self.state), self.state.version()))
    }

    /// Swaps `inputs` (live as of log version `read_at`) for `output` in one commit that
    /// changes no data (`dataChange=false`), so readers see the old files or the new one, never
    /// both. Returns `false` (and commits nothing) when another compaction got there first: an
    /// input is no longer live, or a compaction committed meanwhile.
    ///
    /// Hazard: deltalake-core's conflict checker ignores `dataChange=false` removals, so two
    /// compactions of the same files would both commit. Every compaction commit therefore also
    /// moves the table's compactor transaction (`sluice/compactor`) one version up: of two
    /// racers that read the same version, the second conflicts and is refused.
    ///
    /// `then` says whether the state is brought to the new version now ([`Then::Update`]: more
    /// merges of the pass will commit) or when next needed; the published part counts move by
    /// the swap either way.
    pub(crate) async fn commit_compaction(
        &mut self,
        inputs: &[LiveFile],
        read_at: u64,
        output: Add,
        target_bytes: u64,
        then: Then,
    ) -> Result<bool, SinkError> {
        self.refresh().await?;
        // When the log has not moved, the inputs are still live; otherwise each is looked up.
        if self.state.version() != read_at {
            let mut gone: HashSet<&str> = inputs.iter().map(|i| i.relative.as_str()).collect();
            for file in self.state.log_data().iter() {
                gone.remove(file.path().as_ref());
            }
            if !gone.is_empty() {
                return Ok(false);
            }
        }
        let guard = self.version_of(COMPACTOR_APP).await?.unwrap_or(0);
        let now = chrono::Utc::now().timestamp_millis();
        // Sized for the output's add too: pushed onto a full list, it would move the removals
        // (one per input) into fresh memory.
        let mut actions: Vec<Action> = Vec::with_capacity(inputs.len() + 1);
        actions.extend(inputs.iter().map(|input| {
            Action::Remove(Remove {
                path: input.relative.clone(),
                data_change: false,
                deletion_timestamp: Some(now),
                extended_file_metadata: Some(true),
                partition_values: Some(input.partition_values.clone()),
                size: i64::try_from(input.bytes).ok(),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
            })
        }));
        let bytes_out = u64::try_from(output.size).unwrap_or(0);
        actions.push(Action::Add(output));
        let properties = CommitProperties::default()
            .with_application_transaction(Transaction::new(
                COMPACTOR_APP,
                i64::try_from(guard + 1).unwrap_or(i64::MAX),
            ))
            .with_cleanup_expired_logs(Some(false));
        let operation = DeltaOperation::Optimize {
            predicate: None,
            target_size: i64::try_from(target_bytes).unwrap_or(i64::MAX),
        };
        match self.commit(properties, actions, operation, then).await {
            Ok(()) => {
                if self.behind {
                    self.count_swap(inputs, bytes_out);
                }
                Ok(true)
            }
            // A conflict (the only failure that leaves the outcome certain): another compactor
            // committed first. Nothing of this merge landed.
            Err(e) if !self.uncertain => {
                tracing::debug!(error = %e, "a compaction lost a race");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Every file the log records as removed, with when (milliseconds since the epoch; a
    /// removal without a time never expires).
    pub(crate) async fn removed(&self) -> Result<Vec<(String, i64)>, SinkError> {
        use futures_util::TryStreamExt;
        let tombstones: Vec<_> = self
            .state
            .all_tombstones(self.log_store.as_ref())
            .try_collect()
            .await
            .map_err(|e| delta_error(&self.location, "read", e))?;
        Ok(tombstones
            .iter()
            .map(|t| {
                let at = t.deletion_timestamp().unwrap_or(i64::MAX);
                (t.path().into_owned(), at)
            })
            .collect())
    }

    /// The table's data files.
    pub(crate) fn files(&self) -> &TableFiles {
        &self.files
    }

    /// Rereads the log to its newest version and, when it moved, republishes the part counts.
    pub(crate) async fn refresh(&mut self) -> Result<(), SinkError> {
        let before = self.state.version();
        self.state
            .update(self.log_store.as_ref(), None)
            .await
            .map_err(|e| delta_error(&self.location, "load", e))?;
        self.behind = false;
        if self.state.version() != before {
            self.publish_counts();
        }
        Ok(())
    }

    /// The active parts per partition this log publishes.
    pub(crate) fn counts(&self) -> Arc<PartCounts> {
        self.counts.clone()
    }

    fn counted(self) -> Self {
        self.publish_counts();
        self
    }

    /// Recounts the active parts per partition from `state` and publishes them.
    fn publish_counts(&self) {
        let mut counts: HashMap<PartitionKey, PartitionParts> = HashMap::new();
        for file in self.state.log_data().iter() {
            let key = self.partition_of_file(&file);
            let entry = counts.entry(key.clone()).or_insert(PartitionParts {
                partition: key,
                parts: 0,
                rows: 0,
                bytes: 0,
            });
            entry.parts += 1;
            entry.rows += file.num_records().unwrap_or(0) as u64;
            entry.bytes += u64::try_from(file.size()).unwrap_or(0);
        }
        match self.counts.write() {
            Ok(mut guard) => *guard = counts,
            Err(poisoned) => *poisoned.into_inner() = counts,
        }
    }

    /// Moves the published counts by a compaction's swap (`inputs`, of one partition, became
    /// one file of `bytes_out` bytes; the rows stay), for a state left behind it.
    fn count_swap(&self, inputs: &[LiveFile], bytes_out: u64) {
        let Some(partition) = inputs
            .first()
            .map(|input| self.partition_of(&input.partition_values))
        else {
            return;
        };
        let bytes_in: u64 = inputs.iter().map(|input| input.bytes).sum();
        let mut counts = match self.counts.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(entry) = counts.get_mut(&partition) {
            entry.parts = entry.parts.saturating_sub(inputs.len() as u64) + 1;
            entry.bytes = entry.bytes.saturating_sub(bytes_in) + bytes_out;
        }
    }

    async fn version_of(&self, app: &str) -> Result<Option<u64>, SinkError> {
        let version = self
            .state
            .transaction_version(self.log_store.as_ref(), app)
            .await
            .map_err(|e| delta_error(&self.location, "read", e))?;
        Ok(version.and_then(|v| u64::try_from(v).ok()))
    }

    /// The partition of a file in the log. An unpartitioned table's files have no partition
    /// values to read: building each one's empty map from the log costs more than the rest of
    /// a pass over the files.
    fn partition_of_file(&self, file: &LogicalFileView) -> PartitionKey {
        if self.partition_columns.is_empty() {
            return PartitionKey::Whole;
        }
        self.partition_of(&file.partition_values_map())
    }

    /// The partition a file's partition values stand for.
    pub(crate) fn partition_of(&self, values: &HashMap<String, Option<String>>) -> PartitionKey {
        match self.partition_columns.first() {
            None => PartitionKey::Whole,
            Some(column) => match values.get(column) {
                Some(Some(value)) => PartitionKey::Value(value.clone()),
                _ => PartitionKey::Null,
            },
        }
    }
}

/// What a commit does with the table's state once its entry is in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Brings it to the new version: the next commit builds on it.
    Update,
    /// Leaves it behind, for the next use to read the log again: for a commit after which the
    /// state may never be read (a compaction pass's last).
    Defer,
}

/// Tries an append gets again after a conflict, each on the version that beat the last.
const APPEND_RETRIES: usize = 3;

/// The table property naming how a table maps its column names to the files' (Delta's
/// column mapping): sluice writes only tables that do not.
const COLUMN_MAPPING_KEY: &str = "delta.columnMapping.mode";

/// Tries a schema change gets beyond one per change, for commits lost to other writers'.
const SCHEMA_RETRIES: usize = 3;

/// The application id that guards compaction commits.
const COMPACTOR_APP: &str = "sluice/compactor";

/// The Delta `add` action for a flush's file of new rows, just written into `partition_values`.
pub(crate) fn add_action(
    part: &WrittenPart,
    partition_values: HashMap<String, Option<String>>,
) -> Add {
    Add {
        path: part.relative.clone(),
        partition_values,
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

/// The Delta `add` action for a compaction's merged file of `inputs` (one partition's, in the
/// order the merge wrote them): no data change, as it rewrites rows the table holds, and the
/// time its newest input landed, not the time of the merge. The landing order
/// ([`super::files::landing_order`]) goes by that time, so a merged file keeps its inputs'
/// place among the table's files, and a later merge of merged files writes their rows in the
/// order they came, whatever order a pass committed its merges in (most inputs first) or
/// however long a merge took while new parts landed.
pub(crate) fn merged_add_action(part: &WrittenPart, inputs: &[LiveFile]) -> Add {
    let partition_values = inputs
        .first()
        .map(|f| f.partition_values.clone())
        .unwrap_or_default();
    let mut add = add_action(part, partition_values);
    add.data_change = false;
    if let Some(newest) = inputs.iter().map(|f| f.added_ms).max() {
        add.modification_time = newest;
    }
    add
}

/// The partition values of a file of `partition`, as the log records them.
pub(crate) fn partition_values(
    columns: &[String],
    partition: &PartitionKey,
) -> HashMap<String, Option<String>> {
    columns
        .iter()
        .map(|column| {
            let value = match partition {
                PartitionKey::Value(v) => Some(v.clone()),
                PartitionKey::Null | PartitionKey::Whole => None,
            };
            (column.clone(), value)
        })
        .collect()
}

/// The application transaction id of `writer`'s flushes into `partition`.
pub(crate) fn app_id(writer: &str, partition: &PartitionKey) -> String {
    format!("sluice/{writer}/{}", ledger::key(partition))
}

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

fn commit_file(version: u64) -> String {
    format!("{version:020}.json")
}

/// Fsyncs `files` in the log folder (those that exist), then the folder.
fn sync_log(log_dir: &Path, files: &[String]) -> std::io::Result<()> {
    for name in files {
        match std::fs::File::open(log_dir.join(name)) {
            Ok(file) => file.sync_all()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    fsio::sync_dir(log_dir)
}

/// How an existing table's schema differs from the layout's columns, in the ways a metadata
/// commit can change: columns to add, and columns to make nullable.
#[derive(Debug, Default, PartialEq)]
struct SchemaChange {
    add: Vec<StructField>,
    relax: Vec<String>,
}

impl SchemaChange {
    fn is_empty(&self) -> bool {
        self.add.is_empty() && self.relax.is_empty()
    }

    /// The next commit of this change to `current`: the schema after it and the operation it
    /// records (every added column at once, or one column made nullable); `None` when there is
    /// nothing to change.
    fn next(
        &self,
        current: &StructType,
    ) -> Result<Option<(StructType, DeltaOperation)>, SinkError> {
        let (fields, operation): (Vec<StructField>, _) = if !self.add.is_empty() {
            let fields = current.fields().chain(&self.add).cloned().collect();
            let operation = DeltaOperation::AddColumn {
                fields: self.add.clone(),
            };
            (fields, operation)
        } else if let Some(name) = self.relax.first() {
            let mut column = None;
            let fields = current
                .fields()
                .map(|field| {
                    let mut field = field.clone();
                    if field.name() == name {
                        field.nullable = true;
                        column = Some(field.clone());
                    }
                    field
                })
                .collect();
            let Some(column) = column else {
                return Ok(None);
            };
            (fields, DeltaOperation::DropColumnNotNull { column })
        } else {
            return Ok(None);
        };
        let schema = StructType::try_new(fields).map_err(|e| {
            SinkError::permanent(
                SINK,
                format!("cannot change the table's schema ({self}): {e}"),
            )
        })?;
        Ok(Some((schema, operation)))
    }
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let quoted = |names: &mut dyn Iterator<Item = &str>| {
            names
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.add.is_empty() {
            let names = quoted(&mut self.add.iter().map(|f| f.name().as_str()));
            parts.push(format!("add {names}"));
        }
        if !self.relax.is_empty() {
            let names = quoted(&mut self.relax.iter().map(String::as_str));
            parts.push(format!("make {names} nullable"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A table's schema and partition columns, as its log holds them.
struct Current {
    schema: Arc<StructType>,
    partition_columns: Vec<String>,
}

impl Current {
    fn of(state: &DeltaTableState) -> Self {
        Self {
            schema: state.schema(),
            partition_columns: state.metadata().partition_columns().to_vec(),
        }
    }
}

/// What it takes to bring the table's schema (`current`) to the layout's `fields` and
/// `partition_columns`. A difference no commit can make without rewriting the rows the table
/// holds is refused, naming it: writing would make files its readers cannot read.
fn schema_change(
    dir: &LakeRoot,
    current: &Current,
    fields: &[StructField],
    partition_columns: &[String],
) -> Result<SchemaChange, SinkError> {
    let mismatch = |what: String| {
        SinkError::permanent(
            SINK,
            format!("the Delta table at {dir} does not match the table's layout: {what}"),
        )
    };
    let existing = &current.partition_columns;
    if existing != partition_columns {
        return Err(mismatch(format!(
            "it is partitioned by {existing:?}, the layout says {partition_columns:?}"
        )));
    }
    let schema = &current.schema;
    let mut change = SchemaChange::default();
    for field in fields {
        let name = field.name();
        match schema.field(name) {
            Some(existing) if existing.data_type() != field.data_type() => {
                return Err(mismatch(format!(
                    "column '{name}' is {} there, {} here",
                    existing.data_type(),
                    field.data_type()
                )));
            }
            Some(existing) => {
                if !existing.is_nullable() && field.is_nullable() {
                    change.relax.push(name.clone());
                }
            }
            None => {
                if let Some(other) = schema
                    .fields()
                    .find(|f| f.name().eq_ignore_ascii_case(name))
                {
                    return Err(mismatch(format!(
                        "its column '{}' is '{name}' here, and a Delta table takes names that \
                         differ only in case for one column",
                        other.name()
                    )));
                }
                if !field.is_nullable() {
                    return Err(mismatch(format!(
                        "it has no column '{name}', and the rows it holds have no value for \
                         it: declare the column nullable to add it"
                    )));
                }
                change.add.push(field.clone());
            }
        }
    }
    Ok(change)
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

fn delta_error(location: &LakeRoot, action: &str, e: DeltaTableError) -> SinkError {
    // Conflicts, I/O and object store failures pass; the log itself decides nothing permanent
    // about a batch, and a stalled table shows in /health.
    SinkError::retriable(
        SINK,
        format!("cannot {action} the Delta log of {location}: {e}"),
    )
    .with_source(e)
}

fn io_error(path: &Path, e: std::io::Error) -> SinkError {
    SinkError::retriable(SINK, format!("cannot sync {}: {e}", path.display())).with_source(e)
}

#[cfg(test)]
mod tests {
    use deltalake_core::kernel::{DataType, PrimitiveType};

    use super::*;

    fn field(name: &str, ty: PrimitiveType, nullable: bool) -> StructField {
        StructField::new(name, DataType::Primitive(ty), nullable)
    }

    /// A table of `id` (a long, not null) and `name` (a string, nullable), unpartitioned.
    fn current() -> Current {
        let fields = [
            field("id", PrimitiveType::Long, false),
            field("name", PrimitiveType::String, true),
        ];
        Current {
            schema: Arc::new(StructType::try_new(fields).unwrap()),
            partition_columns: vec![],
        }
    }

    fn change(fields: &[StructField], partitions: &[&str]) -> Result<SchemaChange, String> {
        let dir = LakeRoot::Folder("/lake/t".into());
        let partitions: Vec<String> = partitions.iter().map(|p| (*p).to_owned()).collect();
        schema_change(&dir, &current(), fields, &partitions).map_err(|e| e.to_string())
    }

    #[test]
    fn new_nullable_columns_are_added_and_relaxed_ones_made_nullable() {
        let (id, name) = (
            field("id", PrimitiveType::Long, true),
            field("name", PrimitiveType::String, true),
        );
        let note = field("note", PrimitiveType::String, true);
        // The same columns, one dropped, or one made required: nothing to commit.
        let same = [field("id", PrimitiveType::Long, false), name.clone()];
        assert_eq!(change(&same, &[]).unwrap(), SchemaChange::default());
        assert_eq!(change(&same[..1], &[]).unwrap(), SchemaChange::default());
        let required = [same[0].clone(), field("name", PrimitiveType::String, false)];
        assert_eq!(change(&required, &[]).unwrap(), SchemaChange::default());

        let wanted = [id, name, note.clone()];
        let planned = change(&wanted, &[]).unwrap();
        assert_eq!(planned.add, std::slice::from_ref(&note));
        assert_eq!(planned.relax, ["id"]);
        assert_eq!(planned.to_string(), "add 'note', make 'id' nullable");
        // The additions commit first, then each relaxed column.
        let (schema, operation) = planned.next(&current().schema).unwrap().unwrap();
        assert!(matches!(operation, DeltaOperation::AddColumn { fields } if fields == [note]));
        let names: Vec<&String> = schema.fields().map(StructField::name).collect();
        assert_eq!(names, ["id", "name", "note"]);
        let relax_only = SchemaChange {
            add: vec![],
            relax: vec!["id".into()],
        };
        let (schema, operation) = relax_only.next(&current().schema).unwrap().unwrap();
        assert!(
            matches!(operation, DeltaOperation::DropColumnNotNull { column } if column.name() == "id")
        );
        assert!(schema.fields().all(StructField::is_nullable));
        assert!(
            SchemaChange::default()
                .next(&current().schema)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn changes_that_would_need_the_rows_rewritten_are_refused_by_name() {
        let id = field("id", PrimitiveType::Long, false);
        let cases = [
            (
                vec![id.clone(), field("tag", PrimitiveType::String, false)],
                vec![],
                "it has no column 'tag', and the rows it holds have no value for it",
            ),
            (
                vec![field("id", PrimitiveType::String, false)],
                vec![],
                "column 'id' is long there, string here",
            ),
            (
                vec![id.clone(), field("Name", PrimitiveType::String, true)],
                vec![],
                "its column 'name' is 'Name' here",
            ),
            (
                vec![id.clone()],
                vec!["id"],
                "it is partitioned by [], the layout says [\"id\"]",
            ),
        ];
        for (fields, partitions, expected) in cases {
            let refused = change(&fields, &partitions).unwrap_err();
            assert!(
                refused.contains("the Delta table at /lake/t does not match the table's layout")
                    && refused.contains(expected),
                "{refused}"
            );
        }
    }
}
