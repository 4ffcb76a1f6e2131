//! A batch flushes when it is `max_age` old on tokio's clock, or, with `min_age`, sooner when the
//! table receives few rows. The tests pause the clock and move it on, so they wait for none of the
//! hour a batch is allowed.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::{Column, ColumnType, FlushPolicyConfig, TableDef, TableLayout, TableName};
use sluice_pipeline::{AckMode, Pipeline, PipelineConfig};
use sluice_sinks::{FileCatalog, LakeConfig, LakeSink};

use crate::common;

const MAX_AGE: Duration = Duration::from_secs(3600);

const MIN_AGE: Duration = Duration::from_secs(60);

async fn start(dir: &std::path::Path, min_age: Option<Duration>) -> Pipeline {
    let layout = TableLayout {
        columns: vec![Column::new("id", ColumnType::Int64).required()],
        partition_by: String::new(),
        sort_by: vec![],
    };
    let policy = FlushPolicyConfig {
        max_age: Some(MAX_AGE),
        min_age,
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
    let p = start(dir.path(), None).await;
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

/// Moves the paused clock on by `by` and lets the pipeline's tasks run.
async fn advance(by: Duration) {
    tokio::time::advance(by).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn with_min_age_a_light_table_flushes_at_min_age_and_a_busy_one_at_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path(), Some(MIN_AGE)).await;
    common::insert(&p, b"{\"id\":1}\n{\"id\":2}\n{\"id\":3}", AckMode::Async)
        .await
        .unwrap();
    run_until("the light insert to be buffered", || {
        p.tables().iter().map(|t| t.buffered_rows).sum::<u64>() == 3
    })
    .await;
    advance(MIN_AGE - Duration::from_secs(1)).await;
    assert_eq!(written(&p), 0, "the batch landed before it was min_age old");
    advance(Duration::from_secs(2)).await;
    run_until("the light batch to land", || written(&p) == 3).await;

    // 5,000 rows at once: far above the dense rate, so this batch waits for max_age.
    let busy: String = (10..5010).map(|id| format!("{{\"id\":{id}}}\n")).collect();
    common::insert(&p, busy.as_bytes(), AckMode::Async)
        .await
        .unwrap();
    run_until("the busy insert to be buffered", || {
        p.tables().iter().map(|t| t.buffered_rows).sum::<u64>() == 5000
    })
    .await;
    advance(MIN_AGE * 2).await;
    assert_eq!(written(&p), 3, "the busy batch landed at min_age");
    advance(MAX_AGE).await;
    run_until("the busy batch to land", || written(&p) == 5003).await;
    let ids = common::ids_on_disk(dir.path());
    assert_eq!(ids.len(), 5003);
    assert!(ids.values().all(|&n| n == 1));
}
