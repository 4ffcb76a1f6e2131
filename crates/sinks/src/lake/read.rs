//! Reading a lake table's current state from outside the sink: the files its log holds now.
//! For `sluice parts`, the lab's exactly-once checks and tests; a reader never lists folders,
//! which also hold files no commit references (an interrupted flush, a compaction's inputs
//! awaiting deletion).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use deltalake_core::table::state::DeltaTableState;
use deltalake_core::{DeltaTableBuilder, DeltaTableError};
use sluice_core::SinkError;
use sluice_core::compaction::PartSize;

use super::delta::{DELTA_LOG_DIR, table_url};

const SINK: &str = "lake";

/// One data file of a table, as its log describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Where the file is.
    pub path: PathBuf,
    /// Its path from the table's folder, as the log names it (URI-decoded).
    pub relative: String,
    /// Its partition values, by partition column (`None`: null).
    pub partition_values: HashMap<String, Option<String>>,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its row count, when its statistics say.
    pub rows: Option<u64>,
}

/// The files the Delta table in `dir` holds at its newest version; none when `dir` holds no
/// Delta table.
pub async fn live_files(dir: &Path) -> Result<Vec<LiveFile>, SinkError> {
    if !dir.join(DELTA_LOG_DIR).is_dir() {
        return Ok(Vec::new());
    }
    let failed = |e: DeltaTableError| {
        SinkError::retriable(
            SINK,
            format!("cannot read the Delta log of {}: {e}", dir.display()),
        )
    };
    let table = DeltaTableBuilder::from_url(table_url(dir)?)
        .map_err(failed)?
        .load()
        .await
        .map_err(failed)?;
    let state = table.snapshot().map_err(failed)?;
    let mut files = files_of(dir, state);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The files of a table state in `dir`.
pub(crate) fn files_of(dir: &Path, state: &DeltaTableState) -> Vec<LiveFile> {
    state
        .log_data()
        .iter()
        .map(|file| {
            let relative = file.path().into_owned();
            LiveFile {
                path: dir.join(&relative),
                relative,
                partition_values: file.partition_values_map(),
                bytes: u64::try_from(file.size()).unwrap_or(0),
                rows: file.num_records().map(|n| n as u64),
            }
        })
        .collect()
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
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::End(-8))?;
    let mut tail = [0u8; 8];
    file.read_exact(&mut tail)?;
    if &tail[4..] != b"PAR1" {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a Parquet file", path.display()),
        ));
    }
    let metadata = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    Ok(u64::from(metadata) + 8)
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
