//! sluice's HTTP edge.
//!
//! # Layout
//!
//! - [`auth`]: who may write (bearer tokens, ClickHouse-style users), globally or per table.
//! - `api.rs`: the native API (`/v1/tables/{table}/rows`, `/v1/tables`, `/health`).
//! - `clickhouse/`: the ClickHouse-compatible endpoint (`POST /?query=INSERT ...`, `/ping`).
//! - `body.rs`: body size and row limits, and decompression.
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
mod error;
pub mod metrics;
pub mod tls;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use sluice_pipeline::Pipeline;
use tokio::net::TcpListener;

/// The largest request body, compressed or decompressed: as large as a default batch, so one
/// request never needs more than one batch's memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The most rows (lines) one insert may carry: a hundred thousand rows is far more than any
/// producer batches (sluice exists so they need not), and keeps one insert's decoding time and
/// memory bounded even when each row is tiny.
pub const DEFAULT_MAX_ROWS_PER_INSERT: usize = 100_000;

/// The default listen address: loopback, on the port clickhouse-bulk uses for the same role.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8124";

/// Limits the edge enforces before the pipeline sees a request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest request body in bytes, before and after decompression.
    pub max_body_bytes: usize,
    /// The most rows (lines) in one insert.
    pub max_rows_per_insert: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_rows_per_insert: DEFAULT_MAX_ROWS_PER_INSERT,
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pipeline: Pipeline,
    metrics: PrometheusHandle,
    limits: Limits,
    access: std::sync::Arc<auth::Access>,
}

impl AppState {
    /// State over a running pipeline, with the metrics handle from [`metrics::install`]. Anyone
    /// may write until [`AppState::with_access`] says otherwise.
    pub fn new(pipeline: Pipeline, metrics: PrometheusHandle, limits: Limits) -> Self {
        Self {
            pipeline,
            metrics,
            limits,
            access: std::sync::Arc::default(),
        }
    }

    /// The same state, with who may write.
    pub fn with_access(mut self, access: auth::Access) -> Self {
        self.access = std::sync::Arc::new(access);
        self
    }
}

/// Every route of the HTTP surface.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(clickhouse::query_get).post(clickhouse::insert))
        .route("/ping", get(|| async { "Ok.\n" }))
        .route("/v1/tables", get(api::list_tables))
        .route("/v1/tables/{table}/rows", post(api::insert_rows))
        .route("/metrics", get(metrics::render))
        .route("/health", get(api::health))
        .with_state(state)
}

/// Serves until `shutdown` resolves, then stops accepting connections and waits for the
/// requests in flight; over TLS when `tls` is given. The caller shuts the pipeline down
/// afterwards.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    tls: Option<tls::Tls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
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
    let result = match tls {
        Some(tls) => tls::serve(listener, router(state), tls, shutdown).await,
        None => {
            axum::serve(listener, router(state))
                .with_graceful_shutdown(shutdown)
                .await
        }
    };
    upkeep.abort();
    result
}
