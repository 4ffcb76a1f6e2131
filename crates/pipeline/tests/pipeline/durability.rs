//! The write-ahead log under the pipeline: `durable` acks survive a crash and land exactly once,
//! replay skips what the lake already holds, and a failing log refuses inserts instead of
//! acknowledging them falsely; rows it refused never land.
//!
//! A crash is a tokio runtime shut down in the background while the pipeline is still alive: the
//! writer tasks, and every row they buffer, vanish without a flush, as they would under `kill -9`.
//! (Dropping the pipeline first would be a clean shutdown: its writers drain when their channels
//! close.)

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use sluice_core::{Column, ColumnType, TableDef, TableLayout};
use sluice_pipeline::{AckMode, InsertError, Pipeline, Storage};
use sluice_wal::FsStorage;
use sluice_wal::faults::FaultyStorage;

use crate::common;

fn table(max_rows: i64) -> TableDef {
    let layout = TableLayout {
        columns: vec![Column::new("id", ColumnType::Int64).required()],
        partition_by: String::new(),
        sort_by: vec![],
    };
    common::table(layout, max_rows)
}

async fn start(dir: &Path, max_rows: i64, storage: Arc<dyn Storage>) -> Pipeline {
    common::start_logged(dir, table(max_rows), storage).await
}

async fn insert(p: &Pipeline, ids: std::ops::Range<i64>, ack: AckMode) -> Result<(), InsertError> {
    let body: Vec<u8> = ids
        .flat_map(|id| format!("{{\"id\":{id}}}\n").into_bytes())
        .collect();
    common::insert(p, &body, ack).await
}

fn assert_ids(counts: &HashMap<i64, usize>, expected: impl Iterator<Item = i64>) {
    let expected: Vec<i64> = expected.collect();
    for id in &expected {
        assert_eq!(counts.get(id), Some(&1), "id {id}");
    }
    assert_eq!(counts.len(), expected.len(), "unexpected rows on disk");
}

#[test]
fn durable_rows_survive_a_crash_and_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = common::crashing_runtime();
    let alive = crashed.block_on(async {
        let p = start(dir.path(), 1_000_000, Arc::new(FsStorage)).await;
        for i in 0..10 {
            insert(&p, i * 10..(i + 1) * 10, AckMode::Durable)
                .await
                .unwrap();
        }
        // Async rows are not logged: a crash loses them, as documented.
        insert(&p, 1000..1010, AckMode::Async).await.unwrap();
        common::wait_for("the rows to be buffered", || {
            p.tables()[0].buffered_rows == 110
        })
        .await;
        p
    });
    crashed.shutdown_background();
    drop(alive);
    assert!(
        common::ids_on_disk(dir.path()).is_empty(),
        "nothing landed before the crash"
    );

    common::runtime().block_on(async {
        let p = start(dir.path(), 1_000_000, Arc::new(FsStorage)).await;
        let replayed = p.replayed();
        assert_eq!((replayed.frames, replayed.rows), (10, 100));
        let report = p.shutdown().await;
        assert_eq!(report.rows_lost(), 0);
        assert_eq!(
            p.memory().0,
            0,
            "a replayed insert's reservation outlived it"
        );
    });
    assert_ids(&common::ids_on_disk(dir.path()), 0..100);
}

#[test]
fn replay_skips_what_the_lake_already_holds() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = common::crashing_runtime();
    let alive = crashed.block_on(async {
        let p = start(dir.path(), 100, Arc::new(FsStorage)).await;
        // 100 rows: one full batch, landed. Then 50 more, buffered.
        for i in 0..10 {
            insert(&p, i * 10..(i + 1) * 10, AckMode::Durable)
                .await
                .unwrap();
        }
        common::wait_for("the first batch", || p.tables()[0].rows_written == 100).await;
        for i in 10..15 {
            insert(&p, i * 10..(i + 1) * 10, AckMode::Durable)
                .await
                .unwrap();
        }
        p
    });
    crashed.shutdown_background();
    drop(alive);

    common::runtime().block_on(async {
        let p = start(dir.path(), 100, Arc::new(FsStorage)).await;
        let replayed = p.replayed();
        // The log still holds all 15 frames (its one segment is active): the 10 the lake holds
        // are skipped, the 5 it does not are replayed.
        assert_eq!(replayed.frames, 15);
        assert_eq!(replayed.pieces_already_landed, 10);
        assert_eq!(replayed.rows, 50);
        p.shutdown().await;
    });
    assert_ids(&common::ids_on_disk(dir.path()), 0..150);

    // A third start replays nothing new.
    common::runtime().block_on(async {
        let p = start(dir.path(), 100, Arc::new(FsStorage)).await;
        assert_eq!(p.replayed().rows, 0);
        p.shutdown().await;
    });
    assert_ids(&common::ids_on_disk(dir.path()), 0..150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_refuses_logged_inserts_and_their_rows_never_land() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, faults) = FaultyStorage::new();
    let p = start(dir.path(), 1_000_000, storage).await;
    insert(&p, 0..10, AckMode::Durable).await.unwrap();

    faults.fail_fsync.store(true, Ordering::Relaxed);
    let error = insert(&p, 10..20, AckMode::Durable).await.unwrap_err();
    assert!(
        matches!(&error, InsertError::WalFailed(m) if m.contains("fsync")),
        "{error}"
    );
    faults.fail_fsync.store(false, Ordering::Relaxed);

    // Poisoned: logged acks are refused at once, async ones (never logged) still work.
    let error = insert(&p, 20..30, AckMode::Committed).await.unwrap_err();
    assert!(
        matches!(&error, InsertError::WalFailed(m) if m.contains("until restart")),
        "{error}"
    );
    insert(&p, 30..40, AckMode::Async).await.unwrap();
    assert!(p.wal().unwrap().poisoned.is_some());

    p.shutdown().await;
    assert_eq!(
        p.memory().0,
        0,
        "a refused insert's reservation outlived it"
    );
    let on_disk = common::ids_on_disk(dir.path());
    assert_ids(&on_disk, (0..10).chain(30..40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_inserts_until_there_is_room() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, faults) = FaultyStorage::new();
    let p = start(dir.path(), 1_000_000, storage).await;
    insert(&p, 0..10, AckMode::Durable).await.unwrap();

    faults.enospc.store(true, Ordering::Relaxed);
    let error = insert(&p, 10..20, AckMode::Durable).await.unwrap_err();
    assert!(error.to_string().contains("No space left"), "{error}");
    let error = insert(&p, 20..30, AckMode::Committed).await.unwrap_err();
    assert!(matches!(error, InsertError::WalFailed(_)), "{error}");

    faults.enospc.store(false, Ordering::Relaxed);
    insert(&p, 30..40, AckMode::Durable).await.unwrap();
    assert!(p.wal().unwrap().poisoned.is_none());
    p.shutdown().await;
    assert_eq!(
        p.memory().0,
        0,
        "a refused insert's reservation outlived it"
    );
    assert_ids(&common::ids_on_disk(dir.path()), (0..10).chain(30..40));
}
