//! `sluice lab ...`: experiments that start their own sluice servers and report what they
//! measured.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use sluice_lab::acks::{self, AcksConfig};
use sluice_lab::crash::{self, CrashConfig};

/// `sluice lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Kill a loaded server with SIGKILL again and again; check every durable row landed once.
    Crash(CrashArgs),
    /// Async, durable and committed acks side by side: rows/s, latency, WAL fsyncs/s.
    Acks(AcksArgs),
}

/// Where an experiment keeps its data.
#[derive(Debug, Args)]
pub struct Scratch {
    /// Data directory for the experiment's server [default: a new temporary folder].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the data directory afterwards (a temporary one is removed by default).
    #[arg(long)]
    keep: bool,
}

impl Scratch {
    fn open(&self) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
        match &self.dir {
            Some(dir) => Ok((dir.clone(), None)),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("sluice-lab-")
                    .tempdir()
                    .context("cannot create a temporary folder")?;
                let path = temp.path().to_path_buf();
                if self.keep {
                    eprintln!("data kept in {}", path.display());
                    Ok((temp.keep(), None))
                } else {
                    Ok((path, Some(temp)))
                }
            }
        }
    }
}

/// `sluice lab crash` flags.
#[derive(Debug, Args)]
pub struct CrashArgs {
    /// How many times to kill the server.
    #[arg(long, default_value_t = 20)]
    cycles: usize,
    /// Concurrent producers, each sending single-row inserts with ack=durable.
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 1)]
    rows_per_insert: usize,
    /// Shortest time under load before a kill.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "300ms")]
    min_run: Duration,
    /// Longest time under load before a kill.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    max_run: Duration,
    /// Seed of the kill times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    scratch: Scratch,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `sluice lab acks` flags.
#[derive(Debug, Args)]
pub struct AcksArgs {
    /// Concurrent producers.
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 1)]
    rows_per_insert: usize,
    /// How long each mode runs.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    duration: Duration,
    /// The flush age limit (committed acks wait for it).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    #[command(flatten)]
    scratch: Scratch,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: LabCommand) -> Result<ExitCode> {
    let binary = sluice_lab::process::current_binary().context("cannot find the sluice binary")?;
    match command {
        LabCommand::Crash(args) => {
            let (dir, _temp) = args.scratch.open()?;
            let config = CrashConfig {
                binary,
                data_dir: dir,
                cycles: args.cycles,
                producers: args.producers,
                rows_per_insert: args.rows_per_insert,
                min_run: args.min_run,
                max_run: args.max_run,
                seed: args.seed,
            };
            let report = crash::run(config, |i, cycle| {
                eprintln!(
                    "cycle {:>3}: killed after {:>5} ms, {:>8} rows acknowledged durable",
                    i + 1,
                    cycle.ran_ms,
                    cycle.acked
                );
            })
            .await
            .map_err(anyhow::Error::msg)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                let a = &report.audit;
                println!(
                    "crash test: {} kills with SIGKILL under load",
                    report.cycles.len()
                );
                println!("  acknowledged rows  {:>10}", a.acked);
                println!("  rows in the lake   {:>10}", a.landed);
                println!("  lost               {:>10}", a.lost);
                println!("  duplicated         {:>10}", a.duplicated);
                println!("  parts              {:>10}", report.parts);
                println!("  elapsed            {:>10.1} s", report.elapsed_s);
                if !a.lost_examples.is_empty() || !a.duplicated_examples.is_empty() {
                    println!(
                        "  lost e.g. {:?}, duplicated e.g. {:?}",
                        a.lost_examples, a.duplicated_examples
                    );
                }
                println!("  {}", if report.passed() { "PASSED" } else { "FAILED" });
            }
            Ok(if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        LabCommand::Acks(args) => {
            let (dir, _temp) = args.scratch.open()?;
            let config = AcksConfig {
                binary,
                data_dir: dir,
                producers: args.producers,
                rows_per_insert: args.rows_per_insert,
                duration: args.duration,
                max_age: args.max_age,
            };
            if !args.json {
                println!(
                    "{} producers x {} rows/insert, {:?} per mode, max_age {:?}",
                    config.producers, config.rows_per_insert, config.duration, config.max_age
                );
                println!(
                    "{:<10} {:>12} {:>9} {:>9} {:>11} {:>12} {:>7}",
                    "ack", "rows/s", "p50 ms", "p99 ms", "fsyncs/s", "rows/fsync", "errors"
                );
            }
            let json = args.json;
            let report = acks::run(config, |m| {
                if !json {
                    println!(
                        "{:<10} {:>12.0} {:>9.2} {:>9.2} {:>11.0} {:>12.1} {:>7}",
                        m.ack,
                        m.rows_per_s,
                        m.latency.p50_ms,
                        m.latency.p99_ms,
                        m.fsyncs_per_s,
                        m.rows_per_fsync,
                        m.errors
                    );
                }
            })
            .await
            .map_err(anyhow::Error::msg)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else if let (Some(a), Some(d)) = (report.modes.first(), report.modes.get(1)) {
                println!(
                    "durable / async throughput: {:.2}",
                    d.rows_per_s / a.rows_per_s.max(1e-9)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
