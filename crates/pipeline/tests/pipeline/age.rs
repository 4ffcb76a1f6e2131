//! A batch flushes when it is `max_age` old on tokio's clock. The test pauses the clock and moves
//! it on, so it waits for none of the hour the batch is allowed.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::{Column, ColumnType, FlushPolicyConfig, TableDef, TableLayout, TableName};
use sluice_pipeline::{AckMode, Pipeline, PipelineConfig};
use sluice_sinks::{FileCatalog, LakeConfig, LakeSink};

use crate::common;

const MAX_AGE: Duration = Duration::from_secs(3600);

async fn start(dir: &std::path::Path) -> Pipeline {
    let layout = TableLayout {
        columns: vec![Column::new("id", ColumnType::Int64).required()],
        partition_by: String::new(),
        sort_by: vec![],
    };
    let policy = FlushPolicyConfig {
        max_age: Some(MAX_AGE),
        ..Default::default()
    }
    .validate()
    .unwrap();
    let table = TableDef::new(TableName::new("t").unwrap(), layout, policy).unwrap();
    let config = PipelineConfig {
        default_policy: policy,
        // A committed insert must be able to wait out its batch's age.
        ack_timeout: MAX_AGE * 2,
        ..PipelineConfig::default()
    };
    let catalog = Arc::new(FileCatalog::open(dir).unwrap());
    let lake = Arc::new(LakeSink::new(LakeConfig::new(dir)).unwrap());
    Pipeline::builder(config, catalog, lake)
        .table(table, None)
        .start()
        .await
        .unwrap()
}

/// Rows landed in table `t`, as its writer counts them.
fn written(p: &Pipeline) -> u64 {
    p.tables().iter().map(|t| t.rows_written).sum()
}

/// Lets the pipeline's tasks run, without moving the paused clock, until `done` or
/// [`common::REAL_DEADLINE`]. A flush writes its file on a blocking thread: a paused runtime that
/// sleeps while it waits for one moves its clock on by itself, so this yields instead of sleeping.
async fn run_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + common::REAL_DEADLINE;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_batch_lands_when_it_is_max_age_old_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path()).await;
    common::insert(&p, b"{\"id\":1}\n{\"id\":2}\n{\"id\":3}", AckMode::Async)
        .await
        .unwrap();
    run_until("the insert to be buffered", || {
        p.tables().iter().map(|t| t.buffered_rows).sum::<u64>() == 3
    })
    .await;

    tokio::time::advance(MAX_AGE - Duration::from_secs(1)).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(written(&p), 0, "the batch landed before it was max_age old");

    tokio::time::advance(Duration::from_secs(2)).await;
    run_until("the batch to land", || written(&p) == 3).await;
    let ids = common::ids_on_disk(dir.path());
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
}
