//! ClickHouse's official clients, installed from their registries at pinned versions by
//! `scripts/services/clients.sh`, used as their READMEs show with only the host and port
//! changed; and the reads every client sends when it connects, answered as ClickHouse does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;

use crate::common::{Server, python, stop_and_read};

const CONFIG: &str = r#"
[flush]
max_age = "100ms"

[tables.t]
columns = [
  { name = "id", type = "Int64", nullable = false },
  { name = "name", type = "String" },
]
"#;

/// Where `scripts/services/clients.sh` installed `@clickhouse/client`.
fn js_modules() -> PathBuf {
    let tools = std::env::var_os("SLUICE_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools"));
    let modules = tools.join("clickhouse-js/node_modules");
    assert!(
        modules.join("@clickhouse/client").exists(),
        "no @clickhouse/client in {}: run scripts/services/install.sh (scripts/test.sh does)",
        modules.display()
    );
    modules
}

/// Runs `program` with `args`, fails the test with its output if it fails, returns its stdout.
fn run(mut command: Command, what: &str) -> String {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A row of table `t`: its id and name.
type Row = (i64, Option<String>);

/// Stops the server and returns every row of table `t` in the lake, sorted.
fn landed(server: Server) -> Vec<Row> {
    stop_and_read(server, "t")
        .into_iter()
        .map(|cells| {
            let id = cells[0].as_deref().unwrap_or_default().parse().unwrap();
            (id, cells[1].clone())
        })
        .collect()
}

fn row(id: i64, name: Option<&str>) -> Row {
    (id, name.map(str::to_owned))
}

async fn post(server: &Server, query: &str, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url(&format!("/?{query}")))
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reads_clients_send_on_connect_are_answered_as_clickhouse_does() {
    let server = Server::start(CONFIG);

    let response = post(&server, "query_id=q-1", "SELECT version(), timezone()").await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(headers["x-clickhouse-query-id"], "q-1");
    assert_eq!(headers["x-clickhouse-timezone"], "UTC");
    assert_eq!(headers["x-clickhouse-format"], "TabSeparated");
    assert_eq!(headers["x-clickhouse-server-display-name"], "sluice");
    assert_eq!(response.text().await.unwrap(), "25.8.1.1\tUTC\n");

    // GET runs reads; FORMAT in the query, or default_format, picks the output.
    let json: serde_json::Value = reqwest::get(server.url("/?query=SELECT%201%20FORMAT%20JSON"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(json["meta"][0]["type"], "UInt8");
    assert_eq!(json["data"][0]["1"], 1);
    let count = post(
        &server,
        "default_format=JSONEachRow",
        "SELECT count() FROM system.databases WHERE name = 'default'",
    )
    .await;
    assert_eq!(count.text().await.unwrap(), "{\"count()\":\"1\"}\n");
    let database = post(&server, "", "SELECT currentDatabase() FORMAT JSONCompact").await;
    let database: serde_json::Value = database.json().await.unwrap();
    assert_eq!(database["data"][0][0], "default");

    // DESCRIBE from the table's schema, in ClickHouse's types; the 7 columns clients expect.
    let describe = post(
        &server,
        "default_format=TSVWithNamesAndTypes",
        "DESCRIBE TABLE `t`",
    )
    .await;
    assert_eq!(describe.status(), StatusCode::OK);
    let text = describe.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "name\ttype\tdefault_type\tdefault_expression\tcomment\tcodec_expression\tttl_expression"
    );
    assert_eq!(lines[2], "id\tInt64\t\t\t\t\t");
    assert_eq!(lines[3], "name\tNullable(String)\tDEFAULT\tNULL\t\t\t");
    let unknown = post(&server, "", "DESCRIBE TABLE nowhere").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(unknown.headers()["x-clickhouse-exception-code"], "60");
    assert!(
        unknown
            .text()
            .await
            .unwrap()
            .contains("Table default.nowhere does not exist")
    );
    for (table, exists) in [("t", "1\n"), ("nowhere", "0\n")] {
        let answer = post(&server, "", &format!("EXISTS TABLE {table}")).await;
        assert_eq!(answer.text().await.unwrap(), exists);
    }

    // Anything else is refused, saying what sluice answers.
    let read = post(&server, "", "SELECT * FROM t").await;
    assert_eq!(read.status(), StatusCode::BAD_REQUEST);
    assert_eq!(read.headers()["x-clickhouse-exception-code"], "62");
    assert!(
        read.text()
            .await
            .unwrap()
            .contains("sluice takes INSERT statements")
    );
    let insert_over_get = reqwest::get(
        server.url("/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow%20%7B%22id%22%3A1%7D"),
    )
    .await
    .unwrap();
    assert_eq!(insert_over_get.status(), StatusCode::BAD_REQUEST);
    assert!(insert_over_get.text().await.unwrap().contains("POST"));
    // An empty `query` parameter leaves the statement to the body, as ClickHouse reads it.
    let empty_query = post(
        &server,
        "query=",
        "INSERT INTO t FORMAT JSONEachRow {\"id\":1}",
    )
    .await;
    assert_eq!(empty_query.status(), StatusCode::OK);
    server
        .wait_rows_written("t", 1, Duration::from_secs(10))
        .await;
    assert_eq!(landed(server), [row(1, None)]);
}

/// clickhouse-connect as its README shows: `get_client`, `command`, `raw_insert`.
const PYTHON_CLIENT: &str = r#"
import json, sys
import clickhouse_connect

client = clickhouse_connect.get_client(host="127.0.0.1", port=int(sys.argv[1]))
out = {"version": client.server_version, "select": client.command("SELECT 1")}
client.command('INSERT INTO t FORMAT JSONEachRow {"id": 1, "name": "command"}')
summary = client.raw_insert(
    "t", ["id", "name"], insert_block='{"id": 2, "name": "raw"}\n{"id": 3}\n', fmt="JSONEachRow"
)
out["written_rows"] = summary.written_rows
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_connect_connects_and_inserts_unchanged() {
    let server = Server::start(CONFIG);
    let mut command = Command::new(python());
    command
        .args(["-c", PYTHON_CLIENT])
        .arg(server.addr.port().to_string());
    let out: serde_json::Value = serde_json::from_str(&run(command, "clickhouse-connect")).unwrap();
    assert_eq!(out["version"], "25.8.1.1");
    assert_eq!(out["select"], 1);
    assert_eq!(out["written_rows"], 2);
    server
        .wait_rows_written("t", 3, Duration::from_secs(10))
        .await;
    assert_eq!(
        landed(server),
        [row(1, Some("command")), row(2, Some("raw")), row(3, None)]
    );
}

/// clickhouse-connect's `insert()` and `insert_df()`, which send Native blocks: LZ4-framed by
/// default, plain with `compress=False`.
const PYTHON_NATIVE_CLIENT: &str = r#"
import json, sys
import clickhouse_connect
import pandas as pd

port = int(sys.argv[1])
client = clickhouse_connect.get_client(host="127.0.0.1", port=port)
out = {}
out["insert"] = client.insert("t", [[20, "native"], [21, None]], column_names=["id", "name"]).written_rows
frame = pd.DataFrame({"id": [22, 23, 24], "name": ["frame", None, "é"]})
out["insert_df"] = client.insert_df("t", frame).written_rows
plain = clickhouse_connect.get_client(host="127.0.0.1", port=port, compress=False)
out["plain"] = plain.insert("t", [[25, "plain"]]).written_rows
try:
    client.insert("t", [[26, "x"]], column_names=["id", "nope"])
except Exception as e:
    out["unknown_column"] = str(e)
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_connect_inserts_native_blocks_and_data_frames() {
    let server = Server::start(CONFIG);
    let mut command = Command::new(python());
    command
        .args(["-c", PYTHON_NATIVE_CLIENT])
        .arg(server.addr.port().to_string());
    let out: serde_json::Value = serde_json::from_str(&run(command, "clickhouse-connect")).unwrap();
    assert_eq!(
        (&out["insert"], &out["insert_df"], &out["plain"]),
        (&2.into(), &3.into(), &1.into()),
        "{out}"
    );
    let refused = out["unknown_column"].as_str().unwrap_or_default();
    assert!(refused.contains("nope"), "{out}");
    server
        .wait_rows_written("t", 6, Duration::from_secs(10))
        .await;
    assert_eq!(
        landed(server),
        [
            row(20, Some("native")),
            row(21, None),
            row(22, Some("frame")),
            row(23, None),
            row(24, Some("é")),
            row(25, Some("plain")),
        ]
    );
}

/// @clickhouse/client as its README shows: `ping`, `insert` with its default format
/// (`JSONCompactEachRow`), with `format: 'JSONEachRow'`, gzipped, and `query(...).json()`.
const JS_CLIENT: &str = r#"
const { createClient } = require('@clickhouse/client');
(async () => {
  const client = createClient({ url: process.argv[1] });
  const ping = await client.ping();
  if (!ping.success) throw ping.error;
  await client.insert({
    table: 't',
    values: [{ id: 10, name: 'js' }, { id: 11, name: null }],
    format: 'JSONEachRow',
  });
  await client.insert({ table: 't', values: [[12, 'compact'], [13, null]] });
  await client.insert({ table: 't', values: [['name-first', 14]], columns: ['name', 'id'] });
  const gzipped = createClient({ url: process.argv[1], compression: { request: true } });
  await gzipped.insert({ table: 't', values: [[15, 'gzip']] });
  await gzipped.close();
  const result = await client.query({ query: 'SELECT version()', format: 'JSON' });
  const json = await result.json();
  console.log(JSON.stringify({ version: json.data[0]['version()'] }));
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_js_pings_and_inserts_unchanged() {
    let server = Server::start(CONFIG);
    let mut command = Command::new("node");
    command
        .env("NODE_PATH", js_modules())
        .args(["-e", JS_CLIENT])
        .arg(server.url(""));
    let out: serde_json::Value = serde_json::from_str(&run(command, "@clickhouse/client")).unwrap();
    assert_eq!(out["version"], "25.8.1.1");
    server
        .wait_rows_written("t", 6, Duration::from_secs(10))
        .await;
    assert_eq!(
        landed(server),
        [
            row(10, Some("js")),
            row(11, None),
            row(12, Some("compact")),
            row(13, None),
            row(14, Some("name-first")),
            row(15, Some("gzip")),
        ]
    );
}

#[derive(clickhouse::Row, serde::Serialize)]
struct Event {
    id: i64,
    name: Option<String>,
}

/// The Rust `clickhouse` crate as its README shows, with its defaults: the table's columns
/// checked with `DESCRIBE TABLE` first, rows in `RowBinaryWithNamesAndTypes`, LZ4-compressed in
/// ClickHouse's checksummed blocks (`decompress=1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_inserts_and_its_inserter_commits_unchanged() {
    let server = Server::start(CONFIG);
    let client = clickhouse::Client::default().with_url(server.url(""));
    let mut insert = client.insert::<Event>("t").await.unwrap();
    for id in 20..25 {
        let name = (id % 2 == 0).then(|| format!("rust-{id}"));
        insert.write(&Event { id, name }).await.unwrap();
    }
    insert.end().await.unwrap();

    let mut inserter = client
        .inserter::<Event>("t")
        .with_max_rows(1000)
        .with_period(Some(Duration::from_secs(15)));
    // Enough rows that the body spans several compressed blocks.
    for id in 100..20_100 {
        let name = Some(format!("inserted by the inserter, row {id}"));
        inserter.write(&Event { id, name }).await.unwrap();
        if id % 5_000 == 0 {
            inserter.commit().await.unwrap();
        }
    }
    inserter.end().await.unwrap();

    // A table sluice does not know: the crate gets ClickHouse's answer.
    let refused = async {
        let mut insert = client.insert::<Event>("nowhere").await?;
        insert.write(&Event { id: 1, name: None }).await?;
        insert.end().await
    };
    let error = refused.await.unwrap_err().to_string();
    assert!(error.contains("does not exist"), "{error}");
    server
        .wait_rows_written("t", 20_005, Duration::from_secs(30))
        .await;
    let expected: Vec<Row> = (20..25)
        .map(|id| (id, (id % 2 == 0).then(|| format!("rust-{id}"))))
        .chain((100..20_100).map(|id| (id, Some(format!("inserted by the inserter, row {id}")))))
        .collect();
    assert_eq!(landed(server), expected);
}
