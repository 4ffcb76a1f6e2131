//! Into a real ClickHouse server (Debian's 18.16, started by `scripts/services/clickhouse.sh`):
//! single-row producers across a SIGKILL land at least once and are counted; a table made by
//! hand gets the columns the config adds; a batch the table cannot take goes to the dead-letter
//! folder with ClickHouse's words; `Too many parts` is waited
//! out, never dropped; pacing keeps a partition's part count away from the limits; a server
//! down when sluice starts does not stop the start; and one that hangs holds up no flush and no
//! shutdown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::{self, sample};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadConfig, Progress, Stop, http_get, http_post};
use sluice_lab::process::ServerProcess;
use sluice_lab::services::ClickHouse;
use sluice_lab::verify::audit;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

fn config(dir: &Path, ch: &ClickHouse, extra: &str) -> PathBuf {
    let path = dir.join("sluice.toml");
    let text = format!(
        "shutdown_timeout = \"20s\"\nack_timeout = \"60s\"\n\n[flush]\nmax_age = \"200ms\"\n\n\
         [sinks.ch]\ntype = \"clickhouse\"\nurl = {:?}\n{extra}\n\
         [tables.load]\nsink = \"ch\"\ncolumns = {COLUMNS_TOML}\n",
        ch.url
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn ids(ch: &ClickHouse) -> HashMap<i64, usize> {
    ch.query("SELECT id, count() FROM load GROUP BY id FORMAT TabSeparated")
        .await
        .unwrap()
        .lines()
        .map(|line| {
            let (id, n) = line.split_once('\t').unwrap();
            (id.parse().unwrap(), n.parse().unwrap())
        })
        .collect()
}

fn table_metric(page: &str, name: &str) -> f64 {
    sample(page, name, &[])
}

fn retried_flushes(page: &str) -> f64 {
    sample(page, "sluice_flush_errors_total", &["kind=\"retriable\""])
}

fn load(server: &ServerProcess, producers: usize, stop: Stop, id_offset: u64) -> LoadConfig {
    LoadConfig {
        addr: server.addr,
        table: "load".into(),
        endpoint: Endpoint::ClickHouse,
        producers,
        rows_per_insert: 1,
        rate: Some(3_000.0),
        stop,
        ack: "durable".into(),
        seed: 5,
        id_offset,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_down_at_start_does_not_stop_the_start_and_gets_its_rows_when_it_answers() {
    let ch = ClickHouse::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "");
    let data = dir.path().join("data");
    // A first start with the server up gives the log its reservation; a later one goes on
    // without the server.
    common::start_and_stop(&config, &data);
    ch.stop().unwrap();
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();

    // Through sluice's ClickHouse endpoint, taken and logged while ClickHouse is down.
    let insert = "/?query=INSERT%20INTO%20load%20FORMAT%20JSONEachRow&sluice_ack=durable";
    common::insert_while_the_store_is_down(server.addr, insert).await;

    ch.restart().unwrap();
    // Once it answers, the database, the ledger and the table are made and the rows land.
    let committed = "/?query=INSERT%20INTO%20load%20FORMAT%20JSONEachRow&sluice_ack=committed";
    let (status, message) = http_post(server.addr, committed, "{\"id\":100,\"service\":\"web\"}")
        .await
        .unwrap();
    assert_eq!(status, 200, "{message}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let found = ids(&ch).await;
    assert_eq!(found.len(), 101, "{found:?}");
    assert!((0..=100).all(|id| found.get(&id) == Some(&1)), "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clickhouse_that_hangs_holds_up_no_flush_and_no_shutdown() {
    let ch = ClickHouse::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "timeout = \"2s\"");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("shutdown_timeout = \"20s\"", "shutdown_timeout = \"3s\"");
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();
    // The server hangs: its port takes connections, nothing answers.
    common::insert_around_a_hang(server.addr, async { ch.freeze().unwrap() }).await;
    common::wait_for_tables_to_say(server.addr, "no answer within 2s").await;
    // Past shutdown_timeout the rows stay in the log.
    server.terminate().unwrap();
    let status = server.wait(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "{status}");

    // Once the server answers, the next start lands them: at least once (a timed-out insert
    // the server still had in its socket may have landed too, without its ledger row).
    ch.thaw().unwrap();
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ids(&ch).await.len() < 11 {
        assert!(Instant::now() < deadline, "{:?}", ids(&ch).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let found = ids(&ch).await;
    assert!(
        found.len() == 11 && (0..=10).all(|id| found.contains_key(&id)),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_row_producers_land_at_least_once_across_a_crash() {
    let ch = ClickHouse::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "");
    let data = dir.path().join("data");
    let mut acked = Vec::new();

    // 32 producers through sluice's ClickHouse endpoint, then SIGKILL in the middle.
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();
    let progress = Arc::new(Progress::default());
    let first = load(&server, 32, Stop::After(Duration::from_secs(60)), 0);
    let task = tokio::spawn(sluice_lab::load::run(first.clone(), progress.clone(), true));
    common::wait_for_acks(&progress, 3_000).await;
    server.kill().unwrap();
    progress.stop.store(true, Ordering::Relaxed);
    acked.extend(task.await.unwrap().unwrap().acked_ids.unwrap());

    // Restart: the log is replayed above the ledger's watermark. Then a clean run and SIGTERM.
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();
    let clean = LoadConfig {
        addr: server.addr,
        stop: Stop::Rows(3_200),
        id_offset: 1_000_000,
        ..first
    };
    let report = sluice_lab::load::run(clean, Arc::new(Progress::default()), true)
        .await
        .unwrap();
    assert_eq!(report.rows_acked, 3_200, "{:?}", report.errors);
    acked.extend(report.acked_ids.unwrap());
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());

    let found = audit(&ids(&ch).await, &acked);
    println!("ClickHouse after a SIGKILL: {found:?}");
    assert!(found.acked > 6_000, "{found:?}");
    assert_eq!(found.lost, 0, "an acknowledged row is missing: {found:?}");
    let ledger = ch
        .number("SELECT max(last_seq) FROM _sluice_ledger WHERE table_name = 'load'")
        .await
        .unwrap();
    assert!(ledger > 0, "the ledger records what landed");

    // A clean restart replays nothing the ledger covers: not one row more.
    let rows = ch.number("SELECT count() FROM load").await.unwrap();
    let mut server = ServerProcess::spawn(binary(), &data, Some(&config)).unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());
    assert_eq!(ch.number("SELECT count() FROM load").await.unwrap(), rows);
}

/// A ClickHouse server whose `load` table `statements` made by hand, and a sluice started on it
/// with `load` declared: the server, the folder of sluice's config and data, and sluice.
async fn sluice_over_a_table_made_by_hand(
    statements: &[&str],
) -> (ClickHouse, tempfile::TempDir, ServerProcess) {
    let ch = ClickHouse::start().unwrap();
    for statement in statements {
        ch.query(statement).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "");
    let server = ServerProcess::spawn(binary(), &dir.path().join("data"), Some(&config)).unwrap();
    (ch, dir, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_by_hand_gets_the_columns_the_config_adds() {
    let (ch, _dir, mut server) = sluice_over_a_table_made_by_hand(&[
        "CREATE TABLE load (id Int64, status Int32) ENGINE = MergeTree() ORDER BY id",
        "INSERT INTO load VALUES (0, 7)",
    ])
    .await;
    let (status, message) = http_post(
        server.addr,
        "/v1/tables/load/rows",
        "{\"id\":1,\"service\":\"api\",\"status\":200}\n{\"id\":2}",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{message}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());

    let types = ch
        .query(
            "SELECT name, type FROM system.columns WHERE database = 'default' AND table = \
             'load' FORMAT TabSeparated",
        )
        .await
        .unwrap();
    assert_eq!(
        types,
        "id\tInt64\nstatus\tInt32\nts\tNullable(DateTime(\\'UTC\\'))\nservice\tNullable(String)\n\
         endpoint\tNullable(String)\nlatency_ms\tNullable(Float64)\nbytes\tNullable(Int64)\n\
         request_id\tNullable(String)\nuser_id\tNullable(Int64)\n"
    );
    // The row landed before reads the added column as null; `status`, not Nullable there
    // (sluice warns), takes its default where a row has no value.
    let rows = ch
        .query("SELECT id, status, service FROM load ORDER BY id FORMAT TabSeparated")
        .await
        .unwrap();
    assert_eq!(rows, "0\t7\t\\N\n1\t200\tapi\n2\t0\t\\N\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_table_cannot_take_goes_to_the_dead_letter_folder() {
    let (ch, dir, mut server) = sluice_over_a_table_made_by_hand(&[
        "CREATE TABLE load (id Int64, service Date) ENGINE = MergeTree() ORDER BY id",
    ])
    .await;
    let data = dir.path().join("data");

    let (status, message) = http_post(
        server.addr,
        "/v1/tables/load/rows",
        "{\"id\":1,\"service\":\"api\"}\n{\"id\":2,\"service\":\"web\"}",
    )
    .await
    .unwrap();
    assert_eq!(status, 502, "{message}");
    assert!(
        message.contains("Cannot parse")
            && message.contains("the value of key service")
            && message.contains("_dead"),
        "{message}"
    );
    let (kept, note) = common::dead_letter(&data, "load");
    assert_eq!(kept.lines().count(), 2, "{kept}");
    assert!(
        note.contains("ClickHouse code 27") && note.contains("key service"),
        "{note}"
    );
    let page = http_get(server.addr, "/metrics").await.unwrap();
    assert_eq!(table_metric(&page, "sluice_dead_letter_rows_total"), 2.0);

    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    assert_eq!(ch.number("SELECT count() FROM load").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_parts_is_waited_out_never_dropped() {
    let ch = ClickHouse::start().unwrap();
    ch.query(
        "CREATE TABLE load (id Int64) ENGINE = MergeTree() ORDER BY id \
         SETTINGS parts_to_delay_insert = 2, parts_to_throw_insert = 3",
    )
    .await
    .unwrap();
    ch.query("SYSTEM STOP MERGES").await.unwrap();
    for id in 0..3 {
        ch.query(&format!("INSERT INTO load VALUES ({id})"))
            .await
            .unwrap();
    }
    let refused = ch.query("INSERT INTO load VALUES (3)").await.unwrap_err();
    assert!(refused.contains("Code: 252"), "{refused}");

    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "");
    let mut server =
        ServerProcess::spawn(binary(), &dir.path().join("data"), Some(&config)).unwrap();
    // A committed insert through sluice's ClickHouse endpoint waits while ClickHouse refuses.
    let addr = server.addr;
    let insert = tokio::spawn(async move {
        http_post(
            addr,
            "/?query=INSERT%20INTO%20load%20FORMAT%20JSONEachRow",
            "{\"id\":10}\n{\"id\":11}",
        )
        .await
        .unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = http_get(addr, "/health").await.unwrap();
        if health.contains("Too many parts") {
            break;
        }
        assert!(Instant::now() < deadline, "never saw the refusal: {health}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!insert.is_finished(), "answered while ClickHouse refused");

    ch.query("SYSTEM START MERGES").await.unwrap();
    ch.query("OPTIMIZE TABLE load FINAL").await.unwrap();
    let (status, body) = insert.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let page = http_get(addr, "/metrics").await.unwrap();
    assert!(retried_flushes(&page) >= 1.0, "{page}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    assert_eq!(
        ch.query("SELECT id FROM load ORDER BY id FORMAT TabSeparated")
            .await
            .unwrap(),
        "0\n1\n2\n10\n11\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_keeps_parts_away_from_the_limit() {
    let ch = ClickHouse::start().unwrap();
    // Merges stopped: every flush stays a part. Without pacing, flushes every 20 ms would reach
    // the throw limit of 20 parts in under half a second.
    ch.query(
        "CREATE TABLE load (id Int64, ts Nullable(DateTime('UTC')), service Nullable(String), \
         endpoint Nullable(String), status Nullable(Int32), latency_ms Nullable(Float64), \
         bytes Nullable(Int64), request_id Nullable(String), user_id Nullable(Int64)) \
         ENGINE = MergeTree() ORDER BY id \
         SETTINGS parts_to_delay_insert = 10, parts_to_throw_insert = 20",
    )
    .await
    .unwrap();
    ch.query("SYSTEM STOP MERGES").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), &ch, "max_pause = \"1s\"\n");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("max_age = \"200ms\"", "max_age = \"20ms\"");
    std::fs::write(&path, text).unwrap();
    let mut server = ServerProcess::spawn(binary(), &dir.path().join("data"), Some(&path)).unwrap();

    let run = load(&server, 16, Stop::After(Duration::from_secs(4)), 0);
    let report = sluice_lab::load::run(run, Arc::new(Progress::default()), true)
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let page = http_get(server.addr, "/metrics").await.unwrap();
    let active = ch
        .number("SELECT count() FROM system.parts WHERE table = 'load' AND active")
        .await
        .unwrap();
    println!(
        "pacing: {} rows in 4 s -> {active} active parts, {} paused flushes",
        report.rows_acked,
        table_metric(&page, "sluice_store_pauses_total")
    );
    assert!(
        table_metric(&page, "sluice_store_pauses_total") >= 1.0,
        "{page}"
    );
    assert!(active < 20, "{active} parts: pacing did not hold back");
    assert_eq!(retried_flushes(&page), 0.0, "ClickHouse refused a flush");

    ch.query("SYSTEM START MERGES").await.unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());
    let found = audit(&ids(&ch).await, report.acked_ids.as_deref().unwrap());
    assert!(found.acked > 1_000, "{found:?}");
    assert_eq!((found.lost, found.duplicated), (0, 0), "{found:?}");
}

fn typed_table() -> sluice_core::TableDef {
    use sluice_core::{Column, ColumnType, FlushPolicy, TableDef, TableLayout, TableName};
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("ts", ColumnType::Timestamp).required(),
            Column::new("small", ColumnType::Int8),
            Column::new("big", ColumnType::UInt64),
            Column::new("ok", ColumnType::Bool),
            Column::new("day", ColumnType::Date),
            Column::new("x", ColumnType::Float32),
            Column::new("s`; DROP TABLE _sluice_ledger; --", ColumnType::String),
        ],
        partition_by: "day(ts)".into(),
        sort_by: vec!["id".into()],
    };
    TableDef::new(
        TableName::new("typed").unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_and_partitions_land_as_documented() {
    use sluice_core::{DecodeOptions, FlushBatch, FlushId, PartitionKey, Sink, decode_ndjson};
    use sluice_sinks::{ClickHouseConfig, ClickHouseSink};

    let ch = ClickHouse::start().unwrap();
    let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url)).unwrap();
    let table = typed_table();
    sink.create_table(&table).await.unwrap();
    let body = br#"{"id":1,"ts":"2026-11-29T12:00:00.900Z","small":-5,"big":18446744073709551615,"ok":true,"day":"2026-11-29","x":1.5,"s`; DROP TABLE _sluice_ledger; --":"o'brien \\ \"q\""}
{"id":2,"ts":"2026-11-29T23:59:59Z"}"#;
    let batch = decode_ndjson(table.schema(), body, &DecodeOptions::default()).unwrap();
    let id = FlushId {
        table: table.name().clone(),
        partition: PartitionKey::Value("2026-11-29".into()),
        first_seq: 3,
        last_seq: 4,
    };
    let landed = sink
        .write(FlushBatch {
            table: &table,
            id,
            batches: vec![batch.slice(0, 1), batch.slice(1, batch.num_rows() - 1)],
            keys: Default::default(),
        })
        .await
        .unwrap();
    assert_eq!(landed.parts, 1);
    assert_eq!(
        sink.committed(&table).await.unwrap(),
        [(PartitionKey::Value("2026-11-29".into()), 4)]
    );

    let rows = ch
        .query(
            "SELECT id, toString(ts), small, big, ok, toString(day), x, \
             `s\\`; DROP TABLE _sluice_ledger; --` FROM typed ORDER BY id FORMAT TabSeparated",
        )
        .await
        .unwrap();
    assert_eq!(
        rows,
        "1\t2026-11-29 12:00:00\t-5\t18446744073709551615\t1\t2026-11-29\t1.5\to\\'brien \\\\ \"q\"\n\
         2\t2026-11-29 23:59:59\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\n"
    );
    let partitions = ch
        .query(
            "SELECT DISTINCT partition FROM system.parts WHERE table = 'typed' FORMAT TabSeparated",
        )
        .await
        .unwrap();
    assert_eq!(partitions, "2026-11-29\n");

    // A nullable key column cannot be a ClickHouse key: refused up front, by name.
    let mut layout = table.layout();
    layout.columns[0].nullable = true;
    let bad = sluice_core::TableDef::new(
        sluice_core::TableName::new("bad").unwrap(),
        layout,
        sluice_core::FlushPolicy::default(),
    )
    .unwrap();
    let error = sink.create_table(&bad).await.unwrap_err();
    assert!(!error.is_retriable());
    assert!(
        error.to_string().contains("nullable column 'id'"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_is_compacted_and_survives_a_compaction_cut_short() {
    use sluice_core::{PartitionKey, Sink};
    use sluice_sinks::clickhouse::LEDGER_COMPACT_ROWS;
    use sluice_sinks::{ClickHouseConfig, ClickHouseSink};

    let ch = ClickHouse::start().unwrap();
    let table = typed_table();
    // The ledger is set up (and compacted) when a sink first opens a table.
    let connect = async || {
        let sink = ClickHouseSink::new(ClickHouseConfig::new(&ch.url))?;
        sink.create_table(&table).await.map(|()| sink)
    };
    connect().await.unwrap();
    ch.query(&format!(
        "INSERT INTO _sluice_ledger SELECT 'typed', '=2026-11-29', number, now() \
         FROM system.numbers LIMIT {}",
        LEDGER_COMPACT_ROWS + 1
    ))
    .await
    .unwrap();
    let sink = connect().await.unwrap();
    assert_eq!(
        ch.number("SELECT count() FROM _sluice_ledger")
            .await
            .unwrap(),
        1
    );
    let held = [(
        PartitionKey::Value("2026-11-29".into()),
        LEDGER_COMPACT_ROWS,
    )];
    assert_eq!(sink.committed(&table).await.unwrap(), held);

    // Cut short between the two renames: the compacted copy is whole and is taken.
    ch.query("RENAME TABLE _sluice_ledger TO _sluice_ledger_compact")
        .await
        .unwrap();
    let sink = connect().await.unwrap();
    assert_eq!(sink.committed(&table).await.unwrap(), held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clickhouse_restart_under_load_loses_nothing() {
    let ch = ClickHouse::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &ch, "");
    let mut server =
        ServerProcess::spawn(binary(), &dir.path().join("data"), Some(&config)).unwrap();
    let run = load(&server, 32, Stop::After(Duration::from_secs(60)), 0);
    // ClickHouse goes away under load, and comes back with its data.
    let report = common::store_restart_under_load(
        &mut server,
        run,
        || ch.stop().unwrap(),
        || ch.restart().unwrap(),
    )
    .await;

    let found = audit(&ids(&ch).await, report.acked_ids.as_deref().unwrap());
    println!("ClickHouse restart under load: {found:?}");
    assert!(found.acked >= 5_000, "{found:?}");
    assert_eq!(found.lost, 0, "{found:?}");
}
