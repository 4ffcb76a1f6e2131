//! `sluice lab ...`: experiments that start their own sluice servers and report what they
//! measured.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sluice_core::merge_sim::{self, MergeSimConfig, MergeSimReport};
use sluice_lab::acks::{self, AcksConfig};
use sluice_lab::age::{self, AgeConfig, AgeReport};
use sluice_lab::clickhouse::{ClickHouseLabConfig, Protocol};
use sluice_lab::compaction::{self, CompactionLabConfig};
use sluice_lab::crash::{self, CrashConfig};
use sluice_lab::decode::{self, DecodeLabConfig};
use sluice_lab::formats::{self, FormatsConfig};
use sluice_lab::http::{self, HttpConfig, HttpReport};
use sluice_lab::knee::{self, KneeConfig};
use sluice_lab::layouts::{self, LayoutsConfig, LayoutsReport};
use sluice_lab::overload::{self, OverloadConfig};
use sluice_lab::plot;
use sluice_lab::resend::{self, ResendConfig, Store};
use sluice_lab::shards::{self, ShardsConfig};
use sluice_lab::writers::{self, WritersConfig};

/// `sluice lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Seed 000: the same rows as tiny files and big ones: bytes, footers, scans, a query,
    /// compaction and merge cost.
    Layouts(LayoutsArgs),
    /// Seed 000: one merge thread against a stream of small parts.
    MergeSim(MergeSimArgs),
    /// Seed 001: rows/s by batch size in SQLite, trickle waits, and single-row producers through
    /// sluice.
    Knee(KneeArgs),
    /// Kill a loaded server with SIGKILL again and again; check every durable row landed once.
    Crash(CrashArgs),
    /// Producers that resend every unanswered insert, against a server killed with SIGKILL
    /// again and again: every row once with insert keys, duplicates without.
    Resend(ResendArgs),
    /// Async, durable and committed acks side by side: rows/s, latency, WAL fsyncs/s.
    Acks(AcksArgs),
    /// `GET /ping` against 1-row async and durable inserts on one server: what a row costs
    /// beyond the HTTP exchange, with 1,000-row durable inserts for rows/s.
    Http(HttpArgs),
    /// The adaptive flush age (`min_age`) against a fixed one: a committed trickle's latency and
    /// a busy load's parts per second, side by side.
    Age(AgeArgs),
    /// Several sluice processes landing in one Delta table: commits that lost a race to
    /// another writer, and flush times, with 1, 2, 3 writers.
    Writers(WritersArgs),
    /// Seed 000 on a real ClickHouse: single-row inserts straight in vs through sluice: rows/s,
    /// parts, rows rewritten by merges.
    Clickhouse(ClickHouseArgs),
    /// A ClickHouse cluster of two shards: the parts on each shard when sluice inserts through
    /// a Distributed table, asynchronous or not, or straight into the shards by key or in turn.
    Shards(ShardsArgs),
    /// The store goes down under a load ten times the buffer: peak memory, refusals, drain, and
    /// an audit of every acknowledged row.
    Overload(OverloadArgs),
    /// Seed 000's remedy: 20,000 files of 100 rows in a Delta table compacted by sluice, and by
    /// pyarrow's dataset writer on the same files: time and bytes before and after.
    Compaction(CompactionArgs),
    /// The same rows through the ClickHouse door in each input format: rows/s side by side with
    /// JSONEachRow, and an audit of every acknowledged row.
    Formats(FormatsArgs),
    /// Nested OpenTelemetry log records (resource and attribute maps) against flat API events,
    /// decoded in this process on one core: rows/s and MB/s side by side.
    Decode(DecodeArgs),
}

/// `sluice lab decode` flags.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Rows of each shape per run.
    #[arg(long, default_value_t = 500_000)]
    rows: usize,
    /// Rows per body.
    #[arg(long, default_value_t = 1_000)]
    rows_per_body: usize,
    /// Runs of each shape, alternated; each reports its median.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab formats` flags.
#[derive(Debug, Args)]
pub struct FormatsArgs {
    /// Concurrent producers.
    #[arg(long, default_value_t = 16)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 1000)]
    rows_per_insert: usize,
    /// How long each format runs in each round.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    duration: Duration,
    /// Rounds over every format; each format's figure is its median round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The ack mode asked for.
    #[arg(long, default_value = "durable")]
    ack: String,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab compaction` flags.
#[derive(Debug, Args)]
pub struct CompactionArgs {
    /// Rows in the data set.
    #[arg(long, default_value_t = 2_000_000)]
    rows: usize,
    /// Rows per small file.
    #[arg(long, default_value_t = 100)]
    rows_per_file: usize,
    /// A Python that has pyarrow, for the side-by-side [default: $SLUICE_PYTHON, else python3].
    #[arg(long)]
    python: Option<PathBuf>,
    /// Skip pyarrow.
    #[arg(long)]
    no_pyarrow: bool,
    /// Write the small files with zstd instead of the LZ4 sluice gives small parts.
    #[arg(long)]
    zstd_inputs: bool,
    /// Runs of each side, alternated, sluice each time on a fresh copy of the small files;
    /// each side's time is its median.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=50))]
    runs: u64,
    /// The rows: `api` (seed 000's API events) or `otel` (OpenTelemetry log records, with
    /// resource and attribute maps).
    #[arg(long, default_value = "api")]
    events: sluice_lab::compaction::Events,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
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

/// Where the figures go besides the table on stdout.
#[derive(Debug, Args)]
pub struct Outputs {
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an SVG plot to this file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

impl Outputs {
    fn write_json(&self, value: &impl Serialize) -> Result<()> {
        write_json(self.json.as_ref(), value)
    }

    fn note_plot(&self) {
        if let Some(path) = &self.plot {
            eprintln!("plot written to {}", path.display());
        }
    }
}

/// `sluice lab layouts` flags.
#[derive(Debug, Args)]
pub struct LayoutsArgs {
    /// Rows in the data set.
    #[arg(long, default_value_t = 2_000_000)]
    rows: usize,
    /// Rows per file of each layout, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = layouts::SEED_LAYOUTS)]
    layouts: Vec<usize>,
    /// Threads of the parallel scan and of compaction [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Each timing is the best of this many runs.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Seed of the events.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    #[command(flatten)]
    scratch: Scratch,
    #[command(flatten)]
    outputs: Outputs,
}

/// `sluice lab merge-sim` flags.
#[derive(Debug, Args)]
pub struct MergeSimArgs {
    /// Rows ingested per second [default: the seed's scenarios].
    #[arg(long)]
    rate: Option<f64>,
    /// Rows per insert [default: the seed's scenarios].
    #[arg(long)]
    insert_rows: Option<u64>,
    /// How long ingest runs.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10m")]
    duration: Duration,
    /// Take the merge cost (fixed + per row) from a `sluice lab layouts --json` file measured on
    /// this machine instead of the seed's 14.6 ms + 0.3284 us/row.
    #[arg(long)]
    merge_cost_from_layouts: Option<PathBuf>,
    #[command(flatten)]
    outputs: Outputs,
}

/// `sluice lab knee` flags.
#[derive(Debug, Args)]
pub struct KneeArgs {
    /// Rows per batch size.
    #[arg(long, default_value_t = 200_000)]
    rows: usize,
    /// Rows for batch size 1.
    #[arg(long, default_value_t = 20_000)]
    rows_for_one: usize,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = knee::SEED_SIZES)]
    sizes: Vec<usize>,
    /// Runs per size (the median is kept).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Rows per second of the trickle.
    #[arg(long, default_value_t = 20.0)]
    trickle: f64,
    /// The age limit of the size-or-age policy (and of sluice's row).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "200ms")]
    max_age: Duration,
    /// Single-row producers sending through sluice.
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Run the sweep and sluice's row against this PostgreSQL too
    /// (`postgres://user@127.0.0.1:5432/db`; writes tables `sluice_knee` and `sluice_knee_pipeline`).
    #[arg(long)]
    postgres: Option<String>,
    #[command(flatten)]
    scratch: Scratch,
    #[command(flatten)]
    outputs: Outputs,
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
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab resend` flags.
#[derive(Debug, Args)]
pub struct ResendArgs {
    /// Where the rows land.
    #[arg(long, value_enum, default_value_t = StoreArg::Lake)]
    store: StoreArg,
    /// The PostgreSQL server of `--store postgres` (`postgres://user@127.0.0.1:5432/db`); its
    /// table `resend` must hold no rows yet.
    #[arg(long, required_if_eq("store", "postgres"))]
    postgres_url: Option<String>,
    /// Send inserts without keys, to count the rows resends land twice.
    #[arg(long)]
    no_keys: bool,
    /// How many times to kill the server.
    #[arg(long, default_value_t = 10)]
    cycles: usize,
    /// Concurrent producers, running through every restart.
    #[arg(long, default_value_t = 16)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 1)]
    rows_per_insert: usize,
    /// Shortest life of a server before the kill.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "300ms")]
    min_run: Duration,
    /// Longest life of a server before the kill.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1200ms")]
    max_run: Duration,
    /// The ack mode asked for.
    #[arg(long, default_value = "durable")]
    ack: String,
    /// Seed of the kill times and the events.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The stores `sluice lab resend` can land in.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum StoreArg {
    Lake,
    Sqlite,
    Postgres,
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
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab http` flags.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Keep-alive connections in every phase.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// How long each phase runs.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    duration: Duration,
    /// How many times the four phases run, each time on a fresh server; the report gives each
    /// figure's median.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab age` flags.
#[derive(Debug, Args)]
pub struct AgeArgs {
    /// The adaptive table's `min_age`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "100ms")]
    min_age: Duration,
    /// Both tables' `max_age`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    /// The trickle's rows per second over all its producers.
    #[arg(long, default_value_t = 20.0)]
    trickle_rate: f64,
    /// The trickle's producers, each waiting for `committed` acks.
    #[arg(long, default_value_t = 40)]
    trickle_producers: usize,
    /// How long the trickle runs on each table.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    trickle_duration: Duration,
    /// The busy loads' producers, as fast as answers come.
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// How long each busy load runs on each table.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    duration: Duration,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab writers` flags.
#[derive(Debug, Args)]
pub struct WritersArgs {
    /// The most sluice processes on the table; every count from 1 up to it runs.
    #[arg(long, default_value_t = 3)]
    writers: usize,
    /// Producers in all, split evenly between the writers.
    #[arg(long, default_value_t = 48)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 10)]
    rows_per_insert: usize,
    /// How long each count of writers runs.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    duration: Duration,
    /// The table's `max_age`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab shards` flags.
#[derive(Debug, Args)]
pub struct ShardsArgs {
    /// Producers.
    #[arg(long, default_value_t = 16)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 10)]
    rows_per_insert: usize,
    /// Rows per second over all producers.
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// How long each way runs.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    duration: Duration,
    /// sluice's `max_age`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab overload` flags.
#[derive(Debug, Args)]
pub struct OverloadArgs {
    /// The server's `max_buffer_bytes`.
    #[arg(long, default_value = "64MiB")]
    buffer: sluice_core::ByteSize,
    /// How many times the buffer the producers offer while the store is down.
    #[arg(long, default_value_t = 10.0)]
    factor: f64,
    /// Concurrent producers.
    #[arg(long, default_value_t = 64)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, default_value_t = 100)]
    rows_per_insert: usize,
    /// The longest the store stays down.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "120s")]
    max_outage: Duration,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `sluice lab clickhouse` flags.
#[derive(Debug, Args)]
pub struct ClickHouseArgs {
    /// Single-row inserts per side.
    #[arg(long, default_value_t = 10_000)]
    inserts: u64,
    /// Concurrent clients (the same on both sides).
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// sluice's flush age limit.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    max_age: Duration,
    /// Rows per second over all clients, the same on both sides [default: as fast as answers
    /// come].
    #[arg(long)]
    rate: Option<f64>,
    /// How the clients send, on both sides: ClickHouse's HTTP interface (JSONEachRow) or its
    /// native protocol (a Native block per insert).
    #[arg(long, value_enum, default_value_t = ProtocolArg::Http)]
    protocol: ProtocolArg,
    #[command(flatten)]
    scratch: Scratch,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProtocolArg {
    Http,
    Native,
}

fn write_json(path: Option<&PathBuf>, value: &impl Serialize) -> Result<()> {
    if let Some(path) = path {
        std::fs::write(path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("figures written to {}", path.display());
    }
    Ok(())
}

/// The exit code of an experiment that checks itself: failure when its check failed.
fn exit_code(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The last line of an experiment that checks itself.
fn verdict(passed: bool) -> &'static str {
    if passed { "PASSED" } else { "FAILED" }
}

/// An indicatif bar on stderr, one step at a time.
struct Bar(ProgressBar);

impl Bar {
    fn new() -> Self {
        let bar = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template("{msg:<48} {bar:30} {pos}/{len} {elapsed}")
        {
            bar.set_style(style);
        }
        Self(bar)
    }
}

impl layouts::Progress for Bar {
    fn step(&self, name: &str, total: u64) {
        self.0.set_message(name.to_owned());
        self.0.set_length(total);
        self.0.set_position(0);
    }

    fn advance(&self, n: u64) {
        self.0.inc(n);
    }
}

/// Runs one lab experiment. The sluice binary is looked up first, whichever experiment runs.
pub async fn run(command: LabCommand) -> Result<ExitCode> {
    let binary = sluice_lab::process::current_binary().context("cannot find the sluice binary")?;
    match command {
        LabCommand::Layouts(args) => run_layouts(args).await,
        LabCommand::MergeSim(args) => run_merge_sim(args),
        LabCommand::Knee(args) => run_knee(args).await,
        LabCommand::Crash(args) => run_crash(args, binary).await,
        LabCommand::Resend(args) => run_resend(args, binary).await,
        LabCommand::Overload(args) => run_overload(args, binary).await,
        LabCommand::Compaction(args) => run_compaction(args).await,
        LabCommand::Clickhouse(args) => run_clickhouse(args, binary).await,
        LabCommand::Acks(args) => run_acks(args, binary).await,
        LabCommand::Http(args) => run_http(args, binary).await,
        LabCommand::Age(args) => run_age(args, binary).await,
        LabCommand::Writers(args) => run_writers(args, binary).await,
        LabCommand::Shards(args) => run_shards(args, binary).await,
        LabCommand::Formats(args) => run_formats(args, binary).await,
        LabCommand::Decode(args) => run_decode(args),
    }
}

/// `sluice lab formats`: the same rows in each input format. Fails unless every acknowledged row
/// landed exactly once.
async fn run_formats(args: FormatsArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = FormatsConfig {
        binary,
        data_dir: dir,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        duration: args.duration,
        rounds: args.rounds,
        ack: args.ack,
    };
    let report = formats::run(&config, |line| eprintln!("{line}"))
        .await
        .map_err(anyhow::Error::msg)?;
    print_formats(&report);
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.passed()))
}

/// Each format's median rows/s and its ratio to JSONEachRow, as a table on stdout.
fn print_formats(report: &formats::FormatsReport) {
    println!(
        "{} producers, {}-row inserts, {} acks, {:.0} s per format per round",
        report.producers, report.rows_per_insert, report.ack, report.duration_s
    );
    println!(
        "  {:<28} {:>12} {:>10} {:>10}",
        "format", "rows/s", "vs JSON", "bytes/row"
    );
    for f in &report.formats {
        println!(
            "  {:<28} {:>12.0} {:>9.2}x {:>10.1}",
            f.format, f.median_rows_per_s, f.ratio_to_json, f.bytes_per_row
        );
    }
    let a = &report.audit;
    println!(
        "  acknowledged {}, lost {}, duplicated {}",
        a.acked, a.lost, a.duplicated
    );
    println!("  {}", verdict(report.passed()));
}

/// `sluice lab crash`: kills a loaded server again and again, then audits the lake. Fails
/// unless every row acknowledged durable landed exactly once.
async fn run_crash(args: CrashArgs, binary: PathBuf) -> Result<ExitCode> {
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
    write_json(args.json.as_ref(), &report)?;
    print_crash(&report);
    Ok(exit_code(report.passed()))
}

/// The crash test's audit, as a table on stdout.
fn print_crash(report: &crash::CrashReport) {
    let a = &report.audit;
    println!(
        "crash test: {} kills with SIGKILL under load",
        report.cycles.len()
    );
    print_audit(a, "rows in the lake ");
    println!("  parts              {:>10}", report.parts);
    println!("  elapsed            {:>10.1} s", report.elapsed_s);
    print_examples(a);
    println!("  {}", verdict(report.passed()));
}

/// What an audit counted: acknowledged rows, what the store holds, lost, duplicated.
fn print_audit(a: &sluice_lab::verify::Audit, landed: &str) {
    println!("  acknowledged rows  {:>10}", a.acked);
    println!("  {landed}  {:>10}", a.landed);
    println!("  lost               {:>10}", a.lost);
    println!("  duplicated         {:>10}", a.duplicated);
}

/// A few of the lost and duplicated ids, when there are any.
fn print_examples(a: &sluice_lab::verify::Audit) {
    if !a.lost_examples.is_empty() || !a.duplicated_examples.is_empty() {
        println!(
            "  lost e.g. {:?}, duplicated e.g. {:?}",
            a.lost_examples, a.duplicated_examples
        );
    }
}

/// `sluice lab resend`: producers that resend until answered, across kills. Fails when an
/// acknowledged row is missing or an insert was given up, and with keys when a row landed twice.
async fn run_resend(args: ResendArgs, binary: PathBuf) -> Result<ExitCode> {
    let store = match (args.store, args.postgres_url) {
        (StoreArg::Lake, None) => Store::Lake,
        (StoreArg::Sqlite, None) => Store::Sqlite,
        (StoreArg::Postgres, Some(url)) => Store::Postgres(url),
        (StoreArg::Postgres, None) => anyhow::bail!("--store postgres needs --postgres-url"),
        (_, Some(_)) => anyhow::bail!("--postgres-url goes with --store postgres"),
    };
    let (dir, _temp) = args.scratch.open()?;
    let config = ResendConfig {
        binary,
        data_dir: dir,
        store,
        keys: !args.no_keys,
        cycles: args.cycles,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        min_run: args.min_run,
        max_run: args.max_run,
        ack: args.ack,
        seed: args.seed,
    };
    let report = resend::run(config, |i, cycle| {
        eprintln!(
            "cycle {:>3}: killed after {:>5} ms, {:>8} inserts answered, {:>6} resends",
            i + 1,
            cycle.ran_ms,
            cycle.answered,
            cycle.resends
        );
    })
    .await
    .map_err(anyhow::Error::msg)?;
    write_json(args.json.as_ref(), &report)?;
    print_resend(&report);
    Ok(exit_code(report.passed()))
}

/// The resend test's phases, counts and audit, as a table on stdout.
fn print_resend(report: &resend::ResendReport) {
    let a = &report.audit;
    println!(
        "resend test: {} kills with SIGKILL, {} producers resending until answered, keys {}, \
         store {}",
        report.cycles.len(),
        report.producers,
        if report.keys { "on" } else { "off" },
        report.store
    );
    println!(
        "  {:>7} {:>8} {:>10} {:>8}",
        "cycle", "ran ms", "answered", "resends"
    );
    let numbered = (report.cycles.iter().enumerate()).map(|(i, p)| ((i + 1).to_string(), p));
    for (name, phase) in numbered.chain([("drain".to_owned(), &report.drain)]) {
        println!(
            "  {:>7} {:>8} {:>10} {:>8}",
            name, phase.ran_ms, phase.answered, phase.resends
        );
    }
    println!("  inserts answered   {:>10}", report.inserts);
    println!("  resends            {:>10}", report.resends);
    println!("  duplicate answers  {:>10}", report.duplicate_answers);
    println!(
        "  given up           {:>10}{}",
        report.given_up,
        given_up_statuses(report)
    );
    print_audit(a, "ids in the store ");
    println!("  elapsed            {:>10.1} s", report.elapsed_s);
    print_examples(a);
    println!("  {}", verdict(report.passed()));
}

/// ` (400: 1, 409: 2)` after the count of given-up inserts, or nothing when there were none.
fn given_up_statuses(report: &resend::ResendReport) -> String {
    if report.given_up_by_status.is_empty() {
        return String::new();
    }
    let statuses: Vec<String> = report
        .given_up_by_status
        .iter()
        .map(|(status, n)| format!("{status}: {n}"))
        .collect();
    format!(" ({})", statuses.join(", "))
}

/// `sluice lab overload`: takes the store down under a load far past the buffer. Fails unless
/// every acknowledged row landed exactly once.
async fn run_overload(args: OverloadArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = OverloadConfig {
        binary,
        data_dir: dir,
        buffer_bytes: args.buffer.0,
        factor: args.factor,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        max_outage: args.max_outage,
    };
    let report = overload::run(&config, |line| eprintln!("{line}"))
        .await
        .map_err(anyhow::Error::msg)?;
    print_overload(&report);
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.passed()))
}

/// The overload experiment's memory, refusals, drain and audit, as a table on stdout.
fn print_overload(report: &overload::OverloadReport) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let a = &report.audit;
    println!("store down {:.1} s under durable load", report.outage_s);
    println!(
        "  buffer limit        {:>9.1} MiB",
        mib(report.buffer_bytes)
    );
    println!(
        "  offered             {:>9.1} MiB ({:.1}x the buffer)",
        mib(report.offered_bytes),
        report.offered_factor
    );
    println!(
        "  resident at start   {:>9.1} MiB",
        mib(report.rss_at_start_bytes)
    );
    println!(
        "  peak resident       {:>9.1} MiB (grew {:.2}x the buffer limit)",
        mib(report.peak_rss_bytes),
        report.growth_over_buffer
    );
    println!("  refused (503)       {:>9}", report.refused_inserts);
    println!("  other failures      {:>9}", report.failed_inserts);
    println!("  drained in          {:>9.1} s", report.drain_s);
    println!("  acknowledged rows   {:>9}", a.acked);
    println!("  lost                {:>9}", a.lost);
    println!("  duplicated          {:>9}", a.duplicated);
    println!("  {}", verdict(report.passed()));
}

/// `sluice lab compaction`: many small files compacted by sluice, and by pyarrow on the same
/// files unless it is skipped.
async fn run_compaction(args: CompactionArgs) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let python = (!args.no_pyarrow).then(|| {
        args.python
            .or_else(|| std::env::var_os("SLUICE_PYTHON").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("python3"))
    });
    let config = CompactionLabConfig {
        rows: args.rows,
        rows_per_file: args.rows_per_file,
        dir,
        python,
        seed: 42,
        zstd_inputs: args.zstd_inputs,
        runs: args.runs as usize,
        events: args.events,
    };
    let report = compaction::run(&config, &|step| eprintln!("{step} ..."))
        .await
        .map_err(anyhow::Error::msg)?;
    print_compaction(&report, config.rows_per_file);
    write_json(args.json.as_ref(), &report)?;
    Ok(ExitCode::SUCCESS)
}

/// The compaction experiment's inputs and each side's time and output, on stdout.
fn print_compaction(report: &compaction::CompactionLabReport, rows_per_file: usize) {
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{} rows in {} files of {} rows ({}): {:.1} MB",
        report.rows,
        report.files_in,
        rows_per_file,
        report.input_codec,
        mb(report.bytes_in)
    );
    // Every run's time, when there were several.
    let runs = |side: &compaction::Side| match side.runs.as_slice() {
        [_] | [] => String::new(),
        all => {
            let times: Vec<String> = all.iter().map(|t| format!("{t:.2}")).collect();
            format!(" (median of {} s)", times.join(", "))
        }
    };
    let s = &report.sluice;
    println!(
        "  sluice compact     {:>7.2} s -> {} files, {:.1} MB{}",
        s.seconds,
        s.files_out,
        mb(s.bytes_out),
        runs(s)
    );
    match (&report.pyarrow, &report.pyarrow_skipped) {
        (Some(p), _) => println!(
            "  pyarrow dataset    {:>7.2} s -> {} files, {:.1} MB{}",
            p.seconds,
            p.files_out,
            mb(p.bytes_out),
            runs(p)
        ),
        (None, Some(why)) => println!("  pyarrow skipped: {why}"),
        (None, None) => {}
    }
    if let Some(speedup) = report.speedup {
        println!("  sluice is {speedup:.1}x faster on the same files");
    }
}

/// `sluice lab clickhouse`: single-row inserts straight into ClickHouse and through sluice.
/// Fails on any error, or when sluice landed fewer rows than it acknowledged.
async fn run_clickhouse(args: ClickHouseArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = ClickHouseLabConfig {
        binary,
        data_dir: dir,
        inserts: args.inserts,
        clients: args.clients,
        max_age: args.max_age,
        rate: args.rate,
        protocol: match args.protocol {
            ProtocolArg::Http => Protocol::Http,
            ProtocolArg::Native => Protocol::Native,
        },
    };
    println!(
        "{} single-row inserts from {} clients over {:?}, straight into ClickHouse and through \
         sluice (max_age {:?}, ack durable)",
        config.inserts, config.clients, config.protocol, config.max_age
    );
    let report = sluice_lab::clickhouse::run(&config, |line| println!("{line}"))
        .await
        .map_err(anyhow::Error::msg)?;
    let (d, s) = (&report.direct, &report.sluice);
    println!(
        "ClickHouse {}: sluice made {:.0}x fewer parts, merges rewrote {:.2}x vs {:.2}x \
         the rows inserted, {:.1}x the rows/s",
        report.clickhouse_version,
        d.parts_all as f64 / s.parts_all.max(1) as f64,
        s.rewrite_ratio,
        d.rewrite_ratio,
        s.rows_per_s / d.rows_per_s.max(1e-9)
    );
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(
        d.errors + s.errors == 0 && s.rows_landed >= s.rows_acked,
    ))
}

/// `sluice lab acks`: the same load under each ack mode in turn, a row of figures per mode.
async fn run_acks(args: AcksArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = AcksConfig {
        binary,
        data_dir: dir,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        duration: args.duration,
        max_age: args.max_age,
    };
    println!(
        "{} producers x {} rows/insert, {:?} per mode, max_age {:?}",
        config.producers, config.rows_per_insert, config.duration, config.max_age
    );
    println!(
        "{:<10} {:>12} {:>9} {:>9} {:>11} {:>12} {:>7}",
        "ack", "rows/s", "p50 ms", "p99 ms", "fsyncs/s", "rows/fsync", "errors"
    );
    let report = acks::run(config, |m| {
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
    })
    .await
    .map_err(anyhow::Error::msg)?;
    if let (Some(a), Some(d)) = (report.modes.first(), report.modes.get(1)) {
        println!(
            "durable / async throughput: {:.2}",
            d.rows_per_s / a.rows_per_s.max(1e-9)
        );
    }
    write_json(args.json.as_ref(), &report)?;
    Ok(ExitCode::SUCCESS)
}

/// `sluice lab http`: rounds of pings, then 1-row async, 1-row durable and 1,000-row durable
/// inserts, each round on a fresh server. Fails when a phase had errors or measured nothing; the
/// issue's goals are information.
async fn run_http(args: HttpArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = HttpConfig {
        binary,
        data_dir: dir,
        connections: args.connections,
        duration: args.duration,
        rounds: args.rounds as usize,
    };
    println!(
        "{} keep-alive connections, {:?} per phase, {} rounds of a fresh server each",
        config.connections, config.duration, config.rounds
    );
    print_http_header();
    let report = http::run(config, |round, phase| {
        print_http_phase(&(round + 1).to_string(), phase);
    })
    .await
    .map_err(anyhow::Error::msg)?;
    print_http_medians(&report);
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.measured_cleanly()))
}

/// The column heads of `sluice lab http`'s table.
fn print_http_header() {
    println!(
        "  {:<6} {:<28} {:>12} {:<9} {:>7} {:>18} {:>18}",
        "round", "phase", "per s", "", "errors", "server CPU us/req", "client CPU us/req"
    );
}

/// One phase's line in `sluice lab http`'s table.
fn print_http_phase(first: &str, phase: &http::Phase) {
    println!(
        "  {first:<6} {:<28} {:>12.0} {:<9} {:>7} {:>18.1} {:>18.1}",
        phase.name, phase.per_s, phase.unit, phase.errors, phase.server_cpu_us, phase.client_cpu_us
    );
}

/// The medians of `sluice lab http`'s rounds, then the two ratios, each beside its goal and the
/// range the rounds gave.
fn print_http_medians(report: &HttpReport) {
    for phase in &report.median_phases {
        print_http_phase("median", phase);
    }
    let range = |ratio: fn(&http::RoundFigures) -> f64| {
        let values = report.per_round.iter().map(ratio);
        let low = values.clone().fold(f64::INFINITY, f64::min);
        let high = values.fold(f64::NEG_INFINITY, f64::max);
        format!("{low:.3}..{high:.3}")
    };
    println!(
        "  async inserts / pings     {:>6.3}  (goal {:.2}: {}; rounds {})",
        report.async_vs_ping,
        report.async_vs_ping_goal,
        met(report.async_vs_ping_met),
        range(|r| r.async_vs_ping)
    );
    println!(
        "  durable / async inserts   {:>6.3}  (goal {:.2}: {}; rounds {})",
        report.durable_vs_async,
        report.durable_vs_async_goal,
        met(report.durable_vs_async_met),
        range(|r| r.durable_vs_async)
    );
    if !report.measured_cleanly() {
        println!("  a phase had errors or measured nothing: the figures are not to be trusted");
    }
}

/// How a lab prints whether a goal was reached.
fn met(reached: bool) -> &'static str {
    if reached { "met" } else { "not met" }
}

/// `sluice lab age`: three loads on a fixed-age table and an adaptive one. Fails when a load had
/// errors or acknowledged nothing; the goals are information.
async fn run_age(args: AgeArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = AgeConfig {
        binary,
        data_dir: dir,
        min_age: args.min_age,
        max_age: args.max_age,
        trickle_rate: args.trickle_rate,
        trickle_producers: args.trickle_producers,
        trickle_duration: args.trickle_duration,
        busy_producers: args.producers,
        busy_duration: args.duration,
    };
    println!(
        "max_age {:?}; adaptive: min_age {:?}; trickle {} rows/s over {} producers; busy {} producers",
        config.max_age,
        config.min_age,
        config.trickle_rate,
        config.trickle_producers,
        config.busy_producers
    );
    println!(
        "  {:<9} {:<19} {:>10} {:>8} {:>8} {:>8} {:>8} {:>10} {:>6}",
        "policy", "load", "rows/s", "p50 ms", "p99 ms", "max ms", "parts/s", "rows/part", "errors"
    );
    let report = age::run(config, |policy, load, f| {
        println!(
            "  {:<9} {:<19} {:>10.0} {:>8.1} {:>8.1} {:>8.1} {:>8.2} {:>10.1} {:>6}",
            policy,
            load,
            f.rows_per_s,
            f.p50_ms,
            f.p99_ms,
            f.max_ms,
            f.parts_per_s,
            f.rows_per_part,
            f.errors
        );
    })
    .await
    .map_err(anyhow::Error::msg)?;
    print_age_goals(&report);
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.measured_cleanly()))
}

/// `sluice lab writers`: 1, 2, ... sluice processes on one Delta table. Fails when a count had
/// errors or landed nothing.
async fn run_writers(args: WritersArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = WritersConfig {
        binary,
        dir,
        max_writers: args.writers,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        duration: args.duration,
        max_age: args.max_age,
    };
    println!(
        "{} producers of {}-row durable inserts, {:?} per count, max_age {:?}, 8 partitions",
        config.producers, config.rows_per_insert, config.duration, config.max_age
    );
    println!(
        "  {:>7} {:>10} {:>10} {:>16} {:>13} {:>13} {:>6}",
        "writers",
        "rows/s",
        "commits/s",
        "lost races/min",
        "flush p50 ms",
        "flush p99 ms",
        "errors"
    );
    let report = writers::run(config, |r| {
        println!(
            "  {:>7} {:>10.0} {:>10.1} {:>16.1} {:>13.1} {:>13.1} {:>6}",
            r.writers,
            r.rows_per_s,
            r.commits_per_s,
            r.commit_retries_per_min,
            r.flush_p50_ms,
            r.flush_p99_ms,
            r.errors
        );
    })
    .await
    .map_err(anyhow::Error::msg)?;
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.measured_cleanly()))
}

/// `sluice lab decode`: nested against flat rows, decoded in-process.
fn run_decode(args: DecodeArgs) -> Result<ExitCode> {
    let config = DecodeLabConfig {
        rows: args.rows,
        rows_per_body: args.rows_per_body,
        runs: args.runs,
    };
    println!(
        "{} rows of each shape in bodies of {}, median of {} alternated runs, one core",
        config.rows, config.rows_per_body, config.runs
    );
    let report = decode::run(&config).map_err(anyhow::Error::msg)?;
    for shape in [&report.flat, &report.nested] {
        println!(
            "  {:<7} {:>11.0} rows/s {:>8.1} MB/s  ({} bytes)",
            shape.name, shape.rows_per_s, shape.mb_per_s, shape.bytes
        );
    }
    println!(
        "  nested/flat: {:.2} of the rows/s, {:.2} of the MB/s",
        report.rows_ratio, report.bytes_ratio
    );
    write_json(args.json.as_ref(), &report)?;
    Ok(ExitCode::SUCCESS)
}

/// `sluice lab shards`: four ways into a ClickHouse cluster of two shards. Fails when a way
/// had errors or did not land each acknowledged row once.
async fn run_shards(args: ShardsArgs, binary: PathBuf) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = ShardsConfig {
        binary,
        dir,
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        rate: args.rate,
        duration: args.duration,
        max_age: args.max_age,
    };
    println!(
        "{} producers of {}-row durable inserts at {:.0} rows/s, {:?} per way, max_age {:?}",
        config.producers, config.rows_per_insert, config.rate, config.duration, config.max_age
    );
    println!(
        "  {:<17} {:>9} {:>9} {:>9} {:>13} {:>21} {:>6}",
        "way", "rows/s", "parts A", "parts B", "rows/part", "rows A / B", "errors"
    );
    let report = shards::run(config, |r| {
        println!(
            "  {:<17} {:>9.0} {:>9} {:>9} {:>13.0} {:>10} / {:<10} {:>6}",
            r.way.name(),
            r.rows_per_s,
            r.parts[0],
            r.parts[1],
            r.rows_per_part,
            r.rows[0],
            r.rows[1],
            r.errors
        );
    })
    .await
    .map_err(anyhow::Error::msg)?;
    write_json(args.json.as_ref(), &report)?;
    Ok(exit_code(report.measured_cleanly()))
}

/// The two goals of `sluice lab age`, each with what was measured.
fn print_age_goals(report: &AgeReport) {
    println!(
        "  adaptive trickle p99 at most {:.0} ms: {}",
        report.trickle_p99_goal_ms,
        met(report.trickle_goal_met)
    );
    println!(
        "  adaptive busy load at most about one part per max_age: {}",
        met(report.busy_goal_met)
    );
    if !report.measured_cleanly() {
        println!("  a load had errors or acknowledged nothing: the figures are not to be trusted");
    }
}

async fn run_layouts(args: LayoutsArgs) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = LayoutsConfig {
        rows: args.rows,
        layouts: args.layouts,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        reps: args.reps,
        dir,
        seed: args.seed,
    };
    let report = tokio::task::spawn_blocking(move || {
        let bar = Bar::new();
        let report = layouts::run(&config, &bar);
        bar.0.finish_and_clear();
        report
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    print_layouts(&report);
    args.outputs.write_json(&report)?;
    if let Some(path) = &args.outputs.plot {
        plot::layouts(&report, path).map_err(anyhow::Error::msg)?;
        args.outputs.note_plot();
    }
    Ok(ExitCode::SUCCESS)
}

fn print_layouts(r: &LayoutsReport) {
    println!(
        "{} rows, {:.1} MB in memory, {} threads, best of {}",
        r.rows,
        r.raw_bytes as f64 / 1e6,
        r.threads,
        r.reps
    );
    println!(
        "{:>10} {:>7} {:>9} {:>15} {:>9} {:>10} {:>11} {:>11} {:>9}",
        "rows/file",
        "files",
        "MB",
        "footer MB (%)",
        "write s",
        "meta ms",
        "scan 1t ms",
        "scan Nt ms",
        "query ms"
    );
    for l in &r.layouts {
        println!(
            "{:>10} {:>7} {:>9.1} {:>8.2} ({:>3.0}%) {:>9.2} {:>10.1} {:>11.0} {:>11.0} {:>9.1}",
            l.rows_per_file,
            l.files,
            l.bytes as f64 / 1e6,
            l.footer_bytes as f64 / 1e6,
            l.footer_share * 100.0,
            l.write_s,
            l.meta_open_s * 1000.0,
            l.scan_1_thread_s * 1000.0,
            l.scan_threads_s * 1000.0,
            l.query_s * 1000.0
        );
    }
    if let Some(x) = &r.ratios {
        println!(
            "tiny vs big: bytes {:.1}x, scan {:.0}x ({:.0}x on 1 thread), query {:.0}x, write {:.0}x, metadata {:.0}x",
            x.bytes, x.scan, x.scan_1_thread, x.query, x.write, x.meta_open
        );
    }
    if let Some(c) = &r.compaction {
        println!(
            "compaction: {} files ({:.1} MB) into {} ({:.1} MB), {} rows, {:.2} s",
            c.files_in,
            c.bytes_in as f64 / 1e6,
            c.files_out,
            c.bytes_out as f64 / 1e6,
            c.rows,
            c.seconds
        );
    }
    if let Some(m) = &r.merge {
        for p in &m.points {
            println!(
                "merge 10 files of {:>7} rows: {:>8.1} ms",
                p.rows_per_file,
                p.seconds * 1000.0
            );
        }
        println!(
            "fit: {:.1} ms per merge + {:.3} us per row",
            m.fixed_s * 1000.0,
            m.per_row_s * 1e6
        );
    }
}

fn run_merge_sim(args: MergeSimArgs) -> Result<ExitCode> {
    let mut base = MergeSimConfig {
        duration: args.duration,
        ..MergeSimConfig::default()
    };
    if let Some(path) = &args.merge_cost_from_layouts {
        (base.fixed_cost, base.per_row_cost_s) = merge_fit_from_layouts(path)?;
    }
    let scenarios = merge_sim_scenarios(args.rate, args.insert_rows);
    println!(
        "one merge thread, 10 parts into 1, {:.1} ms + {:.4} us/row, {:?} of ingest",
        base.fixed_cost.as_secs_f64() * 1000.0,
        base.per_row_cost_s * 1e6,
        base.duration
    );
    println!(
        "{:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>11} {:>11} {:>11}",
        "rows/s",
        "rows/ins",
        "parts/s",
        "merges",
        "ampl.",
        "busy",
        "parts end",
        "1,000 at s",
        "3,000 at s"
    );
    let mut runs: Vec<(String, MergeSimReport)> = Vec::new();
    for (rate, insert_rows) in scenarios {
        let report = merge_sim::simulate(&MergeSimConfig {
            rate,
            insert_rows,
            ..base
        });
        let at = |t: Option<f64>| t.map_or_else(|| "never".to_owned(), |t| format!("{t:.2}"));
        println!(
            "{:>9.0} {:>9} {:>8.0} {:>8} {:>6.2}x {:>6.1}% {:>11} {:>11} {:>11}",
            rate,
            insert_rows,
            report.parts_per_s,
            report.merges,
            report.write_amplification,
            report.merger_busy * 100.0,
            report.parts_at_end,
            at(report.passed_1000_s),
            at(report.passed_3000_s)
        );
        runs.push((
            format!("{rate:.0} rows/s in {insert_rows}-row inserts"),
            report,
        ));
    }
    let json: Vec<&MergeSimReport> = runs.iter().map(|(_, r)| r).collect();
    args.outputs.write_json(&json)?;
    if let Some(path) = &args.outputs.plot {
        plot::merge_sim(&runs, path).map_err(anyhow::Error::msg)?;
        args.outputs.note_plot();
    }
    Ok(ExitCode::SUCCESS)
}

/// The merge cost (fixed, and seconds per row) that a `sluice lab layouts --json` file fitted.
fn merge_fit_from_layouts(path: &Path) -> Result<(Duration, f64)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text)?;
    let fixed = report["merge"]["fixed_s"].as_f64();
    let per_row = report["merge"]["per_row_s"].as_f64();
    match (fixed, per_row) {
        (Some(fixed), Some(per_row)) if fixed >= 0.0 && per_row >= 0.0 => {
            Ok((Duration::from_secs_f64(fixed), per_row))
        }
        _ => anyhow::bail!(
            "{} has no usable merge fit (merge.fixed_s, merge.per_row_s)",
            path.display()
        ),
    }
}

/// The (rows/s, rows per insert) pairs to simulate: the seed's scenarios unless a flag names
/// one, whose unset half comes from the seed's first.
fn merge_sim_scenarios(rate: Option<f64>, insert_rows: Option<u64>) -> Vec<(f64, u64)> {
    match (rate, insert_rows) {
        (None, None) => vec![
            (20_000.0, 100),
            (20_000.0, 10_000),
            (20_000.0, 1_000_000),
            (200_000.0, 100),
        ],
        (rate, rows) => vec![(rate.unwrap_or(20_000.0), rows.unwrap_or(100))],
    }
}

async fn run_knee(args: KneeArgs) -> Result<ExitCode> {
    let (dir, _temp) = args.scratch.open()?;
    let config = KneeConfig {
        rows: args.rows,
        rows_for_one: args.rows_for_one,
        sizes: args.sizes,
        reps: args.reps,
        trickle_rate: args.trickle,
        trickle_size: 1000,
        max_age: args.max_age,
        producers: args.producers,
        dir,
        postgres: args.postgres,
    };
    let bar = ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(120));
    bar.set_message("batch sizes into SQLite, one commit per batch");
    let report = knee::run(&config, |line| {
        bar.suspend(|| println!("{line}"));
    })
    .await
    .map_err(anyhow::Error::msg)?;
    bar.finish_and_clear();
    println!(
        "SQLite: batch 10,000 vs 1: {:.0}x; sluice's single-row producers vs a commit per row: {:.0}x",
        report.knee_ratio, report.sluice_ratio
    );
    if let Some(pg) = &report.postgres {
        println!(
            "PostgreSQL: batch 10,000 vs 1: {:.0}x; sluice's single-row producers vs a commit per row: {:.0}x",
            pg.knee_ratio, pg.sluice_ratio
        );
    }
    args.outputs.write_json(&report)?;
    if let Some(path) = &args.outputs.plot {
        plot::knee(&report, path).map_err(anyhow::Error::msg)?;
        args.outputs.note_plot();
    }
    Ok(ExitCode::SUCCESS)
}
