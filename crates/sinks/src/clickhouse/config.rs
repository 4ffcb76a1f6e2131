//! The ClickHouse sink's settings.

use std::collections::BTreeMap;
use std::fmt;
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
    /// The HTTP interfaces of a cluster's shards, when sluice inserts straight into each
    /// shard's table of the same name (see `sharding.rs`); empty: `url` is the only server.
    /// `url` keeps the ledger either way.
    #[serde(default)]
    pub shards: Vec<String>,
    /// The column whose value picks a row's shard, as a `Distributed` table with the sharding
    /// key `sipHash64(column)` would; unset: each flush lands whole on one shard, in turn.
    #[serde(default)]
    pub shard_key: Option<String>,
    /// ClickHouse settings sent with every insert (`insert_distributed_sync = 1`).
    #[serde(default)]
    pub settings: BTreeMap<String, SettingValue>,
}

/// A ClickHouse setting's value as TOML writes it: `1`, `true` or `"best_effort"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SettingValue {
    /// `true` or `false`, sent as `1` or `0`.
    Flag(bool),
    /// A number.
    Number(i64),
    /// Text.
    Text(String),
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag(on) => f.write_str(if *on { "1" } else { "0" }),
            Self::Number(n) => write!(f, "{n}"),
            Self::Text(text) => f.write_str(text),
        }
    }
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
            shards: Vec::new(),
            shard_key: None,
            settings: BTreeMap::new(),
        }
    }

    /// Checks the cluster settings: shards named once each, and a shard key only with shards
    /// to choose between.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for shard in &self.shards {
            let url = shard.trim().trim_end_matches('/');
            if url.is_empty() {
                return Err("shards: a shard's URL is empty".to_owned());
            }
            if !seen.insert(url) {
                return Err(format!("shards: {url} is listed twice"));
            }
        }
        match &self.shard_key {
            Some(key) if key.trim().is_empty() => Err("shard_key: the column is empty".to_owned()),
            Some(_) if self.shards.len() < 2 => Err(
                "shard_key: rows are split by key between shards; list at least two in `shards`"
                    .to_owned(),
            ),
            _ => Ok(()),
        }
    }

    /// Checks that `table` can be sharded by the shard key, if there is one.
    pub fn check_table(&self, table: &sluice_core::TableDef) -> Result<(), String> {
        match &self.shard_key {
            Some(key) => super::sharding::check_key(table, key),
            None => Ok(()),
        }
    }

    /// The servers rows land on: the shards, or `url` alone.
    pub fn shard_urls(&self) -> Vec<&str> {
        if self.shards.is_empty() {
            vec![self.url.as_str()]
        } else {
            self.shards.iter().map(String::as_str).collect()
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
