//! `sluice lab writers`: several sluice processes landing in one Delta table at once.
//!
//! Each sluice keeps its own data directory and write-ahead log; they share one lake root, as a
//! fleet behind a load balancer does. Every flush is a Delta commit, and commits to one table
//! are numbered one after another: when two writers reach for the same version, the loser tries
//! the next one. This lab counts those lost races and the time a flush takes, with 1, 2, ...
//! writers on one table partitioned by service (eight partitions, so each writer commits several
//! times per `max_age`).
//!
//! For each number of writers it starts that many servers on a fresh lake root, splits the
//! producers between them, runs `durable` inserts for the duration, and reads each server's `/metrics`: `sluice_commit_retries_total`, the parts
//! landed, and the `sluice_flush_duration_seconds` histogram, whose buckets are added up over
//! the servers and read like Prometheus's `histogram_quantile`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;

/// The table every writer lands in.
const TABLE: &str = "shared";

/// What to run.
#[derive(Debug, Clone)]
pub struct WritersConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// Where the lake roots and the servers' data directories go.
    pub dir: PathBuf,
    /// The largest number of writers; every count from 1 up to it is run.
    pub max_writers: usize,
    /// Producers in all, split evenly between the writers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// How long each count of writers runs.
    pub duration: Duration,
    /// The table's `max_age`.
    pub max_age: Duration,
}

/// One count of writers.
#[derive(Debug, Clone, Serialize)]
pub struct WritersResult {
    /// sluice processes writing the table.
    pub writers: usize,
    /// Acknowledged rows per second, all writers together.
    pub rows_per_s: f64,
    /// Commits (landed parts) per second, all writers together.
    pub commits_per_s: f64,
    /// Commits that lost a race to another writer and were tried again, per minute.
    pub commit_retries_per_min: f64,
    /// The median time a flush took (writing its file and committing it), ms.
    pub flush_p50_ms: f64,
    /// The 99th percentile, ms.
    pub flush_p99_ms: f64,
    /// Inserts that failed.
    pub errors: u64,
}

/// Every count of writers.
#[derive(Debug, Clone, Serialize)]
pub struct WritersReport {
    /// Producers in all.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Seconds per count of writers.
    pub duration_s: f64,
    /// The table's `max_age`, seconds.
    pub max_age_s: f64,
    /// One result per count of writers, from 1 up.
    pub results: Vec<WritersResult>,
}

impl WritersReport {
    /// Whether the run can be trusted: every count landed rows and none had errors.
    pub fn measured_cleanly(&self) -> bool {
        self.results
            .iter()
            .all(|r| r.rows_per_s > 0.0 && r.commits_per_s > 0.0 && r.errors == 0)
    }
}

/// Runs 1, 2, ... `max_writers` writers, calling `on_result` as each count ends.
pub async fn run(
    config: WritersConfig,
    mut on_result: impl FnMut(&WritersResult),
) -> Result<WritersReport, String> {
    if config.max_writers == 0 || config.producers < config.max_writers {
        return Err("run at least one writer and at least one producer per writer".into());
    }
    if config.rows_per_insert == 0 || config.duration.is_zero() || config.max_age.is_zero() {
        return Err("rows per insert, the duration and max_age must be more than zero".into());
    }
    let mut results = Vec::with_capacity(config.max_writers);
    for writers in 1..=config.max_writers {
        let result = run_writers(&config, writers).await?;
        on_result(&result);
        results.push(result);
    }
    Ok(WritersReport {
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        duration_s: config.duration.as_secs_f64(),
        max_age_s: config.max_age.as_secs_f64(),
        results,
    })
}

/// Starts `writers` servers on a fresh lake root, loads them together, reads their metrics.
async fn run_writers(config: &WritersConfig, writers: usize) -> Result<WritersResult, String> {
    let root = config.dir.join(format!("{writers}-writers"));
    let lake = root.join("lake");
    std::fs::create_dir_all(&lake).map_err(|e| e.to_string())?;
    let mut servers = Vec::with_capacity(writers);
    for i in 0..writers {
        servers.push(start_server(config, &root, &lake, i)?);
    }
    let loads = servers.iter().enumerate().map(|(i, server)| {
        let load = LoadConfig {
            seed: i as u64,
            id_offset: (i as u64) << 40,
            ..LoadConfig::native(
                server.addr,
                TABLE,
                config.producers / writers,
                config.rows_per_insert,
                "durable",
                Stop::After(config.duration),
            )
        };
        load::run(load, Arc::new(Progress::default()), false)
    });
    let reports = side_by_side(loads).await?;
    let mut totals = Totals::default();
    for server in &servers {
        totals.add(server.addr).await?;
    }
    for server in &mut servers {
        server.terminate().map_err(|e| e.to_string())?;
        server
            .wait(Duration::from_secs(60))
            .map_err(|e| e.to_string())?;
    }
    let elapsed = reports
        .iter()
        .map(|r| r.elapsed_s)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    Ok(WritersResult {
        writers,
        rows_per_s: reports.iter().map(|r| r.rows_acked as f64).sum::<f64>() / elapsed,
        commits_per_s: totals.parts / elapsed,
        commit_retries_per_min: totals.retries * 60.0 / elapsed,
        flush_p50_ms: totals.quantile(0.5) * 1000.0,
        flush_p99_ms: totals.quantile(0.99) * 1000.0,
        errors: reports.iter().map(|r| r.errors.values().sum::<u64>()).sum(),
    })
}

/// Runs the loads side by side and waits for all of them.
async fn side_by_side<F>(loads: impl Iterator<Item = F>) -> Result<Vec<load::LoadReport>, String>
where
    F: std::future::Future<Output = Result<load::LoadReport, load::LoadError>> + Send + 'static,
{
    let tasks: Vec<_> = loads.map(tokio::spawn).collect();
    let mut reports = Vec::with_capacity(tasks.len());
    for task in tasks {
        reports.push(
            task.await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(reports)
}

/// Writes writer `i`'s config (the shared lake root, the table) and starts it.
fn start_server(
    config: &WritersConfig,
    root: &std::path::Path,
    lake: &std::path::Path,
    i: usize,
) -> Result<ServerProcess, String> {
    let data_dir = root.join(format!("writer-{i}"));
    let text = format!(
        "[flush]\nmax_age = \"{}ms\"\n\n[lake]\nroot = {:?}\n\n\
         [tables.{TABLE}]\ncolumns = {COLUMNS_TOML}\npartition_by = \"service\"\n",
        config.max_age.as_millis().max(1),
        lake.display().to_string(),
    );
    ServerProcess::spawn_configured(&config.binary, &data_dir, "writer.toml", &text)
}

/// The metrics of every writer, added up.
#[derive(Debug, Default)]
struct Totals {
    parts: f64,
    retries: f64,
    /// Cumulative flush counts by upper bound, in seconds, as the histogram lists them.
    buckets: Vec<(f64, f64)>,
}

impl Totals {
    async fn add(&mut self, addr: SocketAddr) -> Result<(), String> {
        let page = load::http_get(addr, "/metrics").await?;
        let labelled = |name: &str| format!("{name}{{table=\"{TABLE}\"}}");
        self.parts += load::metric(&page, &labelled("sluice_parts_written_total")).unwrap_or(0.0);
        self.retries +=
            load::metric(&page, &labelled("sluice_commit_retries_total")).unwrap_or(0.0);
        let prefix = format!("sluice_flush_duration_seconds_bucket{{table=\"{TABLE}\",le=\"");
        for line in page.lines() {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let Some((bound, count)) = rest.split_once("\"} ") else {
                continue;
            };
            let bound = if bound == "+Inf" {
                f64::INFINITY
            } else {
                bound
                    .parse()
                    .map_err(|_| format!("bad bucket bound {bound}"))?
            };
            let count: f64 = count
                .trim()
                .parse()
                .map_err(|_| format!("bad count {count}"))?;
            match self.buckets.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, total)) => *total += count,
                None => self.buckets.push((bound, count)),
            }
        }
        self.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(())
    }

    /// The `q` quantile of the flush time in seconds, interpolated within its bucket as
    /// Prometheus's `histogram_quantile` does; the largest finite bound when it falls past it.
    fn quantile(&self, q: f64) -> f64 {
        let Some(&(_, total)) = self.buckets.last() else {
            return 0.0;
        };
        let rank = q * total;
        let mut previous = (0.0, 0.0);
        for &(bound, count) in &self.buckets {
            if count >= rank {
                if bound.is_infinite() {
                    return previous.0;
                }
                let in_bucket = (count - previous.1).max(1e-9);
                return previous.0 + (bound - previous.0) * (rank - previous.1) / in_bucket;
            }
            previous = (bound, count);
        }
        previous.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        let totals = Totals {
            buckets: vec![
                (0.01, 50.0),
                (0.05, 90.0),
                (0.1, 100.0),
                (f64::INFINITY, 100.0),
            ],
            ..Totals::default()
        };
        assert!((totals.quantile(0.5) - 0.01).abs() < 1e-12);
        assert!((totals.quantile(0.7) - 0.03).abs() < 1e-12);
        assert!((totals.quantile(0.99) - 0.095).abs() < 1e-12);
        assert_eq!(Totals::default().quantile(0.99), 0.0);
    }
}
