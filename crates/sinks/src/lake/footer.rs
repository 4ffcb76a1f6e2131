//! A Parquet file's footer size, read from its last 8 bytes alone.

use std::path::Path;

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
