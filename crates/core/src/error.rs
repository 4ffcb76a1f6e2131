//! The core's error types. Messages are lower-case, say what and where, and never print `Debug`.

use std::fmt;

/// A table or column name that sluice refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("name is empty")]
    Empty,
    /// The name is longer than the limit.
    #[error("name '{name}' is {len} characters long; at most {max} are allowed")]
    TooLong {
        /// The name, escaped and shortened for display.
        name: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The name has a character outside `[A-Za-z0-9_]` or starts with a digit.
    #[error("name '{name}' is not allowed: use letters, digits and '_', not starting with a digit")]
    Invalid {
        /// The name, escaped and shortened for display.
        name: String,
    },
    /// The name is one kept for folders that are not tables.
    #[error("name '{name}' is reserved: sluice or the lake keeps folders of its own by that name")]
    Reserved {
        /// The name.
        name: String,
    },
}

/// A configuration value that is zero, out of range, or contradicts another.
///
/// `field` is the dotted path of the setting as it is written in the config file, so the user can
/// find it (`tables.events.flush.max_rows`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config: {field}: {reason}")]
pub struct ConfigError {
    /// The setting, as a dotted path.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfigError {
    /// A new error for `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error with `prefix.` put in front of its field path.
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

/// Why an insert's rows were refused. The whole insert is refused: sluice never keeps part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeError {
    /// 1-based line of the body where the problem is, when it is known.
    pub line: Option<usize>,
    /// 1-based byte of that line where the text stops being valid JSON, for syntax errors.
    pub position: Option<usize>,
    /// The column involved, when there is one.
    pub field: Option<String>,
    /// What is wrong, in words.
    pub message: String,
    /// Whether `line` counts rows rather than lines (binary and row-framed formats).
    pub counts_rows: bool,
}

impl DecodeError {
    pub(crate) fn new(line: Option<usize>, field: Option<String>, message: String) -> Self {
        Self {
            line,
            position: None,
            field,
            message,
            counts_rows: false,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = if self.counts_rows { "row" } else { "line" };
        match (&self.line, &self.position, &self.field) {
            (Some(line), Some(position), _) => write!(f, "{unit} {line}, column {position}: ")?,
            (Some(line), None, Some(field)) => write!(f, "{unit} {line}, column '{field}': ")?,
            (Some(line), None, None) => write!(f, "{unit} {line}: ")?,
            (None, _, Some(field)) => write!(f, "column '{field}': ")?,
            (None, _, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}
