//! The log's errors.

use std::path::PathBuf;

use crate::recovery::RecoveryMode;

/// What went wrong with the log.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A file operation failed.
    #[error("{context}: {message}")]
    Io {
        /// What was being done, and on which file.
        context: String,
        /// The operating system's words.
        message: String,
        /// The error kind, for callers that classify.
        kind: std::io::ErrorKind,
    },
    /// A segment holds a bad frame where the recovery mode does not allow one.
    #[error(
        "the WAL segment {} is corrupt at byte {offset}: {reason} (recovery mode {mode}; \
         move the segment away or start with wal.recovery = \"skip_corrupt\" to go on without it)",
        segment.display()
    )]
    Corrupt {
        /// The segment.
        segment: PathBuf,
        /// Where the bad frame starts.
        offset: usize,
        /// What is wrong with it.
        reason: &'static str,
        /// The mode that refused it.
        mode: RecoveryMode,
    },
    /// The LSN reservation file cannot be read as one. Without it the log cannot tell which
    /// LSNs it handed out, so it does not open.
    #[error(
        "the WAL's LSN reservation {} holds {reason}; with the stores reachable, move it away \
         and start again: sluice then numbers new inserts above what the stores report",
        path.display()
    )]
    Reservation {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An fsync failed earlier; the log takes no more appends until restart.
    #[error("the WAL is poisoned by an earlier failure and takes no writes until restart: {0}")]
    Poisoned(String),
    /// This append's group could not be written.
    #[error("the WAL could not write this insert: {0}")]
    Failed(String),
    /// The log is closed.
    #[error("the WAL is closed")]
    Closed,
}

impl WalError {
    pub(crate) fn io(context: String, e: std::io::Error) -> Self {
        Self::Io {
            context,
            message: e.to_string(),
            kind: e.kind(),
        }
    }
}
