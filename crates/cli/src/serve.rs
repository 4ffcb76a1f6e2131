//! `sluice serve`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use sluice_core::TableDef;
use sluice_pipeline::Pipeline;
use sluice_server::tls::Tls;
use sluice_server::{AppState, CompactionRound, Compactions};
use sluice_sinks::lake::CompactionReport;
use sluice_sinks::{ClickHouseSink, FileCatalog, LakeSink, LedgerWriter, PostgresSink, SqliteSink};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{CompactionSettings, FileConfig, LAKE_SINK, Overrides, Settings, SinkSpec};
use crate::lock::DataDirLock;

/// `sluice serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML config file (tables, flush policy, limits). Optional.
    #[arg(long, short, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Where the lake and sluice's own files live [default: ./sluice-data].
    #[arg(long, env = "SLUICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8124].
    #[arg(long, env = "SLUICE_LISTEN")]
    listen: Option<String>,
    /// The write-ahead log: `on` (the default) makes `durable` acks possible; `off` refuses them.
    #[arg(long, env = "SLUICE_WAL", value_parser = ["on", "off"])]
    wal: Option<String>,
    /// How long after SIGTERM sluice still takes inserts while `/health` says `stopping`, so a
    /// load balancer stops sending first: a duration such as `5s` [default: 0s].
    #[arg(long, env = "SLUICE_DRAIN_DELAY", value_parser = humantime::parse_duration)]
    drain_delay: Option<std::time::Duration>,
}

pub async fn run(args: ServeArgs) -> Result<ExitCode> {
    init_tracing();
    let signals = stop_signals()?;
    let mut settings = resolve_settings(args)?;
    // Held until the last flush has landed: dropped last.
    let _lock = DataDirLock::acquire(&settings.data_dir)?;
    let tls = load_tls(&settings)?;
    let metrics = sluice_server::metrics::install();

    let (lake, sinks) = build_sinks(&settings)?;
    let tables = std::mem::take(&mut settings.tables);
    let pipeline = start_pipeline(&settings, tables, &sinks).await?;
    let listeners = sluice_server::Listeners {
        http: bind(&settings).await?,
        native: bind_native(&settings, tls.is_some()).await?,
    };
    announce(&listeners, &settings, tls.is_some())?;
    let state =
        AppState::new(pipeline.clone(), metrics, settings.limits).with_access(settings.access);
    let (stop_upkeep, upkeep) = spawn_upkeep(lake, settings.compaction, state.compactions());

    sluice_server::serve(listeners, state, tls, signals)
        .await
        .context("the HTTP server failed")?;
    let _ = stop_upkeep.send(());
    let _ = upkeep.await;
    Ok(flush_at_shutdown(&pipeline).await)
}

/// The config file, if any, with the command-line flags over it.
fn resolve_settings(args: ServeArgs) -> Result<Settings> {
    let file = match &args.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    file.resolve(Overrides {
        listen: args.listen,
        data_dir: args.data_dir,
        wal: args.wal.map(|w| w == "on"),
        drain_delay: args.drain_delay,
    })
}

/// The certificate and key of `[tls]`, read now so that a bad file stops sluice before it
/// listens.
fn load_tls(settings: &Settings) -> Result<Option<Tls>> {
    let tls = match &settings.tls {
        Some(files) => Some(
            Tls::from_pem_files(&files.cert, &files.key)
                .map_err(|e| anyhow::anyhow!("invalid config: tls: {e}"))?,
        ),
        None => None,
    };
    Ok(tls)
}

/// Starts the pipeline on the data directory's catalog, with each declared table in its sink.
async fn start_pipeline(
    settings: &Settings,
    tables: Vec<(TableDef, String)>,
    sinks: &Sinks,
) -> Result<Pipeline> {
    let sink = |name: &str| -> Result<Arc<dyn sluice_core::Sink>> {
        sinks
            .get(name)
            .cloned()
            .with_context(|| format!("there is no sink '{name}'"))
    };
    let catalog = Arc::new(FileCatalog::open(&settings.data_dir)?);
    let mut builder = Pipeline::builder(
        settings.pipeline.clone(),
        catalog,
        sink(&settings.default_sink)?,
    );
    for (table, sink_name) in tables {
        builder = builder.table(table, Some(sink(&sink_name)?));
    }
    builder.start().await.context("cannot start the pipeline")
}

/// Opens the listening socket and says where sluice listens, with a warning when anyone
/// beyond this machine could write.
async fn bind(settings: &Settings) -> Result<TcpListener> {
    let listener = TcpListener::bind(&settings.listen)
        .await
        .with_context(|| format!("cannot listen on {}", settings.listen))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() && !settings.access.is_enabled() {
        tracing::warn!(
            %addr,
            "listening beyond loopback with no access control: anyone who can reach this address can write"
        );
    }
    tracing::info!(%addr, data_dir = %settings.data_dir.display(), "sluice is listening");
    Ok(listener)
}

/// Prints the one line that says where sluice listens, for scripts and tests that start it on
/// port 0: the HTTP address first, then the native protocol's when it is on.
fn announce(listeners: &sluice_server::Listeners, settings: &Settings, tls: bool) -> Result<()> {
    let scheme = if tls { "https" } else { "http" };
    let mut line = format!(
        "sluice listening on {scheme}://{} (data in {})",
        listeners.http.local_addr()?,
        settings.data_dir.display()
    );
    if let Some(native) = &listeners.native {
        line.push_str(&format!(
            "; native protocol on tcp://{}",
            native.local_addr()?
        ));
    }
    println!("{line}");
    Ok(())
}

/// Opens the native protocol's socket when `[clickhouse] tcp_listen` is set.
async fn bind_native(settings: &Settings, tls: bool) -> Result<Option<TcpListener>> {
    let Some(listen) = &settings.tcp_listen else {
        return Ok(None);
    };
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (clickhouse.tcp_listen)"))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, tls, "ClickHouse's native protocol is listening");
    Ok(Some(listener))
}

/// Starts the lake's upkeep (compaction, rereading logs), which runs until the sender is used
/// or dropped: the server stops it when it stops taking inserts.
fn spawn_upkeep(
    lake: LakeSink,
    compaction: CompactionSettings,
    console: Arc<Compactions>,
) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop_upkeep, upkeep_stopped) = oneshot::channel::<()>();
    let upkeep = tokio::spawn(async move {
        let stop = async move {
            let _ = upkeep_stopped.await;
        };
        let policy = compaction.enabled.then_some(compaction.policy);
        let record = |table: &_, round: &_| record_compaction(&console, table, round);
        lake.run_upkeep(policy, compaction.interval, record, stop)
            .await;
    });
    (stop_upkeep, upkeep)
}

/// Flushes what is buffered once the server no longer accepts, and fails the process if an
/// accepted row could not land (rows left in the write-ahead log land after the next start).
async fn flush_at_shutdown(pipeline: &Pipeline) -> ExitCode {
    tracing::info!("no longer accepting; flushing what is buffered");
    let report = pipeline.shutdown().await;
    let lost = report.rows_lost();
    let deferred = report.rows_deferred();
    if deferred > 0 {
        tracing::warn!(
            rows = deferred,
            "rows not landed at shutdown are in the write-ahead log and land after the next start"
        );
    }
    if lost > 0 {
        tracing::error!(rows = lost, "shutdown could not land every accepted row");
        return ExitCode::FAILURE;
    }
    tracing::info!(tables = report.tables.len(), "everything flushed; bye");
    ExitCode::SUCCESS
}

/// Counts what a background compaction round did in `/metrics`, and for the console.
fn record_compaction(
    console: &Compactions,
    table: &sluice_core::TableName,
    round: &Result<CompactionReport, sluice_core::SinkError>,
) {
    use sluice_pipeline::names;
    let table = table.to_string();
    let report = match round {
        Ok(report) => report,
        Err(_) => {
            metrics::counter!(names::COMPACTION_ERRORS, "table" => table.clone()).increment(1);
            console.record_error(&table);
            return;
        }
    };
    console.record(
        &table,
        &CompactionRound {
            merges: report.merges,
            files_in: report.files_in,
            files_out: report.files_out,
            bytes_in: report.bytes_in,
            bytes_out: report.bytes_out,
            rows: report.rows,
        },
    );
    let by_table = |name: &'static str, value: u64| {
        metrics::counter!(name, "table" => table.clone()).increment(value);
    };
    by_table(names::COMPACTION_MERGES, report.merges);
    by_table(names::COMPACTION_LOST_RACES, report.lost_races);
    by_table(names::COMMIT_ANSWERS_LOST, report.answers_lost);
    by_table(names::COMPACTION_ROWS, report.rows);
    by_table(names::COMPACTION_FILES_DELETED, report.files_deleted);
    for (name, inward, outward) in [
        (names::COMPACTION_FILES, report.files_in, report.files_out),
        (names::COMPACTION_BYTES, report.bytes_in, report.bytes_out),
    ] {
        metrics::counter!(name, "table" => table.clone(), "direction" => "in").increment(inward);
        metrics::counter!(name, "table" => table.clone(), "direction" => "out").increment(outward);
    }
    // Only rounds that merged: the idle ones (short, since they find nothing to do) would
    // hide how long the work takes, which is what tells whether compaction keeps up. Recorded
    // after the counters, so a scrape never sees more such rounds than merges.
    if report.merges + report.lost_races > 0 {
        metrics::histogram!(names::COMPACTION_SECONDS, "table" => table).record(report.elapsed_s);
    }
}

/// The sinks by the names the settings give them.
type Sinks = HashMap<String, Arc<dyn sluice_core::Sink>>;

/// Every sink the settings name, by name: the lake (also returned as itself, for its
/// compactor), and each `[sinks.NAME]`.
fn build_sinks(settings: &Settings) -> Result<(LakeSink, Sinks)> {
    let mut sinks = Sinks::new();
    let lake = LakeSink::new(settings.lake.clone())?;
    sinks.insert(LAKE_SINK.to_owned(), Arc::new(lake.clone()));
    // The database stores keep this data directory's rows of their ledgers apart from other
    // sluice processes' (their sequence numbers come from other logs), by the lake's identity.
    let writer = LedgerWriter::new(lake.writer());
    for (name, spec) in &settings.sinks {
        let sink: Arc<dyn sluice_core::Sink> = match spec {
            SinkSpec::Sqlite(config) => Arc::new(
                SqliteSink::open(config.clone())
                    .with_context(|| format!("sink {name}: cannot open {}", config.path.display()))?
                    .with_writer(writer.clone()),
            ),
            // Nothing is asked of these servers yet: each table opens in its store as the
            // pipeline starts, and one that does not answer then is opened later.
            SinkSpec::Postgres(config) => Arc::new(
                PostgresSink::new(config.clone())
                    .with_context(|| format!("sink {name}: bad PostgreSQL settings"))?
                    .with_writer(writer.clone()),
            ),
            SinkSpec::ClickHouse(config) => Arc::new(
                ClickHouseSink::new(config.clone())
                    .with_context(|| format!("sink {name}: bad ClickHouse settings"))?
                    .with_writer(writer.clone()),
            ),
        };
        sinks.insert(name.clone(), sink);
    }
    Ok((lake, sinks))
}

/// Logs to stderr, `info` unless `RUST_LOG` says otherwise. deltalake-core reports every commit
/// retried after another writer's commit as a warning (routine with several writers on one
/// table), and its Delta kernel logs every snapshot it builds at `info`: by default only their
/// errors and warnings show.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "info,deltalake_core::kernel::transaction=error,buoyant_kernel=warn",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// SIGINT and SIGTERM, registered now (so a signal that arrives while sluice starts is not
/// lost to the default action, which would kill it unflushed) and passed on, each time one
/// comes, to the server: the first starts the drain, a second cuts its delay short.
fn stop_signals() -> Result<sluice_server::Signals> {
    let (send, signals) = tokio::sync::mpsc::channel(4);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = interrupt.recv() => tracing::info!("SIGINT received"),
                    _ = terminate.recv() => tracing::info!("SIGTERM received"),
                }
                // The server needs two at most; more are as good as two.
                let _ = send.try_send(());
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("Ctrl-C received");
            let _ = send.try_send(());
        }
    });
    Ok(signals)
}
