//! The files a table's log holds: what each is, and the order their rows landed in.

use std::collections::HashMap;

use deltalake_core::table::state::DeltaTableState;
use sluice_core::compaction::PartSize;

/// One data file of a table, as its log describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Its path from the table's folder, as the log names it (URI-decoded).
    pub relative: String,
    /// Its partition values, by partition column (`None`: null).
    pub partition_values: HashMap<String, Option<String>>,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its row count, when its statistics say.
    pub rows: Option<u64>,
    /// When its rows landed: its log entry's `modificationTime`, in milliseconds since the
    /// epoch. A flush's file takes the time it was written; a merged file the time its newest
    /// input landed (`log/commit.rs`'s `merged_add_action`), so it keeps its inputs' place.
    pub added_ms: i64,
}

/// `files` in the order they were added to the table, oldest first: by their log entries' times,
/// then by name.
pub fn in_landing_order(mut files: Vec<LiveFile>) -> Vec<LiveFile> {
    files.sort_by(landing_order);
    files
}

/// Which of two files' rows landed first: by the time their log entries give (for a merged
/// file, its newest input's), then by name (a flush's file names its sequence range, then a
/// UUID v7, and both grow with time). The log lists files in no order the protocol promises
/// (deltalake-core gives the newest commit's first). The compaction policy packs a partition's
/// parts in the order it is given them, and a merged file is written in the order of its
/// inputs, so given this order a table without a sort key keeps its rows in the order they
/// came: each merged file covers a span of arrival, after the one before it, and so does each
/// of its row groups and pages, which their statistics prune by. (Read in size order, as the
/// policy used to pack, the compaction lab's merged file had each of its row groups span the
/// file's whole range of timestamps; in this order, each covers its own share of it.)
pub(crate) fn landing_order(a: &LiveFile, b: &LiveFile) -> std::cmp::Ordering {
    (a.added_ms, &a.relative).cmp(&(b.added_ms, &b.relative))
}

/// The files of a table state.
pub(crate) fn files_of(state: &DeltaTableState) -> Vec<LiveFile> {
    // An unpartitioned table's files have no partition values: building each one's empty map
    // from the log would cost more than the rest of this.
    let partitioned = !state.metadata().partition_columns().is_empty();
    let log = state.log_data();
    // Sized up front: grown as it filled, the list (about 100 bytes a file) was copied into
    // fresh memory at every doubling, a large share of the time of building it for a table of
    // many files.
    let mut files = Vec::with_capacity(log.num_files());
    files.extend(log.iter().map(|file| LiveFile {
        relative: file.path().into_owned(),
        partition_values: if partitioned {
            file.partition_values_map()
        } else {
            HashMap::new()
        },
        bytes: u64::try_from(file.size()).unwrap_or(0),
        rows: file.num_records().map(|n| n as u64),
        added_ms: file.modification_time(),
    }));
    files
}

/// The files as the compaction policy sees them.
pub fn part_sizes(files: &[LiveFile]) -> Vec<PartSize> {
    files
        .iter()
        .map(|f| PartSize {
            bytes: f.bytes,
            rows: f.rows.unwrap_or(0),
        })
        .collect()
}
