//! Insert keys: a resend with the key of an insert within the window lands once, answered as a
//! duplicate; the same key for other rows is refused; a refused insert's key is free again; a
//! resend waits for its first while that is in flight; keys age out; and the status endpoint
//! says what became of a key. Through the native API, the ClickHouse HTTP door and the native
//! protocol.

use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::common::{Server, python, stop_and_read};

const CONFIG: &str = r#"
insert_key_window = "2s"

[flush]
max_age = "300ms"

[clickhouse]
tcp_listen = "127.0.0.1:0"

[tables.t]
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "name", type = "string" },
]
"#;

/// Posts `body` to the native API with `key` as `Idempotency-Key`: status, duplicate header,
/// answer.
async fn post(server: &Server, ack: &str, key: &str, body: &str) -> (StatusCode, bool, Value) {
    let response = reqwest::Client::new()
        .post(server.url(&format!("/v1/tables/t/rows?ack={ack}")))
        .header("Idempotency-Key", key)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let duplicate = response.headers().get("x-sluice-duplicate").is_some();
    (status, duplicate, response.json().await.unwrap())
}

async fn status_of(server: &Server, key: &str) -> Value {
    reqwest::get(server.url(&format!("/v1/tables/t/inserts/{key}")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn ids(server: Server) -> Vec<i64> {
    stop_and_read(server, "t")
        .into_iter()
        .map(|row| row[0].as_deref().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_with_the_same_key_lands_once() {
    let server = Server::start(CONFIG);
    let rows = "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n";
    let (status, duplicate, first) = post(&server, "durable", "k1", rows).await;
    assert_eq!((status, duplicate), (StatusCode::OK, false), "{first}");
    assert_eq!(first["duplicate"], Value::Null);
    // The same rows, spelled otherwise: still the same insert.
    let respelled = "{\"name\": \"a\", \"id\": 1}\n{\"id\": 2, \"name\": null}\n";
    let (status, duplicate, again) = post(&server, "durable", "k1", respelled).await;
    assert_eq!((status, duplicate), (StatusCode::OK, true), "{again}");
    assert_eq!(
        (&again["duplicate"], &again["rows"]),
        (&Value::Bool(true), &Value::from(2))
    );
    let status = status_of(&server, "k1").await;
    assert_eq!(
        (&status["status"], &status["rows"]),
        (&Value::from("durable"), &Value::from(2))
    );
    assert_eq!(status_of(&server, "nope").await["status"], "unknown");

    let (status, _, conflict) = post(&server, "durable", "k1", "{\"id\":3}\n").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{conflict}");
    assert!(
        conflict["error"]
            .as_str()
            .unwrap()
            .contains("'k1' was used for other rows")
    );

    // A refused insert leaves its key free for the corrected rows.
    let (status, _, _) = post(&server, "durable", "k2", "{\"name\":\"no id\"}\n").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let refused = status_of(&server, "k2").await;
    assert_eq!(refused["status"], "refused");
    assert!(
        refused["reason"].as_str().unwrap().contains("id"),
        "{refused}"
    );
    let (status, duplicate, _) = post(&server, "durable", "k2", "{\"id\":4}\n").await;
    assert_eq!((status, duplicate), (StatusCode::OK, false));

    // Past the window the key is forgotten: the same rows are a new insert.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(status_of(&server, "k2").await["status"], "unknown");
    let (status, duplicate, _) = post(&server, "durable", "k2", "{\"id\":4}\n").await;
    assert_eq!((status, duplicate), (StatusCode::OK, false));

    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_insert_duplicates_total{table=\"t\"} 1"),
        "{metrics}"
    );
    assert_eq!(ids(server), [1, 2, 4, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_while_the_first_is_in_flight_waits_for_it() {
    let server = Server::start(CONFIG);
    let url = server.url("/v1/tables/t/rows?ack=committed&insert_id=slow");
    let send = |url: String| async move {
        let response = reqwest::Client::new()
            .post(url)
            .body("{\"id\":7}\n")
            .send()
            .await
            .unwrap();
        let duplicate = response.headers().get("x-sluice-duplicate").is_some();
        (response.status(), duplicate)
    };
    let first = tokio::spawn(send(url.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(status_of(&server, "slow").await["status"], "in_flight");
    let resend = send(url).await;
    assert_eq!(first.await.unwrap(), (StatusCode::OK, false));
    assert_eq!(
        resend,
        (StatusCode::OK, true),
        "answered once the first landed"
    );
    assert_eq!(status_of(&server, "slow").await["status"], "committed");
    assert_eq!(ids(server), [7]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_doors_take_insert_deduplication_token() {
    let server = Server::start(CONFIG);
    for _ in 0..2 {
        let response = reqwest::Client::new()
            .post(server.url("/"))
            .query(&[
                ("query", "INSERT INTO t FORMAT JSONEachRow"),
                ("insert_deduplication_token", "http-1"),
            ])
            .body("{\"id\":10}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let script = r#"
import sys
from clickhouse_driver import Client
client = Client("127.0.0.1", port=int(sys.argv[1]))
for _ in range(2):
    client.execute("INSERT INTO t (id) VALUES", [(20,)],
                   settings={"insert_deduplication_token": "tcp-1"})
"#;
    let port = server.native_addr.unwrap().port().to_string();
    let output = Command::new(python())
        .args(["-c", script, &port])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(ids(server), [10, 20]);
}

/// A config whose table `t` lands in `sink` (a `[sinks.db]` body), flushing at once.
fn store_config(sink: &str) -> String {
    format!(
        "[flush]\nmax_age = \"100ms\"\n\n[sinks.db]\n{sink}\n\n[tables.t]\nsink = \"db\"\n\
         columns = [\n  {{ name = \"id\", type = \"int64\", nullable = false }},\n  \
         {{ name = \"name\", type = \"string\" }},\n]\n"
    )
}

/// Two sluice processes, each with its own data directory, write one table of `sink`: a keyed
/// insert resent to the second after the first landed it is left out there, since the store
/// keeps the key with the rows. A key the store holds for other rows is not a resend: those
/// rows land too. Returns both servers, for the caller to stop and read the store.
async fn two_sluices_land_a_keyed_resend_once(sink: &str) -> (Server, Server) {
    let config = store_config(sink);
    let (first, second) = (Server::start(&config), Server::start(&config));
    let rows = "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n";
    let (status, duplicate, _) = post(&first, "committed", "shared-1", rows).await;
    assert_eq!((status, duplicate), (StatusCode::OK, false));
    // The second has never seen the key: it takes the insert, and its flush leaves it out.
    let (status, duplicate, _) = post(&second, "committed", "shared-1", rows).await;
    assert_eq!((status, duplicate), (StatusCode::OK, false));
    let (status, _, _) = post(&second, "committed", "shared-1", "{\"id\":3}\n").await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "the second knows it now"
    );
    // Other rows under a key the store holds are another producer's mistake, not a resend:
    // they land rather than be lost.
    let (status, _, _) = post(&second, "committed", "shared-2", "{\"id\":4}\n").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = post(&first, "committed", "shared-2", "{\"id\":5}\n").await;
    assert_eq!(status, StatusCode::OK, "the first never saw shared-2");
    // Every insert above was answered `committed`, so each flush is done: the second wrote
    // id 4 only, having left out the rows the first had landed.
    assert_eq!(rows_written(&second).await, 1);
    assert_eq!(rows_written(&first).await, 3);
    (first, second)
}

/// The rows `server` says it wrote into `t`.
async fn rows_written(server: &Server) -> u64 {
    let tables: Value = reqwest::get(server.url("/v1/tables"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tables = tables["tables"].as_array().unwrap();
    let t = tables.iter().find(|t| t["name"] == "t").unwrap();
    t["rows_written"].as_u64().unwrap()
}

fn stop(mut server: Server) {
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sluices_writing_one_sqlite_table_land_a_keyed_resend_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let sink = format!("type = \"sqlite\"\npath = {:?}", db.display().to_string());
    let (first, second) = two_sluices_land_a_keyed_resend_once(&sink).await;
    stop(first);
    stop(second);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut stmt = conn.prepare("SELECT id FROM t ORDER BY id").unwrap();
    let ids: Vec<i64> = stmt
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ids, [1, 2, 4, 5]);
    let keys: i64 = conn
        .query_row("SELECT count(*) FROM _sluice_insert_keys", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(keys, 2, "shared-1 once; shared-2 once, for id 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sluices_writing_one_postgres_table_land_a_keyed_resend_once() {
    let pg = sluice_lab::services::Postgres::start().unwrap();
    let sink = format!("type = \"postgres\"\nurl = {:?}", pg.url);
    let (first, second) = two_sluices_land_a_keyed_resend_once(&sink).await;
    stop(first);
    stop(second);
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let ids: Vec<i64> = client
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids, [1, 2, 4, 5]);
}

/// Posts `body` with `key` to the native API of the server at `addr`: status, duplicate header.
async fn post_to(
    addr: std::net::SocketAddr,
    ack: &str,
    key: &str,
    body: &str,
) -> (StatusCode, bool) {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tables/t/rows?ack={ack}"))
        .header("Idempotency-Key", key)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let duplicate = response.headers().get("x-sluice-duplicate").is_some();
    (response.status(), duplicate)
}

async fn status_at(addr: std::net::SocketAddr, key: &str) -> Value {
    reqwest::get(format!("http://{addr}/v1/tables/t/inserts/{key}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_their_status_survive_a_kill_and_a_restart() {
    use sluice_lab::process::ServerProcess;
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("sluice.toml"));
    // Rows stay buffered until shutdown: a kill finds them in the log only.
    std::fs::write(
        &config,
        "ack_timeout = \"2h\"\n\n[flush]\nmax_age = \"1h\"\n\n[tables.t]\ncolumns = [\n  \
         { name = \"id\", type = \"int64\", nullable = false },\n]\n",
    )
    .unwrap();
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_sluice"));
    let start = || ServerProcess::spawn(binary, &data, Some(&config)).unwrap();

    let mut server = start();
    let (status, _) = post_to(server.addr, "durable", "logged", "{\"id\":1}").await;
    assert_eq!(status, StatusCode::OK);
    server.kill().unwrap();
    // Replay took the key back from the log record: the rows are held, not yet landed.
    let mut server = start();
    let status = status_at(server.addr, "logged").await;
    assert_eq!(
        (&status["status"], &status["rows"]),
        (&"durable".into(), &1.into())
    );
    assert_eq!(
        post_to(server.addr, "durable", "logged", "{\"id\":1}").await,
        (StatusCode::OK, true)
    );
    let (status, _) = post_to(server.addr, "async", "buffered", "{\"id\":2}").await;
    assert_eq!(status, StatusCode::OK);
    // A clean stop lands everything; the log lets the records go, the journal keeps the keys.
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());

    let server = start();
    for key in ["logged", "buffered"] {
        let status = status_at(server.addr, key).await;
        assert_eq!(status["status"], "committed", "{key}: {status}");
        let flush = status["flush"].as_str().unwrap_or_default().to_owned();
        assert!(flush.starts_with("t/"), "{key}: {status}");
    }
    assert_eq!(
        post_to(server.addr, "committed", "buffered", "{\"id\":2}").await,
        (StatusCode::OK, true),
        "answered at once: its rows landed before the restart"
    );
    assert_eq!(status_at(server.addr, "never").await["status"], "unknown");
    drop(server);
    let mut ids: Vec<i64> = crate::common::read_landed(&data, "t")
        .into_iter()
        .map(|row| row[0].as_deref().unwrap().parse().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [1, 2], "each once");
}
