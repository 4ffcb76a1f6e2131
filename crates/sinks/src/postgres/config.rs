//! The PostgreSQL sink's settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_core::policy::duration_text;

/// Connections kept open: one per table flushing at once is plenty, and flushes are few.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// How long one exchange with the server may take: connecting, a flush's transaction, a read of
/// the ledger. A COPY of a large batch into a busy server can take seconds; a minute without an
/// answer means the server (or the network to it) is in trouble, and the flush is retried on a
/// fresh connection. ClickHouse's request timeout has the same default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the PostgreSQL sink writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// A libpq-style URL or key=value string: `postgres://user@127.0.0.1:5432/db`.
    pub url: String,
    /// Connections in the pool.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    /// How long one exchange may take ([`DEFAULT_TIMEOUT`] when unset).
    #[serde(default, with = "duration_text")]
    pub timeout: Option<Duration>,
}

fn default_pool_size() -> usize {
    DEFAULT_POOL_SIZE
}

impl PostgresConfig {
    /// The defaults for the database at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_size: DEFAULT_POOL_SIZE,
            timeout: None,
        }
    }

    /// The timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }
}
