//! The lake sink's settings.

use std::path::PathBuf;
use std::time::Duration;

/// zstd level 3: zstd's own default, most of the size win of higher levels at a fraction of the
/// CPU (seed 000's layouts were written with pyarrow's zstd default, also 3).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Rows per Parquet row group: parquet's own default, so a 1,000,000-row flush is one row group
/// and readers can still skip groups by statistics in larger parts.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// A Delta checkpoint every 20 commits: every commit lists the log folder, and a checkpoint
/// lets the entries before it go (delta-rs's own default of 100 let commits slow to 200 ms).
pub const DEFAULT_CHECKPOINT_INTERVAL: u64 = 20;

/// Log entries older than this and covered by a checkpoint are removed. Ten minutes keeps the
/// log short at one commit a second per partition; time travel further back is not a goal of
/// an ingest gateway (a Delta reader needs the log only from the last checkpoint on).
pub const DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(10 * 60);

/// Files a compaction replaced are deleted this long after the swap: a reader that planned its
/// scan on the version before it has this long to read them. Short, for the embedded setup;
/// raise it when readers run long queries.
pub const DEFAULT_FILE_RETENTION: Duration = Duration::from_secs(5 * 60);

/// Where and how the lake writes parts.
#[derive(Debug, Clone, PartialEq)]
pub struct LakeConfig {
    /// The root folder; each table is a Delta table in a folder under it.
    pub root: PathBuf,
    /// The folder holding this writer's identity (`_sluice/writer-id`): the data directory,
    /// next to the write-ahead log whose sequence numbers the identity qualifies. Several
    /// writers may share `root`; each needs its own `state_dir`.
    pub state_dir: PathBuf,
    /// zstd compression level (1 to 22).
    pub zstd_level: i32,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// Commits between Delta checkpoints, for tables this sink creates.
    pub checkpoint_interval: u64,
    /// How long log entries covered by a checkpoint are kept, for tables this sink creates.
    pub log_retention: Duration,
    /// How long files a compaction replaced stay on disk.
    pub file_retention: Duration,
}

impl LakeConfig {
    /// The defaults, rooted at `root`, with the writer's identity kept there too.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            state_dir: root.clone(),
            root,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            log_retention: DEFAULT_LOG_RETENTION,
            file_retention: DEFAULT_FILE_RETENTION,
        }
    }
}
