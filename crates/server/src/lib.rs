//! sluice's HTTP edge.
//!
//! # Layout
//!
//! - [`auth`]: who may write (bearer tokens, ClickHouse-style users), globally or per table.
//! - `api.rs`: the native API (`/v1/tables/{table}/rows`, `/v1/tables`, `/health`).
//! - `console/`: the console, `GET /dashboard`: a page that shows sluice at work, its JSON
//!   (`/v1/dashboard`), the sampler behind its charts, and the estimator (`/v1/estimate`).
//! - `clickhouse/`: the ClickHouse-compatible endpoint (`POST /?query=INSERT ...`, `/ping`).
//! - `body.rs`: body size and row limits, the body's idle timeout, and decompression.
//! - [`drain`]: the graceful stop behind a load balancer: unhealthy first, then the doors close.
//! - `error.rs`: every error kind and the one table mapping it to an HTTP status.
//! - [`metrics`]: the Prometheus exporter.
//! - [`tls`]: HTTPS with rustls when a certificate is configured.
//!
//! Architecture invariant: the server holds no sink or WAL logic; it turns requests into
//! pipeline calls and pipeline results into answers.

mod api;
pub mod auth;
mod body;
pub mod clickhouse;
mod console;
pub mod drain;
mod error;
pub mod metrics;
pub mod tls;

use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use sluice_pipeline::Pipeline;
use tokio::net::TcpListener;

pub use body::decode_content_encoding;
pub use console::{CompactionRound, Compactions};
use drain::Stopping;
pub use drain::{DEFAULT_DRAIN_DELAY, Signals};

/// The largest request body, compressed or decompressed: as large as a default batch, so one
/// request never needs more than one batch's memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The most rows (lines) one insert may carry: a hundred thousand rows is far more than any
/// producer batches (sluice exists so they need not), and keeps one insert's decoding time and
/// memory bounded even when each row is tiny.
pub const DEFAULT_MAX_ROWS_PER_INSERT: usize = 100_000;

/// The default listen address: loopback, on the port clickhouse-bulk uses for the same role.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8124";

/// How long a request body may go without a byte arriving before the request is answered 408
/// and its connection closed: a client that stalls mid-body holds no task and no memory for
/// longer. ClickHouse's `http_receive_timeout` has the same default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How much longer than `ack_timeout` shutdown waits for requests in flight: a `committed`
/// insert's wait ends within `ack_timeout`, and its answer needs a moment more.
pub const DRAIN_MARGIN: Duration = Duration::from_secs(5);

/// [`Limits::drain_timeout`] with the default `ack_timeout`.
pub const DEFAULT_DRAIN_TIMEOUT: Duration =
    Duration::from_secs(sluice_pipeline::DEFAULT_ACK_TIMEOUT.as_secs() + DRAIN_MARGIN.as_secs());

/// [`Limits::idle_timeout`] by default: ClickHouse's own `idle_connection_timeout`, so pooled
/// clients see the connection life they expect.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// The sockets sluice serves on.
#[derive(Debug)]
pub struct Listeners {
    /// HTTP: the native API and ClickHouse's HTTP interface.
    pub http: TcpListener,
    /// ClickHouse's native protocol, when it is on.
    pub native: Option<TcpListener>,
}

/// Limits the edge enforces before the pipeline sees a request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest request body in bytes, before and after decompression.
    pub max_body_bytes: usize,
    /// The most rows (lines) in one insert.
    pub max_rows_per_insert: usize,
    /// The longest a body may go without a byte arriving.
    pub body_timeout: Duration,
    /// How long a native-protocol connection may stay open between queries.
    pub idle_timeout: Duration,
    /// How long shutdown waits for the requests in flight once it stops accepting; connections
    /// still open then are closed without an answer (nothing they sent was acknowledged). Long
    /// enough for a `committed` insert to get its answer (its wait is bounded by
    /// `ack_timeout`); a client that trickles its body, or sends half a request and stalls,
    /// no longer holds the shutdown up for good.
    pub drain_timeout: Duration,
    /// How long after the first signal the doors stay open while `/health` says `stopping`,
    /// so that a load balancer's health check stops sending here before they close.
    pub drain_delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_rows_per_insert: DEFAULT_MAX_ROWS_PER_INSERT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            drain_delay: DEFAULT_DRAIN_DELAY,
        }
    }
}

/// What every handler shares. Behind one `Arc`: axum clones the state for every request.
#[derive(Clone)]
pub struct AppState(std::sync::Arc<AppStateInner>);

/// The fields of [`AppState`].
#[derive(Clone)]
pub struct AppStateInner {
    pipeline: Pipeline,
    metrics: PrometheusHandle,
    limits: Limits,
    access: std::sync::Arc<auth::Access>,
    console: std::sync::Arc<console::Console>,
    stopping: Stopping,
}

impl AppState {
    /// State over a running pipeline, with the metrics handle from [`metrics::install`]. Anyone
    /// may write until [`AppState::with_access`] says otherwise.
    pub fn new(pipeline: Pipeline, metrics: PrometheusHandle, limits: Limits) -> Self {
        Self(std::sync::Arc::new(AppStateInner {
            pipeline,
            metrics,
            limits,
            access: std::sync::Arc::default(),
            console: std::sync::Arc::default(),
            stopping: Stopping::default(),
        }))
    }

    /// The same state, with who may write.
    pub fn with_access(mut self, access: auth::Access) -> Self {
        std::sync::Arc::make_mut(&mut self.0).access = std::sync::Arc::new(access);
        self
    }

    /// Whether this instance is on its way out: a signal came, or the pipeline no longer
    /// takes inserts. `GET /health` then answers 503 `stopping`.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.is_set() || !self.pipeline.is_accepting()
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateInner;

    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

/// Every route of the HTTP surface.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(clickhouse::query_get).post(clickhouse::post))
        .route("/ping", get(|| async { "Ok.\n" }))
        .route("/v1/tables", get(api::list_tables))
        .route("/v1/tables/{table}/rows", post(api::insert_rows))
        .route("/v1/tables/{table}/inserts/{key}", get(api::insert_status))
        .route("/metrics", get(metrics::render))
        .route("/health", get(api::health))
        .route("/dashboard", get(console::dashboard_page))
        .route("/dashboard/estimate", get(console::estimate_page))
        .route("/dashboard/assets/{name}", get(console::asset))
        .route("/v1/dashboard", get(console::dashboard_json))
        .route("/v1/estimate", get(console::estimate_json))
        .layer(axum::middleware::map_response_with_state(
            state.stopping.clone(),
            drain::close_when_stopping,
        ))
        .with_state(state)
}

/// Serves HTTP, and the native protocol when its listener is given, over TLS when `tls` is
/// given, until the doors close: [`Limits::drain_delay`] after the first of `signals`, or at the
/// second. From the first signal `/health` says `stopping` (see [`drain`]). When the doors close
/// both stop accepting, and the requests in flight are waited for, at most
/// [`Limits::drain_timeout`]. The caller shuts the pipeline down afterwards.
pub async fn serve(
    listeners: Listeners,
    state: AppState,
    tls: Option<tls::Tls>,
    signals: Signals,
) -> std::io::Result<()> {
    let drain = state.limits.drain_timeout;
    // The doors' closing, seen twice: by the servers, which stop accepting, and by the drain's
    // clock.
    let (closing, closed) = tokio::sync::watch::channel(false);
    let stopping = state.stopping.clone();
    let delay = state.limits.drain_delay;
    tokio::spawn(async move {
        drain::until_doors_close(signals, stopping, delay).await;
        let _ = closing.send(true);
    });
    let signal = |mut closed: tokio::sync::watch::Receiver<bool>| async move {
        // An error means the sender is gone, which it is only after sending.
        let _ = closed.wait_for(|&close| close).await;
    };
    let deadline = {
        let closed = closed.clone();
        async move {
            signal(closed).await;
            tokio::time::sleep(drain).await;
        }
    };
    let upkeep = {
        let handle = state.metrics.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                handle.run_upkeep();
            }
        })
    };
    let sampler = tokio::spawn(state.console.clone().run_sampler(state.pipeline.clone()));
    let native = {
        let (state, tls, closed) = (state.clone(), tls.clone(), closed.clone());
        async move {
            if let Some(listener) = listeners.native {
                clickhouse::tcp::serve(listener, state, tls, closed).await;
            }
        }
    };
    let http = async {
        match tls {
            Some(tls) => tls::serve(listeners.http, router(state), tls, signal(closed)).await,
            None => {
                axum::serve(listeners.http, router(state))
                    .with_graceful_shutdown(signal(closed))
                    .await
            }
        }
    };
    let served = async { tokio::join!(http, native).0 };
    let result = tokio::select! {
        result = served => result,
        () = deadline => {
            tracing::warn!(
                waited_s = drain.as_secs_f64(),
                "requests still in flight at shutdown are cut off unanswered: nothing they sent \
                 was acknowledged"
            );
            Ok(())
        }
    };
    upkeep.abort();
    sampler.abort();
    result
}
