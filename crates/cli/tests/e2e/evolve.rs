//! `evolve = true`: events that gain new keys over time add columns to their table, once each,
//! while 16 producers send them at once, into the lake and into PostgreSQL. Every acknowledged
//! row lands once, rows sent before a key existed read it as null, and a value that does not
//! fit the new column is still refused with its row and column.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_lab::load::http_post;
use sluice_lab::process::ServerProcess;
use sluice_lab::services::Postgres;

use crate::common::{Server, python_json};

const PRODUCERS: usize = 16;
const INSERTS: usize = 30;
const ROWS: usize = 5;

/// Row `row` of insert `insert` of producer `producer`: from the 10th insert on it has
/// `region`, from the 15th `retries`, from the 20th `tags`.
fn event(producer: usize, insert: usize, row: usize) -> Value {
    let id = (producer * INSERTS + insert) * ROWS + row;
    let mut event = json!({"id": id, "service": format!("s{producer}")});
    if insert >= 10 {
        event["region"] = json!(format!("r{}", producer % 3));
    }
    if insert >= 15 {
        event["retries"] = json!(row);
    }
    if insert >= 20 {
        event["tags"] = json!(["a", format!("p{producer}")]);
    }
    event
}

/// The value each row must read back with: id, service, region, retries, tags.
fn expected(id: usize) -> Value {
    let (insert, row) = ((id / ROWS) % INSERTS, id % ROWS);
    let producer = id / ROWS / INSERTS;
    let event = event(producer, insert, row);
    json!([
        id,
        event["service"],
        event["region"],
        event["retries"],
        event["tags"]
    ])
}

/// Sends every producer's inserts at once, each waiting for `committed`, and checks that a
/// value of the wrong type for a new column is refused.
async fn send_events(server: &Server, path: &str) {
    send_events_of(server, path, 0..PRODUCERS).await;
}

/// [`send_events`] for the producers `range`.
async fn send_events_of(server: &Server, path: &str, range: std::ops::Range<usize>) {
    let mut producers = Vec::new();
    for producer in range {
        let addr = server.addr;
        let path = path.to_owned();
        producers.push(tokio::spawn(async move {
            for insert in 0..INSERTS {
                let body: String = (0..ROWS)
                    .map(|row| format!("{}\n", event(producer, insert, row)))
                    .collect();
                let (status, answer) = http_post(addr, &path, body).await.unwrap();
                assert_eq!(
                    status, 200,
                    "producer {producer}, insert {insert}: {answer}"
                );
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    let wrong = "{\"id\":999999,\"service\":\"x\",\"retries\":\"many\"}";
    let (status, answer) = http_post(server.addr, path, wrong).await.unwrap();
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("retries"), "{answer}");
}

/// Checks `rows` (id, service, region, retries, tags) against what was sent.
fn check(rows: &[Value]) {
    assert_eq!(rows.len(), PRODUCERS * INSERTS * ROWS);
    let mut seen = HashMap::new();
    for row in rows {
        let id = row[0].as_u64().unwrap() as usize;
        *seen.entry(id).or_insert(0) += 1;
        assert_eq!(*row, expected(id), "row {id}");
    }
    assert!(seen.values().all(|&n| n == 1), "a row landed twice");
}

/// Evolving tables flushed often, with `top` (top-level keys) and `sections` added.
fn config(top: &str, sections: &str) -> String {
    format!("evolve = true\n{top}\n[flush]\nmax_age = \"200ms\"\n\n{sections}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keys_become_columns_once_in_the_lake() {
    let mut server = Server::start(&config("", ""));
    send_events(&server, "/v1/tables/events/rows?ack=committed").await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    const READ: &str = r#"
import json, os, sys
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1])
data = table.to_pyarrow_table()
names = [f.name for f in data.schema]
rows = [[r["id"], r["service"], r["region"], r["retries"], r["tags"]] for r in data.to_pylist()]
adds = sum(1 for h in table.history() if h.get("operation") == "ADD COLUMN")
print(json.dumps({"names": names, "rows": rows, "adds": adds}), flush=True)
os._exit(0)
"#;
    let table = server.data_dir.join("events");
    let read = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    assert_eq!(
        read["names"],
        json!(["id", "service", "region", "retries", "tags"]),
        "{read}"
    );
    check(read["rows"].as_array().unwrap());
    // One schema commit per new key at most: never the same column twice.
    let adds = read["adds"].as_u64().unwrap();
    assert!((1..=3).contains(&adds), "{read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keys_become_columns_once_in_postgres() {
    let pg = Postgres::start().unwrap();
    let sink = format!("[sinks.pg]\ntype = \"postgres\"\nurl = {:?}\n", pg.url);
    let mut server = Server::start(&config("default_sink = \"pg\"\n", &sink));
    send_events(&server, "/v1/tables/events/rows?ack=committed").await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let columns: Vec<String> = client
        .query(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = 'events'::regclass \
             AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(columns, ["id", "service", "region", "retries", "tags"]);
    let rows: Vec<Value> = client
        .query(
            "SELECT json_build_array(id, service, region, retries, tags)::text FROM events",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(&r.get::<_, String>(0)).unwrap())
        .collect();
    check(&rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_rows_with_new_and_nested_columns_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (dir.path().join("sluice.toml"), dir.path().join("data"));
    // Nothing flushes before the kill: every row is only in the log.
    std::fs::write(
        &config,
        "evolve = true\nack_timeout = \"2h\"\n\n[flush]\nmax_age = \"1h\"\n",
    )
    .unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    let path = "/v1/tables/crashed/rows?ack=durable";
    let sent = [
        json!({"id": 1, "service": "a"}),
        json!({"id": 2, "service": "b", "tags": ["x", null], "http": {"status": 200}}),
        json!({"id": 3, "tags": [], "region": "eu"}),
    ];
    for row in &sent {
        let (status, answer) = http_post(server.addr, path, row.to_string()).await.unwrap();
        assert_eq!(status, 200, "{answer}");
    }
    server.kill().unwrap();

    // The restart replays the log into the columns the inserts added.
    let mut server = ServerProcess::spawn(binary, &data, Some(&config)).unwrap();
    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(60)).unwrap().success());
    const READ: &str = r#"
import json, os, sys
from deltalake import DeltaTable
data = DeltaTable(sys.argv[1]).to_pyarrow_table().sort_by("id")
print(json.dumps({"names": [f.name for f in data.schema], "rows": data.to_pylist()}), flush=True)
os._exit(0)
"#;
    let read = python_json(
        READ,
        &[&data.join("crashed").to_string_lossy()],
        &[],
        "the lake",
    );
    assert_eq!(
        read["names"],
        json!(["id", "service", "http", "tags", "region"]),
        "{read}"
    );
    assert_eq!(
        read["rows"],
        json!([
            {"id": 1, "service": "a", "http": null, "tags": null, "region": null},
            {"id": 2, "service": "b", "http": {"status": 200}, "tags": ["x", null], "region": null},
            {"id": 3, "service": null, "http": null, "tags": [], "region": "eu"},
        ]),
        "{read}"
    );
}

/// Two inserts into `[sinks.store]`, the second with a new key: the store gets the column.
async fn evolve_in_store(sink: &str) {
    let sink = format!("[sinks.store]\n{sink}");
    let mut server = Server::start(&config("default_sink = \"store\"\n", &sink));
    let path = "/v1/tables/grown/rows?ack=committed";
    for body in [
        r#"{"id":1,"service":"a"}"#,
        r#"{"id":2,"service":"b","region":"eu","tags":["x"]}"#,
    ] {
        let (status, answer) = http_post(server.addr, path, body).await.unwrap();
        assert_eq!(status, 200, "{answer}");
    }
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keys_become_columns_in_sqlite_and_clickhouse() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("grown.sqlite");
    evolve_in_store(&format!(
        "type = \"sqlite\"\npath = {:?}\n",
        db.display().to_string()
    ))
    .await;
    const READ: &str = r#"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute('SELECT id, service, region, tags FROM grown ORDER BY id').fetchall()
print(json.dumps([list(r) for r in rows]))
"#;
    let rows = python_json(READ, &[&db.to_string_lossy()], &[], "SQLite");
    assert_eq!(
        rows,
        json!([[1, "a", null, null], [2, "b", "eu", "[\"x\"]"]])
    );

    let ch = sluice_lab::services::ClickHouse::start().unwrap();
    evolve_in_store(&format!("type = \"clickhouse\"\nurl = {:?}\n", ch.url)).await;
    let text = ch
        .query("SELECT id, service, region, tags FROM grown ORDER BY id FORMAT TabSeparated")
        .await
        .unwrap();
    assert_eq!(text, "1\ta\t\\N\t[]\n2\tb\teu\t['x']\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sluice_processes_add_each_new_column_once_to_a_shared_lake() {
    let lake = tempfile::tempdir().unwrap();
    let table = "[tables.events]\ncolumns = [{name = \"id\", type = \"int64\", nullable = false}, \
                 {name = \"service\", type = \"string\"}]\n";
    let sections = format!(
        "[lake]\nroot = {:?}\n\n{table}",
        lake.path().display().to_string()
    );
    let config = config("", &sections);
    let (mut first, mut second) = (Server::start(&config), Server::start(&config));
    let path = "/v1/tables/events/rows?ack=committed";
    tokio::join!(
        send_events_of(&first, path, 0..PRODUCERS / 2),
        send_events_of(&second, path, PRODUCERS / 2..PRODUCERS),
    );
    for server in [&first, &second] {
        server.sigterm();
    }
    for server in [&mut first, &mut second] {
        assert!(server.wait(Duration::from_secs(30)).success());
    }
    const READ: &str = r#"
import json, os, sys
from deltalake import DeltaTable
data = DeltaTable(sys.argv[1]).to_pyarrow_table()
names = [f.name for f in data.schema]
rows = [[r["id"], r["service"], r["region"], r["retries"], r["tags"]] for r in data.to_pylist()]
print(json.dumps({"names": names, "rows": rows}), flush=True)
os._exit(0)
"#;
    let events = lake.path().join("events");
    let read = python_json(READ, &[&events.to_string_lossy()], &[], "the lake");
    assert_eq!(
        read["names"],
        json!(["id", "service", "region", "retries", "tags"]),
        "{read}"
    );
    check(read["rows"].as_array().unwrap());
}
