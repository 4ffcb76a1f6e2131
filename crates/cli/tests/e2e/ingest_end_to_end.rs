//! Many producers sending single-row inserts through both endpoints land every row exactly once,
//! in the few parts the flush policy predicts. And auto-creation: where it stops, and what a
//! table the store cannot make leaves behind (nothing).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{
    Server, assert_exactly_once, id_counts, load_config, load_table_flushing_every_5000_rows,
    part_rows, parts,
};
use sluice_lab::load::{Endpoint, LoadConfig, LoadReport, Progress};
use sluice_lab::process::ServerProcess;

async fn run(config: LoadConfig) -> LoadReport {
    sluice_lab::load::run(config, Arc::new(Progress::default()), true)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_single_row_producers_on_both_endpoints_land_every_row_once() {
    let mut server = Server::start(&load_table_flushing_every_5000_rows());
    let native = run(load_config(
        &server,
        Endpoint::Native,
        16,
        10_000,
        0,
        "async",
    ));
    let clickhouse = run(load_config(
        &server,
        Endpoint::ClickHouse,
        16,
        10_000,
        10_000,
        "async",
    ));
    let (native, clickhouse) = tokio::join!(native, clickhouse);
    for report in [&native, &clickhouse] {
        assert_eq!(report.rows_acked, 10_000, "{report:?}");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
    }
    // Three flushes at 5,000 rows, then the rest at shutdown.
    server
        .wait_rows_written("load", 15_000, Duration::from_secs(30))
        .await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());

    // 20,000 rows at 5,000 rows per flush: four parts, not one per insert. Inserts that arrive
    // together are handed over together, at most one per producer, so a flush can pass 5,000
    // rows by fewer than 32; whatever the first flushes leave lands at shutdown.
    let files = parts(&server.data_dir, "load");
    let mut sizes: Vec<usize> = files.iter().map(|p| part_rows(p)).collect();
    sizes.sort_unstable();
    assert_eq!(sizes.len(), 4, "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 20_000);
    assert!(
        sizes[1..].iter().all(|rows| (5000..5032).contains(rows)),
        "{sizes:?}"
    );
    let counts = id_counts(&server.data_dir, "load");
    assert_eq!(counts.len(), 20_000);
    let acked: Vec<_> = native
        .acked_ids
        .unwrap()
        .into_iter()
        .chain(clickhouse.acked_ids.unwrap())
        .collect();
    assert_exactly_once(&counts, &acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_acks_come_only_after_the_rows_are_on_disk() {
    // An auto-created table with a short age limit.
    let mut server = Server::start("[flush]\nmax_age = \"200ms\"\n");
    let started = Instant::now();
    let mut config = load_config(&server, Endpoint::Native, 16, 4_000, 0, "committed");
    config.rows_per_insert = 10;
    let report = run(config).await;
    let elapsed = started.elapsed();
    assert_eq!(report.rows_acked, 4_000, "{report:?}");

    // Read the files before anything else can flush: every acknowledged row is already there.
    let counts = id_counts(&server.data_dir, "load");
    assert_exactly_once(&counts, report.acked_ids.as_deref().unwrap());
    assert_eq!(counts.len(), 4_000);

    // One part per age window, not one per insert: 400 inserts made at most elapsed/200ms + 2.
    let n_parts = parts(&server.data_dir, "load").len();
    let windows = (elapsed.as_secs_f64() / 0.2).ceil() as usize + 2;
    assert!(n_parts <= windows, "{n_parts} parts in {elapsed:?}");
    assert!(
        n_parts * 4 <= report.inserts_acked as usize,
        "{n_parts} parts for {} inserts",
        report.inserts_acked
    );

    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_creation_stops_at_max_tables_while_existing_tables_take_rows() {
    let mut server = Server::start(
        "max_tables = 2\n\n[tables.declared]\ncolumns = [{ name = \"id\", type = \"int64\" }]\n",
    );
    let client = reqwest::Client::new();
    let insert = |path: String| client.post(server.url(&path)).body("{\"id\":1}").send();
    let native = |table: &str| insert(format!("/v1/tables/{table}/rows"));

    // The declared table counts: one more may be created.
    assert_eq!(native("first").await.unwrap().status(), 200);
    let refused = native("second").await.unwrap();
    assert_eq!(refused.status(), 404);
    assert_eq!(refused.headers()["x-sluice-error"], "too_many_tables");
    let text = refused.text().await.unwrap();
    assert!(text.contains("max_tables"), "{text}");
    let clickhouse = insert("/?query=INSERT%20INTO%20third%20FORMAT%20JSONEachRow".into())
        .await
        .unwrap();
    assert_eq!(clickhouse.status(), 404);
    let text = clickhouse.text().await.unwrap();
    assert!(text.starts_with("Code: 60."), "{text}");
    for table in ["second", "third"] {
        assert!(!server.data_dir.join(table).exists(), "{table} was created");
    }
    for table in ["declared", "first"] {
        assert_eq!(native(table).await.unwrap().status(), 200, "{table}");
    }

    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_the_store_cannot_make_is_not_remembered_and_stops_no_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let start = || ServerProcess::spawn_with_env(binary, &data, None, &[("SLUICE_WAL", "off")]);
    let client = reqwest::Client::new();
    // An insert's status and answer.
    let post = async |addr: SocketAddr, table: &str, body: &'static str| {
        let response = client
            .post(format!("http://{addr}/v1/tables/{table}/rows"))
            .body(body)
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    };

    // Two spellings of one column are one column to Delta Lake: refused at the door.
    let mut server = start().unwrap();
    let (status, text) = post(server.addr, "cases", "{\"id\":1,\"ID\":2}").await;
    assert_eq!(status, 400);
    assert!(text.contains("spelled in another case"), "{text}");
    assert!(!data.join("cases").exists());

    // A Delta table sluice's catalog does not know, of another schema than an insert's: the
    // store cannot make the table, and the catalog must not remember it.
    let (status, text) = post(server.addr, "other", "{\"x\":1}").await;
    assert_eq!(status, 200, "{text}");
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let remembered = data.join("other/_sluice/table.json");
    std::fs::remove_file(&remembered).unwrap();
    let mut server = start().unwrap();
    let (status, text) = post(server.addr, "other", "{\"y\":\"s\"}").await;
    assert!(status.is_server_error(), "{status}: {text}");
    assert!(
        !remembered.exists(),
        "a table the store refused is in the catalog"
    );
    server.kill().unwrap();

    // The next start is not stopped by it, and an insert that fits the table creates it again.
    let mut server = start().unwrap();
    let (status, text) = post(server.addr, "other", "{\"x\":2}").await;
    assert_eq!(status, 200, "{text}");
    assert!(remembered.exists());
    server.kill().unwrap();
}
