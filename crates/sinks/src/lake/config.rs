//! The lake sink's settings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// zstd level 3: zstd's own default, most of the size win of higher levels at a fraction of the
/// CPU (seed 000's layouts were written with pyarrow's zstd default, also 3).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Rows per Parquet row group: parquet's own default, so a 1,000,000-row flush is one row group
/// and readers can still skip groups by statistics in larger parts.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// Where and how the lake writes parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LakeConfig {
    /// The root folder; each table is a folder under it.
    pub root: PathBuf,
    /// zstd compression level (1 to 22).
    #[serde(default = "default_zstd_level")]
    pub zstd_level: i32,
    /// Rows per row group.
    #[serde(default = "default_row_group_rows")]
    pub row_group_rows: usize,
}

fn default_zstd_level() -> i32 {
    DEFAULT_ZSTD_LEVEL
}

fn default_row_group_rows() -> usize {
    DEFAULT_ROW_GROUP_ROWS
}

impl LakeConfig {
    /// The defaults, rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            zstd_level: DEFAULT_ZSTD_LEVEL,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
        }
    }
}
