//! Through the real server into SQLite: 32 single-row producers, a SIGKILL in the middle, a
//! restart that replays the write-ahead log, and every acknowledged row in the database exactly
//! once (the ledger skips what already landed).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadConfig, Progress, Stop};
use sluice_lab::process::ServerProcess;
use sluice_lab::verify::audit;

fn db_ids(path: &Path) -> HashMap<i64, usize> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT id, count(*) FROM load GROUP BY id")
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as usize))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_row_producers_land_in_sqlite_exactly_once_across_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[flush]\nmax_age = \"200ms\"\n\n[sinks.db]\ntype = \"sqlite\"\npath = {:?}\n\n\
             [tables.load]\nsink = \"db\"\ncolumns = {COLUMNS_TOML}\n",
            db.display().to_string()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut acked = Vec::new();

    // Phase 1: load, then SIGKILL mid-load.
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    let progress = Arc::new(Progress::default());
    let load = LoadConfig {
        addr: server.addr,
        table: "load".into(),
        endpoint: Endpoint::Native,
        producers: 32,
        rows_per_insert: 1,
        rate: None,
        stop: Stop::After(Duration::from_secs(30)),
        ack: "durable".into(),
        seed: 1,
        id_offset: 0,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: false,
    };
    let task = tokio::spawn(sluice_lab::load::run(load.clone(), progress.clone(), true));
    while progress.rows_acked.load(Ordering::Relaxed) < 3_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.kill().unwrap();
    progress.stop.store(true, Ordering::Relaxed);
    acked.extend(task.await.unwrap().unwrap().acked_ids.unwrap());

    // Phase 2: restart (replay), a clean run of 32 x 100 single-row inserts, SIGTERM.
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    let clean = LoadConfig {
        addr: server.addr,
        stop: Stop::Rows(3_200),
        id_offset: 1_000_000,
        ..load
    };
    let report = sluice_lab::load::run(clean, Arc::new(Progress::default()), true)
        .await
        .unwrap();
    assert_eq!(report.rows_acked, 3_200, "{:?}", report.errors);
    acked.extend(report.acked_ids.unwrap());
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());

    let found = audit(&db_ids(&db), &acked);
    assert!(found.acked > 6_000, "{found:?}");
    assert_eq!((found.lost, found.duplicated), (0, 0), "{found:?}");
}
