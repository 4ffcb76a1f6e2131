//! sluice's write-ahead log: what makes a `durable` acknowledgement true.
//!
//! ```text
//! DATA_DIR/_sluice/wal/
//!   00000000000000000001.wal      segment named by its first LSN
//!   00000000000000052317.wal      the active segment
//!   reserved-lsn                  every LSN handed out lies below the number it holds
//!
//! segment: +-----------------------------------+-------+-------+-----+-------------+
//!          | "SLUICWAL" | version u32 | 0 u32 | frame | frame | ... | zeros       |
//!          +-----------------------------------+-------+-------+-----+-------------+
//! frame:   | len u32 | crc32c u32 | lsn u64 | payload (len bytes) |
//! ```
//!
//! Appends from many producers share one `fdatasync` (group commit); segments are preallocated
//! to their size, so a sync writes data, not a new file length (see [`storage`]); they rotate by
//! size; the
//! folder is fsynced after a segment is created or deleted. Recovery reads up to the last valid
//! frame and cuts a torn tail, or refuses, by its mode. A failed fsync poisons the log.
//!
//! # Layout
//!
//! - [`frame`]: encoding and decoding one frame (pure; fuzzed).
//! - [`recovery`]: scanning a segment and the recovery modes (pure).
//! - [`log`]: open, replay, append, group commit, release, poison.
//! - [`reserve`]: the LSN reservation, which keeps LSNs rising across restarts even for LSNs
//!   no frame records.
//! - [`storage`]: file access behind a trait, so tests inject faults.
//! - `faults` (feature `faults`, for tests only): real files with switches that fail fsyncs and
//!   writes.
//!
//! Architecture invariant: the log knows nothing of batches, sinks or HTTP; a payload is bytes.

pub mod error;
#[cfg(feature = "faults")]
pub mod faults;
pub mod frame;
pub mod log;
pub mod recovery;
pub mod reserve;
pub mod storage;

pub use error::WalError;
pub use log::{
    Appended, Completion, DEFAULT_SEGMENT_BYTES, Recovered, Replay, Wal, WalConfig, WalStats,
};
pub use recovery::RecoveryMode;
pub use reserve::DEFAULT_RESERVE_BLOCK;
pub use storage::{FsStorage, SegmentFile, Storage};
