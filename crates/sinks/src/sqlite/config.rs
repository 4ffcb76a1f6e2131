//! The SQLite sink's settings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `PRAGMA journal_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    /// Write-ahead logging: readers do not block the writer. The default.
    #[default]
    Wal,
    /// The rollback journal, deleted after each transaction.
    Delete,
    /// The rollback journal, truncated after each transaction.
    Truncate,
}

/// `PRAGMA synchronous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    /// Fsync at every commit: a committed flush survives power loss. The default.
    #[default]
    Full,
    /// Fewer fsyncs; in WAL mode the last transactions may be lost on power loss.
    Normal,
}

/// Where and how the SQLite sink writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file (created if missing).
    pub path: PathBuf,
    /// Journal mode.
    #[serde(default)]
    pub journal_mode: JournalMode,
    /// Synchronous mode.
    #[serde(default)]
    pub synchronous: Synchronous,
}

impl SqliteConfig {
    /// The defaults for the database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            journal_mode: JournalMode::default(),
            synchronous: Synchronous::default(),
        }
    }

    pub(crate) fn pragmas(&self) -> String {
        let journal = match self.journal_mode {
            JournalMode::Wal => "WAL",
            JournalMode::Delete => "DELETE",
            JournalMode::Truncate => "TRUNCATE",
        };
        let sync = match self.synchronous {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        };
        format!(
            "PRAGMA journal_mode = {journal}; PRAGMA synchronous = {sync}; PRAGMA busy_timeout = 5000;"
        )
    }
}
