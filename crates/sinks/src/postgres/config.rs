//! The PostgreSQL sink's settings.

use serde::{Deserialize, Serialize};

/// Connections kept open: one per table flushing at once is plenty, and flushes are few.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// Where the PostgreSQL sink writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// A libpq-style URL or key=value string: `postgres://user@127.0.0.1:5432/db`.
    pub url: String,
    /// Connections in the pool.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
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
        }
    }
}
