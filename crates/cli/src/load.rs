//! `sluice load`: the load generator's command line and output.

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use sluice_lab::load::{Endpoint, LoadConfig, LoadReport, Progress, Stop};

/// `sluice load` flags.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The sluice server (`tcp://host:port` for --endpoint clickhouse-tcp).
    #[arg(long, default_value = "http://127.0.0.1:8124")]
    url: String,
    /// Table to insert into (created on first insert when auto_create is on).
    #[arg(long, default_value = "load")]
    table: String,
    /// Which API the producers use.
    #[arg(long, value_enum, default_value_t = EndpointArg::Native)]
    endpoint: EndpointArg,
    /// Concurrent producers, each with its own connection.
    #[arg(long, short = 'c', default_value_t = 64)]
    producers: usize,
    /// Rows per insert.
    #[arg(long, short = 'r', default_value_t = 1)]
    rows_per_insert: usize,
    /// Target rows per second over all producers [default: as fast as possible].
    #[arg(long)]
    rate: Option<f64>,
    /// How long to run (`10s`, `1m`); the default when --total-rows is not given.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "total_rows")]
    duration: Option<Duration>,
    /// Stop after this many rows instead of after a duration.
    #[arg(long)]
    total_rows: Option<u64>,
    /// Ack mode to ask for.
    #[arg(long, value_enum, default_value_t = AckArg::Committed)]
    ack: AckArg,
    /// Seed of the synthetic events.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The first row id (ids are unique and consecutive from here).
    #[arg(long, default_value_t = 0)]
    id_offset: u64,
    /// Give each insert a key (its first row's id), so a resend would land once.
    #[arg(long)]
    keyed: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum EndpointArg {
    Native,
    Clickhouse,
    /// ClickHouse's native protocol, at the --url's address (`[clickhouse] tcp_listen`).
    ClickhouseTcp,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AckArg {
    Async,
    Durable,
    Committed,
}

pub async fn run(args: LoadArgs) -> Result<ExitCode> {
    let addr = resolve(&args.url)?;
    let stop = match (args.total_rows, args.duration) {
        (Some(rows), _) => Stop::Rows(rows),
        (None, Some(d)) => Stop::After(d),
        (None, None) => Stop::After(Duration::from_secs(10)),
    };
    let config = LoadConfig {
        addr,
        table: args.table,
        endpoint: match args.endpoint {
            EndpointArg::Native => Endpoint::Native,
            EndpointArg::Clickhouse => Endpoint::ClickHouse,
            EndpointArg::ClickhouseTcp => Endpoint::ClickHouseTcp,
        },
        producers: args.producers,
        rows_per_insert: args.rows_per_insert,
        rate: args.rate,
        stop,
        ack: match args.ack {
            AckArg::Async => "async",
            AckArg::Durable => "durable",
            AckArg::Committed => "committed",
        }
        .to_owned(),
        seed: args.seed,
        id_offset: args.id_offset,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: args.keyed,
    };
    let progress = Arc::new(Progress::default());
    let bar = progress_bar(stop);
    let ticker = {
        let (bar, progress) = (bar.clone(), progress.clone());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let rows = progress.rows_acked.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                match stop {
                    Stop::Rows(_) => bar.set_position(rows),
                    Stop::After(_) => bar.set_position(started.elapsed().as_millis() as u64),
                }
                bar.set_message(format!(
                    "{rows} rows, {:.0} rows/s, {} errors",
                    rows as f64 / secs,
                    progress.errors.load(Ordering::Relaxed)
                ));
            }
        })
    };
    let interrupt = {
        let progress = progress.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                progress.stop.store(true, Ordering::Relaxed);
            }
        })
    };
    let report = sluice_lab::load::run(config, progress, false).await;
    interrupt.abort();
    ticker.abort();
    bar.finish_and_clear();
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if report.rows_acked == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn resolve(url: &str) -> Result<SocketAddr> {
    let (rest, default_port) = match url.strip_prefix("tcp://") {
        Some(rest) => (rest, 9000),
        None => (
            url.strip_prefix("http://")
                .with_context(|| format!("--url must start with http:// or tcp:// (got {url})"))?,
            80,
        ),
    };
    let host = rest.split('/').next().unwrap_or(rest);
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:{default_port}")
    };
    match host.to_socket_addrs()?.next() {
        Some(addr) => Ok(addr),
        None => bail!("cannot resolve {host}"),
    }
}

fn progress_bar(stop: Stop) -> ProgressBar {
    let (len, template) = match stop {
        Stop::Rows(rows) => (rows, "{bar:30} {percent:>3}% {msg}"),
        Stop::After(d) => (d.as_millis() as u64, "{bar:30} {elapsed:>4} {msg}"),
    };
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

fn print_report(r: &LoadReport) {
    let endpoint = match r.endpoint {
        Endpoint::Native => "native",
        Endpoint::ClickHouse => "clickhouse",
        Endpoint::ClickHouseServer => "clickhouse server",
        Endpoint::ClickHouseTcp => "clickhouse native protocol",
    };
    println!(
        "{} producers x {} rows/insert, endpoint {endpoint}, ack {}",
        r.producers, r.rows_per_insert, r.ack
    );
    println!("  rows acked     {:>12}", r.rows_acked);
    println!("  inserts acked  {:>12}", r.inserts_acked);
    println!("  elapsed        {:>12.2} s", r.elapsed_s);
    println!("  rows/s         {:>12.0}", r.rows_per_s);
    println!("  inserts/s      {:>12.0}", r.inserts_per_s);
    println!(
        "  latency ms     p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        r.latency.p50_ms, r.latency.p90_ms, r.latency.p99_ms, r.latency.max_ms
    );
    if r.retries > 0 {
        println!("  retries (overloaded) {}", r.retries);
    }
    for (kind, n) in &r.errors {
        println!("  errors {kind:<10} {n}");
    }
}
