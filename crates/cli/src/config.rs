//! The config file (TOML) and how it combines with command-line flags.
//!
//! Every setting is optional; flags win over the file, the file over the defaults. Errors name
//! the setting as it is written in the file (`tables.events.flush.max_rows`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use sluice_core::compaction::CompactionPolicy;
use sluice_core::policy::duration_text;
use sluice_core::{
    ByteSize, Column, ConfigError, FlushPolicy, FlushPolicyConfig, TableDef, TableLayout,
    TableName, ThrottleConfig,
};
use sluice_pipeline::{
    DEFAULT_ACK_TIMEOUT, DEFAULT_EVOLVE_MAX_COLUMNS, DEFAULT_KEY_WINDOW, DEFAULT_MAX_BUFFER_BYTES,
    DEFAULT_MAX_KEYS, DEFAULT_MAX_PARTITIONS_PER_INSERT, DEFAULT_MAX_TABLE_SHARE,
    DEFAULT_MAX_TABLES, DEFAULT_SHUTDOWN_TIMEOUT, KeyWindow, PipelineConfig, RecoveryMode,
    WalConfig,
};
use sluice_server::auth::{Access, Credentials};
use sluice_server::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_DRAIN_DELAY, DEFAULT_IDLE_TIMEOUT, DEFAULT_LISTEN,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_ROWS_PER_INSERT, DRAIN_MARGIN, Limits,
};
use sluice_sinks::lake::LakeRoot;
use sluice_sinks::{ClickHouseConfig, LakeConfig, PostgresConfig, SqliteConfig};

/// The default data directory, relative to where sluice runs.
pub const DEFAULT_DATA_DIR: &str = "./sluice-data";

/// Where the write-ahead log lives, inside the data directory (`_sluice` is a reserved table name).
pub const WAL_DIR: &str = "_sluice/wal";

/// Where batches a store refuses for good are kept (`_dead` is a reserved table name).
pub const DEAD_LETTER_DIR: &str = "_dead";

/// Where the keys of landed inserts are kept, under the data directory: a folder per table.
pub const KEY_JOURNAL_DIR: &str = "_sluice/keys";

/// `[tls]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The certificate chain, PEM, leaf first.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
}

/// The environment variable holding a bearer token every table accepts.
pub const TOKEN_ENV: &str = "SLUICE_TOKEN";

/// A rule that lets nobody in is a mistake, not a lock.
fn check_rule(field: &str, rule: &Credentials) -> Result<(), ConfigError> {
    if rule.is_empty() {
        return Err(ConfigError::new(
            field,
            "no tokens and no users: nobody could write; add some or remove the section",
        ));
    }
    if rule.tokens.iter().any(|t| t.trim().is_empty()) {
        return Err(ConfigError::new(
            format!("{field}.tokens"),
            "an empty token would accept anyone",
        ));
    }
    Ok(())
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub listen: Option<String>,
    /// Where the lake and sluice's own files live.
    pub data_dir: Option<PathBuf>,
    /// Create unknown tables from their first insert.
    pub auto_create: Option<bool>,
    /// Tables past which auto-creation refuses new ones.
    pub max_tables: Option<usize>,
    /// Take an insert's new keys as new nullable columns, in every table that does not say
    /// otherwise.
    pub evolve: Option<bool>,
    /// The most columns evolution gives a table.
    pub evolve_max_columns: Option<usize>,
    /// Partitions one insert may span (0: any number).
    pub max_partitions_per_insert: Option<usize>,
    /// Arrow memory all buffers may hold together.
    pub max_buffer_bytes: Option<ByteSize>,
    /// The share of it one table may hold.
    pub max_table_share: Option<f64>,
    /// The largest request body.
    pub max_body_bytes: Option<ByteSize>,
    /// The most rows in one insert.
    pub max_rows_per_insert: Option<usize>,
    /// The longest a request body may go without a byte arriving.
    #[serde(default, with = "duration_text")]
    pub body_timeout: Option<Duration>,
    /// How long a committed insert waits for its batch to land.
    #[serde(default, with = "duration_text")]
    pub ack_timeout: Option<Duration>,
    /// How long shutdown retries failing flushes.
    #[serde(default, with = "duration_text")]
    pub shutdown_timeout: Option<Duration>,
    /// How long after a signal sluice still takes inserts while `/health` says `stopping`.
    #[serde(default, with = "duration_text")]
    pub drain_delay: Option<Duration>,
    /// How long each table remembers an insert key.
    #[serde(default, with = "duration_text")]
    pub insert_key_window: Option<Duration>,
    /// The most insert keys each table remembers.
    pub max_insert_keys: Option<usize>,
    /// The default flush policy.
    #[serde(default)]
    pub flush: FlushPolicyConfig,
    /// The default parts throttle.
    #[serde(default)]
    pub throttle: ThrottleConfig,
    /// Lake settings.
    #[serde(default)]
    pub lake: LakeFileConfig,
    /// Write-ahead log settings.
    #[serde(default)]
    pub wal: WalFileConfig,
    /// Stores other than the built-in lake, by name.
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkSpec>,
    /// The sink auto-created tables land in (default `lake`).
    pub default_sink: Option<String>,
    /// Who may write to tables without a rule of their own (default: anyone). The environment
    /// variable `SLUICE_TOKEN` adds a bearer token to it.
    pub auth: Option<Credentials>,
    /// HTTPS: a certificate chain and its key, PEM files.
    pub tls: Option<TlsFiles>,
    /// ClickHouse's native protocol.
    #[serde(default)]
    pub clickhouse: ClickHouseFileConfig,
    /// Declared tables.
    #[serde(default)]
    pub tables: BTreeMap<String, TableFileConfig>,
}

/// `[clickhouse]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseFileConfig {
    /// Where ClickHouse's native protocol listens (ClickHouse's own port is 9000); off when
    /// unset.
    pub tcp_listen: Option<String>,
    /// How long a native-protocol connection may stay open between queries.
    #[serde(default, with = "duration_text")]
    pub idle_timeout: Option<Duration>,
}

/// `[lake]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LakeFileConfig {
    /// Where the lake's tables live (default: the data directory): a folder, or an object
    /// store URL (`s3://bucket/prefix`, `gs://...`, `az://...`). Several sluice processes, each
    /// with its own data directory, may share one root.
    pub root: Option<String>,
    /// Object-store options (`aws_endpoint`, `aws_region`, `aws_access_key_id`, ...), over the
    /// environment's `AWS_*`, `GOOGLE_*` and `AZURE_*` variables.
    #[serde(default)]
    pub storage: BTreeMap<String, String>,
    /// zstd level.
    pub zstd_level: Option<i32>,
    /// Parts smaller than this (Arrow memory of their rows) are LZ4-compressed and plain (no
    /// dictionary pages); "0B": all zstd.
    pub lz4_below: Option<ByteSize>,
    /// Rows per row group.
    pub row_group_rows: Option<usize>,
    /// Commits between Delta checkpoints of new tables.
    pub checkpoint_interval: Option<u64>,
    /// How long Delta log entries a checkpoint covers are kept, for new tables.
    #[serde(default, with = "duration_text")]
    pub log_retention: Option<Duration>,
    /// How long files a compaction replaced stay on disk for readers still using them.
    #[serde(default, with = "duration_text")]
    pub file_retention: Option<Duration>,
    /// The background compactor.
    #[serde(default)]
    pub compaction: CompactionFileConfig,
}

/// `[lake.compaction]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionFileConfig {
    /// Run the background compactor (default true).
    pub enabled: Option<bool>,
    /// Time between compaction rounds.
    #[serde(default, with = "duration_text")]
    pub interval: Option<Duration>,
    /// The size merges aim for.
    pub target_size: Option<ByteSize>,
    /// Tier width and fewest parts of one tier that make a merge.
    pub fanin: Option<usize>,
}

/// How often the background compactor looks at each lake table.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(30);

/// The background compactor's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionSettings {
    /// Which parts to merge.
    pub policy: CompactionPolicy,
    /// Whether the background compactor merges (`sluice compact` works either way).
    pub enabled: bool,
    /// Time between rounds. Each round also rereads every lake table's log, so part counts
    /// (and the throttle) see other writers' commits and compactions, even when disabled.
    pub interval: Duration,
}

/// `[wal]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalFileConfig {
    /// Log inserts (default true).
    pub enabled: Option<bool>,
    /// Segment size.
    pub segment_bytes: Option<ByteSize>,
    /// `tolerate_tail`, `strict` or `skip_corrupt`.
    pub recovery: Option<String>,
}

impl CompactionFileConfig {
    fn resolve(&self) -> Result<CompactionSettings> {
        let mut policy = CompactionPolicy::default();
        if let Some(ByteSize(bytes)) = self.target_size {
            if bytes < 1024 * 1024 {
                return Err(ConfigError::new(
                    "lake.compaction.target_size",
                    "must be at least 1MiB",
                )
                .into());
            }
            policy.target_bytes = bytes;
        }
        if let Some(fanin) = self.fanin {
            if fanin < 2 {
                return Err(ConfigError::new("lake.compaction.fanin", "must be at least 2").into());
            }
            policy.fanin = fanin;
        }
        let interval = self.interval.unwrap_or(DEFAULT_COMPACTION_INTERVAL);
        if interval.is_zero() {
            return Err(ConfigError::new(
                "lake.compaction.interval",
                "must be greater than zero (set enabled = false to turn the compactor off)",
            )
            .into());
        }
        Ok(CompactionSettings {
            policy,
            enabled: self.enabled.unwrap_or(true),
            interval,
        })
    }
}

/// The name of the built-in sink: the Parquet lake in the data directory.
pub const LAKE_SINK: &str = "lake";

/// `[sinks.<name>]`: a store, by its `type`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SinkSpec {
    /// A SQLite database file.
    Sqlite(SqliteConfig),
    /// A PostgreSQL database.
    Postgres(PostgresConfig),
    /// A ClickHouse server, over HTTP.
    ClickHouse(ClickHouseConfig),
}

/// `[tables.<name>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableFileConfig {
    /// Columns in order.
    pub columns: Vec<Column>,
    /// `"col"`, `"day(col)"`, `"hour(col)"`.
    #[serde(default)]
    pub partition_by: String,
    /// Sort key.
    #[serde(default)]
    pub sort_by: Vec<String>,
    /// This table's flush policy; unset fields come from the top-level `[flush]`.
    #[serde(default)]
    pub flush: FlushPolicyConfig,
    /// This table's parts throttle; unset fields come from the top-level `[throttle]`.
    #[serde(default)]
    pub throttle: ThrottleConfig,
    /// The sink it lands in (default: `default_sink`, else `lake`).
    pub sink: Option<String>,
    /// Who may write to this table (instead of the global `[auth]`).
    pub auth: Option<Credentials>,
    /// Take an insert's new keys as new nullable columns (default: the top-level `evolve`).
    pub evolve: Option<bool>,
}

/// Flags that override the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--wal on|off`.
    pub wal: Option<bool>,
    /// `--drain-delay`.
    pub drain_delay: Option<Duration>,
}

/// Everything `sluice serve` needs, validated.
#[derive(Debug)]
pub struct Settings {
    /// Address to listen on.
    pub listen: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Pipeline settings.
    pub pipeline: PipelineConfig,
    /// HTTP limits.
    pub limits: Limits,
    /// Lake settings.
    pub lake: LakeConfig,
    /// Compaction of lake tables.
    pub compaction: CompactionSettings,
    /// Declared tables, each with the name of its sink.
    pub tables: Vec<(TableDef, String)>,
    /// Named sinks other than the lake.
    pub sinks: BTreeMap<String, SinkSpec>,
    /// The sink auto-created tables land in.
    pub default_sink: String,
    /// Who may write.
    pub access: Access,
    /// HTTPS, when configured.
    pub tls: Option<TlsFiles>,
    /// Where ClickHouse's native protocol listens, when it is on.
    pub tcp_listen: Option<String>,
}

/// The settings of a command that works on the data directory rather than serving it
/// (`sluice compact`, `sluice parts`): the config file if given, and `--data-dir`.
pub fn load_settings(config: Option<&Path>, data_dir: Option<PathBuf>) -> Result<Settings> {
    let file = match config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    file.resolve(Overrides {
        data_dir,
        ..Overrides::default()
    })
}

impl FileConfig {
    /// Reads and parses a config file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }

    /// Applies flags and defaults and validates everything, one section after another. The
    /// order decides which mistake a bad file is told about first, so it stays as it is.
    pub fn resolve(self, overrides: Overrides) -> Result<Settings> {
        let data_dir = overrides
            .data_dir
            .or_else(|| self.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        let default_policy = self.flush.validate().map_err(|e| e.within("flush"))?;
        let (max_body_bytes, max_rows_per_insert) = self.resolve_insert_limits()?;
        let wal = self.wal.resolve(&data_dir, overrides.wal)?;
        let pipeline = self.resolve_pipeline(&data_dir, wal, default_policy)?;
        let mut limits =
            self.resolve_limits(max_body_bytes, max_rows_per_insert, pipeline.ack_timeout)?;
        if let Some(delay) = overrides.drain_delay {
            limits.drain_delay = delay;
        }
        let (lake, compaction) = self.lake.resolve(&data_dir)?;
        self.check_sinks()?;
        let default_sink = match &self.default_sink {
            Some(name) => known_sink(&self.sinks, "default_sink", name)?,
            None => LAKE_SINK.to_owned(),
        };
        let mut access = self.resolve_auth()?;
        let tables = resolve_tables(
            self.tables,
            pipeline.evolve,
            &self.flush,
            &self.throttle,
            &self.sinks,
            &default_sink,
            &mut access,
        )?;
        let listen = resolve_listen(overrides.listen, self.listen)?;
        let tcp_listen = self.clickhouse.tcp_listen.clone();
        if tcp_listen.as_deref().is_some_and(|l| l.trim().is_empty()) {
            bail!("invalid config: clickhouse.tcp_listen: the address is empty");
        }
        Ok(Settings {
            listen,
            data_dir,
            pipeline,
            limits,
            lake,
            compaction,
            tables,
            sinks: self.sinks,
            default_sink,
            access,
            tls: self.tls,
            tcp_listen,
        })
    }

    /// `max_body_bytes` and `max_rows_per_insert`: neither may be zero, since nothing could
    /// be inserted.
    fn resolve_insert_limits(&self) -> Result<(u64, usize)> {
        let max_body_bytes = self
            .max_body_bytes
            .map_or(DEFAULT_MAX_BODY_BYTES as u64, u64::from);
        if max_body_bytes == 0 {
            return Err(ConfigError::new("max_body_bytes", "must be greater than zero").into());
        }
        let max_rows_per_insert = self
            .max_rows_per_insert
            .unwrap_or(DEFAULT_MAX_ROWS_PER_INSERT);
        if max_rows_per_insert == 0 {
            return Err(
                ConfigError::new("max_rows_per_insert", "must be greater than zero").into(),
            );
        }
        Ok((max_body_bytes, max_rows_per_insert))
    }

    /// The pipeline's settings: the top-level memory, table and timeout settings, the default
    /// `[throttle]`, and the WAL and flush policy already resolved.
    fn resolve_pipeline(
        &self,
        data_dir: &Path,
        wal: Option<WalConfig>,
        default_policy: FlushPolicy,
    ) -> Result<PipelineConfig> {
        let max_buffer_bytes = self
            .max_buffer_bytes
            .map_or(DEFAULT_MAX_BUFFER_BYTES, u64::from);
        let pipeline = PipelineConfig {
            wal,
            dead_letters: Some(data_dir.join(DEAD_LETTER_DIR)),
            key_journal: Some(data_dir.join(KEY_JOURNAL_DIR)),
            max_buffer_bytes,
            max_table_share: self.max_table_share.unwrap_or(DEFAULT_MAX_TABLE_SHARE),
            auto_create: self.auto_create.unwrap_or(true),
            max_tables: self.max_tables.unwrap_or(DEFAULT_MAX_TABLES),
            evolve: self.evolve.unwrap_or(false),
            evolve_max_columns: self
                .evolve_max_columns
                .unwrap_or(DEFAULT_EVOLVE_MAX_COLUMNS),
            max_partitions_per_insert: self
                .max_partitions_per_insert
                .unwrap_or(DEFAULT_MAX_PARTITIONS_PER_INSERT),
            default_policy,
            default_throttle: self.throttle.validate().map_err(|e| e.within("throttle"))?,
            ack_timeout: self.ack_timeout.unwrap_or(DEFAULT_ACK_TIMEOUT),
            shutdown_timeout: self.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT),
            keys: KeyWindow {
                window: self.insert_key_window.unwrap_or(DEFAULT_KEY_WINDOW),
                max_keys: self.max_insert_keys.unwrap_or(DEFAULT_MAX_KEYS),
            },
            ..PipelineConfig::default()
        };
        if pipeline.keys.window.is_zero() || pipeline.keys.max_keys == 0 {
            let field = if pipeline.keys.window.is_zero() {
                "insert_key_window"
            } else {
                "max_insert_keys"
            };
            return Err(ConfigError::new(field, "must be greater than zero").into());
        }
        if pipeline.evolve_max_columns == 0 {
            return Err(ConfigError::new("evolve_max_columns", "must be greater than zero").into());
        }
        if pipeline.max_tables == 0 {
            return Err(ConfigError::new(
                "max_tables",
                "must be greater than zero (auto_create = false turns auto-creation off)",
            )
            .into());
        }
        if pipeline.ack_timeout.is_zero() {
            return Err(ConfigError::new("ack_timeout", "must be greater than zero").into());
        }
        Ok(pipeline)
    }

    /// The HTTP limits: the insert limits already checked, `body_timeout`, and how long
    /// shutdown waits for answers still owed.
    fn resolve_limits(
        &self,
        max_body_bytes: u64,
        max_rows_per_insert: usize,
        ack_timeout: Duration,
    ) -> Result<Limits> {
        let body_timeout = self.body_timeout.unwrap_or(DEFAULT_BODY_TIMEOUT);
        if body_timeout.is_zero() {
            return Err(ConfigError::new("body_timeout", "must be greater than zero").into());
        }
        let idle_timeout = self.clickhouse.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT);
        if idle_timeout.is_zero() {
            return Err(
                ConfigError::new("clickhouse.idle_timeout", "must be greater than zero").into(),
            );
        }
        // A committed insert in flight at shutdown still gets its answer.
        let drain_timeout = ack_timeout.saturating_add(DRAIN_MARGIN);
        Ok(Limits {
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(usize::MAX),
            max_rows_per_insert,
            body_timeout,
            idle_timeout,
            drain_timeout,
            drain_delay: self.drain_delay.unwrap_or(DEFAULT_DRAIN_DELAY),
        })
    }

    /// `[sinks.*]`: none may take the built-in lake's name, and no store's timeout may be zero.
    fn check_sinks(&self) -> Result<()> {
        for (name, spec) in &self.sinks {
            if name == LAKE_SINK {
                return Err(ConfigError::new(
                    format!("sinks.{name}"),
                    "'lake' is the built-in lake; give this sink another name",
                )
                .into());
            }
            if let SinkSpec::ClickHouse(ch) = spec {
                ch.check()
                    .map_err(|e| ConfigError::new(format!("sinks.{name}"), e))?;
            }
            let timeout = match spec {
                SinkSpec::Sqlite(_) => None,
                SinkSpec::Postgres(pg) => pg.timeout,
                SinkSpec::ClickHouse(ch) => ch.timeout,
            };
            if timeout.is_some_and(|t| t.is_zero()) {
                return Err(ConfigError::new(
                    format!("sinks.{name}.timeout"),
                    "must be greater than zero",
                )
                .into());
            }
        }
        Ok(())
    }

    /// `[auth]`, with the token from `SLUICE_TOKEN` added: who may write to tables without a
    /// rule of their own.
    fn resolve_auth(&self) -> Result<Access> {
        let mut access = Access::default();
        let token = std::env::var(TOKEN_ENV).unwrap_or_default();
        let mut global = self.auth.clone();
        if !token.trim().is_empty() {
            global
                .get_or_insert_with(Credentials::default)
                .tokens
                .push(token.trim().to_owned());
        }
        if let Some(rule) = global {
            check_rule("auth", &rule)?;
            access.global = Some(rule);
        }
        Ok(access)
    }
}

impl WalFileConfig {
    /// `[wal]`, unless `--wal off` or `enabled = false` turns the log off (then `None`).
    fn resolve(&self, data_dir: &Path, flag: Option<bool>) -> Result<Option<WalConfig>> {
        if !flag.or(self.enabled).unwrap_or(true) {
            return Ok(None);
        }
        let mut wal = WalConfig::new(data_dir.join(WAL_DIR));
        if let Some(ByteSize(bytes)) = self.segment_bytes {
            if bytes < 4096 {
                return Err(ConfigError::new("wal.segment_bytes", "must be at least 4KiB").into());
            }
            wal.segment_bytes = bytes;
        }
        if let Some(mode) = &self.recovery {
            wal.recovery = mode
                .parse::<RecoveryMode>()
                .map_err(|reason| ConfigError::new("wal.recovery", reason))?;
        }
        Ok(Some(wal))
    }
}

impl LakeFileConfig {
    /// `[lake]` and `[lake.compaction]`: where the lake lives, how its files are written and
    /// how they are compacted.
    fn resolve(&self, data_dir: &Path) -> Result<(LakeConfig, CompactionSettings)> {
        let mut lake = self.resolve_root(data_dir)?;
        if let Some(interval) = self.checkpoint_interval {
            if interval == 0 {
                return Err(ConfigError::new(
                    "lake.checkpoint_interval",
                    "must be greater than zero",
                )
                .into());
            }
            lake.checkpoint_interval = interval;
        }
        if let Some(retention) = self.log_retention {
            lake.log_retention = retention;
        }
        if let Some(retention) = self.file_retention {
            lake.file_retention = retention;
        }
        let compaction = self.compaction.resolve()?;
        if let Some(level) = self.zstd_level {
            if !(1..=22).contains(&level) {
                return Err(ConfigError::new(
                    "lake.zstd_level",
                    format!("{level} is not a zstd level (1 to 22)"),
                )
                .into());
            }
            lake.zstd_level = level;
        }
        if let Some(ByteSize(bytes)) = self.lz4_below {
            lake.lz4_below = bytes;
        }
        if let Some(rows) = self.row_group_rows {
            if rows == 0 {
                return Err(
                    ConfigError::new("lake.row_group_rows", "must be greater than zero").into(),
                );
            }
            lake.row_group_rows = rows;
        }
        Ok((lake, compaction))
    }

    /// `lake.root` and `[lake.storage]`: the lake's defaults with its root, and the
    /// object-store options, which only an object-store root takes.
    fn resolve_root(&self, data_dir: &Path) -> Result<LakeConfig> {
        let mut lake = LakeConfig::new(data_dir);
        if let Some(root) = &self.root {
            lake.root =
                LakeRoot::parse(root).map_err(|reason| ConfigError::new("lake.root", reason))?;
        }
        if !self.storage.is_empty() && lake.root.folder().is_some() {
            return Err(ConfigError::new(
                "lake.storage",
                "object-store options need an object-store root (lake.root = \"s3://...\")",
            )
            .into());
        }
        lake.storage_options = self
            .storage
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        sluice_sinks::lake::retry_config(&lake.storage_options)
            .map_err(|reason| ConfigError::new("lake.storage", reason))?;
        sluice_sinks::lake::check_storage_options(&lake.root, &lake.storage_options)
            .map_err(|reason| ConfigError::new("lake.storage", reason))?;
        Ok(lake)
    }
}

/// The sink a setting names, if it is the lake or one of `[sinks.*]`; the error lists them all.
fn known_sink(sinks: &BTreeMap<String, SinkSpec>, field: &str, name: &str) -> Result<String> {
    if name == LAKE_SINK || sinks.contains_key(name) {
        Ok(name.to_owned())
    } else {
        let mut names: Vec<&str> = sinks.keys().map(String::as_str).collect();
        names.insert(0, LAKE_SINK);
        Err(ConfigError::new(
            field,
            format!("there is no sink '{name}' (known: {})", names.join(", ")),
        )
        .into())
    }
}

/// `[tables.*]`: each declared table with the name of its sink. Unset flush and throttle
/// fields come from the top-level ones; a table's own `auth` rule goes into `access`.
fn resolve_tables(
    tables: BTreeMap<String, TableFileConfig>,
    default_evolve: bool,
    default_flush: &FlushPolicyConfig,
    default_throttle: &ThrottleConfig,
    sinks: &BTreeMap<String, SinkSpec>,
    default_sink: &str,
    access: &mut Access,
) -> Result<Vec<(TableDef, String)>> {
    let mut resolved = Vec::new();
    for (name, table) in tables {
        let field = format!("tables.{name}");
        if let Some(rule) = &table.auth {
            check_rule(&format!("{field}.auth"), rule)?;
            access.tables.insert(name.clone(), rule.clone());
        }
        let table_name =
            TableName::new(&name).map_err(|e| ConfigError::new(&field, e.to_string()))?;
        let policy = table
            .flush
            .or(default_flush)
            .validate()
            .map_err(|e| e.within(&format!("{field}.flush")))?;
        let layout = TableLayout {
            columns: table.columns,
            partition_by: table.partition_by,
            sort_by: table.sort_by,
        };
        let throttle = table
            .throttle
            .or(default_throttle)
            .validate()
            .map_err(|e| e.within(&format!("{field}.throttle")))?;
        let def = TableDef::new(table_name, layout, policy)
            .map_err(|e| e.within(&field))?
            .with_throttle(throttle)
            .with_evolve(table.evolve.unwrap_or(default_evolve))
            .declared();
        let sink = match &table.sink {
            Some(sink) => known_sink(sinks, &format!("{field}.sink"), sink)?,
            None => default_sink.to_owned(),
        };
        if let Some(SinkSpec::ClickHouse(ch)) = sinks.get(&sink) {
            ch.check_table(&def)
                .map_err(|e| ConfigError::new(&field, e))?;
        }
        resolved.push((def, sink));
    }
    Ok(resolved)
}

/// The address to listen on: `--listen`, else the file's, else the default; never empty.
fn resolve_listen(flag: Option<String>, file: Option<String>) -> Result<String> {
    let listen = flag.or(file).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    if listen.trim().is_empty() {
        bail!("invalid config: listen: the address is empty");
    }
    Ok(listen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> Result<Settings> {
        let file: FileConfig = toml::from_str(text)?;
        file.resolve(Overrides::default())
    }

    #[test]
    fn empty_file_gives_defaults() {
        let s = resolve("").unwrap();
        assert_eq!(s.listen, DEFAULT_LISTEN);
        assert_eq!(s.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert!(s.pipeline.auto_create);
        assert!(s.tables.is_empty());
        let wal = s.pipeline.wal.expect("the WAL is on by default");
        assert_eq!(wal.dir, PathBuf::from(DEFAULT_DATA_DIR).join(WAL_DIR));
    }

    #[test]
    fn declares_tables_with_inherited_policy() {
        let s = resolve(
            r#"
            [flush]
            max_age = "250ms"
            min_age = "50ms"
            [tables.events]
            columns = [
              { name = "ts", type = "timestamp", nullable = false },
              { name = "service", type = "String" },
            ]
            partition_by = "day(ts)"
            sort_by = ["service", "ts"]
            [tables.events.flush]
            max_rows = 5000
            "#,
        )
        .unwrap();
        let (t, sink) = &s.tables[0];
        assert_eq!(sink, LAKE_SINK);
        assert_eq!(t.policy().max_rows(), 5000);
        assert_eq!(t.policy().max_age(), Duration::from_millis(250));
        assert_eq!(t.policy().min_age(), Some(Duration::from_millis(50)));
        assert_eq!(t.sort_by(), ["service", "ts"]);
    }

    #[test]
    fn tables_pick_named_sinks() {
        let s = resolve(
            r#"
            default_sink = "db"
            [sinks.db]
            type = "sqlite"
            path = "x.db"
            synchronous = "normal"
            [tables.a]
            columns = [{ name = "id", type = "int64" }]
            [tables.b]
            columns = [{ name = "id", type = "int64" }]
            sink = "lake"
            "#,
        )
        .unwrap();
        let sinks: Vec<(&str, &str)> = s
            .tables
            .iter()
            .map(|(t, s)| (t.name().as_str(), s.as_str()))
            .collect();
        assert_eq!(sinks, [("a", "db"), ("b", "lake")]);
        assert_eq!(s.default_sink, "db");
        assert!(matches!(&s.sinks["db"], SinkSpec::Sqlite(c) if c.path == Path::new("x.db")));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("[flush]\nmax_rows = 0", "flush.max_rows"),
            ("[flush]\nmax_rows = -5", "flush.max_rows"),
            (
                "[tables.t]\ncolumns = [{name = \"a\", type = \"int64\"}]\n[tables.t.flush]\nmax_inserts = 0",
                "tables.t.flush.max_inserts",
            ),
            (
                "[tables.t]\ncolumns = [{name = \"a\", type = \"int64\"}]\nsort_by = [\"b\"]",
                "tables.t.sort_by[0]",
            ),
            (
                "[tables.\"a/b\"]\ncolumns = [{name = \"a\", type = \"int64\"}]",
                "tables.a/b",
            ),
            ("[lake]\nzstd_level = 40", "lake.zstd_level"),
            (
                "[lake]\ncheckpoint_interval = 0",
                "lake.checkpoint_interval",
            ),
            ("[lake.compaction]\nfanin = 1", "lake.compaction.fanin"),
            (
                "[throttle]\nparts_to_delay_insert = 0",
                "throttle.parts_to_delay_insert",
            ),
            (
                "[tables.t]\ncolumns = [{name = \"a\", type = \"int64\"}]\n[tables.t.throttle]\nparts_to_throw_insert = 5\nparts_to_delay_insert = 9",
                "tables.t.throttle.parts_to_throw_insert",
            ),
            (
                "[lake.compaction]\ntarget_size = \"10KiB\"",
                "lake.compaction.target_size",
            ),
            ("[wal]\nrecovery = \"maybe\"", "wal.recovery"),
            ("default_sink = \"nope\"", "default_sink"),
            (
                "[tables.t]\ncolumns = [{name = \"a\", type = \"int64\"}]\nsink = \"nope\"",
                "tables.t.sink",
            ),
            (
                "[sinks.lake]\ntype = \"sqlite\"\npath = \"x\"",
                "sinks.lake",
            ),
            ("[wal]\nsegment_bytes = 10", "wal.segment_bytes"),
            ("body_timeout = \"0s\"", "body_timeout"),
            (
                "[lake]\nroot = \"s3://b/l\"\n[lake.storage]\nRETRY_TIMEOUT = \"soon\"",
                "lake.storage",
            ),
            (
                "[lake]\nroot = \"s3://b/l\"\n[lake.storage]\naws_acess_key_id = \"x\"",
                "lake.storage",
            ),
            (
                "[sinks.pg]\ntype = \"postgres\"\nurl = \"postgres://x@127.0.0.1/db\"\ntimeout = \"0s\"",
                "sinks.pg.timeout",
            ),
            (
                "[sinks.ch]\ntype = \"clickhouse\"\nurl = \"http://127.0.0.1:8123\"\ntimeout = \"0s\"",
                "sinks.ch.timeout",
            ),
            (
                "[sinks.ch]\ntype = \"clickhouse\"\nurl = \"http://a:8123\"\nshard_key = \"u\"",
                "sinks.ch",
            ),
            (
                "[sinks.ch]\ntype = \"clickhouse\"\nurl = \"http://a:8123\"\nshards = [\"http://a:8123\", \"http://a:8123/\"]",
                "sinks.ch",
            ),
            (
                "[sinks.ch]\ntype = \"clickhouse\"\nurl = \"http://a:8123\"\nshards = [\"http://a:8123\", \"http://b:8123\"]\nshard_key = \"u\"\n[tables.t]\nsink = \"ch\"\ncolumns = [{name = \"u\", type = \"string\"}]",
                "tables.t",
            ),
            (
                "[sinks.ch]\ntype = \"clickhouse\"\nurl = \"http://a:8123\"\nshards = [\"http://a:8123\", \"http://b:8123\"]\nshard_key = \"u\"\n[tables.t]\nsink = \"ch\"\ncolumns = [{name = \"u\", type = \"float64\", nullable = false}]",
                "tables.t",
            ),
        ];
        for (text, field) in cases {
            let err = resolve(text).unwrap_err();
            let config = err
                .downcast_ref::<ConfigError>()
                .unwrap_or_else(|| panic!("{text}: {err:#}"));
            assert_eq!(config.field, field, "{text}");
        }
    }

    #[test]
    fn the_drain_delay_comes_from_the_flag_over_the_file() {
        assert_eq!(resolve("").unwrap().limits.drain_delay, Duration::ZERO);
        let file = "drain_delay = \"4s\"";
        assert_eq!(
            resolve(file).unwrap().limits.drain_delay,
            Duration::from_secs(4)
        );
        let flag = Overrides {
            drain_delay: Some(Duration::from_millis(1500)),
            ..Overrides::default()
        };
        let settings = toml::from_str::<FileConfig>(file)
            .unwrap()
            .resolve(flag)
            .unwrap();
        assert_eq!(settings.limits.drain_delay, Duration::from_millis(1500));
        assert!(resolve("drain_delay = \"soon\"").is_err());
    }

    #[test]
    fn unknown_settings_and_types_are_refused() {
        assert!(resolve("max_rowz = 5").is_err());
        let err =
            resolve("[tables.t]\ncolumns = [{name = \"a\", type = \"decimals\"}]").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown column type"),
            "{err:#}"
        );
    }
}
