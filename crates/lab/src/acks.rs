//! `sluice lab acks`: what each acknowledgement mode costs, side by side in one run.
//!
//! One server (with its write-ahead log), the same producers and inserts for `async`, `durable`
//! and `committed`, one table per mode. For each: rows/s, latency, and the log's fsyncs per second
//! read from `/metrics`, which shows group commit at work: fsyncs per second stay near the disk's
//! rate while rows per second follow the producers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, Latency, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;

/// What to run.
#[derive(Debug, Clone)]
pub struct AcksConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// Concurrent producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// How long each mode runs.
    pub duration: Duration,
    /// The flush age limit (committed acks wait for it).
    pub max_age: Duration,
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    /// `async`, `durable` or `committed`.
    pub ack: String,
    /// Acknowledged rows per second.
    pub rows_per_s: f64,
    /// Latency of acknowledged inserts.
    pub latency: Latency,
    /// Write-ahead-log fsyncs per second during the run.
    pub fsyncs_per_s: f64,
    /// Rows per fsync.
    pub rows_per_fsync: f64,
    /// Failed inserts.
    pub errors: u64,
}

/// All three modes.
#[derive(Debug, Clone, Serialize)]
pub struct AcksReport {
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Seconds per mode.
    pub duration_s: f64,
    /// The flush age limit, seconds.
    pub max_age_s: f64,
    /// One result per mode, in the order async, durable, committed.
    pub modes: Vec<ModeResult>,
}

/// Runs the three modes against one server.
pub async fn run(
    config: AcksConfig,
    mut on_mode: impl FnMut(&ModeResult),
) -> Result<AcksReport, String> {
    let mut text = format!("[flush]\nmax_age = \"{}ms\"\n", config.max_age.as_millis());
    for ack in ["async", "durable", "committed"] {
        text.push_str(&format!(
            "\n[tables.acks_{ack}]\ncolumns = {COLUMNS_TOML}\n"
        ));
    }
    let mut server =
        ServerProcess::spawn_configured(&config.binary, &config.data_dir, "acks.toml", &text)?;
    let mut modes = Vec::new();
    for ack in ["async", "durable", "committed"] {
        let before = fsyncs(&server).await?;
        let load = LoadConfig {
            seed: 11,
            ..LoadConfig::native(
                server.addr,
                &format!("acks_{ack}"),
                config.producers,
                config.rows_per_insert,
                ack,
                Stop::After(config.duration),
            )
        };
        let report = load::run(load, Arc::new(Progress::default()), false)
            .await
            .map_err(|e| e.to_string())?;
        let after = fsyncs(&server).await?;
        let fsyncs_per_s = (after - before) / report.elapsed_s.max(1e-9);
        let result = ModeResult {
            ack: ack.into(),
            rows_per_s: report.rows_per_s,
            latency: report.latency,
            fsyncs_per_s,
            rows_per_fsync: if after > before {
                report.rows_acked as f64 / (after - before)
            } else {
                0.0
            },
            errors: report.errors.values().sum(),
        };
        on_mode(&result);
        modes.push(result);
    }
    server.terminate().map_err(|e| e.to_string())?;
    server
        .wait(Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    Ok(AcksReport {
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        duration_s: config.duration.as_secs_f64(),
        max_age_s: config.max_age.as_secs_f64(),
        modes,
    })
}

async fn fsyncs(server: &ServerProcess) -> Result<f64, String> {
    let page = load::http_get(server.addr, "/metrics").await?;
    Ok(load::metric(&page, "sluice_wal_fsyncs_total").unwrap_or(0.0))
}
