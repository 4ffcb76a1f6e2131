//! A store that does not answer when the pipeline starts: with the write-ahead log on, the start
//! goes on, the table's inserts are logged and held, and once the store answers its log lands
//! exactly once, without the pieces the store already held, and with new inserts numbered above
//! everything the store holds although it could not be asked (the log's LSN reservation).
//! Without the log, or at the first start of a log (which has no reservation yet), the start
//! stops and says why.
//!
//! The outage is real: the lake table's folder is moved away and a regular file put in its
//! place, so opening the table fails with an I/O error until the folder is back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sluice_core::retry::Backoff;
use sluice_core::{Column, ColumnType, TableDef, TableLayout};
use sluice_pipeline::{AckMode, Pipeline, PipelineConfig, StartError, WalConfig};
use sluice_sinks::{FileCatalog, LakeConfig, LakeSink};

use crate::common;

/// Table `t`, partitioned by `service`, flushing at `max_rows`.
fn table(max_rows: i64) -> TableDef {
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("service", ColumnType::String).required(),
        ],
        partition_by: "service".into(),
        sort_by: vec![],
    };
    common::table(layout, max_rows)
}

/// The lake lives in `DIR/lake`, the catalog and the log beside it, so moving the table's folder
/// away takes the store down and nothing else.
fn lake(dir: &Path) -> PathBuf {
    dir.join("lake")
}

async fn start(dir: &Path, wal: bool, max_rows: i64) -> Result<Pipeline, StartError> {
    let config = PipelineConfig {
        wal: wal.then(|| WalConfig::new(dir.join("wal"))),
        backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        shutdown_timeout: Duration::from_secs(5),
        // Out of reach of the paused clock, which runs ahead while the log fsyncs.
        ack_timeout: Duration::from_secs(24 * 3600),
        ..PipelineConfig::default()
    };
    let catalog = Arc::new(FileCatalog::open(dir.join("catalog")).unwrap());
    let store = Arc::new(LakeSink::new(LakeConfig::new(lake(dir))).unwrap());
    Pipeline::builder(config, catalog, store)
        .table(table(max_rows), None)
        .start()
        .await
}

async fn insert(p: &Pipeline, service: &str, ids: std::ops::Range<i64>, ack: AckMode) {
    let body: Vec<u8> = ids
        .flat_map(|id| format!("{{\"id\":{id},\"service\":\"{service}\"}}\n").into_bytes())
        .collect();
    common::insert(p, &body, ack).await.unwrap();
}

/// Takes the table's store down: its folder moved away, a file where it was.
fn take_down(dir: &Path) {
    std::fs::rename(lake(dir).join("t"), lake(dir).join("t.away")).unwrap();
    std::fs::write(lake(dir).join("t"), b"not a table").unwrap();
}

fn bring_back(dir: &Path) {
    std::fs::remove_file(lake(dir).join("t")).unwrap();
    std::fs::rename(lake(dir).join("t.away"), lake(dir).join("t")).unwrap();
}

#[test]
fn a_store_down_at_start_gets_the_log_and_new_inserts_once_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    // Before the crash: partition a lands 100 logged rows, partition b holds 50 logged rows not
    // landed yet, and then partition a lands 100 `async` rows, whose LSN no frame records and is
    // above every frame. A single-threaded runtime, shut down in the background: `kill -9`.
    let crashed = common::crashing_runtime();
    let alive = crashed.block_on(async {
        let p = start(dir.path(), true, 100).await.unwrap();
        for i in 0..10 {
            insert(&p, "a", i * 10..(i + 1) * 10, AckMode::Durable).await;
        }
        common::wait_for("the first batch", || p.tables()[0].rows_written == 100).await;
        for i in 10..15 {
            insert(&p, "b", i * 10..(i + 1) * 10, AckMode::Durable).await;
        }
        insert(&p, "a", 1000..1100, AckMode::Async).await;
        common::wait_for("the async batch", || p.tables()[0].rows_written == 200).await;
        p
    });
    crashed.shutdown_background();
    drop(alive);

    take_down(dir.path());
    // On a paused clock: the store's retries and the batch's age pass in tokio's time.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        // Batches large enough now that replayed rows and new ones share one: a part with the
        // new rows' higher LSN, which the lake's own replay check would not skip.
        let p = start(dir.path(), true, 10_000)
            .await
            .expect("the start goes on without the store");
        // Every frame is handed to the writer: what the store holds is not known yet.
        assert_eq!(p.replayed().frames, 15);
        assert_eq!(p.replayed().pieces_already_landed, 0);
        // New inserts are taken and logged while the store is down.
        insert(&p, "a", 2000..2010, AckMode::Durable).await;
        insert(&p, "b", 2100..2110, AckMode::Durable).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let info = &p.tables()[0];
        assert_eq!(info.rows_written, 0);
        let failing = info.failing.as_ref().map(|(_, e)| e.as_str()).unwrap_or("");
        assert!(failing.contains("cannot open the table yet"), "{failing:?}");

        bring_back(dir.path());
        // The replayed partition-a frames are left out (the store held them); partition b's 50
        // replayed rows land, and so do the 20 new ones, whose LSNs are above the `async`
        // batch's although the store could not be asked for it at start (numbered below it,
        // the lake would take their flushes for replays of it and skip them).
        common::wait_for("the store to open", || p.tables()[0].failing.is_none()).await;
        // Landed before the shutdown, whose timeout the paused clock could otherwise reach
        // while a flush writes.
        common::wait_for("every row to land", || p.tables()[0].buffered_rows == 0).await;
        let shutdown = p.shutdown().await;
        assert_eq!((shutdown.rows_lost(), shutdown.rows_deferred()), (0, 0));
        assert_eq!(
            p.memory().0,
            0,
            "a left-out piece's reservation outlived it"
        );
    });

    let on_disk = common::ids_on_disk(&lake(dir.path()));
    let expected: Vec<i64> = (0..150)
        .chain(1000..1100)
        .chain(2000..2010)
        .chain(2100..2110)
        .collect();
    for id in &expected {
        assert_eq!(on_disk.get(id), Some(&1), "id {id}");
    }
    assert_eq!(
        on_disk.len(),
        expected.len(),
        "rows on disk that were not inserted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_log_a_store_down_at_start_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = start(dir.path(), false, 100).await.unwrap();
    insert(&p, "a", 0..100, AckMode::Committed).await;
    p.shutdown().await;

    take_down(dir.path());
    let error = start(dir.path(), false, 100)
        .await
        .err()
        .expect("the start stops");
    assert!(matches!(error, StartError::StoreDown { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("table t: ") && message.contains("write-ahead log on"),
        "{message}"
    );
    bring_back(dir.path());
    let p = start(dir.path(), false, 100).await.unwrap();
    assert_eq!(p.tables()[0].layout, table(100).layout());
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_of_a_log_needs_every_store() {
    let dir = tempfile::tempdir().unwrap();
    // The store is down before anything was ever numbered: nothing says what it may hold.
    std::fs::create_dir_all(lake(dir.path())).unwrap();
    std::fs::write(lake(dir.path()).join("t"), b"not a table").unwrap();
    let error = start(dir.path(), true, 100)
        .await
        .err()
        .expect("the start stops");
    let message = error.to_string();
    assert!(
        matches!(error, StartError::StoreDown { .. }) && message.contains("must answer once"),
        "{message}"
    );
    assert!(
        !dir.path().join("wal/reserved-lsn").exists(),
        "a reservation made without the store's answer"
    );

    // Once every store has answered, a later start goes on without one that is down.
    std::fs::remove_file(lake(dir.path()).join("t")).unwrap();
    let p = start(dir.path(), true, 100).await.unwrap();
    p.shutdown().await;
    assert!(dir.path().join("wal/reserved-lsn").exists());
    take_down(dir.path());
    let p = start(dir.path(), true, 100).await.unwrap();
    p.shutdown().await;
}
