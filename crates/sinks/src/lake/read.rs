//! Reading a lake table's current state from outside the sink: the files its log holds now.
//! For `sluice parts`, the lab's exactly-once checks and tests; a reader never lists folders,
//! which also hold files no commit references (an interrupted flush, a compaction's inputs
//! awaiting deletion).

use std::collections::HashMap;
use std::path::Path;

use deltalake_core::DeltaTableError;
use deltalake_core::table::state::DeltaTableState;
use sluice_core::compaction::{CompactionPolicy, Merge, PartSize};
use sluice_core::{SinkError, TableDef};

use super::config::{LakeConfig, LakeRoot};
use super::delta::existing_table;
use super::parallel::on_every_core;
use super::storage::TableFiles;

const SINK: &str = "lake";

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
    /// input landed (`delta.rs`'s `merged_add_action`), so it keeps its inputs' place.
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

/// A lake table opened to read: the files its log holds at its newest version.
pub struct LakeTable {
    config: LakeConfig,
    files: TableFiles,
    live: Vec<LiveFile>,
}

impl LakeTable {
    /// Opens table `name` of the lake `config` describes; `None` when there is no Delta table
    /// there.
    pub async fn open(config: &LakeConfig, name: &str) -> Result<Option<Self>, SinkError> {
        let location = config.root.table(name);
        let Some(mut table) = existing_table(config, &location).await? else {
            return Ok(None);
        };
        let failed = |e: DeltaTableError| {
            SinkError::retriable(
                SINK,
                format!("cannot read the Delta log of {location}: {e}"),
            )
        };
        table.load().await.map_err(failed)?;
        let mut live = files_of(table.snapshot().map_err(failed)?);
        live.sort_by(|a, b| a.relative.cmp(&b.relative));
        let store = table.log_store().object_store(None);
        Ok(Some(Self {
            config: config.clone(),
            files: TableFiles::new(&config.root, &location, store),
            live,
        }))
    }

    /// The files the table holds, by path.
    pub fn live_files(&self) -> &[LiveFile] {
        &self.live
    }

    /// The merges a compaction pass would make of `files` (one partition's) now, as the
    /// compactor plans them for `table` (reading a sample of a backlog's small parts to
    /// estimate their merged size), packed in the order the files landed as the compactor
    /// packs them: each merge's inputs index `files`, in that order. Blocks: call it off the
    /// runtime's worker threads.
    pub fn plan(
        &self,
        table: &TableDef,
        policy: &CompactionPolicy,
        files: &[LiveFile],
    ) -> Vec<Merge> {
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by(|&a, &b| landing_order(&files[a], &files[b]));
        let landed: Vec<LiveFile> = order.iter().map(|&i| files[i].clone()).collect();
        let mut merges = super::shrink::plan(&self.config, table, &self.files, policy, &landed);
        for input in merges.iter_mut().flat_map(|m| m.inputs.iter_mut()) {
            *input = order[*input];
        }
        merges
    }

    /// The footer size of each of `files` (metadata plus the 8-byte tail), read from their
    /// tails, several at a time. Blocks: call it off the runtime's worker threads.
    pub fn footer_bytes(&self, files: &[LiveFile]) -> Result<Vec<u64>, SinkError> {
        on_every_core(files, |file| {
            Ok(vec![self.files.footer_bytes(&file.relative, file.bytes)?])
        })
    }
}

/// The files the Delta table in the folder `dir` holds at its newest version; none when `dir`
/// holds no Delta table.
pub async fn live_files(dir: &Path) -> Result<Vec<LiveFile>, SinkError> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(Vec::new());
    };
    let config = LakeConfig {
        root: LakeRoot::Folder(parent.to_owned()),
        ..LakeConfig::new(parent)
    };
    Ok(LakeTable::open(&config, &name.to_string_lossy())
        .await?
        .map(|table| table.live)
        .unwrap_or_default())
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

/// The bytes of a Parquet file's footer: its metadata plus the 8-byte tail (metadata length
/// and magic), read from the tail alone.
pub fn footer_bytes(path: &Path) -> std::io::Result<u64> {
    footer_len(tail(path)?).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a Parquet file", path.display()),
        )
    })
}

/// The last 8 bytes of a local file.
pub(crate) fn tail(path: &Path) -> std::io::Result<[u8; 8]> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = crate::fsio::open_to_read(path)?;
    file.seek(SeekFrom::End(-8))?;
    let mut tail = [0u8; 8];
    file.read_exact(&mut tail)?;
    Ok(tail)
}

/// The footer size a Parquet file's last 8 bytes give (metadata length plus the 8 bytes);
/// `None` when they do not end with the Parquet magic.
pub(crate) fn footer_len(tail: [u8; 8]) -> Option<u64> {
    (&tail[4..] == b"PAR1")
        .then(|| u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]])) + 8)
}

/// [`live_files`] for callers without an async runtime (or inside one they may not block):
/// runs on a thread of its own.
pub fn live_files_blocking(dir: &Path) -> Result<Vec<LiveFile>, SinkError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        SinkError::retriable(SINK, format!("cannot start a runtime: {e}"))
                    })?
                    .block_on(live_files(dir))
            })
            .join()
            .unwrap_or_else(|_| Err(SinkError::retriable(SINK, "the log reader panicked")))
    })
}
