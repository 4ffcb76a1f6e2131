//! `sluice lab shards`: the parts a ClickHouse cluster of two shards gets from sluice, four
//! ways.
//!
//! - `distributed`: sluice inserts into a `Distributed` table on the first shard, sharding key
//!   `sipHash64(user_id)`, ClickHouse's default asynchronous mode: the first shard writes its
//!   own rows and queues the second shard's on its disk, sent on in the background.
//! - `distributed-sync`: the same with `insert_distributed_sync = 1`: the insert is answered
//!   once both shards hold their rows.
//! - `by-key`: sluice inserts straight into each shard's table, each row to the shard
//!   `sipHash64(user_id)` picks (`shard_key`).
//! - `in-turn`: straight into each shard's table, each flush whole to the next shard.
//!
//! Each way runs the same load (`durable` inserts of the lab's events at a fixed rate) through
//! a fresh sluice into fresh tables, and reads from each shard the parts inserts made (level 0
//! in `system.parts`; merged-away parts stay on disk for eight minutes) and its rows.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;
use crate::services::ClickHouse;

/// How long a way's rows may take to reach both shards after sluice stopped (the asynchronous
/// `Distributed` table sends its queue in the background).
const ARRIVAL_LIMIT: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct ShardsConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// Where the servers' data directories go.
    pub dir: PathBuf,
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Rows per second over all producers.
    pub rate: f64,
    /// How long each way runs.
    pub duration: Duration,
    /// sluice's `max_age`.
    pub max_age: Duration,
}

/// How sluice reaches the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Way {
    /// Through a `Distributed` table, asynchronous.
    Distributed,
    /// Through a `Distributed` table, `insert_distributed_sync = 1`.
    DistributedSync,
    /// Straight into each shard's table, by `shard_key`.
    ByKey,
    /// Straight into each shard's table, each flush whole to the next shard.
    InTurn,
}

impl Way {
    const ALL: [Way; 4] = [
        Way::Distributed,
        Way::DistributedSync,
        Way::ByKey,
        Way::InTurn,
    ];

    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Way::Distributed => "distributed",
            Way::DistributedSync => "distributed-sync",
            Way::ByKey => "by-key",
            Way::InTurn => "in-turn",
        }
    }

    /// The table the rows land in on each shard.
    fn local_table(self) -> String {
        self.name().replace('-', "_")
    }

    /// The table sluice inserts into: the `Distributed` one, or the shards' own.
    fn sluice_table(self) -> String {
        match self {
            Way::Distributed | Way::DistributedSync => format!("{}_all", self.local_table()),
            Way::ByKey | Way::InTurn => self.local_table(),
        }
    }
}

/// One way's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WayResult {
    /// The way.
    pub way: Way,
    /// Acknowledged rows per second.
    pub rows_per_s: f64,
    /// Rows acknowledged.
    pub rows_acked: u64,
    /// Parts inserts made on each shard.
    pub parts: [u64; 2],
    /// Rows on each shard.
    pub rows: [u64; 2],
    /// Rows per inserted part, both shards together.
    pub rows_per_part: f64,
    /// Inserts that failed.
    pub errors: u64,
}

/// Every way.
#[derive(Debug, Clone, Serialize)]
pub struct ShardsReport {
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Rows per second asked for.
    pub rate: f64,
    /// Seconds per way.
    pub duration_s: f64,
    /// sluice's `max_age`, seconds.
    pub max_age_s: f64,
    /// ClickHouse's version.
    pub clickhouse_version: String,
    /// One result per way.
    pub results: Vec<WayResult>,
}

impl ShardsReport {
    /// Whether the run can be trusted: every way landed each acknowledged row once, without
    /// errors.
    pub fn measured_cleanly(&self) -> bool {
        self.results
            .iter()
            .all(|r| r.errors == 0 && r.rows_acked > 0 && r.rows[0] + r.rows[1] == r.rows_acked)
    }
}

/// Runs every way on one cluster of two fresh servers, calling `on_result` as each ends.
pub async fn run(
    config: ShardsConfig,
    mut on_result: impl FnMut(&WayResult),
) -> Result<ShardsReport, String> {
    if config.producers == 0 || config.rows_per_insert == 0 || config.rate <= 0.0 {
        return Err("producers, rows per insert and the rate must be more than zero".into());
    }
    let shards = ClickHouse::two_shards()?;
    let version = shards[0].query("SELECT version()").await?.trim().to_owned();
    let mut results = Vec::with_capacity(Way::ALL.len());
    for way in Way::ALL {
        let result = run_way(&config, &shards, way).await?;
        on_result(&result);
        results.push(result);
    }
    Ok(ShardsReport {
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        rate: config.rate,
        duration_s: config.duration.as_secs_f64(),
        max_age_s: config.max_age.as_secs_f64(),
        clickhouse_version: version,
        results,
    })
}

/// The lab's events with `user_id`, the shard key, never null.
fn columns() -> String {
    COLUMNS_TOML.replace(
        "{ name = \"user_id\", type = \"int64\" }",
        "{ name = \"user_id\", type = \"int64\", nullable = false }",
    )
}

/// Runs the load through a fresh sluice set up for `way`, and reads both shards.
async fn run_way(
    config: &ShardsConfig,
    shards: &[ClickHouse; 2],
    way: Way,
) -> Result<WayResult, String> {
    if matches!(way, Way::Distributed | Way::DistributedSync) {
        make_distributed(shards, way).await?;
    }
    let data_dir = config.dir.join(way.name());
    let text = sluice_config(config, shards, way);
    let mut sluice =
        ServerProcess::spawn_configured(&config.binary, &data_dir, "shards.toml", &text)?;
    let load = LoadConfig {
        rate: Some(config.rate),
        ..LoadConfig::native(
            sluice.addr,
            &way.sluice_table(),
            config.producers,
            config.rows_per_insert,
            "durable",
            Stop::After(config.duration),
        )
    };
    let report = load::run(load, Arc::new(Progress::default()), false)
        .await
        .map_err(|e| e.to_string())?;
    sluice
        .stop(Duration::from_secs(120))
        .map_err(|e| format!("{e} ({})", way.name()))?;
    let table = way.local_table();
    let rows = wait_for_rows(shards, &table, report.rows_acked).await?;
    let mut parts = [0; 2];
    for (count, shard) in parts.iter_mut().zip(shards) {
        *count = shard
            .number(&format!(
                "SELECT count() FROM system.parts WHERE table = '{table}' AND level = 0"
            ))
            .await?;
    }
    Ok(WayResult {
        way,
        rows_per_s: report.rows_per_s,
        rows_acked: report.rows_acked,
        parts,
        rows,
        rows_per_part: (rows[0] + rows[1]) as f64 / (parts[0] + parts[1]).max(1) as f64,
        errors: report.errors.values().sum(),
    })
}

/// The shards' tables for `way`, and its `Distributed` table on the first shard.
async fn make_distributed(shards: &[ClickHouse; 2], way: Way) -> Result<(), String> {
    let local = way.local_table();
    let ddl = format!(
        "CREATE TABLE {local} (id Int64, ts Nullable(DateTime('UTC')), \
         service Nullable(String), endpoint Nullable(String), status Nullable(Int32), \
         latency_ms Nullable(Float64), bytes Nullable(Int64), request_id Nullable(String), \
         user_id Int64) ENGINE = MergeTree() ORDER BY tuple()"
    );
    for shard in shards {
        shard.query(&ddl).await?;
    }
    shards[0]
        .query(&format!(
            "CREATE TABLE {} AS {local} \
             ENGINE = Distributed(sluice_shards, default, {local}, sipHash64(user_id))",
            way.sluice_table()
        ))
        .await
        .map(|_| ())
}

/// sluice's config for `way`: one ClickHouse sink, one table.
fn sluice_config(config: &ShardsConfig, shards: &[ClickHouse; 2], way: Way) -> String {
    let (a, b) = (&shards[0].url, &shards[1].url);
    let sink = match way {
        Way::Distributed => String::new(),
        Way::DistributedSync => "[sinks.ch.settings]\ninsert_distributed_sync = 1\n".into(),
        Way::ByKey => format!("shards = [{a:?}, {b:?}]\nshard_key = \"user_id\"\n"),
        Way::InTurn => format!("shards = [{a:?}, {b:?}]\n"),
    };
    format!(
        "[flush]\nmax_age = \"{}ms\"\n\n[sinks.ch]\ntype = \"clickhouse\"\nurl = {a:?}\n{sink}\n\
         [tables.{}]\nsink = \"ch\"\ncolumns = {}\n",
        config.max_age.as_millis().max(1),
        way.sluice_table(),
        columns()
    )
}

/// Waits until both shards' `table` hold `expected` rows together (the asynchronous
/// `Distributed` table sends its queue after sluice stopped), at most [`ARRIVAL_LIMIT`]; then
/// the rows on each.
async fn wait_for_rows(
    shards: &[ClickHouse; 2],
    table: &str,
    expected: u64,
) -> Result<[u64; 2], String> {
    let deadline = Instant::now() + ARRIVAL_LIMIT;
    loop {
        let mut rows = [0; 2];
        for (count, shard) in rows.iter_mut().zip(shards) {
            *count = shard
                .number(&format!("SELECT count() FROM {table}"))
                .await?;
        }
        if rows[0] + rows[1] >= expected || Instant::now() > deadline {
            return Ok(rows);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
