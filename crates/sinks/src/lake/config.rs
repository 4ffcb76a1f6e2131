//! The lake sink's settings, and where its tables live.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

/// zstd level 1, the default of pyarrow and ClickHouse. On the compaction lab's events it wrote
/// smaller files than level 3, in less time.
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;

/// Parts whose rows take less Arrow memory than this are compressed with LZ4 instead of zstd.
/// A small part lives until compaction rewrites it (in zstd, once large), and reading it back
/// is then the cost that matters: parquet-rs builds a zstd decoder context for every column
/// chunk it reads, which costs more than decoding a column of a few hundred rows (the same
/// rule as ClickHouse's `<compression>` cases, LZ4 below `min_part_size`, zstd above).
pub const DEFAULT_LZ4_BELOW: u64 = 4 * 1024 * 1024;

/// Rows per Parquet row group: parquet's own default, so a 1,000,000-row flush is one row group
/// and readers can still skip groups by statistics in larger parts.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// A Delta checkpoint every 20 commits: every commit lists the log folder, and a checkpoint
/// lets the entries before it go (delta-rs's own default of 100 let commits slow down as the
/// entries piled up).
pub const DEFAULT_CHECKPOINT_INTERVAL: u64 = 20;

/// Log entries older than this and covered by a checkpoint are removed. Ten minutes keeps the
/// log short at one commit a second per partition; time travel further back is not a goal of
/// an ingest gateway (a Delta reader needs the log only from the last checkpoint on).
pub const DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(10 * 60);

/// Files a compaction replaced are deleted this long after the swap: a reader that planned its
/// scan on the version before it has this long to read them. Short, for the embedded setup;
/// raise it when readers run long queries.
pub const DEFAULT_FILE_RETENTION: Duration = Duration::from_secs(5 * 60);

/// Where a lake's tables (or one table) live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LakeRoot {
    /// A local folder: files are fsynced and renamed into place, log entries fsynced.
    Folder(PathBuf),
    /// An object store: `s3://bucket/prefix/`, `gs://bucket/prefix/`, `az://container/prefix/`
    /// (also `s3a`, `abfs`, `abfss`, `azure`, `adl`). Each file is one PUT; each commit is a
    /// put-if-absent of the log entry (S3: `If-None-Match`, which AWS S3, MinIO and R2 honour).
    /// Always ends with `/`.
    Url(Url),
}

/// The URL schemes of object stores a lake can live in.
pub(crate) const OBJECT_STORE_SCHEMES: &[&str] =
    &["s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl"];

impl LakeRoot {
    /// A folder path, a `file://` URL (a folder too) or an object-store URL.
    pub fn parse(text: &str) -> Result<Self, String> {
        if !text.contains("://") {
            return Ok(Self::Folder(PathBuf::from(text)));
        }
        let url = Url::parse(text).map_err(|e| format!("'{text}' is not a URL: {e}"))?;
        if url.scheme() == "file" {
            return url
                .to_file_path()
                .map(Self::Folder)
                .map_err(|()| format!("'{text}' is not a local path"));
        }
        if !OBJECT_STORE_SCHEMES.contains(&url.scheme()) {
            return Err(format!(
                "'{}' is not a storage sluice writes to: use a folder, file://, or one of {}",
                url.scheme(),
                OBJECT_STORE_SCHEMES
                    .iter()
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("'{text}' names no bucket or container"));
        }
        Ok(Self::Url(with_trailing_slash(url)))
    }

    /// The location of table `name` under this root.
    pub fn table(&self, name: &str) -> Self {
        match self {
            Self::Folder(dir) => Self::Folder(dir.join(name)),
            Self::Url(url) => {
                let mut url = url.clone();
                url.path_segments_mut()
                    .map(|mut segments| {
                        segments.pop_if_empty().push(name);
                    })
                    .ok();
                Self::Url(with_trailing_slash(url))
            }
        }
    }

    /// The local folder, when the root is one.
    pub fn folder(&self) -> Option<&Path> {
        match self {
            Self::Folder(dir) => Some(dir),
            Self::Url(_) => None,
        }
    }
}

impl fmt::Display for LakeRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Folder(dir) => write!(f, "{}", dir.display()),
            Self::Url(url) => write!(f, "{url}"),
        }
    }
}

impl From<PathBuf> for LakeRoot {
    fn from(dir: PathBuf) -> Self {
        Self::Folder(dir)
    }
}

impl From<&Path> for LakeRoot {
    fn from(dir: &Path) -> Self {
        Self::Folder(dir.to_owned())
    }
}

fn with_trailing_slash(mut url: Url) -> Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

/// Where and how the lake writes parts.
#[derive(Clone, PartialEq)]
pub struct LakeConfig {
    /// Where the tables are; each table is a Delta table in a folder (or prefix) under it.
    pub root: LakeRoot,
    /// Options for an object-store root, as object_store names them (`aws_endpoint`,
    /// `aws_region`, `aws_access_key_id`, `google_service_account`, `azure_storage_account_name`,
    /// ...). The environment's `AWS_*`, `GOOGLE_*` and `AZURE_*` variables are read too; these
    /// win over them.
    pub storage_options: HashMap<String, String>,
    /// The folder holding this writer's identity (`_sluice/writer-id`): the data directory,
    /// next to the write-ahead log whose sequence numbers the identity qualifies. Several
    /// writers may share `root`; each needs its own `state_dir`.
    pub state_dir: PathBuf,
    /// zstd compression level (1 to 22).
    pub zstd_level: i32,
    /// Parts smaller than this (Arrow memory of their rows) are LZ4-compressed and written
    /// without dictionary pages; 0: all zstd with dictionaries.
    pub lz4_below: u64,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// Commits between Delta checkpoints, for tables this sink creates.
    pub checkpoint_interval: u64,
    /// How long log entries covered by a checkpoint are kept, for tables this sink creates.
    pub log_retention: Duration,
    /// How long files a compaction replaced stay on disk.
    pub file_retention: Duration,
}

/// Shows the storage options' names only: their values may be secrets.
impl fmt::Debug for LakeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut options: Vec<&String> = self.storage_options.keys().collect();
        options.sort();
        f.debug_struct("LakeConfig")
            .field("root", &self.root)
            .field("storage_options", &options)
            .field("state_dir", &self.state_dir)
            .field("zstd_level", &self.zstd_level)
            .field("lz4_below", &self.lz4_below)
            .field("row_group_rows", &self.row_group_rows)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("log_retention", &self.log_retention)
            .field("file_retention", &self.file_retention)
            .finish()
    }
}

impl LakeConfig {
    /// The defaults, rooted at the folder `root`, with the writer's identity kept there too.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            state_dir: root.clone(),
            root: LakeRoot::Folder(root),
            storage_options: HashMap::new(),
            zstd_level: DEFAULT_ZSTD_LEVEL,
            lz4_below: DEFAULT_LZ4_BELOW,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            log_retention: DEFAULT_LOG_RETENTION,
            file_retention: DEFAULT_FILE_RETENTION,
        }
    }
}

/// Files no commit references (a flush interrupted between its file and its commit) are
/// deleted once this old: long past any commit still in flight.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_parse_as_folders_or_object_store_urls() {
        assert_eq!(
            LakeRoot::parse("./sluice-data").unwrap(),
            LakeRoot::Folder(PathBuf::from("./sluice-data"))
        );
        assert_eq!(
            LakeRoot::parse("file:///var/lib/lake").unwrap(),
            LakeRoot::Folder(PathBuf::from("/var/lib/lake"))
        );
        let root = LakeRoot::parse("s3://bucket/some/prefix").unwrap();
        assert_eq!(root.to_string(), "s3://bucket/some/prefix/");
        assert_eq!(
            root.table("events").to_string(),
            "s3://bucket/some/prefix/events/"
        );
        assert_eq!(
            LakeRoot::parse("gs://bucket")
                .unwrap()
                .table("t")
                .to_string(),
            "gs://bucket/t/"
        );
        assert_eq!(
            LakeRoot::parse("abfss://data@account.dfs.core.windows.net/lake")
                .unwrap()
                .table("t")
                .to_string(),
            "abfss://data@account.dfs.core.windows.net/lake/t/"
        );
        let err = LakeRoot::parse("ftp://host/x").unwrap_err();
        assert!(err.contains("s3://"), "{err}");
        assert!(LakeRoot::parse("s3:///prefix").is_err());
    }

    #[test]
    fn debug_output_names_storage_options_without_their_values() {
        let mut config = LakeConfig::new("lake");
        config
            .storage_options
            .insert("aws_secret_access_key".into(), "hunter2".into());
        let shown = format!("{config:?}");
        assert!(shown.contains("aws_secret_access_key"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
