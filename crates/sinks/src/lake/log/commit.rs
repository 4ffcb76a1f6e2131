//! Commits: a flush's file with its identity, a compaction's swap, durably; and reading back
//! what the log holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use deltalake_core::DeltaTableError;
use deltalake_core::checkpoints::cleanup_expired_logs_for;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, Add, Remove, Transaction};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::table::config::TablePropertiesExt;
use sluice_core::{PartitionKey, SinkError};

use crate::lake::files::{LiveFile, files_of};
use crate::lake::part::WrittenPart;
use crate::{fsio, ledger};

use super::*;

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
pub(super) const APPEND_RETRIES: usize = 3;

/// The application id that guards compaction commits.
pub(super) const COMPACTOR_APP: &str = "sluice/compactor";

/// The `commitInfo` field that names each commit, so that one whose answer was lost can be
/// found in the log ([`TableLog::settle_failed_commit`]). Readers ignore fields they do not
/// know in `commitInfo`.
pub(super) const COMMIT_ID_KEY: &str = "sluiceCommitId";

/// Whether a log entry's `commitInfo` carries `commit_id`.
fn carries_commit_id(entry: &[u8], commit_id: &str) -> bool {
    entry
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
        .any(|action| action["commitInfo"][COMMIT_ID_KEY] == commit_id)
}

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
/// ([`crate::lake::files::landing_order`]) goes by that time, so a merged file keeps its inputs'
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

pub(super) fn commit_file(version: u64) -> String {
    format!("{version:020}.json")
}

/// Fsyncs `files` in the log folder (those that exist), then the folder.
pub(super) fn sync_log(log_dir: &Path, files: &[String]) -> std::io::Result<()> {
    for name in files {
        match std::fs::File::open(log_dir.join(name)) {
            Ok(file) => file.sync_all()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    fsio::sync_dir(log_dir)
}

impl TableLog {
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
    pub(super) async fn append(
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
                    self.lost_races += 1;
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
    pub(super) async fn commit(
        &mut self,
        properties: CommitProperties,
        actions: Vec<Action>,
        operation: DeltaOperation,
        then: Then,
    ) -> Result<(), SinkError> {
        if self.behind {
            self.refresh().await?;
        }
        let read_version = self.state.version();
        let commit_id = uuid::Uuid::now_v7().to_string();
        let properties = properties.with_metadata([(
            COMMIT_ID_KEY.to_owned(),
            serde_json::Value::from(commit_id.as_str()),
        )]);
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
            Err(e) => return self.settle_failed_commit(e, read_version, &commit_id).await,
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
                    // deltalake-core tried each newer version another writer had taken.
                    self.lost_races += finalized.metrics.num_retries;
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
        let mut files = vec![commit_file(version)];
        // A checkpoint a failed hook may have left is made durable too (or a crash could leave a
        // torn one that readers would load).
        if checkpoint || hook_failed {
            files.push(format!("{version:020}.checkpoint.parquet"));
            files.push("_last_checkpoint".to_owned());
        }
        self.sync_entries(&files)?;
        if checkpoint {
            self.clean_log(version).await;
        }
        Ok(())
    }

    /// What a failed commit did. A conflict usually means another writer took the version and
    /// nothing of this commit was written; any other error may have written it.
    ///
    /// A conflict can also be this commit itself: an object store's client retries a PUT whose
    /// answer was lost after the store kept it (a 5xx, a dropped response), the retry is refused
    /// because the entry exists, and deltalake-core checks the commit against its own entry
    /// and reports a conflict. Tried again, a flush would land twice; taken for a lost race, a
    /// merge would delete the file its swap just made live. So on a conflict the log after
    /// `read_version` is searched for this commit's id: found, the commit landed.
    async fn settle_failed_commit(
        &mut self,
        error: DeltaTableError,
        read_version: u64,
        commit_id: &str,
    ) -> Result<(), SinkError> {
        let conflict = matches!(
            &error,
            DeltaTableError::Transaction {
                source: TransactionError::CommitConflict(_)
            }
        );
        let failed = delta_error(&self.location, "commit to", error);
        if !conflict {
            self.uncertain = true;
            return Err(failed);
        }
        let found = match self.find_commit(read_version, commit_id).await {
            Ok(found) => found,
            Err(e) => {
                self.uncertain = true;
                return Err(e);
            }
        };
        self.uncertain = false;
        let Some(version) = found else {
            return Err(failed);
        };
        self.answers_lost += 1;
        tracing::warn!(table = %self.location, version, "a commit's answer was lost; the log holds it");
        self.sync_entries(&[commit_file(version)])
    }

    /// Makes `files` of the log durable, in a table in a folder (a PUT to an object store that
    /// returned is durable already). A failure leaves the commit uncertain.
    fn sync_entries(&mut self, files: &[String]) -> Result<(), SinkError> {
        let Some(dir) = self.location.folder() else {
            return Ok(());
        };
        let log_dir = dir.join(DELTA_LOG_DIR);
        sync_log(&log_dir, files).map_err(|e| {
            self.uncertain = true;
            io_error(&log_dir, e)
        })
    }

    /// The version, after `after`, whose entry carries `commit_id`, with the state brought to
    /// the log's newest version.
    async fn find_commit(&mut self, after: u64, commit_id: &str) -> Result<Option<u64>, SinkError> {
        self.refresh().await?;
        for version in after + 1..=self.state.version() {
            let entry = self
                .log_store
                .read_commit_entry(version)
                .await
                .map_err(|e| delta_error(&self.location, "read", e))?;
            if entry.is_some_and(|entry| carries_commit_id(&entry, commit_id)) {
                return Ok(Some(version));
            }
        }
        Ok(None)
    }

    /// Removes log entries older than the retention that the newest checkpoint covers. A
    /// failure only leaves the log longer; it is logged, not returned.
    pub(super) async fn clean_log(&self, version: u64) {
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

    pub(super) async fn version_of(&self, app: &str) -> Result<Option<u64>, SinkError> {
        let version = self
            .state
            .transaction_version(self.log_store.as_ref(), app)
            .await
            .map_err(|e| delta_error(&self.location, "read", e))?;
        Ok(version.and_then(|v| u64::try_from(v).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_is_found_by_the_id_in_its_commit_info_only() {
        let entry = concat!(
            r#"{"add":{"path":"part-1.parquet","tags":{"sluiceCommitId":"c-1"}}}"#,
            "\n",
            r#"{"commitInfo":{"timestamp":1,"operation":"WRITE","sluiceCommitId":"c-2"}}"#,
            "\n",
        );
        assert!(carries_commit_id(entry.as_bytes(), "c-2"));
        assert!(!carries_commit_id(entry.as_bytes(), "c-1"));
        assert!(!carries_commit_id(entry.as_bytes(), "c-3"));
        assert!(!carries_commit_id(b"not json\n", "c-2"));
    }
}
