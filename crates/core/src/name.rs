//! Validated table and column names.
//!
//! A table name becomes a folder under the data directory and an identifier in SQL stores, so it
//! is checked before anything touches the disk: `[A-Za-z_][A-Za-z0-9_]*`, 1 to 128 characters.
//! That alone rules out `..`, `/`, NUL and every other path trick.

use std::fmt;

use crate::error::NameError;

/// The longest table name sluice accepts, in characters (ASCII, so also bytes).
pub const MAX_TABLE_NAME_LEN: usize = 128;

/// Names kept for folders that are not tables: sluice's own in the data directory (`_sluice`
/// for the write-ahead log, `_dead` for batches no store would take) and a Delta table's log
/// (`_delta_log`: a lake table by that name would make its parent folder look like a Delta
/// table, and its own log cannot be opened). Compared without regard to case, for filesystems
/// that do not regard it.
pub const RESERVED_TABLE_NAMES: [&str; 3] = ["_sluice", "_dead", "_delta_log"];

/// A table name that is safe as a folder name and as a (quoted) SQL identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName(String);

impl TableName {
    /// Checks `name` against `[A-Za-z_][A-Za-z0-9_]*` and the length limit.
    pub fn new(name: &str) -> Result<Self, NameError> {
        check_identifier(name, MAX_TABLE_NAME_LEN)?;
        if RESERVED_TABLE_NAMES
            .iter()
            .any(|reserved| reserved.eq_ignore_ascii_case(name))
        {
            return Err(NameError::Reserved {
                name: name.to_owned(),
            });
        }
        Ok(Self(name.to_owned()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for TableName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Checks the identifier rule shared by tables and columns.
pub(crate) fn check_identifier(name: &str, max_len: usize) -> Result<(), NameError> {
    let shown = || printable(name);
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > max_len {
        return Err(NameError::TooLong {
            name: shown(),
            len: name.len(),
            max: max_len,
        });
    }
    let mut chars = name.chars();
    let first = chars.next().unwrap_or('_');
    let first_ok = first.is_ascii_alphabetic() || first == '_';
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(NameError::Invalid { name: shown() });
    }
    Ok(())
}

/// A name made safe to echo in an error message: control characters escaped, length capped.
pub fn printable(name: &str) -> String {
    const SHOWN: usize = 64;
    let mut out: String = name
        .chars()
        .take(SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    if name.chars().count() > SHOWN {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_identifiers() {
        for ok in ["events", "_x", "A1_b2", &"a".repeat(128)] {
            assert!(TableName::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_paths_and_junk() {
        for bad in [
            "",
            "../x",
            "a/b",
            "a.b",
            "1abc",
            "a b",
            "a\0b",
            "é",
            "_sluice",
            "_dead",
            "_delta_log",
            "_Delta_Log",
            &"a".repeat(129),
        ] {
            assert!(TableName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn error_message_escapes_control_characters() {
        let err = TableName::new("a\0b").unwrap_err().to_string();
        assert!(err.contains("a\\0b"), "{err}");
    }
}
