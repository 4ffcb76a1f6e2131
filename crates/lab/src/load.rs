//! The load generator behind `sluice load`: what pgbench is for PostgreSQL, for ingest.
//!
//! N producers, each holding one keep-alive HTTP/1.1 connection like a real producer would, send
//! inserts of R synthetic events to either endpoint at a target total rate or as fast as the
//! server answers, for a duration or a total number of rows. Every row carries a unique `id`
//! (`id_offset` + 0, 1, 2, ...), so a test can check afterwards that each acknowledged row landed
//! exactly once.
//!
//! A `503` whose `X-Sluice-Error` says `overloaded` means the insert was not accepted: the
//! producer waits for `Retry-After` (capped at 100 ms here) and sends the same rows again. Any
//! other failure is counted and the rows are not resent, since they may have landed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;

use crate::events::{Event, EventGen, RowFormat, write_insert};
use crate::native_client::{NativeClient, NativeError};

/// Which HTTP API the producers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    /// `POST /v1/tables/{table}/rows?ack=...`
    Native,
    /// `POST /?query=INSERT INTO {table} FORMAT <format>`, in the config's [`RowFormat`].
    ClickHouse,
    /// The same insert sent to a real ClickHouse server, with
    /// `date_time_input_format=best_effort` so it reads RFC 3339 timestamps.
    ClickHouseServer,
    /// ClickHouse's native protocol, to sluice or to a ClickHouse server: `INSERT INTO {table}
    /// VALUES` and one `Native` block in the types the server announces.
    ClickHouseTcp,
}

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this long.
    After(Duration),
    /// After this many rows were sent (acknowledged or not).
    Rows(u64),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server's address.
    pub addr: SocketAddr,
    /// The table to insert into.
    pub table: String,
    /// Which API.
    pub endpoint: Endpoint,
    /// Concurrent producers, each with its own connection.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Target rows per second over all producers; `None` sends as fast as answers come.
    pub rate: Option<f64>,
    /// When to stop.
    pub stop: Stop,
    /// The ack mode to ask for: `async`, `durable` or `committed`.
    pub ack: String,
    /// Seed of the event generator (producer `p` uses `seed + p`).
    pub seed: u64,
    /// The first row id.
    pub id_offset: u64,
    /// The format of the rows on the ClickHouse endpoint; the others take `JSONEachRow` only.
    pub format: RowFormat,
    /// Whether each insert carries a key (its first row's id), on the native API
    /// (`insert_id=`) or the ClickHouse doors (`insert_deduplication_token`).
    pub keyed: bool,
}

impl LoadConfig {
    /// Producers sending JSON rows to the native API as fast as answers come, without keys, seed
    /// and first id 0: what most labs run, changing a field or two.
    pub fn native(
        addr: SocketAddr,
        table: &str,
        producers: usize,
        rows_per_insert: usize,
        ack: &str,
        stop: Stop,
    ) -> Self {
        Self {
            addr,
            table: table.to_owned(),
            endpoint: Endpoint::Native,
            producers,
            rows_per_insert,
            rate: None,
            stop,
            ack: ack.to_owned(),
            seed: 0,
            id_offset: 0,
            format: RowFormat::JsonEachRow,
            keyed: false,
        }
    }
}

/// Latency figures, in milliseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// The slowest.
    pub max_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// The endpoint used.
    pub endpoint: Endpoint,
    /// The ack mode asked for.
    pub ack: String,
    /// Producers.
    pub producers: usize,
    /// Rows per insert.
    pub rows_per_insert: usize,
    /// Rows acknowledged with 200.
    pub rows_acked: u64,
    /// Inserts acknowledged with 200.
    pub inserts_acked: u64,
    /// Inserts that failed, by HTTP status or `connection`.
    pub errors: BTreeMap<String, u64>,
    /// Inserts resent after an `overloaded` answer.
    pub retries: u64,
    /// Wall time of the run in seconds.
    pub elapsed_s: f64,
    /// Acknowledged rows per second.
    pub rows_per_s: f64,
    /// Acknowledged inserts per second.
    pub inserts_per_s: f64,
    /// Latency of acknowledged inserts, from first send to answer (retries included).
    pub latency: Latency,
    /// The ids of acknowledged rows, as ranges `[start, end)`, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked_ids: Option<Vec<(u64, u64)>>,
}

/// Why the run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A setting is unusable.
    #[error("{0}")]
    Config(String),
    /// The server could not be reached at all.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Default)]
struct ProducerResult {
    latencies_us: Vec<u32>,
    rows: u64,
    inserts: u64,
    errors: BTreeMap<String, u64>,
    retries: u64,
    acked: Vec<(u64, u64)>,
}

/// Live counters a caller can poll to draw progress, and a flag to stop the run early.
#[derive(Debug, Default)]
pub struct Progress {
    /// Rows acknowledged so far.
    pub rows_acked: AtomicU64,
    /// Inserts that failed so far.
    pub errors: AtomicU64,
    /// Body bytes sent so far, resends included.
    pub bytes_sent: AtomicU64,
    /// Set to make every producer stop before its next insert.
    pub stop: AtomicBool,
}

/// Runs the load and reports. `record_ids` keeps the acknowledged id ranges in the report.
pub async fn run(
    config: LoadConfig,
    progress: Arc<Progress>,
    record_ids: bool,
) -> Result<LoadReport, LoadError> {
    if config.producers == 0 || config.rows_per_insert == 0 {
        return Err(LoadError::Config(
            "producers and rows per insert must be at least 1".into(),
        ));
    }
    if config.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(LoadError::Config(
            "the rate must be a positive number of rows per second".into(),
        ));
    }
    // Fail fast if nothing listens, rather than counting every insert as an error.
    TcpStream::connect(config.addr)
        .await
        .map_err(|source| LoadError::Connect {
            addr: config.addr,
            source,
        })?;
    let config = Arc::new(config);
    let next_id = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(config.producers);
    for producer in 0..config.producers {
        let (config, next_id, progress) = (config.clone(), next_id.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            produce(&config, producer, &next_id, &progress, started, record_ids).await
        }));
    }
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Ok(result) = task.await {
            results.push(result);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(report(&config, results, elapsed, record_ids))
}

/// One producer: sends inserts on its own connection until the run is over or `progress.stop`
/// is set, and returns what it counted.
async fn produce(
    config: &LoadConfig,
    producer: usize,
    next_id: &AtomicU64,
    progress: &Progress,
    started: Instant,
    record_ids: bool,
) -> ProducerResult {
    let mut result = ProducerResult::default();
    let mut events = EventGen::new(config.seed.wrapping_add(producer as u64));
    let mut conn: Option<SendRequest<Full<Bytes>>> = None;
    let mut native: Option<NativeClient> = None;
    let mut ticker = producer_ticker(config, producer);
    let path = request_path(config);
    let mut body = Vec::with_capacity(config.rows_per_insert * 256);
    let mut batch = Vec::with_capacity(config.rows_per_insert);
    loop {
        if progress.stop.load(Ordering::Relaxed) {
            break;
        }
        let Some((first, rows)) = claim_rows(config, next_id, started) else {
            break;
        };
        if let Some(ticker) = ticker.as_mut() {
            ticker.tick().await;
        }
        let format = match config.endpoint {
            Endpoint::ClickHouse => config.format,
            _ => RowFormat::JsonEachRow,
        };
        batch.clear();
        batch.extend((0..rows).map(|i| (config.id_offset + first + i, events.next_event())));
        let acked = if config.endpoint == Endpoint::ClickHouseTcp {
            deliver_native(config, &mut native, &batch, progress, &mut result).await
        } else {
            body.clear();
            write_insert(format, &batch, &mut body);
            let payload = Bytes::copy_from_slice(&body);
            let keyed = config
                .keyed
                .then(|| keyed_path(config, &path, config.id_offset + first));
            deliver(
                config,
                &mut conn,
                keyed.as_deref().unwrap_or(&path),
                payload,
                rows,
                progress,
                &mut result,
            )
            .await
        };
        if acked && record_ids {
            let start = config.id_offset + first;
            result.acked.push((start, start + rows));
        }
    }
    result
}

/// The ticker that paces one producer at its share of the target rate, when there is one.
/// Producers start a fraction of a period apart, so together they send evenly spread inserts
/// rather than a burst from every producer at once each period.
fn producer_ticker(config: &LoadConfig, producer: usize) -> Option<tokio::time::Interval> {
    config.rate.map(|rate| {
        let per_producer = rate / config.producers as f64;
        let period = Duration::from_secs_f64(config.rows_per_insert as f64 / per_producer);
        let offset = period.mul_f64(producer as f64 / config.producers as f64);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker
    })
}

/// Claims the ids of the next insert: its first id (before `id_offset`) and its row count, or
/// `None` when the run is over.
fn claim_rows(config: &LoadConfig, next_id: &AtomicU64, started: Instant) -> Option<(u64, u64)> {
    match config.stop {
        Stop::After(limit) if started.elapsed() >= limit => None,
        Stop::After(_) => Some((
            next_id.fetch_add(config.rows_per_insert as u64, Ordering::Relaxed),
            config.rows_per_insert as u64,
        )),
        Stop::Rows(total) => {
            let first = next_id.fetch_add(config.rows_per_insert as u64, Ordering::Relaxed);
            if first >= total {
                return None;
            }
            Some((first, (config.rows_per_insert as u64).min(total - first)))
        }
    }
}

/// Sends one insert of `rows` rows, resending it after each `overloaded` answer until it gets
/// another answer or the run is told to stop, and counts the outcome in `result` and
/// `progress`. Returns whether the insert was acknowledged.
async fn deliver(
    config: &LoadConfig,
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    path: &str,
    payload: Bytes,
    rows: u64,
    progress: &Progress,
    result: &mut ProducerResult,
) -> bool {
    let sent_at = Instant::now();
    loop {
        progress
            .bytes_sent
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        match send(config, conn, path, payload.clone()).await {
            Ok((StatusCode::OK, _)) => {
                let us = sent_at.elapsed().as_micros().min(u32::MAX as u128) as u32;
                result.latencies_us.push(us);
                result.rows += rows;
                result.inserts += 1;
                progress.rows_acked.fetch_add(rows, Ordering::Relaxed);
                return true;
            }
            Ok((StatusCode::SERVICE_UNAVAILABLE, Some(reason))) if reason == "overloaded" => {
                result.retries += 1;
                if progress.stop.load(Ordering::Relaxed) {
                    // Never accepted: nothing to account for.
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok((status, _)) => {
                *result
                    .errors
                    .entry(status.as_u16().to_string())
                    .or_default() += 1;
                progress.errors.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            Err(()) => {
                *conn = None;
                *result.errors.entry("connection".into()).or_default() += 1;
                progress.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
                return false;
            }
        }
    }
}

/// `path` with the insert's key, `key`, in the parameter its endpoint reads keys from.
fn keyed_path(config: &LoadConfig, path: &str, key: u64) -> String {
    match config.endpoint {
        Endpoint::Native => format!("{path}&insert_id={key}"),
        _ => format!("{path}&insert_deduplication_token={key}"),
    }
}

/// [`deliver`] over ClickHouse's native protocol, on the producer's connection.
async fn deliver_native(
    config: &LoadConfig,
    client: &mut Option<NativeClient>,
    events: &[(u64, Event)],
    progress: &Progress,
    result: &mut ProducerResult,
) -> bool {
    const MEMORY_LIMIT_EXCEEDED: i32 = 241;
    let mut settings: Vec<(&str, &str)> = match config.ack.as_str() {
        "async" => vec![("async_insert", "1"), ("wait_for_async_insert", "0")],
        "durable" => vec![("sluice_ack", "durable")],
        _ => Vec::new(),
    };
    let key = events.first().map(|(id, _)| id.to_string());
    if let Some(key) = key.as_deref().filter(|_| config.keyed) {
        settings.push(("insert_deduplication_token", key));
    }
    let sent_at = Instant::now();
    loop {
        if client.is_none() {
            *client = NativeClient::connect(config.addr).await.ok();
        }
        let outcome = match client.as_mut() {
            Some(connection) => connection.insert(&config.table, &settings, events).await,
            None => Err(NativeError::Connection("cannot connect".to_owned())),
        };
        let failure = match outcome {
            Ok(()) => {
                let us = sent_at.elapsed().as_micros().min(u32::MAX as u128) as u32;
                result.latencies_us.push(us);
                result.rows += events.len() as u64;
                result.inserts += 1;
                progress
                    .rows_acked
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                return true;
            }
            Err(NativeError::Exception(MEMORY_LIMIT_EXCEEDED, _))
                if !progress.stop.load(Ordering::Relaxed) =>
            {
                result.retries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(NativeError::Exception(code, _)) => format!("code {code}"),
            Err(NativeError::Connection(_)) => {
                *client = None;
                "connection".to_owned()
            }
        };
        *result.errors.entry(failure).or_default() += 1;
        progress.errors.fetch_add(1, Ordering::Relaxed);
        return false;
    }
}

fn request_path(config: &LoadConfig) -> String {
    match config.endpoint {
        Endpoint::Native => format!("/v1/tables/{}/rows?ack={}", config.table, config.ack),
        Endpoint::ClickHouse => {
            // `committed` asks for nothing: a plain insert, which a real ClickHouse server takes
            // as it is.
            let path = format!(
                "/?query=INSERT%20INTO%20{}%20FORMAT%20{}",
                config.table,
                config.format.name()
            );
            match config.ack.as_str() {
                "async" => path + "&wait_for_async_insert=0",
                "durable" => path + "&sluice_ack=durable",
                _ => path,
            }
        }
        Endpoint::ClickHouseServer => format!(
            "/?query=INSERT%20INTO%20{}%20FORMAT%20JSONEachRow&date_time_input_format=best_effort",
            config.table
        ),
        Endpoint::ClickHouseTcp => String::new(),
    }
}

/// Sends one insert on the producer's connection, connecting first if needed. Returns the status
/// and the `X-Sluice-Error` reason, or `Err` when the connection failed.
async fn send(
    config: &LoadConfig,
    conn: &mut Option<SendRequest<Full<Bytes>>>,
    path: &str,
    body: Bytes,
) -> Result<(StatusCode, Option<String>), ()> {
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        *conn = Some(connect(config.addr).await?);
    }
    let sender = conn.as_mut().ok_or(())?;
    sender.ready().await.map_err(|_| ())?;
    let request = Request::post(path)
        .header(hyper::header::HOST, config.addr.to_string())
        .header(hyper::header::CONTENT_TYPE, "application/x-ndjson")
        .body(Full::new(body))
        .map_err(|_| ())?;
    let response = sender.send_request(request).await.map_err(|_| ())?;
    let status = response.status();
    let reason = response
        .headers()
        .get("x-sluice-error")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Read the body so the connection can carry the next request.
    response.into_body().collect().await.map_err(|_| ())?;
    Ok((status, reason))
}

/// An HTTP/1.1 connection to `addr` that stays open between requests; its driver runs as a task.
pub(crate) async fn connect(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>, ()> {
    let stream = TcpStream::connect(addr).await.map_err(|_| ())?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|_| ())?;
    tokio::spawn(connection);
    Ok(sender)
}

fn report(
    config: &LoadConfig,
    results: Vec<ProducerResult>,
    elapsed: f64,
    record_ids: bool,
) -> LoadReport {
    let mut latencies: Vec<u32> = Vec::new();
    let mut errors = BTreeMap::new();
    let (mut rows, mut inserts, mut retries) = (0, 0, 0);
    let mut acked = Vec::new();
    for r in results {
        latencies.extend(r.latencies_us);
        rows += r.rows;
        inserts += r.inserts;
        retries += r.retries;
        for (k, v) in r.errors {
            *errors.entry(k).or_default() += v;
        }
        acked.extend(r.acked);
    }
    latencies.sort_unstable();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let idx = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        f64::from(latencies[idx]) / 1000.0
    };
    let mean = if latencies.is_empty() {
        0.0
    } else {
        latencies.iter().map(|&l| f64::from(l)).sum::<f64>() / latencies.len() as f64 / 1000.0
    };
    acked.sort_unstable();
    LoadReport {
        endpoint: config.endpoint,
        ack: config.ack.clone(),
        producers: config.producers,
        rows_per_insert: config.rows_per_insert,
        rows_acked: rows,
        inserts_acked: inserts,
        errors,
        retries,
        elapsed_s: elapsed,
        rows_per_s: rows as f64 / elapsed.max(1e-9),
        inserts_per_s: inserts as f64 / elapsed.max(1e-9),
        latency: Latency {
            p50_ms: pct(0.50),
            p90_ms: pct(0.90),
            p99_ms: pct(0.99),
            max_ms: latencies.last().map_or(0.0, |&l| f64::from(l) / 1000.0),
            mean_ms: mean,
        },
        acked_ids: record_ids.then_some(acked),
    }
}

/// `GET path` on `addr`, returning the body (for scraping `/metrics` and `/health`).
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let request = Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    exchange(addr, request).await.map(|(_, body)| body)
}

/// `POST path` with `body` on `addr`, returning the status and the answer.
pub async fn http_post(
    addr: SocketAddr,
    path: &str,
    body: impl Into<Bytes>,
) -> Result<(StatusCode, String), String> {
    let request = Request::post(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Full::new(body.into()))
        .map_err(|e| e.to_string())?;
    exchange(addr, request).await
}

async fn exchange(
    addr: SocketAddr,
    request: Request<Full<Bytes>>,
) -> Result<(StatusCode, String), String> {
    let mut sender = connect(addr)
        .await
        .map_err(|()| format!("cannot connect to {addr}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let text = String::from_utf8(body.to_vec()).map_err(|e| e.to_string())?;
    Ok((status, text))
}

/// The value of an unlabelled Prometheus sample in a `/metrics` page.
pub fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
