//! `sluice lab clickhouse`: seed 000's "too many parts", measured on a real ClickHouse.
//!
//! The same clients send the same single-row inserts (a) straight to ClickHouse and (b) to
//! sluice's ClickHouse-compatible endpoint, which lands them in ClickHouse, both over HTTP or
//! both over the native protocol. Each side gets a
//! fresh server (so `system.events` counts only its own work) and the same table. For each:
//! rows/s, the parts that exist afterwards (`system.parts`, active and all: inactive parts stay
//! on disk for `old_parts_lifetime`, 8 minutes, so "all" is every part created during the run),
//! and the rows merges rewrote (`system.events` `MergedRows`) per row inserted.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, Endpoint, Latency, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;
use crate::services::ClickHouse;

/// The table on both sides, as sluice would create it from [`COLUMNS_TOML`].
const TABLE_DDL: &str = "CREATE TABLE load (id Int64, ts Nullable(DateTime('UTC')), \
    service Nullable(String), endpoint Nullable(String), status Nullable(Int32), \
    latency_ms Nullable(Float64), bytes Nullable(Int64), request_id Nullable(String), \
    user_id Nullable(Int64)) ENGINE = MergeTree() ORDER BY id";

/// How long merges may keep running after the inserts before the counts are read anyway.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct ClickHouseLabConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// sluice's data directory.
    pub data_dir: PathBuf,
    /// Single-row inserts per side.
    pub inserts: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// sluice's flush age limit.
    pub max_age: Duration,
    /// Rows per second over all clients on both sides; `None`: as fast as answers come.
    pub rate: Option<f64>,
    /// How the clients send: ClickHouse's HTTP interface or its native protocol.
    pub protocol: Protocol,
}

/// How the lab's clients reach both servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `POST /?query=INSERT ... FORMAT JSONEachRow`.
    Http,
    /// `INSERT ... VALUES` and a `Native` block over TCP.
    Native,
}

/// One side's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// `direct` or `sluice`.
    pub name: String,
    /// Rows acknowledged.
    pub rows_acked: u64,
    /// Rows in the table afterwards.
    pub rows_landed: u64,
    /// Acknowledged rows per second.
    pub rows_per_s: f64,
    /// Latency of acknowledged inserts.
    pub latency: Latency,
    /// Active parts afterwards.
    pub parts_active: u64,
    /// Every part on disk afterwards, active or merged away.
    pub parts_all: u64,
    /// Rows rewritten by merges (`MergedRows`).
    pub merged_rows: u64,
    /// `merged_rows / rows_landed`.
    pub rewrite_ratio: f64,
    /// Failed inserts.
    pub errors: u64,
}

/// Both sides.
#[derive(Debug, Clone, Serialize)]
pub struct ClickHouseReport {
    /// Inserts per side.
    pub inserts: u64,
    /// Clients.
    pub clients: usize,
    /// sluice's flush age limit in seconds.
    pub max_age_s: f64,
    /// How the clients sent.
    pub protocol: Protocol,
    /// The rate both sides sent at, rows/s (absent: as fast as answers came).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// ClickHouse's version.
    pub clickhouse_version: String,
    /// Straight to ClickHouse.
    pub direct: Side,
    /// Through sluice.
    pub sluice: Side,
}

/// Runs both sides, reporting each line as it is measured.
pub async fn run(
    config: &ClickHouseLabConfig,
    mut on_line: impl FnMut(&str),
) -> Result<ClickHouseReport, String> {
    let (version, direct, load) = run_direct(config).await?;
    on_line(&line(&direct));
    let through = run_through_sluice(config, load).await?;
    on_line(&line(&through));
    Ok(ClickHouseReport {
        inserts: config.inserts,
        clients: config.clients,
        max_age_s: config.max_age.as_secs_f64(),
        protocol: config.protocol,
        rate: config.rate,
        clickhouse_version: version,
        direct,
        sluice: through,
    })
}

/// The inserts straight into a fresh ClickHouse: its version, its figures, and the load, for
/// the other side to send the same.
async fn run_direct(config: &ClickHouseLabConfig) -> Result<(String, Side, LoadConfig), String> {
    let server = ClickHouse::start()?;
    let version = server.query("SELECT version()").await?.trim().to_owned();
    server.query(TABLE_DDL).await?;
    let (addr, endpoint) = match config.protocol {
        Protocol::Http => (server.addr, Endpoint::ClickHouseServer),
        Protocol::Native => (server.tcp_addr(), Endpoint::ClickHouseTcp),
    };
    let load = LoadConfig {
        addr,
        table: "load".into(),
        endpoint,
        producers: config.clients,
        rows_per_insert: 1,
        rate: config.rate,
        stop: Stop::Rows(config.inserts),
        ack: "committed".into(),
        seed: 7,
        id_offset: 0,
        format: crate::events::RowFormat::JsonEachRow,
        keyed: false,
    };
    let report = load::run(load.clone(), Arc::new(Progress::default()), false)
        .await
        .map_err(|e| e.to_string())?;
    Ok((version, measure("direct", &server, &report).await?, load))
}

/// The same inserts through sluice, which lands them in another fresh ClickHouse.
async fn run_through_sluice(
    config: &ClickHouseLabConfig,
    load: LoadConfig,
) -> Result<Side, String> {
    let server = ClickHouse::start()?;
    server.query(TABLE_DDL).await?;
    std::fs::create_dir_all(&config.data_dir).map_err(|e| e.to_string())?;
    let toml = config.data_dir.join("sluice.toml");
    let text = format!(
        "[flush]\nmax_age = \"{}ms\"\n\n[clickhouse]\ntcp_listen = \"127.0.0.1:0\"\n\n\
         [sinks.ch]\ntype = \"clickhouse\"\nurl = {:?}\n\n\
         [tables.load]\nsink = \"ch\"\ncolumns = {COLUMNS_TOML}\n",
        config.max_age.as_millis(),
        server.url
    );
    std::fs::write(&toml, text).map_err(|e| e.to_string())?;
    let mut sluice =
        ServerProcess::spawn(&config.binary, &config.data_dir.join("data"), Some(&toml))
            .map_err(|e| e.to_string())?;
    let (addr, endpoint) = match config.protocol {
        Protocol::Http => (sluice.addr, Endpoint::ClickHouse),
        Protocol::Native => (
            sluice
                .native_addr
                .ok_or("sluice did not open the native protocol")?,
            Endpoint::ClickHouseTcp,
        ),
    };
    let through = LoadConfig {
        addr,
        endpoint,
        ack: "durable".into(),
        ..load
    };
    let report = load::run(through, Arc::new(Progress::default()), false)
        .await
        .map_err(|e| e.to_string())?;
    sluice.stop(Duration::from_secs(120))?;
    measure("sluice", &server, &report).await
}

/// Waits for merges to finish, then reads the side's figures.
async fn measure(name: &str, ch: &ClickHouse, report: &load::LoadReport) -> Result<Side, String> {
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut quiet = 0;
    while quiet < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if ch.number("SELECT count() FROM system.merges").await? == 0 {
            quiet += 1;
        } else {
            quiet = 0;
        }
    }
    let rows_landed = ch.number("SELECT count() FROM load").await?;
    let parts = "SELECT count() FROM system.parts WHERE database = 'default' AND table = 'load'";
    let merged_rows = ch
        .query("SELECT value FROM system.events WHERE event = 'MergedRows' FORMAT TabSeparated")
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    Ok(Side {
        name: name.to_owned(),
        rows_acked: report.rows_acked,
        rows_landed,
        rows_per_s: report.rows_per_s,
        latency: report.latency.clone(),
        parts_active: ch.number(&format!("{parts} AND active")).await?,
        parts_all: ch.number(parts).await?,
        merged_rows,
        rewrite_ratio: merged_rows as f64 / rows_landed.max(1) as f64,
        errors: report.errors.values().sum(),
    })
}

fn line(side: &Side) -> String {
    format!(
        "{:<7} {:>9.0} rows/s  p99 {:>7.2} ms  {:>6} rows landed  {:>6} parts ({} active)  \
         {:>9} rows merged ({:.2}x)  {} errors",
        side.name,
        side.rows_per_s,
        side.latency.p99_ms,
        side.rows_landed,
        side.parts_all,
        side.parts_active,
        side.merged_rows,
        side.rewrite_ratio,
        side.errors,
    )
}
