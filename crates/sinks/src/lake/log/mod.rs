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

//!
//! # Layout
//!
//! - `mod.rs`: [`TableLog`], one table's log as this process last saw it.
//! - `open.rs`: opening a table's log, creating the table when there is none.
//! - `evolve.rs`: bringing an existing table's schema to the layout, one metadata commit per
//!   change.
//! - `commit.rs`: commits (a flush's file, a compaction's swap), their identity and
//!   durability, and reading back what the log holds.
//! - `counts.rs`: active parts per partition, published for the insert path's throttle.

mod commit;
mod counts;
mod evolve;
mod open;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deltalake_core::DeltaTableError;
use deltalake_core::kernel::StructField;
use deltalake_core::logstore::LogStoreRef;
use deltalake_core::table::state::DeltaTableState;
use sluice_core::{PartitionKey, PartitionParts, SinkError};

use super::config::LakeRoot;
use super::storage::TableFiles;

use commit::*;
pub(crate) use commit::{Then, add_action, merged_add_action, partition_values};
use evolve::*;
pub(crate) use open::{check_names, existing_table, table_exists};

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
    /// Commits that lost a race to another writer and were tried again on a newer version,
    /// since the log was opened.
    lost_races: u64,
    /// Commits whose answer was lost after the store kept them, found in the log, since the
    /// log was opened.
    answers_lost: u64,
}

/// Active parts per partition of one table, readable without the log's lock.
pub(crate) type PartCounts = std::sync::RwLock<HashMap<PartitionKey, PartitionParts>>;

impl TableLog {
    /// Whether the last commit failed in a way that may have written it anyway.
    pub(crate) fn is_uncertain(&self) -> bool {
        self.uncertain
    }

    /// Commits that lost a race to another writer and were tried again, since the log was
    /// opened.
    pub(crate) fn lost_races(&self) -> u64 {
        self.lost_races
    }

    /// Commits whose answer was lost after the store kept them, found in the log since it was
    /// opened.
    pub(crate) fn answers_lost(&self) -> u64 {
        self.answers_lost
    }

    /// The partition columns, in log order.
    pub(crate) fn partition_columns(&self) -> &[String] {
        &self.partition_columns
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
}

pub(super) fn delta_error(location: &LakeRoot, action: &str, e: DeltaTableError) -> SinkError {
    // Conflicts, I/O and object store failures pass; the log itself decides nothing permanent
    // about a batch, and a stalled table shows in /health.
    SinkError::retriable(
        SINK,
        format!("cannot {action} the Delta log of {location}: {e}"),
    )
    .with_source(e)
}

pub(super) fn io_error(path: &Path, e: std::io::Error) -> SinkError {
    SinkError::retriable(SINK, format!("cannot sync {}: {e}", path.display())).with_source(e)
}
