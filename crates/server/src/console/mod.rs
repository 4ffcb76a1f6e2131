//! The console: `GET /dashboard`, a page served by sluice itself where an operator sees it work,
//! and `GET /dashboard/estimate`, seed 000's estimator on the server's own figures.
//!
//! The pages are static and embedded in the binary; they refresh themselves from
//! `GET /v1/dashboard` and `GET /v1/estimate`. A sampler reads the server once a second into a
//! bounded history of fifteen minutes, so the charts need no Prometheus, and nothing here
//! parses the exporter's text: the figures come from the pipeline's counters, which feed the
//! metrics from the same calls, and from the few counts only the server sees.
//!
//! # Layout
//!
//! Each file imports only from the ones above it.
//!
//! - `counts.rs`: inserts by door and ack mode, and the compactor's rounds per table.
//! - `history.rs`: fifteen minutes of samples and each table's trend, in bounded rings.
//! - `sample.rs`: the sampler's reading of the pipeline and the counts.
//! - `redact.rs`: errors with their passwords and tokens masked.
//! - `view.rs`: the JSON of `GET /v1/dashboard`, summarised to stay small with many tables.
//! - `estimate.rs`: `GET /v1/estimate`, the core's estimator with the server's figures in.
//! - `pages.rs`: the pages and their scripts and style, embedded.
//! - `mod.rs`: the console's state, the sampler's task and the JSON handlers, which need a
//!   credential once access rules are set (`Access::check_read`).

mod counts;
mod estimate;
mod history;
mod pages;
mod redact;
mod sample;
mod view;

use std::sync::{Arc, Mutex, MutexGuard};

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::http::header::CACHE_CONTROL;
use axum::response::{IntoResponse, Response};
use sluice_pipeline::{InsertError, Inserted, Pipeline};

pub use counts::{CompactionRound, Compactions, Door};
pub(crate) use pages::{asset, dashboard_page, estimate_page};
pub(crate) use view::partition_json;

use crate::AppState;
use crate::error::{ApiError, Kind};
use history::History;

/// Estimates run at once; more wait their turn. Each is a bounded simulation on a blocking
/// thread: a page answering as someone types asks often, and must not take every core.
const ESTIMATES_AT_ONCE: usize = 2;

/// What the console keeps: the server's own counts and the history.
#[derive(Debug)]
pub(crate) struct Console {
    doors: counts::Doors,
    compactions: Arc<Compactions>,
    history: Mutex<History>,
    started_ms: u64,
    estimates: tokio::sync::Semaphore,
}

impl Default for Console {
    fn default() -> Self {
        Self {
            doors: counts::Doors::default(),
            compactions: Arc::default(),
            history: Mutex::default(),
            started_ms: sample::now_ms(),
            estimates: tokio::sync::Semaphore::new(ESTIMATES_AT_ONCE),
        }
    }
}

impl Console {
    /// Counts an insert a door accepted.
    pub(crate) fn count(&self, door: Door, inserted: &Inserted) {
        self.doors.count(door, inserted);
    }

    pub(crate) fn compactions(&self) -> Arc<Compactions> {
        self.compactions.clone()
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the server once into the history.
    pub(crate) fn sample(&self, pipeline: &Pipeline) {
        let (sample, tables, waits) = sample::read(pipeline, &self.doors, &self.compactions);
        self.history().record(sample, &tables, waits);
    }

    /// Samples the server every [`sample::INTERVAL`], for as long as the task runs.
    pub(crate) async fn run_sampler(self: Arc<Self>, pipeline: Pipeline) {
        let mut tick = tokio::time::interval(sample::INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.sample(&pipeline);
        }
    }
}

/// The pipeline as one door sees it: an insert through it is counted for the console.
pub(crate) struct Entrance<'a> {
    state: &'a AppState,
    door: Door,
}

impl Entrance<'_> {
    /// [`Pipeline::insert_body`], counted by door and ack mode when accepted.
    pub(crate) async fn insert_body(
        self,
        insert: sluice_pipeline::Insert<'_>,
    ) -> Result<Inserted, InsertError> {
        let inserted = self.state.pipeline.insert_body(insert).await?;
        self.state.console.count(self.door, &inserted);
        Ok(inserted)
    }
}

impl AppState {
    /// The pipeline, for an insert that came through `door`.
    pub(crate) fn door(&self, door: Door) -> Entrance<'_> {
        Entrance { state: self, door }
    }

    /// Where `sluice serve` reports what the lake's compactor did, for the console.
    pub fn compactions(&self) -> Arc<Compactions> {
        self.console.compactions()
    }
}

/// The query's parameters, or a 400 saying why they cannot be read.
fn pairs(
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Vec<(String, String)>, ApiError> {
    query.map(|Query(pairs)| pairs).map_err(|e| {
        ApiError::new(
            Kind::BadRequest,
            format!("the query string is not valid: {e}"),
        )
    })
}

/// An answer the browser must not keep: the figures change every second.
fn fresh(body: serde_json::Value) -> Response {
    ([(CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

/// `ok`, `degraded` or `stopping`, as `GET /health` says.
fn status(state: &AppState, tables: &[sluice_pipeline::TableInfo]) -> &'static str {
    let poisoned = state.pipeline.wal().is_some_and(|w| w.poisoned.is_some());
    if state.is_stopping() {
        "stopping"
    } else if poisoned || tables.iter().any(|t| t.failing.is_some()) {
        "degraded"
    } else {
        "ok"
    }
}

/// `GET /v1/dashboard?filter=&tables=&partitions=&since=`: what the dashboard shows.
pub(crate) async fn dashboard_json(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    state.access.check_read(&headers)?;
    let params = view::Params::parse(&pairs(query)?)?;
    let tables = state.pipeline.tables();
    let inputs = view::Inputs {
        now_ms: sample::now_ms(),
        started_ms: state.console.started_ms,
        status: status(&state, &tables),
        config: state.pipeline.config(),
        memory: state.pipeline.memory(),
        wal: state.pipeline.wal(),
        tables: &tables,
        doors: state.console.doors.snapshot(),
        refusals: crate::error::refusals(),
        compactions: state.console.compactions.snapshot(),
    };
    let body = view::dashboard(&inputs, &state.console.history(), &params);
    Ok(fresh(body))
}

/// `GET /v1/estimate?rows_per_second=&rows_per_insert=&...`: the estimator, on the page's
/// figures over the server's own.
pub(crate) async fn estimate_json(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    state.access.check_read(&headers)?;
    let pairs = pairs(query)?;
    let measured = estimate::measured(&state.console.history());
    let policy = state.pipeline.config().default_policy;
    let (input, sources) = estimate::input(&pairs, &policy, measured.as_ref())?;
    let internal = |e: String| ApiError::new(Kind::Internal, e);
    let _turn = (state.console.estimates.acquire().await)
        .map_err(|e| internal(format!("the estimator is closed: {e}")))?;
    let body =
        tokio::task::spawn_blocking(move || estimate::answer(&input, sources, measured.as_ref()))
            .await
            .map_err(|e| internal(format!("the estimate failed: {e}")))?;
    Ok(fresh(body))
}
