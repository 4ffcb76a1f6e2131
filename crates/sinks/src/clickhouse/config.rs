//! The ClickHouse sink's settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_core::policy::duration_text;

/// How long one HTTP request may take. An insert of a large batch into a busy server can take
/// seconds; a minute without an answer means the server is in trouble, and the flush is retried.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest pause between two flushes of a table whose partitions near
/// `parts_to_delay_insert`. ClickHouse's own delay is at most `max_delay_to_insert` (1 s) per
/// insert; pausing a whole table's flushes for up to 5 s gives merges time to catch up while
/// rows gather into fewer, larger parts.
pub const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(5);

/// Pausing starts when a partition holds this share of `parts_to_delay_insert` active parts, and
/// grows linearly to [`DEFAULT_MAX_PAUSE`] at the threshold itself: slow down well before
/// ClickHouse starts delaying (and, at `parts_to_throw_insert`, refusing) inserts.
pub const PACING_START: f64 = 0.5;

/// Where the ClickHouse sink writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseConfig {
    /// The HTTP interface: `http://127.0.0.1:8123`.
    pub url: String,
    /// The database tables (and the ledger) live in.
    #[serde(default = "default_database")]
    pub database: String,
    /// User name (HTTP basic auth); ClickHouse's `default` when unset.
    #[serde(default)]
    pub user: Option<String>,
    /// Password for `user`.
    #[serde(default)]
    pub password: Option<String>,
    /// How long one request may take.
    #[serde(default, with = "duration_text")]
    pub timeout: Option<Duration>,
    /// The longest pause between flushes when parts pile up; `"0s"` turns pacing off.
    #[serde(default, with = "duration_text")]
    pub max_pause: Option<Duration>,
    /// Gzip request bodies (default true).
    #[serde(default = "default_true")]
    pub gzip: bool,
}

fn default_database() -> String {
    "default".to_owned()
}

fn default_true() -> bool {
    true
}

impl ClickHouseConfig {
    /// The defaults for the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            database: default_database(),
            user: None,
            password: None,
            timeout: None,
            max_pause: None,
            gzip: true,
        }
    }

    /// The request timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The longest pacing pause in effect.
    pub fn max_pause(&self) -> Duration {
        self.max_pause.unwrap_or(DEFAULT_MAX_PAUSE)
    }
}
