//! `sluice lab overload`: the store goes away under a load many times larger than the buffer.
//!
//! A server with a small buffer lands table `overload` in the lake, partitioned by service. Its
//! store fails for real: a regular file stands where each partition's folder must be created, so
//! every part write fails with an I/O error. Producers send `durable` inserts until they have
//! offered `factor` times the buffer's size: the buffer fills, later inserts are refused with 503
//! (`overloaded`, resent by the producers after a pause), and sluice's resident memory is read
//! from `/proc` meanwhile. Then the store comes back: sluice drains on its own, and every
//! acknowledged row is audited in the lake: lost and duplicated must be 0.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::events::{COLUMNS_TOML, SERVICES};
use crate::load::{self, LoadConfig, Progress, Stop, http_get};
use crate::process::ServerProcess;
use crate::verify::{self, Audit};

/// The table the lab writes.
pub const TABLE: &str = "overload";

/// What to run.
#[derive(Debug, Clone)]
pub struct OverloadConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// `max_buffer_bytes` of the server.
    pub buffer_bytes: u64,
    /// How many times the buffer the producers offer while the store is down.
    pub factor: f64,
    /// Concurrent producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// The longest the store stays down, whether or not the offer was reached.
    pub max_outage: Duration,
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct OverloadReport {
    /// `max_buffer_bytes`.
    pub buffer_bytes: u64,
    /// Body bytes the producers sent while the store was down, resends included.
    pub offered_bytes: u64,
    /// `offered_bytes / buffer_bytes`.
    pub offered_factor: f64,
    /// Resident memory right after start.
    pub rss_at_start_bytes: u64,
    /// Peak resident memory over the whole run (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// `(peak - at start) / buffer`: what the buffered rows cost in memory, per byte of limit.
    pub growth_over_buffer: f64,
    /// Seconds the store was down.
    pub outage_s: f64,
    /// Seconds from the store's return until nothing was buffered.
    pub drain_s: f64,
    /// Inserts refused with `overloaded` (and resent).
    pub refused_inserts: u64,
    /// Inserts that failed otherwise.
    pub failed_inserts: u64,
    /// Every acknowledged row, against the lake.
    pub audit: Audit,
}

impl OverloadReport {
    /// Whether every acknowledged row landed exactly once.
    pub fn passed(&self) -> bool {
        self.audit.lost == 0 && self.audit.duplicated == 0 && self.audit.acked > 0
    }
}

/// `VmRSS` and `VmHWM` of a process, in bytes.
pub fn memory_of(pid: u32) -> Result<(u64, u64), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kb| kb * 1024)
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// A regular file where each partition's folder goes: the lake's writes fail until removed.
fn block(table_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(table_dir)?;
    SERVICES
        .iter()
        .map(|service| {
            let path = table_dir.join(format!("service={service}"));
            std::fs::write(&path, "the store is down")?;
            Ok(path)
        })
        .collect()
}

/// Rows buffered by every table, from `GET /v1/tables`.
async fn buffered_rows(addr: std::net::SocketAddr) -> Result<u64, String> {
    let text = http_get(addr, "/v1/tables").await?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let tables = value["tables"].as_array().cloned().unwrap_or_default();
    Ok(tables
        .iter()
        .map(|t| t["buffered_rows"].as_u64().unwrap_or(0))
        .sum())
}

/// Runs the outage and the drain.
pub async fn run(
    config: &OverloadConfig,
    mut on_line: impl FnMut(&str),
) -> Result<OverloadReport, String> {
    let toml = write_server_config(config)?;
    let data = config.data_dir.join("data");
    let mut server =
        ServerProcess::spawn(&config.binary, &data, Some(&toml)).map_err(|e| e.to_string())?;
    // After start (a lake that cannot list its partitions refuses to start), before any row.
    let blockers = block(&data.join(TABLE)).map_err(|e| e.to_string())?;
    let pid = server.pid();
    let (rss_at_start, _) = memory_of(pid)?;

    let progress = Arc::new(Progress::default());
    let task = tokio::spawn(load::run(
        load_config(config, server.addr),
        progress.clone(),
        true,
    ));
    let (offered_bytes, outage_s) = offer(config, &progress, pid, &mut on_line).await?;
    let report = task
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;

    let drain_s = restore_and_drain(&blockers, server.addr).await?;
    let (_, peak) = memory_of(pid)?;
    on_line(&format!(
        "store back: drained in {drain_s:.1} s; peak resident {:.1} MiB",
        peak as f64 / MIB
    ));
    server.stop(Duration::from_secs(120))?;
    let counts = verify::id_counts(&data, TABLE)?;
    let audit = verify::audit(&counts, report.acked_ids.as_deref().unwrap_or_default());
    Ok(OverloadReport {
        buffer_bytes: config.buffer_bytes,
        offered_bytes,
        offered_factor: offered_bytes as f64 / config.buffer_bytes.max(1) as f64,
        rss_at_start_bytes: rss_at_start,
        peak_rss_bytes: peak,
        growth_over_buffer: peak.saturating_sub(rss_at_start) as f64
            / config.buffer_bytes.max(1) as f64,
        outage_s,
        drain_s,
        refused_inserts: report.retries,
        failed_inserts: report.errors.values().sum(),
        audit,
    })
}

/// Writes the server's configuration (the small buffer and table `overload`, partitioned by
/// service) into the data directory and returns its path.
fn write_server_config(config: &OverloadConfig) -> Result<PathBuf, String> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| e.to_string())?;
    let toml = config.data_dir.join("overload.toml");
    let text = format!(
        "max_buffer_bytes = \"{}B\"\nmax_table_share = 1.0\n\n[flush]\nmax_age = \"200ms\"\n\
         max_bytes = \"{}B\"\n\n[tables.{TABLE}]\npartition_by = \"service\"\ncolumns = {COLUMNS_TOML}\n",
        config.buffer_bytes,
        (config.buffer_bytes / 4).max(1),
    );
    std::fs::write(&toml, text).map_err(|e| e.to_string())?;
    Ok(toml)
}

/// The producers' load: `durable` native inserts into table `overload` until told to stop.
fn load_config(config: &OverloadConfig, addr: std::net::SocketAddr) -> LoadConfig {
    LoadConfig {
        seed: 11,
        ..LoadConfig::native(
            addr,
            TABLE,
            config.producers,
            config.rows_per_insert,
            "durable",
            Stop::After(Duration::from_secs(24 * 3600)),
        )
    }
}

/// Lets the producers send until they have offered `factor` times the buffer or the longest
/// outage has passed, noting sluice's resident memory every two seconds, then tells them to
/// stop. Returns the bytes offered and the seconds the store was down.
async fn offer(
    config: &OverloadConfig,
    progress: &Progress,
    pid: u32,
    on_line: &mut impl FnMut(&str),
) -> Result<(u64, f64), String> {
    let offer = (config.buffer_bytes as f64 * config.factor) as u64;
    let started = Instant::now();
    let mut last_note = Instant::now();
    while progress.bytes_sent.load(Ordering::Relaxed) < offer
        && started.elapsed() < config.max_outage
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if last_note.elapsed() >= Duration::from_secs(2) {
            last_note = Instant::now();
            let (rss, _) = memory_of(pid)?;
            on_line(&format!(
                "store down {:>5.1} s: offered {:>6.1} MiB, resident {:>6.1} MiB",
                started.elapsed().as_secs_f64(),
                progress.bytes_sent.load(Ordering::Relaxed) as f64 / MIB,
                rss as f64 / MIB
            ));
        }
    }
    progress.stop.store(true, Ordering::Relaxed);
    let offered_bytes = progress.bytes_sent.load(Ordering::Relaxed);
    let outage_s = started.elapsed().as_secs_f64();
    Ok((offered_bytes, outage_s))
}

/// The longest the lab waits for sluice to drain once the store is back.
const DRAIN_LIMIT: Duration = Duration::from_secs(300);

/// Brings the store back by removing the blockers, then waits, at most [`DRAIN_LIMIT`], until
/// sluice buffers no rows. Returns the seconds the drain took.
async fn restore_and_drain(
    blockers: &[PathBuf],
    addr: std::net::SocketAddr,
) -> Result<f64, String> {
    for path in blockers {
        std::fs::remove_file(path).map_err(|e| e.to_string())?;
    }
    let back = Instant::now();
    loop {
        if buffered_rows(addr).await? == 0 {
            break;
        }
        if back.elapsed() > DRAIN_LIMIT {
            return Err("sluice did not drain within 300 s of the store's return".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(back.elapsed().as_secs_f64())
}

const MIB: f64 = 1024.0 * 1024.0;
