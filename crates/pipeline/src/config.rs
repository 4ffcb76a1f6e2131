//! The pipeline's settings, each default a documented constant.

use std::time::Duration;

use sluice_core::retry::Backoff;
use sluice_core::{ConfigError, FlushPolicy, PartsThrottle};
use sluice_wal::WalConfig;

/// Arrow memory all tables may buffer together: room for several tables' full default batches
/// (64 MiB each) while staying a small share of a typical host.
pub const DEFAULT_MAX_BUFFER_BYTES: u64 = 512 * 1024 * 1024;

/// The share of `max_buffer_bytes` one table may hold: half, so a table whose store stalls (or
/// that takes a burst) leaves the other half to every other table. Set 1.0 for a single table.
pub const DEFAULT_MAX_TABLE_SHARE: f64 = 0.5;

/// How many tables auto-creation stops at, declared and stored ones counted.
pub const DEFAULT_MAX_TABLES: usize = 1_000;

/// The most columns evolution gives a table by default: a producer that puts an id in a key
/// would otherwise add a column per id.
pub const DEFAULT_EVOLVE_MAX_COLUMNS: usize = 500;

/// How many partitions one insert may span (ClickHouse's `max_partitions_per_insert_block`).
pub const DEFAULT_MAX_PARTITIONS_PER_INSERT: usize = 100;

/// How long a `committed` insert waits for its batch to land before it is answered 503: long
/// enough to ride out a store's brief hiccup, short enough for clients' own timeouts.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shutdown keeps retrying flushes that fail before it gives up and reports the rows it
/// could not land.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How the pipeline runs.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Arrow memory all tables may buffer together, in bytes, with
    /// [`crate::INSERT_OVERHEAD`] counted for each insert piece.
    pub max_buffer_bytes: u64,
    /// The share of `max_buffer_bytes` one table may hold, in (0, 1].
    pub max_table_share: f64,
    /// Create unknown tables from their first insert.
    pub auto_create: bool,
    /// Tables past which auto-creation refuses new ones: a producer that puts an id in the
    /// table name would otherwise make a table (a writer, a Delta log, a compaction pass) per
    /// id. Declared tables and stored ones are never refused; they count.
    pub max_tables: usize,
    /// Whether auto-created tables, and stored ones the config does not declare, take an
    /// insert's new keys as new nullable columns (`evolve = true`).
    pub evolve: bool,
    /// The most columns evolution gives a table: each column costs every flush an encoder.
    pub evolve_max_columns: usize,
    /// Partitions one insert may span (0: any number). Each partition is a part of its own in
    /// every flush, so an insert spread over thousands (a table partitioned by an id) makes
    /// thousands of tiny parts: refused whole, as ClickHouse does.
    pub max_partitions_per_insert: usize,
    /// The flush policy of auto-created tables.
    pub default_policy: FlushPolicy,
    /// The parts throttle of auto-created tables and of stored ones the config does not declare.
    pub default_throttle: PartsThrottle,
    /// How long a `committed` insert waits for its batch to land.
    pub ack_timeout: Duration,
    /// How long shutdown retries failing flushes.
    pub shutdown_timeout: Duration,
    /// Waits between retries of a failed flush.
    pub backoff: Backoff,
    /// The write-ahead log, when inserts may be acknowledged `durable`. `None` turns it off:
    /// `durable` is then refused, and `committed` rows in flight are lost with the process.
    pub wal: Option<WalConfig>,
    /// Where batches a store refuses for good are kept as NDJSON (`DATA_DIR/_dead`). `None`
    /// drops them, counted in `sluice_rows_dropped_total`.
    pub dead_letters: Option<std::path::PathBuf>,
    /// How long and how many insert keys each table remembers.
    pub keys: crate::keys::KeyWindow,
    /// Where the keys of landed inserts are kept for their window, a folder per table
    /// (`DATA_DIR/_sluice/keys`). `None` keeps them in memory (and, for logged inserts not yet
    /// landed, in the log): a restart forgets the keys of inserts that landed.
    pub key_journal: Option<std::path::PathBuf>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
            max_table_share: DEFAULT_MAX_TABLE_SHARE,
            auto_create: true,
            max_tables: DEFAULT_MAX_TABLES,
            evolve: false,
            evolve_max_columns: DEFAULT_EVOLVE_MAX_COLUMNS,
            max_partitions_per_insert: DEFAULT_MAX_PARTITIONS_PER_INSERT,
            default_policy: FlushPolicy::default(),
            default_throttle: PartsThrottle::default(),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            backoff: Backoff::default(),
            wal: None,
            keys: crate::keys::KeyWindow::default(),
            key_journal: None,
            dead_letters: None,
        }
    }
}

impl PipelineConfig {
    /// The bytes one table may buffer.
    pub fn table_buffer_bytes(&self) -> u64 {
        ((self.max_buffer_bytes as f64) * self.max_table_share.clamp(0.0, 1.0)) as u64
    }

    /// Checks that a table's policy agrees with the pipeline's limits. `field` is where the
    /// policy is written in config, for the error.
    pub fn check_policy(&self, field: &str, policy: &FlushPolicy) -> Result<(), ConfigError> {
        if self.max_buffer_bytes == 0 {
            return Err(ConfigError::new(
                "max_buffer_bytes",
                "must be greater than zero",
            ));
        }
        if !(self.max_table_share > 0.0 && self.max_table_share <= 1.0) {
            return Err(ConfigError::new(
                "max_table_share",
                format!(
                    "must be more than 0 and at most 1, got {}",
                    self.max_table_share
                ),
            ));
        }
        if policy.max_bytes() > self.table_buffer_bytes() {
            return Err(ConfigError::new(
                format!("{field}.max_bytes"),
                format!(
                    "{} bytes is more than a table may buffer ({} = max_buffer_bytes {} x \
                     max_table_share {}): the batch could never fill",
                    policy.max_bytes(),
                    self.table_buffer_bytes(),
                    self.max_buffer_bytes,
                    self.max_table_share
                ),
            ));
        }
        if policy.max_age() >= self.ack_timeout {
            return Err(ConfigError::new(
                format!("{field}.max_age"),
                format!(
                    "{:?} is not shorter than ack_timeout ({:?}): committed inserts at light load \
                     would time out before their batch flushes",
                    policy.max_age(),
                    self.ack_timeout
                ),
            ));
        }
        Ok(())
    }
}
