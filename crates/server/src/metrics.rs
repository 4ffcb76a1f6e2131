//! The Prometheus exporter: installed once per process, rendered at `GET /metrics`.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sluice_pipeline::names;

use crate::AppState;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs sluice's metrics recorder (once per process) and returns its handle.
///
/// Call it before starting the pipeline: metric handles taken before a recorder exists record
/// nothing.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            // Fine around tens of milliseconds, where a flush's commit falls.
            let seconds = [
                0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0,
                10.0, 30.0,
            ];
            let rows = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7];
            // A round merges up to every partition's small parts: seconds to minutes.
            let rounds = [
                0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(names::ROW_WAIT.into()), &seconds)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(names::FLUSH_SECONDS.into()), &seconds)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(names::PART_ROWS.into()), &rows)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(names::COMPACTION_SECONDS.into()),
                        &rounds,
                    )
                });
            let recorder = match builder {
                Ok(builder) => builder.build_recorder(),
                Err(e) => {
                    tracing::warn!(error = %e, "histogram buckets refused; using summaries");
                    PrometheusBuilder::new().build_recorder()
                }
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
            }
            describe();
            crate::error::register_rejection_reasons();
            handle
        })
        .clone()
}

// Long because: a table of every metric's description, one call each.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(names::ROWS_RECEIVED, "Rows accepted into buffers");
    describe_counter!(
        names::BYTES_RECEIVED,
        "Request body bytes of accepted inserts"
    );
    describe_counter!(names::INSERTS, "Accepted inserts");
    describe_counter!(
        names::FLUSHES,
        "Flushes, by the limit that filled the batch"
    );
    describe_counter!(names::PARTS_WRITTEN, "Parts landed in a store");
    describe_counter!(names::ROWS_WRITTEN, "Rows landed in a store");
    describe_histogram!(names::PART_ROWS, "Rows per landed part");
    describe_histogram!(
        names::ROW_WAIT,
        metrics::Unit::Seconds,
        "From an insert's arrival to the commit of its rows"
    );
    describe_histogram!(
        names::FLUSH_SECONDS,
        metrics::Unit::Seconds,
        "Time a sink took to land one flush"
    );
    describe_gauge!(names::BUFFERED_ROWS, "Rows buffered, not yet landed");
    describe_gauge!(
        names::BUFFERED_BYTES,
        "Arrow bytes buffered, not yet landed"
    );
    describe_gauge!(
        names::MEMORY_USED,
        "Bytes reserved in the shared buffer budget"
    );
    describe_gauge!(names::MEMORY_LIMIT, "The shared buffer budget");
    describe_gauge!(
        names::ACTIVE_PARTS,
        "Active parts (files) per partition, as the store last saw them"
    );
    describe_counter!(
        names::DELAYED_INSERTS,
        "Inserts delayed because their partition held more than parts_to_delay_insert parts"
    );
    describe_counter!(names::FLUSH_ERRORS, "Failed flush attempts, by kind");
    describe_counter!(
        names::COMMIT_RETRIES,
        "Flush commits that lost a race to another writer of the table and were tried again"
    );
    describe_counter!(
        names::COMMIT_ANSWERS_LOST,
        "Commits the store kept whose answer was lost, found in its log and counted as landed"
    );
    describe_counter!(names::ROWS_DROPPED, "Rows a store refused for good");
    describe_counter!(names::REJECTED, "Requests refused, by reason");
    describe_counter!(
        names::DUPLICATES,
        "Resends answered from an earlier insert with the same key"
    );
    describe_gauge!(names::KEYS_HELD, "Insert keys a table remembers");
    describe_gauge!(names::KEYS_BYTES, "Bytes the remembered insert keys take");
    describe_counter!(
        names::COMPACTION_MERGES,
        "Merges the background compactor committed"
    );
    describe_counter!(
        names::COMPACTION_LOST_RACES,
        "Merges given up because another compactor got their inputs first"
    );
    describe_counter!(
        names::COMPACTION_FILES,
        "Files merged away (direction=in) and written (direction=out) by compaction"
    );
    describe_counter!(
        names::COMPACTION_BYTES,
        metrics::Unit::Bytes,
        "Bytes of the files merged away (direction=in) and written (direction=out)"
    );
    describe_counter!(names::COMPACTION_ROWS, "Rows compaction rewrote");
    describe_counter!(
        names::COMPACTION_FILES_DELETED,
        "Replaced or orphaned files compaction deleted"
    );
    describe_counter!(
        names::COMPACTION_ERRORS,
        "Compaction rounds that failed (tried again next round)"
    );
    describe_histogram!(
        names::COMPACTION_SECONDS,
        metrics::Unit::Seconds,
        "Time a background compaction round spent merging, for rounds that merged something"
    );
    describe_counter!(names::WAL_FRAMES, "Frames written to the write-ahead log");
    describe_counter!(
        names::WAL_BYTES,
        metrics::Unit::Bytes,
        "Bytes written to the write-ahead log"
    );
    describe_counter!(
        names::WAL_FSYNCS,
        "Fsyncs of the write-ahead log, one per group commit"
    );
    describe_gauge!(
        names::WAL_OUTSTANDING,
        "Logged inserts whose rows have not all landed"
    );
    describe_gauge!(
        names::WAL_POISONED,
        "1 while a failed fsync keeps the write-ahead log from taking writes"
    );
}

/// `GET /metrics`: gauges are read from the pipeline at scrape time, then everything is rendered.
pub(crate) async fn render(State(state): State<AppState>) -> Response {
    for table in state.pipeline.tables() {
        for partition in table.active_parts.iter().flatten() {
            metrics::gauge!(
                names::ACTIVE_PARTS,
                "table" => table.name.clone(),
                "partition" => partition.partition.to_string()
            )
            .set(partition.parts as f64);
        }
        metrics::gauge!(names::BUFFERED_ROWS, "table" => table.name.clone())
            .set(table.buffered_rows as f64);
        metrics::gauge!(names::BUFFERED_BYTES, "table" => table.name)
            .set(table.buffered_bytes as f64);
    }
    let (used, limit) = state.pipeline.memory();
    metrics::gauge!(names::MEMORY_USED).set(used as f64);
    metrics::gauge!(names::MEMORY_LIMIT).set(limit as f64);
    if let Some(wal) = state.pipeline.wal() {
        metrics::counter!(names::WAL_FRAMES).absolute(wal.frames);
        metrics::counter!(names::WAL_BYTES).absolute(wal.bytes);
        metrics::counter!(names::WAL_FSYNCS).absolute(wal.fsyncs);
        metrics::gauge!(names::WAL_OUTSTANDING).set(wal.outstanding as f64);
        metrics::gauge!(names::WAL_POISONED).set(if wal.poisoned.is_some() { 1.0 } else { 0.0 });
    }
    state.metrics.run_upkeep();
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}
