//! A store that fails: rows stay buffered and their waiters keep waiting, memory stays bounded
//! (the edge is refused, the library waits), and everything drains once the store is back, each
//! row exactly once and in few parts.
//!
//! The fault is real: a regular file sits where the lake must create the partition's folder, so
//! every part write fails with an I/O error until the file is removed.
//!
//! The tests run on a paused clock: the outage's retries, ages and shutdown timeouts pass in
//! tokio's time, not real time. A test never parks without a timer of its own while a flush may
//! be writing (see [`common::wait_for`]), so the clock cannot leap to an ack timeout meanwhile.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::retry::Backoff;
use sluice_core::{Column, ColumnType, FlushPolicyConfig, TableDef, TableLayout, TableName};
use sluice_pipeline::{
    AckMode, Admission, Held, Insert, InsertError, KeyStatus, Pipeline, PipelineConfig,
};
use sluice_sinks::{FileCatalog, LakeConfig, LakeSink};

use crate::common;

const BUDGET: u64 = 256 * 1024;

fn table() -> TableDef {
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("service", ColumnType::String),
        ],
        partition_by: "service".into(),
        sort_by: vec!["id".into()],
    };
    let policy = FlushPolicyConfig {
        max_age: Some(Duration::from_millis(50)),
        max_bytes: Some(sluice_core::ByteSize(BUDGET)),
        ..Default::default()
    }
    .validate()
    .unwrap();
    TableDef::new(TableName::new("t").unwrap(), layout, policy).unwrap()
}

async fn start(dir: &Path, shutdown_timeout: Duration) -> Pipeline {
    // Out of reach of the paused clock, which runs ahead while flushes write.
    start_with(dir, shutdown_timeout, Duration::from_secs(24 * 3600)).await
}

async fn start_with(dir: &Path, shutdown_timeout: Duration, ack_timeout: Duration) -> Pipeline {
    let config = PipelineConfig {
        max_buffer_bytes: BUDGET,
        // One table: it may have all of it.
        max_table_share: 1.0,
        default_policy: *table().policy(),
        backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(50)),
        shutdown_timeout,
        ack_timeout,
        ..PipelineConfig::default()
    };
    let catalog = Arc::new(FileCatalog::open(dir).unwrap());
    let lake = Arc::new(LakeSink::new(LakeConfig::new(dir)).unwrap());
    Pipeline::builder(config, catalog, lake)
        .table(table(), None)
        .start()
        .await
        .unwrap()
}

fn rows(ids: std::ops::Range<i64>) -> Vec<u8> {
    ids.flat_map(|id| format!("{{\"id\":{id},\"service\":\"a\"}}\n").into_bytes())
        .collect()
}

fn insert(body: &[u8], ack: AckMode, admission: Admission) -> Insert<'_> {
    Insert {
        table: "t",
        body,
        options: Default::default(),
        ack,
        admission,
        max_partitions: None,
        max_rows: None,
        key: None,
    }
}

fn part_count(dir: &Path) -> usize {
    sluice_sinks::lake::live_files_blocking(&dir.join("t"))
        .unwrap()
        .len()
}

#[tokio::test(start_paused = true)]
async fn rows_wait_out_an_outage_within_the_memory_bound_and_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = start(dir.path(), Duration::from_secs(30)).await;
    let blocker = dir.path().join("t").join("service=a");
    std::fs::write(&blocker, "not a folder").unwrap();

    // Committed inserts wait while the store fails.
    let mut committed = Vec::new();
    for i in 0..10i64 {
        let p = pipeline.clone();
        committed.push(tokio::spawn(async move {
            let body = rows(i * 100..(i + 1) * 100);
            p.insert_body(insert(&body, AckMode::Committed, Admission::Refuse))
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        committed.iter().all(|t| !t.is_finished()),
        "a committed insert was answered during the outage"
    );

    // Async inserts at the edge fill the budget, then are refused; nothing accepted is dropped.
    // The committed inserts above carry ids 0..1000.
    let mut accepted: Vec<std::ops::Range<i64>> = Vec::new();
    accepted.push(0..1000);
    let mut next = 1000i64;
    let overloaded = loop {
        let body = rows(next..next + 100);
        match pipeline
            .insert_body(insert(&body, AckMode::Async, Admission::Refuse))
            .await
        {
            Ok(_) => accepted.push(next..next + 100),
            Err(InsertError::Overloaded { used, limit, .. }) => break (used, limit),
            Err(e) => panic!("unexpected {e}"),
        }
        next += 100;
        assert!(next < 1_000_000, "the memory bound never refused an insert");
    };
    assert!(overloaded.0 <= overloaded.1, "{overloaded:?}");
    let (used, limit) = pipeline.memory();
    assert!(used <= limit, "{used} > {limit}");

    // The library API waits instead of failing.
    let waiting = {
        let p = pipeline.clone();
        let body = rows(900_000..900_100);
        tokio::spawn(async move {
            p.insert_body(insert(&body, AckMode::Committed, Admission::Wait))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    accepted.push(900_000..900_100);

    // The outage shows in the table's state.
    let info = pipeline.tables().pop().unwrap();
    let (_, error) = info.failing.expect("the table reports its failing store");
    assert!(error.contains("service=a"), "{error}");
    assert!(info.buffered_rows > 0);

    // The store comes back: everything drains on its own.
    std::fs::remove_file(&blocker).unwrap();
    common::wait_for("the inserts to be answered", || {
        committed.iter().all(|t| t.is_finished()) && waiting.is_finished()
    })
    .await;
    for task in committed {
        task.await.unwrap().unwrap();
    }
    waiting.await.unwrap().unwrap();
    common::wait_for("every row to land", || {
        pipeline.tables()[0].buffered_rows == 0
    })
    .await;
    let report = pipeline.shutdown().await;
    assert_eq!(report.rows_lost(), 0);
    assert!(pipeline.tables()[0].failing.is_none());
    assert_eq!(pipeline.memory().0, 0, "a reservation outlived its rows");

    let counts = common::ids_on_disk(dir.path());
    let expected: Vec<i64> = accepted.into_iter().flatten().collect();
    assert_eq!(counts.len(), expected.len());
    for id in expected {
        assert_eq!(counts.get(&id), Some(&1), "id {id}");
    }
    // Batches sealed during the outage were merged: far fewer parts than inserts.
    let parts = part_count(dir.path());
    let inserts = next as usize / 100 + 1;
    assert!(parts * 3 <= inserts, "{parts} parts for {inserts} inserts");
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_up_on_a_dead_store_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = start(dir.path(), Duration::from_millis(300)).await;
    std::fs::write(dir.path().join("t").join("service=a"), "not a folder").unwrap();

    let waiter = {
        let p = pipeline.clone();
        tokio::spawn(async move {
            let body = rows(0..10);
            p.insert_body(insert(&body, AckMode::Committed, Admission::Refuse))
                .await
        })
    };
    let body = rows(10..20);
    pipeline
        .insert_body(insert(&body, AckMode::Async, Admission::Refuse))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let report = pipeline.shutdown().await;
    assert_eq!(report.rows_lost(), 20);
    let error = waiter.await.unwrap().unwrap_err();
    assert!(matches!(error, InsertError::NotCommitted(_)), "{error}");
    assert_eq!(pipeline.memory().0, 0);
    // After shutdown, inserts are refused.
    let late = pipeline
        .insert_body(insert(&body, AckMode::Async, Admission::Refuse))
        .await;
    assert!(matches!(late, Err(InsertError::ShuttingDown)));
}

#[tokio::test(start_paused = true)]
async fn a_stalled_table_fills_only_its_share_and_the_others_keep_going() {
    let dir = tempfile::tempdir().unwrap();
    let config = PipelineConfig {
        max_buffer_bytes: BUDGET,
        max_table_share: 0.5,
        default_policy: FlushPolicyConfig {
            max_age: Some(Duration::from_millis(50)),
            max_bytes: Some(sluice_core::ByteSize(BUDGET / 4)),
            ..Default::default()
        }
        .validate()
        .unwrap(),
        backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(50)),
        shutdown_timeout: Duration::from_millis(300),
        ack_timeout: Duration::from_secs(24 * 3600),
        ..PipelineConfig::default()
    };
    let catalog = Arc::new(FileCatalog::open(dir.path()).unwrap());
    let lake = Arc::new(LakeSink::new(LakeConfig::new(dir.path())).unwrap());
    let pipeline = Pipeline::builder(config, catalog, lake)
        .start()
        .await
        .unwrap();
    let into = |table: &'static str, body: &'static [u8]| Insert {
        table,
        body,
        options: Default::default(),
        ack: AckMode::Async,
        admission: Admission::Refuse,
        max_partitions: None,
        max_rows: None,
        key: None,
    };
    // Both tables exist; then `stalled`'s store fails.
    let row: &'static [u8] = b"{\"id\":1,\"service\":\"a\"}\n";
    pipeline.insert_body(into("stalled", row)).await.unwrap();
    pipeline.insert_body(into("healthy", row)).await.unwrap();
    common::wait_for("both tables' first row", || {
        pipeline.tables().iter().all(|t| t.rows_written == 1)
    })
    .await;
    std::fs::remove_dir_all(dir.path().join("stalled")).unwrap();
    std::fs::write(dir.path().join("stalled"), "not a folder").unwrap();

    let many: &'static [u8] = Box::leak(rows(0..200).into_boxed_slice());
    let refused = loop {
        match pipeline.insert_body(into("stalled", many)).await {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    let InsertError::Overloaded {
        used,
        limit,
        table_share,
    } = refused
    else {
        panic!("unexpected {refused}");
    };
    assert!(
        table_share,
        "the table's share was full, not the whole buffer"
    );
    assert_eq!(limit, BUDGET / 2);
    assert!(used <= limit, "{used} > {limit}");
    let message = InsertError::Overloaded {
        used,
        limit,
        table_share,
    }
    .to_string();
    assert!(message.contains("this table's share"), "{message}");

    // The other table still has the other half.
    for _ in 0..5 {
        pipeline.insert_body(into("healthy", many)).await.unwrap();
    }
    // The healthy table lands while the other one's store is still down.
    common::wait_for("the healthy table to land", || {
        pipeline
            .tables()
            .iter()
            .any(|t| t.name.as_str() == "healthy" && t.rows_written == 1001)
    })
    .await;
    let report = pipeline.shutdown().await;
    let healthy = report.tables.iter().find(|t| t.table == "healthy").unwrap();
    assert_eq!(healthy.rows_lost, 0);
    assert!(pipeline.memory().0 <= BUDGET);
}

#[tokio::test(start_paused = true)]
async fn a_keyed_insert_not_committed_in_time_is_not_stored_again_by_its_resend() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = start_with(dir.path(), Duration::from_secs(30), Duration::from_secs(1)).await;
    let blocker = dir.path().join("t").join("service=a");
    std::fs::write(&blocker, "not a folder").unwrap();
    let body = rows(0..100);
    let keyed = |ack| Insert {
        key: Some("batch-1"),
        ..insert(&body, ack, Admission::Refuse)
    };
    let first = pipeline.insert_body(keyed(AckMode::Committed)).await;
    assert!(
        matches!(first, Err(InsertError::NotCommittedInTime(_))),
        "{first:?}"
    );
    // The first's rows are buffered: that answers an `async` resend, not a `committed` one,
    // which waits for them to land, as long as its own ack timeout.
    let resend = pipeline.insert_body(keyed(AckMode::Async)).await.unwrap();
    assert!(resend.duplicate);
    assert_eq!((resend.rows, resend.ack), (100, AckMode::Async));
    let resend = pipeline.insert_body(keyed(AckMode::Committed)).await;
    assert!(
        matches!(resend, Err(InsertError::NotCommittedInTime(_))),
        "{resend:?}"
    );

    std::fs::remove_file(&blocker).unwrap();
    common::wait_for("the rows to land", || {
        pipeline.tables()[0].rows_written == 100
    })
    .await;
    let resend = pipeline
        .insert_body(keyed(AckMode::Committed))
        .await
        .unwrap();
    assert!(resend.duplicate, "now it has landed");
    assert_eq!((resend.rows, resend.ack), (100, AckMode::Committed));
    let KeyStatus::Accepted {
        held: Held::Committed { flush: Some(flush) },
        ..
    } = pipeline.key_status("t", "batch-1")
    else {
        panic!("{:?}", pipeline.key_status("t", "batch-1"));
    };
    assert!(flush.starts_with("t/"), "{flush}");
    assert!(pipeline.shutdown().await.rows_lost() == 0);
    let landed: u64 = sluice_sinks::lake::live_files_blocking(&dir.path().join("t"))
        .unwrap()
        .iter()
        .map(|f| f.rows.expect("the lake counts a part's rows"))
        .sum();
    assert_eq!(landed, 100, "the rows landed once");
}

#[tokio::test(start_paused = true)]
async fn a_keyed_insert_whose_client_went_away_keeps_its_key_settled() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = start_with(dir.path(), Duration::from_secs(30), Duration::from_secs(10)).await;
    let blocker = dir.path().join("t").join("service=a");
    std::fs::write(&blocker, "not a folder").unwrap();
    let body = rows(0..10);
    let keyed = |ack| Insert {
        key: Some("gone"),
        ..insert(&body, ack, Admission::Refuse)
    };
    // The client gives up while its insert waits for the store: the future is dropped.
    let gave_up = tokio::time::timeout(
        Duration::from_secs(1),
        pipeline.insert_body(keyed(AckMode::Committed)),
    )
    .await;
    assert!(gave_up.is_err());
    assert_eq!(
        pipeline.key_status("t", "gone"),
        KeyStatus::Accepted {
            rows: 10,
            held: Held::Buffered
        },
        "taken, not in flight: its resends need not wait for an answer nobody gets"
    );
    std::fs::remove_file(&blocker).unwrap();
    let resend = pipeline
        .insert_body(keyed(AckMode::Committed))
        .await
        .unwrap();
    assert!(resend.duplicate, "the resend waited for the first to land");
    assert!(matches!(
        pipeline.key_status("t", "gone"),
        KeyStatus::Accepted {
            held: Held::Committed { .. },
            ..
        }
    ));
    assert!(pipeline.shutdown().await.rows_lost() == 0);
    assert_eq!(pipeline.tables()[0].rows_written, 10, "once");
}
