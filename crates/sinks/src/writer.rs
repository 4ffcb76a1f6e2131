//! This writer's identity: the name its commits go by in every lake table's log, and its rows
//! in the database sinks' ledgers.
//!
//! Sequence numbers come from one data directory's write-ahead log, so they mean something only
//! together with that directory. The identity is made once, on first start, and kept in
//! `<data dir>/_sluice/writer-id` beside the log. Deleting it while the log still holds
//! inserts would make replay land them again: the two go together.

use std::fs;
use std::io;
use std::path::Path;

use crate::fsio;

/// The folder, inside the data directory, that holds the identity.
const DIR: &str = "_sluice";

/// The identity's file name.
const FILE: &str = "writer-id";

/// Reads the identity kept in `state_dir`, or makes and durably stores a new one.
pub(crate) fn writer_id(state_dir: &Path) -> io::Result<String> {
    let dir = state_dir.join(DIR);
    let path = dir.join(FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            let valid = !id.is_empty()
                && id.len() <= 64
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if valid {
                Ok(id.to_owned())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} does not hold a writer identity; restore it, or remove it together \
                         with the write-ahead log",
                        path.display()
                    ),
                ))
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(state_dir)?;
            fsio::create_dir_durably(state_dir, &dir)?;
            let id = uuid::Uuid::now_v7().simple().to_string();
            fsio::write_atomically(&dir, FILE, id.as_bytes())?;
            Ok(id)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = writer_id(dir.path()).unwrap();
        assert_eq!(writer_id(dir.path()).unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(writer_id(other.path()).unwrap(), first);
        fs::write(dir.path().join(DIR).join(FILE), "not/an id").unwrap();
        let err = writer_id(dir.path()).unwrap_err();
        assert!(err.to_string().contains("writer identity"), "{err}");
    }
}
