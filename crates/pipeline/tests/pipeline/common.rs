//! What the concerns share: inserting into table `t`, waiting for the pipeline, and reading back
//! the ids in the lake table `t` under a test's folder.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sluice_core::{FlushPolicyConfig, TableDef, TableLayout, TableName};
use sluice_pipeline::{
    AckMode, Admission, Insert, InsertError, Pipeline, PipelineConfig, Storage, WalConfig,
};
use sluice_sinks::{FileCatalog, LakeConfig, LakeSink};

/// Table `t` of `layout`, flushing at `max_rows` rows (or after 20 s).
pub(crate) fn table(layout: TableLayout, max_rows: i64) -> TableDef {
    let policy = FlushPolicyConfig {
        max_rows: Some(max_rows),
        max_age: Some(std::time::Duration::from_secs(20)),
        ..Default::default()
    }
    .validate()
    .unwrap();
    TableDef::new(TableName::new("t").unwrap(), layout, policy).unwrap()
}

/// A runtime to crash: single-threaded, so `shutdown_background` drops every task before it
/// returns and no writer can run again, not even to notice its channel closing.
pub(crate) fn crashing_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime of two worker threads, as this machine's server has.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A pipeline that lands `def` in the lake under `dir`, with its write-ahead log there too, on
/// `storage`.
pub(crate) async fn start_logged(dir: &Path, def: TableDef, storage: Arc<dyn Storage>) -> Pipeline {
    let config = PipelineConfig {
        wal: Some(WalConfig::new(dir.join("_sluice/wal"))),
        ..PipelineConfig::default()
    };
    let catalog = Arc::new(FileCatalog::open(dir).unwrap());
    let lake = Arc::new(LakeSink::new(LakeConfig::new(dir)).unwrap());
    Pipeline::builder(config, catalog, lake)
        .table(def, None)
        .wal_storage(storage)
        .start()
        .await
        .unwrap()
}

/// Inserts the NDJSON `body` into table `t`, refused (not waited for) when the buffer is full.
pub(crate) async fn insert(p: &Pipeline, body: &[u8], ack: AckMode) -> Result<(), InsertError> {
    p.insert_body(Insert {
        table: "t",
        body,
        options: Default::default(),
        ack,
        admission: Admission::Refuse,
        max_partitions: None,
        max_rows: None,
        key: None,
    })
    .await
    .map(|_| ())
}

/// How long a test waits for the pipeline, in real time.
pub(crate) const REAL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// How often [`wait_for`] looks, on tokio's clock.
const POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Polls `done` every [`POLL`] of tokio's clock; fails the test after [`REAL_DEADLINE`], saying
/// it waited for `what`. The deadline is real because a paused clock runs ahead on its own while
/// a flush writes on a blocking thread. The poll's timer is what keeps that clock from leaping to
/// a far deadline (an ack or shutdown timeout) while the test waits.
pub(crate) async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + REAL_DEADLINE;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// How often each id appears in table `t` of the lake in `dir`.
pub(crate) fn ids_on_disk(dir: &Path) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    // The files the table's Delta log holds: a file no commit references is not in the table.
    for file in sluice_sinks::lake::live_files_blocking(&dir.join("t")).unwrap() {
        let path = dir.join("t").join(file.relative);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            for id in batch
                .unwrap()
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
            {
                *counts.entry(*id).or_default() += 1;
            }
        }
    }
    counts
}
