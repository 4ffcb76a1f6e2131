//! Into a real PostgreSQL server (started by `scripts/services/postgres.sh`): every row exactly
//! once through the ledger, a server restart in the middle of the load that loses nothing, a
//! table made by hand given the config's columns, a batch it refuses sent to the dead-letter
//! folder with PostgreSQL's words, a table no insert could fill stopping the start, a server
//! down when sluice starts, which does not, a server that hangs, which holds up no flush and no
//! shutdown, a table another session keeps locked, and two sluice processes writing one table.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use sluice_core::{
    Column, ColumnType, DecodeOptions, FlushBatch, FlushId, FlushPolicy, PartitionKey, Sink,
    TableDef, TableLayout, TableName, decode_ndjson,
};
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadConfig, Stop, http_get, http_post};
use sluice_lab::process::ServerProcess;
use sluice_lab::services::Postgres;
use sluice_lab::verify::audit;
use sluice_sinks::{PostgresConfig, PostgresSink};
use tokio_postgres::NoTls;

use crate::common;

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn ids(url: &str) -> HashMap<i64, usize> {
    client(url)
        .await
        .query("SELECT id, count(*) FROM load GROUP BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1) as usize))
        .collect()
}

/// Waits (60 s at most) until the table `load` at `url` holds ids 0..=`last`, stops `server`
/// cleanly, and checks that each id landed once.
async fn lands_once_each_then_stops(url: &str, server: &mut ServerProcess, last: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while ids(url).await.len() <= last as usize {
        assert!(std::time::Instant::now() < deadline, "{:?}", ids(url).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let found = ids(url).await;
    assert!(
        found.len() == last as usize + 1 && (0..=last).all(|id| found.get(&id) == Some(&1)),
        "{found:?}"
    );
}

fn config(dir: &Path, url: &str) -> std::path::PathBuf {
    config_with_columns(dir, url, COLUMNS_TOML)
}

/// [`config`] with a 2 s `timeout` for every exchange with the server.
fn config_with_timeout(dir: &Path, url: &str) -> std::path::PathBuf {
    let path = config(dir, url);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "type = \"postgres\"",
        "type = \"postgres\"\ntimeout = \"2s\"",
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A config in `dir` declaring the table `load` with `columns` (TOML) in the server at `url`.
fn config_with_columns(dir: &Path, url: &str, columns: &str) -> std::path::PathBuf {
    let path = dir.join("sluice.toml");
    let text = format!(
        "shutdown_timeout = \"20s\"\n\n[flush]\nmax_age = \"200ms\"\n\n\
         [sinks.pg]\ntype = \"postgres\"\nurl = {url:?}\n\n\
         [tables.load]\nsink = \"pg\"\ncolumns = {columns}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A throwaway PostgreSQL server where `sql` has made tables by hand.
async fn postgres_with(sql: &str) -> Postgres {
    let pg = Postgres::start().unwrap();
    client(&pg.url).await.batch_execute(sql).await.unwrap();
    pg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_row_producers_land_once_and_a_postgres_restart_loses_nothing() {
    let pg = Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &pg.url);
    let mut server = ServerProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &dir.path().join("data"),
        Some(&config),
    )
    .unwrap();

    let load = LoadConfig {
        addr: server.addr,
        table: "load".into(),
        endpoint: Endpoint::Native,
        producers: 32,
        rows_per_insert: 1,
        rate: Some(4_000.0),
        stop: Stop::After(Duration::from_secs(60)),
        ack: "durable".into(),
        seed: 3,
        id_offset: 0,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: false,
    };
    // PostgreSQL goes away under load, and comes back.
    let report = common::store_restart_under_load(
        &mut server,
        load,
        || pg.stop().unwrap(),
        || pg.restart().unwrap(),
    )
    .await;

    let found = audit(&ids(&pg.url).await, report.acked_ids.as_deref().unwrap());
    println!("PostgreSQL restart under load: {found:?}");
    assert!(found.acked >= 5_000, "{found:?}");
    assert_eq!((found.lost, found.duplicated), (0, 0), "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_at_start_does_not_stop_the_start_and_gets_its_rows_when_it_answers() {
    let pg = Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &pg.url);
    // Auto-created tables go to PostgreSQL too.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("default_sink = \"pg\"\n{text}")).unwrap();
    let data = dir.path().join("data");

    // The first start of a data directory needs every store: nothing says yet what they hold.
    pg.stop().unwrap();
    let (started, stderr) = common::serve_until_exit(&config, &data);
    assert!(
        !started && stderr.contains("every store must answer once"),
        "{stderr}"
    );
    pg.restart().unwrap();
    common::start_and_stop(&config, &data);

    // Later starts go on without it.
    pg.stop().unwrap();
    let mut server = ServerProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &data,
        Some(&config),
    )
    .unwrap();
    let post = async |table: &str, body: &'static str| {
        reqwest::Client::new()
            .post(format!("http://{}/v1/tables/{table}/rows", server.addr))
            .body(body)
            .send()
            .await
            .unwrap()
    };

    // A table that would be auto-created cannot be made now: refused, safe to send again.
    let response = post("fresh", "{\"id\":1}").await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["x-sluice-error"], "store_unavailable");
    assert_eq!(response.headers()["retry-after"], "5");

    // Taken and logged while PostgreSQL is down; the table says why nothing lands.
    common::insert_while_the_store_is_down(server.addr, "/v1/tables/load/rows?ack=durable").await;
    let health = http_get(server.addr, "/health").await.unwrap();
    assert!(health.contains("degraded"), "{health}");

    pg.restart().unwrap();
    // Once it answers, the table is made and the held rows land; `committed` inserts work.
    let (status, message) = http_post(
        server.addr,
        "/v1/tables/load/rows?ack=committed",
        "{\"id\":100,\"service\":\"web\"}",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{message}");
    let response = post("fresh", "{\"id\":1}").await;
    assert_eq!(response.status(), 200);
    // A table of that name that cannot take the rows: refused by the store, not a 500.
    client(&pg.url)
        .await
        .batch_execute("CREATE TABLE legacy (id bigint, must text NOT NULL)")
        .await
        .unwrap();
    let response = post("legacy", "{\"id\":1}").await;
    assert_eq!(response.status(), 502);
    assert_eq!(response.headers()["x-sluice-error"], "store_refused");
    let message = response.text().await.unwrap();
    assert!(message.contains("'must' that may not be null"), "{message}");

    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let found = ids(&pg.url).await;
    assert_eq!(found.len(), 101, "{found:?}");
    assert!((0..=100).all(|id| found.get(&id) == Some(&1)), "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_that_hangs_holds_up_no_flush_and_no_shutdown() {
    let pg = Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_timeout(dir.path(), &pg.url);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("shutdown_timeout = \"20s\"", "shutdown_timeout = \"3s\"");
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    // A connection to the server is open and in the pool; then the server hangs: its port
    // takes connections, nothing answers.
    common::insert_around_a_hang(server.addr, async { pg.freeze().unwrap() }).await;
    // The flush on the open connection, then a new connection's handshake, each give up after
    // the timeout, and the table says so.
    for what in ["while landing a flush", "while connecting"] {
        common::wait_for_tables_to_say(server.addr, &format!("no answer within 2s {what}")).await;
    }
    // Shutdown is not held up either: past shutdown_timeout the rows stay in the log.
    server.terminate().unwrap();
    let status = server.wait(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "{status}");

    // Once the server answers, the next start lands them, once each.
    pg.thaw().unwrap();
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    lands_once_each_then_stops(&pg.url, &mut server, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_another_session_locks_fails_flushes_saying_so_and_loses_nothing() {
    let pg = Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_timeout(dir.path(), &pg.url);
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, &dir.path().join("data"), Some(&config)).unwrap();
    // Another session takes the table for itself (as a migration's ALTER TABLE would) and
    // keeps it.
    let admin = client(&pg.url).await;
    let lock = admin.batch_execute("BEGIN; LOCK TABLE load IN ACCESS EXCLUSIVE MODE");
    common::insert_around_a_hang(server.addr, async { lock.await.unwrap() }).await;
    // The flush gives up on the lock after half the timeout, saying why, not "no answer".
    common::wait_for_tables_to_say(server.addr, "another session holds a lock this flush needs")
        .await;
    let tables = http_get(server.addr, "/v1/tables").await.unwrap();
    assert!(tables.contains("55P03"), "{tables}");
    assert!(!tables.contains("no answer"), "{tables}");

    // Once the lock goes, the retries land the rows, once each.
    admin.batch_execute("COMMIT").await.unwrap();
    lands_once_each_then_stops(&pg.url, &mut server, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sluice_processes_into_one_table_lose_nothing() {
    let pg = Postgres::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &pg.url);
    let spawn = |data: &str| {
        ServerProcess::spawn(
            Path::new(env!("CARGO_BIN_EXE_sluice")),
            &dir.path().join(data),
            Some(&config),
        )
        .unwrap()
    };
    // Two data directories, so two logs numbering their inserts each from where it stands.
    let (mut a, mut b) = (spawn("a"), spawn("b"));
    let insert = async |server: &ServerProcess, ids: std::ops::Range<i64>| {
        let body: String = ids
            .map(|id| format!("{{\"id\":{id},\"service\":\"api\"}}\n"))
            .collect();
        let (status, message) = http_post(server.addr, "/v1/tables/load/rows?ack=committed", body)
            .await
            .unwrap();
        assert_eq!(status, 200, "{message}");
    };
    // In turns, so each lands flushes numbered below the other's latest.
    for round in 0..3 {
        insert(&a, round * 100..round * 100 + 10).await;
        insert(&b, round * 100 + 50..round * 100 + 60).await;
    }
    for server in [&mut a, &mut b] {
        server.terminate().unwrap();
        assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    }
    let found = ids(&pg.url).await;
    assert_eq!(found.len(), 60, "{found:?}");
    assert!(found.values().all(|n| *n == 1), "{found:?}");
}

async fn columns(url: &str) -> Vec<(String, bool)> {
    client(url)
        .await
        .query(
            "SELECT column_name::text, is_nullable = 'YES' FROM information_schema.columns \
             WHERE table_name = 'load' ORDER BY ordinal_position",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_by_hand_is_fitted_and_a_batch_it_refuses_goes_to_the_dead_letter_folder() {
    let pg = postgres_with(
        "CREATE TABLE load (id bigint NOT NULL CHECK (id > 100), service text NOT NULL); \
         INSERT INTO load VALUES (200, 'old')",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &pg.url);
    let data = dir.path().join("data");
    let mut server = ServerProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &data,
        Some(&config),
    )
    .unwrap();

    // The config's other columns were added, and `service`, nullable there, lost its NOT NULL.
    let fitted = columns(&pg.url).await;
    let names: Vec<&str> = fitted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "service",
            "ts",
            "endpoint",
            "status",
            "latency_ms",
            "bytes",
            "request_id",
            "user_id"
        ]
    );
    assert!(
        fitted
            .iter()
            .all(|(name, nullable)| *nullable == (name != "id")),
        "{fitted:?}"
    );

    // A batch the table's CHECK refuses is kept whole in the dead-letter folder.
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tables/load/rows", server.addr))
        .body("{\"id\":1,\"service\":\"api\"}\n{\"id\":2,\"service\":\"web\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    assert_eq!(response.headers()["x-sluice-error"], "store_refused");
    let message = response.text().await.unwrap();
    assert!(
        message.contains("violates check constraint") && message.contains("_dead"),
        "{message}"
    );

    let (kept, note) = common::dead_letter(&data, "load");
    assert_eq!(kept.lines().count(), 2, "{kept}");
    assert!(
        kept.contains("\"id\":1") && kept.contains("\"service\":\"web\""),
        "{kept}"
    );
    assert!(note.contains("load_id_check"), "{note}");

    let metrics = http_get(server.addr, "/metrics").await.unwrap();
    assert!(
        metrics.contains("sluice_dead_letter_rows_total{table=\"load\"} 2"),
        "{metrics}"
    );
    // The console shows the refusal as the table's last error, without calling it failing.
    let console = http_get(server.addr, "/v1/dashboard").await.unwrap();
    let console: serde_json::Value = serde_json::from_str(&console).unwrap();
    let table = console["tables"]["rows"]
        .as_array()
        .and_then(|shown| shown.iter().find(|t| t["name"] == "load"))
        .unwrap_or_else(|| panic!("no table load in {console}"));
    let last_error = table["last_error"]["error"].as_str().unwrap_or_default();
    assert!(last_error.contains("violates check constraint"), "{table}");
    assert_eq!(table["health"], "ok", "{table}");
    // The table is not blocked: the next batch lands, in the added columns too, and without
    // the `service` the table once required.
    let (status, message) = http_post(
        server.addr,
        "/v1/tables/load/rows",
        "{\"id\":300,\"endpoint\":\"/x\"}",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{message}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let rows: Vec<(i64, Option<String>, Option<String>)> = client(&pg.url)
        .await
        .query("SELECT id, service, endpoint FROM load ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows,
        [
            (200, Some("old".to_owned()), None),
            (300, None, Some("/x".to_owned()))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_key_keeps_its_not_null_when_the_config_lets_it_be_null() {
    let pg = postgres_with("CREATE TABLE load (k text PRIMARY KEY, v bigint NOT NULL)").await;
    let dir = tempfile::tempdir().unwrap();
    // Both columns nullable in the config: PostgreSQL cannot drop a primary key's NOT NULL,
    // which must not stop the start; `v` loses its own.
    let config = config_with_columns(
        dir.path(),
        &pg.url,
        r#"[{ name = "k", type = "string" }, { name = "v", type = "int64" }]"#,
    );
    let mut server = ServerProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &dir.path().join("data"),
        Some(&config),
    )
    .unwrap();
    assert_eq!(
        columns(&pg.url).await,
        [("k".to_owned(), false), ("v".to_owned(), true)]
    );
    let (status, message) = http_post(server.addr, "/v1/tables/load/rows", "{\"k\":\"a\"}")
        .await
        .unwrap();
    assert_eq!(status, 200, "{message}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let rows: Vec<(String, Option<i64>)> = client(&pg.url)
        .await
        .query("SELECT k, v FROM load", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, [("a".to_owned(), None)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_a_required_column_the_config_lacks_stops_the_start() {
    let pg =
        postgres_with("CREATE TABLE load (id bigint NOT NULL, legacy_column text NOT NULL)").await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &pg.url);
    let (started, stderr) = common::serve_until_exit(&config, &dir.path().join("data"));
    assert!(!started, "{stderr}");
    assert!(
        stderr.contains(
            "table load exists in the store and has a column 'legacy_column' that \
             may not be null and has no default"
        ),
        "{stderr}"
    );
    // Nothing was changed.
    assert_eq!(
        columns(&pg.url).await,
        [
            ("id".to_owned(), false),
            ("legacy_column".to_owned(), false)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_land_as_documented_and_a_replayed_flush_is_skipped() {
    let pg = Postgres::start().unwrap();
    let sink = PostgresSink::new(PostgresConfig::new(&pg.url)).unwrap();
    let layout = TableLayout {
        columns: vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("small", ColumnType::Int8),
            Column::new("ok", ColumnType::Bool),
            Column::new("ts", ColumnType::Timestamp),
            Column::new("day", ColumnType::Date),
            Column::new("x", ColumnType::Float32),
            Column::new("s\"; DROP TABLE _sluice_ledger; --", ColumnType::String),
        ],
        partition_by: String::new(),
        sort_by: vec![],
    };
    let table = TableDef::new(
        TableName::new("typed").unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap();
    sink.create_table(&table).await.unwrap();
    let body = br#"{"id":1,"small":-5,"ok":true,"ts":"2026-11-29T12:00:00.123456Z","day":"2026-11-29","x":1.5,"s\"; DROP TABLE _sluice_ledger; --":"o'brien"}
{"id":2}"#;
    let batch = decode_ndjson(table.schema(), body, &DecodeOptions::default()).unwrap();
    let flush = |batch| FlushBatch {
        table: &table,
        id: FlushId {
            table: table.name().clone(),
            partition: PartitionKey::Whole,
            first_seq: 10,
            last_seq: 11,
        },
        batches: vec![batch],
        keys: Default::default(),
    };
    assert_eq!(sink.write(flush(batch.clone())).await.unwrap().parts, 1);
    assert_eq!(
        sink.write(flush(batch)).await.unwrap().parts,
        0,
        "a replay is skipped"
    );
    assert_eq!(
        sink.committed(&table).await.unwrap(),
        [(PartitionKey::Whole, 11)]
    );

    let c = client(&pg.url).await;
    let row = c
        .query_one(
            "SELECT id, small, ok, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), day::text, x, \"s\"\"; DROP TABLE _sluice_ledger; --\" FROM typed WHERE id = 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(row.get::<_, i16>(1), -5);
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, String>(3), "2026-11-29 12:00:00.123456");
    assert_eq!(row.get::<_, String>(4), "2026-11-29");
    assert_eq!(row.get::<_, f32>(5), 1.5);
    assert_eq!(row.get::<_, String>(6), "o'brien");
    let count: i64 = c
        .query_one("SELECT count(*) FROM typed", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 2);
}
