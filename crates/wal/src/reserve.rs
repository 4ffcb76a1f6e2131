//! The LSN reservation: a small file saying that every LSN the log has handed out lies below
//! the number it holds.
//!
//! A logged frame proves its own LSN, but only while its segment lives (segments are deleted
//! once their frames land), and an LSN taken without a frame ([`crate::Wal::next_lsn`], for
//! `async` inserts) leaves no trace at all. A store may hold a flush numbered by either. To
//! number new inserts above everything a store holds without asking the store (it may be down
//! when sluice starts), the log reserves LSNs in blocks: before it hands out an LSN at or above
//! the reservation, it durably moves the reservation a block further. A log opened again starts
//! at its reservation, above every LSN it ever handed out.
//!
//! ```text
//! reserved-lsn:  | "SLUICRSV" | reserved u64 LE | crc32c u32 LE of the 16 bytes before |
//! ```
//!
//! It is written as `reserved-lsn.tmp`, fsynced, renamed over `reserved-lsn`, and the folder is
//! fsynced: a crash leaves the old reservation or the new one, both above every LSN handed out.
//!
//! A log without one (a new folder, or one an older sluice kept) knows nothing of what the
//! stores hold: its first start must ask every store ([`exists`] tells the caller). The
//! reservation written then is above their answers, and each later one is above it.

use std::path::{Path, PathBuf};

use crate::error::WalError;
use crate::storage::Storage;

/// LSNs reserved at a time: one small fsynced write per million LSNs, and at most a million
/// numbers skipped per restart (of 2^63).
pub const DEFAULT_RESERVE_BLOCK: u64 = 1 << 20;

const FILE: &str = "reserved-lsn";
const TMP: &str = "reserved-lsn.tmp";
const MAGIC: &[u8; 8] = b"SLUICRSV";
const LEN: usize = 20;

/// Whether the log in `dir` holds a reservation: it has numbered inserts at a start where every
/// store said what it holds (or one that went on from such a reservation). Only then is it
/// above everything a store may hold without asking the store. A folder that cannot be listed
/// (not made yet) holds none.
pub fn exists(storage: &dyn Storage, dir: &Path) -> bool {
    storage
        .list(dir)
        .is_ok_and(|names| names.iter().any(|n| n == FILE))
}

/// The reservation of one log folder.
pub(crate) struct Reservation {
    storage: std::sync::Arc<dyn Storage>,
    dir: PathBuf,
    block: u64,
    /// Every LSN handed out is below this.
    reserved: u64,
}

impl Reservation {
    /// Reads the folder's reservation (0 when there is none yet). A leftover temporary file
    /// (a crash while moving it) is removed: the reservation it would have replaced still holds.
    pub(crate) fn open(
        storage: std::sync::Arc<dyn Storage>,
        dir: &Path,
        block: u64,
    ) -> Result<Self, WalError> {
        let names = storage
            .list(dir)
            .map_err(|e| WalError::io(format!("cannot list {}", dir.display()), e))?;
        if names.iter().any(|n| n == TMP) {
            let tmp = dir.join(TMP);
            storage
                .remove(&tmp)
                .map_err(|e| WalError::io(format!("cannot remove {}", tmp.display()), e))?;
        }
        let path = dir.join(FILE);
        let reserved = if names.iter().any(|n| n == FILE) {
            let bytes = storage
                .read(&path)
                .map_err(|e| WalError::io(format!("cannot read {}", path.display()), e))?;
            decode(&bytes).ok_or_else(|| WalError::Reservation {
                path: path.clone(),
                reason: format!(
                    "{} bytes that are not a reservation (damaged on disk?)",
                    bytes.len()
                ),
            })?
        } else {
            0
        };
        Ok(Self {
            storage,
            dir: dir.to_owned(),
            block: block.max(1),
            reserved,
        })
    }

    /// The number every LSN handed out so far lies below.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Makes sure `lsn` may be handed out: when it is not below the reservation, moves the
    /// reservation a block above it, durably, first. On failure nothing may be handed out at
    /// `lsn`; the reservation on disk is the old one or the new one, either still true.
    pub(crate) fn cover(&mut self, lsn: u64) -> Result<(), WalError> {
        if lsn < self.reserved {
            return Ok(());
        }
        let next = lsn.saturating_add(self.block);
        self.write(next)?;
        self.reserved = next;
        Ok(())
    }

    fn write(&self, reserved: u64) -> Result<(), WalError> {
        let tmp = self.dir.join(TMP);
        let path = self.dir.join(FILE);
        let fail = |what: &str, e| WalError::io(format!("cannot {what} {}", tmp.display()), e);
        // A temporary file a failed attempt left behind would stop `create`.
        match self.storage.remove(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail("remove", e)),
        }
        let mut file = self
            .storage
            .create(&tmp, 0)
            .map_err(|e| fail("create", e))?;
        file.write_all_at(&encode(reserved), 0)
            .map_err(|e| fail("write", e))?;
        file.sync_data().map_err(|e| fail("fsync", e))?;
        drop(file);
        self.storage.rename(&tmp, &path).map_err(|e| {
            WalError::io(
                format!("cannot rename {} to {}", tmp.display(), path.display()),
                e,
            )
        })?;
        self.storage
            .sync_dir(&self.dir)
            .map_err(|e| WalError::io(format!("cannot fsync {}", self.dir.display()), e))
    }
}

fn encode(reserved: u64) -> [u8; LEN] {
    let mut bytes = [0u8; LEN];
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..16].copy_from_slice(&reserved.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..16]);
    bytes[16..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Option<u64> {
    let bytes: &[u8; LEN] = bytes.try_into().ok()?;
    if &bytes[..8] != MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[16..].try_into().ok()?);
    if crc != crc32c::crc32c(&bytes[..16]) {
        return None;
    }
    Some(u64::from_le_bytes(bytes[8..16].try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_reads_back_and_damage_is_refused() {
        let bytes = encode(1_048_577);
        assert_eq!(decode(&bytes), Some(1_048_577));
        for i in 0..LEN {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert_eq!(decode(&bad), None, "byte {i} flipped");
        }
        assert_eq!(decode(&bytes[..LEN - 1]), None);
        assert_eq!(decode(&[]), None);
    }
}
