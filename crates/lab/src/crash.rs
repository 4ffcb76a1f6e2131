//! `sluice lab crash`: kill a loaded server with SIGKILL again and again, restart it, and check
//! that every row acknowledged `durable` is in the lake exactly once.
//!
//! Each cycle starts `sluice serve` on the same data directory, runs N producers sending
//! single-row inserts with `ack=durable` and unique ids, and kills the server at a random moment.
//! Between kills the server replays its write-ahead log, so each cycle also tests recovery from
//! the last. At the end a last server replays and shuts down cleanly, and every part is read back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;
use crate::verify::{self, Audit};

/// The table the crash lab writes.
pub const TABLE: &str = "crash";

/// What to run.
#[derive(Debug, Clone)]
pub struct CrashConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The data directory every server of the run shares.
    pub data_dir: PathBuf,
    /// How many times to kill the server.
    pub cycles: usize,
    /// Concurrent producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Shortest time under load before the kill.
    pub min_run: Duration,
    /// Longest time under load before the kill.
    pub max_run: Duration,
    /// Seed of the kill times and the events.
    pub seed: u64,
}

/// One kill.
#[derive(Debug, Clone, Serialize)]
pub struct Cycle {
    /// Milliseconds under load before SIGKILL.
    pub ran_ms: u64,
    /// Rows acknowledged in this cycle.
    pub acked: u64,
    /// Inserts that failed (mostly the ones in flight at the kill).
    pub failed_inserts: u64,
}

/// What the run found.
#[derive(Debug, Clone, Serialize)]
pub struct CrashReport {
    /// Kills.
    pub cycles: Vec<Cycle>,
    /// The audit of every acknowledged row against the lake.
    pub audit: Audit,
    /// Parts in the lake at the end.
    pub parts: usize,
    /// Wall time, seconds.
    pub elapsed_s: f64,
}

impl CrashReport {
    /// Whether every acknowledged row is there exactly once.
    pub fn passed(&self) -> bool {
        self.audit.lost == 0 && self.audit.duplicated == 0 && self.audit.acked > 0
    }
}

fn write_config(dir: &Path) -> std::io::Result<PathBuf> {
    // A short age limit lands parts during every cycle, so kills also fall between "part
    // written" and "log released", the case replay must not land twice.
    let text =
        format!("[flush]\nmax_age = \"300ms\"\n\n[tables.{TABLE}]\ncolumns = {COLUMNS_TOML}\n");
    let path = dir.join("crash.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Runs the cycles; `on_cycle` sees each one as it ends.
pub async fn run(
    config: CrashConfig,
    mut on_cycle: impl FnMut(usize, &Cycle),
) -> Result<CrashReport, String> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.data_dir).map_err(|e| e.to_string())?;
    let config_file = write_config(&config.data_dir).map_err(|e| e.to_string())?;
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let mut acked: Vec<(u64, u64)> = Vec::new();
    let mut cycles = Vec::new();
    for cycle in 0..config.cycles {
        let mut server = ServerProcess::spawn(&config.binary, &config.data_dir, Some(&config_file))
            .map_err(|e| format!("cycle {cycle}: {e}"))?;
        let progress = Arc::new(Progress::default());
        let load = LoadConfig {
            seed: config.seed.wrapping_add(cycle as u64),
            id_offset: cycle as u64 * 1_000_000_000,
            ..LoadConfig::native(
                server.addr,
                TABLE,
                config.producers,
                config.rows_per_insert,
                "durable",
                Stop::After(config.max_run * 4),
            )
        };
        let task = tokio::spawn(load::run(load, progress.clone(), true));
        let min = config.min_run.as_millis() as u64;
        let max = config.max_run.as_millis().max(u128::from(min) + 1) as u64;
        let ran_ms = rng.random_range(min..max);
        tokio::time::sleep(Duration::from_millis(ran_ms)).await;
        server
            .kill()
            .map_err(|e| format!("cycle {cycle}: cannot kill: {e}"))?;
        progress.stop.store(true, Ordering::Relaxed);
        let report = task
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cycle {cycle}: {e}"))?;
        let result = Cycle {
            ran_ms,
            acked: report.rows_acked,
            failed_inserts: report.errors.values().sum(),
        };
        on_cycle(cycle, &result);
        cycles.push(result);
        acked.extend(report.acked_ids.unwrap_or_default());
    }
    // A last start replays what the last kill left, then lands everything and stops.
    let mut server = ServerProcess::spawn(&config.binary, &config.data_dir, Some(&config_file))
        .map_err(|e| format!("final start: {e}"))?;
    server
        .stop(Duration::from_secs(60))
        .map_err(|e| format!("{e} (the final server)"))?;
    let counts = verify::id_counts(&config.data_dir, TABLE)?;
    let parts = verify::part_files(&config.data_dir, TABLE)?.len();
    Ok(CrashReport {
        cycles,
        audit: verify::audit(&counts, &acked),
        parts,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}
