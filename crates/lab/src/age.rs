//! `sluice lab age`: the adaptive flush age (`min_age`) against a fixed one, side by side.
//!
//! One server, two tables with the same `max_age`: `age_fixed` flushes every batch at `max_age`,
//! `age_adaptive` also has `min_age`, so a table receiving few rows flushes sooner. The three
//! loads run on one table, then on the other:
//!
//! - a trickle: a few rows per second, spread over many producers, each waiting for `committed`
//!   acks. Its figure is the latency a producer sees, against the goal of `min_age` + 50 ms at
//!   the 99th percentile.
//! - a busy load: producers as fast as answers come with `durable` acks. Its figure is parts
//!   per second, against the goal of about one part per `max_age` (the tables have one
//!   partition each).
//! - the same busy load with `committed` acks, where every producer waits for its part: rows/s
//!   and parts/s show what `min_age` does to producers that wait for the store.
//!
//! Parts are counted from `sluice_parts_written_total` before and after each load, after the
//! previous load's last batch has landed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::events::COLUMNS_TOML;
use crate::load::{self, LoadConfig, Progress, Stop};
use crate::process::ServerProcess;

/// The trickle's latency goal: `min_age` plus this, at the 99th percentile.
pub const TRICKLE_SLACK: Duration = Duration::from_millis(50);

/// The two tables: the policy's name in the report and the table's name.
const TABLES: [(&str, &str); 2] = [("fixed", "age_fixed"), ("adaptive", "age_adaptive")];

/// What to run.
#[derive(Debug, Clone)]
pub struct AgeConfig {
    /// The `sluice` binary to start.
    pub binary: PathBuf,
    /// The server's data directory.
    pub data_dir: PathBuf,
    /// The adaptive table's `min_age`.
    pub min_age: Duration,
    /// Both tables' `max_age`.
    pub max_age: Duration,
    /// The trickle's rows per second, over all its producers.
    pub trickle_rate: f64,
    /// The trickle's producers.
    pub trickle_producers: usize,
    /// How long the trickle runs on each table.
    pub trickle_duration: Duration,
    /// The busy loads' producers.
    pub busy_producers: usize,
    /// How long each busy load runs on each table.
    pub busy_duration: Duration,
}

/// One load on one table.
#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    /// Acknowledged rows per second.
    pub rows_per_s: f64,
    /// Latency of acknowledged inserts, median, ms.
    pub p50_ms: f64,
    /// Latency, 99th percentile, ms.
    pub p99_ms: f64,
    /// The slowest insert, ms.
    pub max_ms: f64,
    /// Parts landed per second during the load.
    pub parts_per_s: f64,
    /// Rows per landed part.
    pub rows_per_part: f64,
    /// Inserts that failed.
    pub errors: u64,
}

/// Every load on one table.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyFigures {
    /// `fixed` or `adaptive`.
    pub policy: String,
    /// The trickle, `committed` acks.
    pub trickle: LoadFigures,
    /// The busy load, `durable` acks.
    pub busy_durable: LoadFigures,
    /// The busy load, `committed` acks.
    pub busy_committed: LoadFigures,
}

/// Every figure of one run.
#[derive(Debug, Clone, Serialize)]
pub struct AgeReport {
    /// The adaptive table's `min_age`, seconds.
    pub min_age_s: f64,
    /// Both tables' `max_age`, seconds.
    pub max_age_s: f64,
    /// The trickle's target rows per second.
    pub trickle_rate: f64,
    /// The trickle's producers.
    pub trickle_producers: usize,
    /// The busy loads' producers.
    pub busy_producers: usize,
    /// The fixed table, then the adaptive one.
    pub policies: Vec<PolicyFigures>,
    /// `min_age` + [`TRICKLE_SLACK`], in ms.
    pub trickle_p99_goal_ms: f64,
    /// Whether the adaptive table's trickle p99 met it.
    pub trickle_goal_met: bool,
    /// Whether the adaptive table's busy durable load made at most 1.2 parts per `max_age`.
    pub busy_goal_met: bool,
}

impl AgeReport {
    /// Whether the run can be trusted: every load acknowledged rows and none had errors.
    pub fn measured_cleanly(&self) -> bool {
        self.policies.iter().all(|p| {
            [&p.trickle, &p.busy_durable, &p.busy_committed]
                .iter()
                .all(|l| l.rows_per_s > 0.0 && l.errors == 0)
        })
    }
}

/// The loads, in the order they run on each table.
#[derive(Debug, Clone, Copy)]
enum Load {
    Trickle,
    BusyDurable,
    BusyCommitted,
}

impl Load {
    const ALL: [Load; 3] = [Load::Trickle, Load::BusyDurable, Load::BusyCommitted];

    /// How it is called in progress lines.
    fn name(self) -> &'static str {
        match self {
            Load::Trickle => "trickle, committed",
            Load::BusyDurable => "busy, durable",
            Load::BusyCommitted => "busy, committed",
        }
    }
}

/// Runs every load on both tables, calling `on_load` with the policy, the load's name and its
/// figures as each ends.
pub async fn run(
    config: AgeConfig,
    mut on_load: impl FnMut(&str, &str, &LoadFigures),
) -> Result<AgeReport, String> {
    check(&config)?;
    let mut server = start_server(&config)?;
    let mut figures: Vec<Vec<LoadFigures>> = vec![Vec::new(), Vec::new()];
    let mut id_offset = 0u64;
    // One table's loads, then the other's: what a load leaves behind (parts to compact) weighs
    // on the next load of the same policy.
    for (i, (policy, table)) in TABLES.iter().enumerate() {
        for load in Load::ALL {
            let measured = run_load(&config, server.addr, table, load, id_offset).await?;
            on_load(policy, load.name(), &measured);
            figures[i].push(measured);
            id_offset += 1 << 40;
        }
    }
    server.terminate().map_err(|e| e.to_string())?;
    server
        .wait(Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let policies = TABLES
        .iter()
        .zip(figures)
        .map(|((policy, _), loads)| policy_figures(policy, loads))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(report(&config, policies))
}

fn check(config: &AgeConfig) -> Result<(), String> {
    if config.min_age.is_zero() || config.min_age > config.max_age {
        return Err("min_age must be more than zero and at most max_age".into());
    }
    if !(config.trickle_rate > 0.0 && config.trickle_rate.is_finite()) {
        return Err("the trickle rate must be a positive number of rows per second".into());
    }
    if config.trickle_producers == 0 || config.busy_producers == 0 {
        return Err("the producers must be more than zero".into());
    }
    if config.trickle_duration.is_zero() || config.busy_duration.is_zero() {
        return Err("the durations must be more than zero".into());
    }
    Ok(())
}

/// Runs one load on one table and counts the parts it made.
async fn run_load(
    config: &AgeConfig,
    addr: SocketAddr,
    table: &str,
    load: Load,
    id_offset: u64,
) -> Result<LoadFigures, String> {
    let (producers, rate, duration, ack) = match load {
        Load::Trickle => (
            config.trickle_producers,
            Some(config.trickle_rate),
            config.trickle_duration,
            "committed",
        ),
        Load::BusyDurable => (config.busy_producers, None, config.busy_duration, "durable"),
        Load::BusyCommitted => (
            config.busy_producers,
            None,
            config.busy_duration,
            "committed",
        ),
    };
    let parts_before = parts_written(addr, table).await?;
    let load_config = LoadConfig {
        rate,
        seed: id_offset,
        id_offset,
        ..LoadConfig::native(addr, table, producers, 1, ack, Stop::After(duration))
    };
    let report = load::run(load_config, Arc::new(Progress::default()), false)
        .await
        .map_err(|e| e.to_string())?;
    let parts = parts_written(addr, table).await? - parts_before;
    // The load's last batch lands within `max_age`: wait for it, so the next load on this table
    // does not count it.
    tokio::time::sleep(config.max_age + config.max_age / 2).await;
    let elapsed = report.elapsed_s.max(1e-9);
    Ok(LoadFigures {
        rows_per_s: report.rows_per_s,
        p50_ms: report.latency.p50_ms,
        p99_ms: report.latency.p99_ms,
        max_ms: report.latency.max_ms,
        parts_per_s: parts / elapsed,
        rows_per_part: if parts > 0.0 {
            report.rows_acked as f64 / parts
        } else {
            0.0
        },
        errors: report.errors.values().sum(),
    })
}

/// Parts the server landed in `table` so far.
async fn parts_written(addr: SocketAddr, table: &str) -> Result<f64, String> {
    let page = load::http_get(addr, "/metrics").await?;
    let name = format!("sluice_parts_written_total{{table=\"{table}\"}}");
    Ok(load::metric(&page, &name).unwrap_or(0.0))
}

/// Writes a config declaring both tables and starts `sluice serve` on the data directory.
fn start_server(config: &AgeConfig) -> Result<ServerProcess, String> {
    let max_age_ms = config.max_age.as_millis();
    let min_age_ms = config.min_age.as_millis().max(1);
    let [(_, fixed), (_, adaptive)] = TABLES;
    let text = format!(
        "[flush]\nmax_age = \"{max_age_ms}ms\"\n\n\
         [tables.{fixed}]\ncolumns = {COLUMNS_TOML}\n\n\
         [tables.{adaptive}]\ncolumns = {COLUMNS_TOML}\n\n\
         [tables.{adaptive}.flush]\nmin_age = \"{min_age_ms}ms\"\n"
    );
    ServerProcess::spawn_configured(&config.binary, &config.data_dir, "age.toml", &text)
}

fn policy_figures(policy: &str, loads: Vec<LoadFigures>) -> Result<PolicyFigures, String> {
    let [trickle, busy_durable, busy_committed]: [LoadFigures; 3] = loads
        .try_into()
        .map_err(|_| format!("a load of the {policy} table is missing"))?;
    Ok(PolicyFigures {
        policy: policy.into(),
        trickle,
        busy_durable,
        busy_committed,
    })
}

fn report(config: &AgeConfig, policies: Vec<PolicyFigures>) -> AgeReport {
    let goal_ms = (config.min_age + TRICKLE_SLACK).as_secs_f64() * 1000.0;
    let adaptive = policies.iter().find(|p| p.policy == "adaptive");
    let trickle_goal_met = adaptive.is_some_and(|p| p.trickle.p99_ms <= goal_ms);
    let busy_limit = 1.2 / config.max_age.as_secs_f64();
    let busy_goal_met = adaptive.is_some_and(|p| p.busy_durable.parts_per_s <= busy_limit);
    AgeReport {
        min_age_s: config.min_age.as_secs_f64(),
        max_age_s: config.max_age.as_secs_f64(),
        trickle_rate: config.trickle_rate,
        trickle_producers: config.trickle_producers,
        busy_producers: config.busy_producers,
        policies,
        trickle_p99_goal_ms: goal_ms,
        trickle_goal_met,
        busy_goal_met,
    }
}
