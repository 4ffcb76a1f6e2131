//! `list`, `struct` and `map` columns through both JSON doors into every store, read back by an
//! independent reader with exactly the values sent: nulls inside lists and structs, empty lists
//! and maps, decimals to the last digit. The lake is read by Python `deltalake`, SQLite by
//! Python's `sqlite3`, PostgreSQL and ClickHouse by their own text. Compaction merges the lake's
//! parts without changing a value, and a first insert's arrays and objects make nested columns.
//!
//! Rows 1-3 come through sluice's NDJSON API, rows 4-6 through the ClickHouse door's
//! `JSONEachRow`, where a timestamp given as a number is seconds and numbers may be quoted.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sluice_lab::load::http_post;
use sluice_lab::services::{ClickHouse, Postgres};

use crate::common::{Server, parts, python_json};

const COLUMNS: &str = "[{name = \"id\", type = \"int64\", nullable = false}, \
     {name = \"tags\", type = \"list<string>\"}, \
     {name = \"scores\", type = \"Array(Decimal(20, 4))\"}, \
     {name = \"keys\", type = \"list<uuid>\"}, \
     {name = \"attrs\", type = \"map<string, int64>\"}, \
     {name = \"record\", type = \"struct<code: int32, at: timestamp, labels: list<string>, doc: json>\"}, \
     {name = \"matrix\", type = \"list<list<int64>>\"}, \
     {name = \"events\", type = \"Array(Tuple(k String, v Float64))\"}]";

const ID: &str = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";

/// What goes in through the native API.
fn native_rows() -> String {
    [
        json!({"id": 1, "tags": ["a", null, "c"],
               "scores": ["1234567890123456.7891", 0.5, null],
               "keys": [ID.to_uppercase()],
               "attrs": {"http.status": 200, "retries": null},
               "record": {"code": 7, "at": "2026-11-29T12:00:00Z", "labels": [],
                          "doc": {"x": [1, 2]}},
               "matrix": [[1, 2], [], null, [3]],
               "events": [{"k": "a", "v": 1.5}, null, {"k": null}]}),
        json!({"id": 2, "tags": [], "attrs": {}, "record": {"code": null}, "matrix": [],
               "events": []}),
        json!({"id": 3, "tags": null, "record": null}),
    ]
    .iter()
    .map(|row| format!("{row}\n"))
    .collect()
}

/// What goes in through the ClickHouse door.
fn clickhouse_rows() -> String {
    [
        json!({"id": 4, "tags": ["x"], "scores": ["-0.0001"], "attrs": {"a": "7"},
               "record": {"code": "8", "at": 1795953600, "labels": ["l"], "doc": "s"},
               "matrix": [[-9223372036854775807_i64]]}),
        json!({"id": 5}),
        json!({"id": 6, "events": [{"k": "z", "v": -2}], "keys": [null]}),
    ]
    .iter()
    .map(|row| format!("{row}\n"))
    .collect()
}

/// Every row as the reader prints it: decimals as text with the column's scale, timestamps in
/// ISO form, maps as lists of key and value, json as the text sent.
fn expected() -> Value {
    let null_record = json!({"code": null, "at": null, "labels": null, "doc": null});
    json!([
        [1, ["a", null, "c"], ["1234567890123456.7891", "0.5000", null], [ID],
         [["http.status", 200], ["retries", null]],
         {"code": 7, "at": "2026-11-29T12:00:00+00:00", "labels": [], "doc": "{\"x\":[1,2]}"},
         [[1, 2], [], null, [3]],
         [{"k": "a", "v": 1.5}, null, {"k": null, "v": null}]],
        [2, [], null, null, [], null_record, [], []],
        [3, null, null, null, null, null, null, null],
        [4, ["x"], ["-0.0001"], null, [["a", 7]],
         {"code": 8, "at": "2026-11-29T12:00:00+00:00", "labels": ["l"], "doc": "\"s\""},
         [[-9223372036854775807_i64]], null],
        [5, null, null, null, null, null, null, null],
        [6, null, null, [null], null, null, null, [{"k": "z", "v": -2.0}]],
    ])
}

/// Reads a lake table's rows, sorted by `id`, with every value in plain JSON, and its Arrow
/// types.
const READ: &str = r#"
import datetime, decimal, json, os, sys
from deltalake import DeltaTable
def plain(v):
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v
table = DeltaTable(sys.argv[1])
data = table.to_pyarrow_table().sort_by("id")
rows = [[plain(r[f.name]) for f in data.schema] for r in data.to_pylist()]
types = {f.name: str(f.type) for f in data.schema}
names = [f.name for f in data.schema]
files = len(table.file_uris())
print(json.dumps({"rows": rows, "names": names, "types": types, "files": files}), flush=True)
os._exit(0)
"#;

async fn send_through_both_doors(server: &Server) {
    let native = "/v1/tables/nested/rows?ack=committed";
    let (status, answer) = http_post(server.addr, native, native_rows()).await.unwrap();
    assert_eq!(status, 200, "{answer}");
    let door = "/?query=INSERT%20INTO%20nested%20FORMAT%20JSONEachRow&sluice_ack=committed";
    let (status, answer) = http_post(server.addr, door, clickhouse_rows())
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_land_in_the_lake_as_sent_and_compact_unchanged() {
    let config = format!("[flush]\nmax_age = \"100ms\"\n\n[tables.nested]\ncolumns = {COLUMNS}\n");
    let mut server = Server::start(&config);
    send_through_both_doors(&server).await;
    // A value that does not fit is refused with its path, at either door, and nothing lands.
    for (path, body) in [
        (
            "/v1/tables/nested/rows",
            r#"{"id":9,"record":{"code":1.5}}"#,
        ),
        (
            "/?query=INSERT%20INTO%20nested%20FORMAT%20JSONEachRow",
            r#"{"id":9,"matrix":[[1],["x"]]}"#,
        ),
    ] {
        let (status, answer) = http_post(server.addr, path, body).await.unwrap();
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer.contains("record.code") || answer.contains("matrix[1][0]"),
            "{answer}"
        );
    }
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());

    let table = server.data_dir.join("nested");
    let read = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    assert_eq!(read["rows"], expected(), "{read}");
    assert_eq!(read["types"]["scores"], "list<element: decimal128(20, 4)>");
    assert_eq!(read["types"]["attrs"], "map<string, int64>", "{read}");
    assert!(parts(&server.data_dir, "nested").len() >= 2, "{read}");

    let config_path = server.data_dir.with_file_name("nested.toml");
    std::fs::write(&config_path, &config).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["compact", "--eager", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&server.data_dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let compacted = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    assert_eq!(compacted["files"], 1, "{compacted}");
    assert_eq!(compacted["rows"], expected(), "{compacted}");

    // The merged file's statistics: a struct's fields nested as Delta keeps them, nothing for
    // lists and maps.
    let stats = last_added_stats(&table);
    assert_eq!(stats["minValues"]["record"]["code"], 7, "{stats}");
    assert_eq!(stats["maxValues"]["record"]["code"], 8, "{stats}");
    assert_eq!(stats["nullCount"]["record"]["code"], 4, "{stats}");
    assert_eq!(stats["minValues"]["id"], 1, "{stats}");
    for column in ["tags", "attrs", "matrix"] {
        assert!(stats["nullCount"].get(column).is_none(), "{stats}");
    }
}

/// The statistics of the file the table's newest commit added.
fn last_added_stats(table: &std::path::Path) -> Value {
    let mut commits: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    commits.sort();
    let newest = std::fs::read_to_string(commits.last().unwrap()).unwrap();
    let add = newest
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find_map(|action| action.get("add").cloned())
        .expect("the newest commit adds a file");
    serde_json::from_str(add["stats"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_insert_of_arrays_and_objects_makes_nested_columns() {
    let mut server = Server::start("[flush]\nmax_age = \"100ms\"\n");
    let first = "{\"id\":1,\"tags\":[\"a\"],\"http\":{\"status\":200,\"path\":\"/\"},\
                 \"attrs\":{\"k\":1}}\n\
                 {\"id\":2,\"tags\":[],\"http\":{\"status\":404,\"path\":null},\
                 \"attrs\":{\"other\":\"x\"}}\n";
    let path = "/v1/tables/inferred/rows?ack=committed";
    let (status, answer) = http_post(server.addr, path, first).await.unwrap();
    assert_eq!(status, 200, "{answer}");
    // The struct's fields are fixed now: a new one is refused, naming it.
    let (status, answer) = http_post(server.addr, path, "{\"id\":3,\"http\":{\"code\":1}}")
        .await
        .unwrap();
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("no field 'code'"), "{answer}");
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let table = server.data_dir.join("inferred");
    let read = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    assert_eq!(read["types"]["tags"], "list<element: string>", "{read}");
    assert_eq!(
        read["types"]["http"], "struct<path: string, status: int64>",
        "{read}"
    );
    assert_eq!(read["types"]["attrs"], "string", "{read}");
    let names = read["names"].as_array().unwrap();
    let by_name: Vec<Value> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let pairs = names.iter().zip(row.as_array().unwrap());
            Value::Object(
                pairs
                    .map(|(n, v)| (n.as_str().unwrap().to_owned(), v.clone()))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        Value::Array(by_name),
        json!([
            {"id": 1, "tags": ["a"], "http": {"path": "/", "status": 200}, "attrs": "{\"k\":1}"},
            {"id": 2, "tags": [], "http": {"path": null, "status": 404},
             "attrs": "{\"other\":\"x\"}"}
        ]),
        "{read}"
    );
}

/// Starts sluice with the nested table in `[sinks.store]`, sends both doors' rows, and stops it.
async fn land_in_store(sink: &str) -> Server {
    let config = format!(
        "[flush]\nmax_age = \"100ms\"\n\n[sinks.store]\n{sink}\n\
         [tables.nested]\nsink = \"store\"\ncolumns = {COLUMNS}\n"
    );
    let mut server = Server::start(&config);
    send_through_both_doors(&server).await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    server
}

/// The columns after `id`, as each store's own text gives them, row by row.
const NAMES: [&str; 7] = [
    "tags", "scores", "keys", "attrs", "record", "matrix", "events",
];

/// Compares each row's store text with `expected`, rows in id order, `None` for SQL NULL.
fn check_texts(found: &[Vec<Option<String>>], expected: &[[Option<&str>; 7]]) {
    assert_eq!(found.len(), expected.len(), "{found:?}");
    for (id, (row, want)) in found.iter().zip(expected).enumerate() {
        for (column, (got, want)) in NAMES.iter().zip(row.iter().zip(want)) {
            assert_eq!(got.as_deref(), *want, "row {}, column {column}", id + 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_land_in_sqlite_as_json_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested.sqlite");
    land_in_store(&format!(
        "type = \"sqlite\"\npath = {:?}\n",
        db.display().to_string()
    ))
    .await;
    const READ: &str = r#"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
names = ", ".join('"%s"' % n for n in sys.argv[2].split(","))
rows = db.execute("SELECT " + names + " FROM nested ORDER BY id").fetchall()
print(json.dumps([list(r) for r in rows]))
"#;
    let rows = python_json(
        READ,
        &[&db.to_string_lossy(), &NAMES.join(",")],
        &[],
        "SQLite",
    );
    let found: Vec<Vec<Option<String>>> = serde_json::from_value(rows).unwrap();
    let at = r#""at":"2026-11-29 12:00:00.000000""#;
    let record_1 = format!(r#"{{"code":7,{at},"labels":[],"doc":{{"x":[1,2]}}}}"#);
    let record_4 = format!(r#"{{"code":8,{at},"labels":["l"],"doc":"s"}}"#);
    let empty_record = r#"{"code":null,"at":null,"labels":null,"doc":null}"#;
    let keys = format!(r#"["{ID}"]"#);
    let events_1 = r#"[{"k":"a","v":1.5},null,{"k":null,"v":null}]"#;
    check_texts(
        &found,
        &[
            [
                Some(r#"["a",null,"c"]"#),
                Some("[1234567890123456.7891,0.5000,null]"),
                Some(&keys),
                Some(r#"{"http.status":200,"retries":null}"#),
                Some(&record_1),
                Some("[[1,2],[],null,[3]]"),
                Some(events_1),
            ],
            [
                Some("[]"),
                None,
                None,
                Some("{}"),
                Some(empty_record),
                Some("[]"),
                Some("[]"),
            ],
            [None; 7],
            [
                Some(r#"["x"]"#),
                Some("[-0.0001]"),
                None,
                Some(r#"{"a":7}"#),
                Some(&record_4),
                Some("[[-9223372036854775807]]"),
                None,
            ],
            [None; 7],
            [
                None,
                None,
                Some("[null]"),
                None,
                None,
                None,
                Some(r#"[{"k":"z","v":-2.0}]"#),
            ],
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_land_in_postgres_as_arrays_and_jsonb() {
    let pg = Postgres::start().unwrap();
    land_in_store(&format!("type = \"postgres\"\nurl = {:?}\n", pg.url)).await;
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let texts: Vec<String> = NAMES.iter().map(|n| format!("{n}::text")).collect();
    let sql = format!("SELECT {} FROM nested ORDER BY id", texts.join(", "));
    let found: Vec<Vec<Option<String>>> = client
        .query(&sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (0..NAMES.len()).map(|i| r.get(i)).collect())
        .collect();
    // PostgreSQL's own text: arrays of the element's type, jsonb with its own key order.
    let at = r#""at": "2026-11-29 12:00:00.000000""#;
    let record_1 = format!(r#"{{{at}, "doc": {{"x": [1, 2]}}, "code": 7, "labels": []}}"#);
    let record_4 = format!(r#"{{{at}, "doc": "s", "code": 8, "labels": ["l"]}}"#);
    let empty_record = r#"{"at": null, "doc": null, "code": null, "labels": null}"#;
    let keys = format!("{{{ID}}}");
    let events_1 = r#"[{"k": "a", "v": 1.5}, null, {"k": null, "v": null}]"#;
    check_texts(
        &found,
        &[
            [
                Some("{a,NULL,c}"),
                Some("{1234567890123456.7891,0.5000,NULL}"),
                Some(&keys),
                Some(r#"{"retries": null, "http.status": 200}"#),
                Some(&record_1),
                Some("[[1, 2], [], null, [3]]"),
                Some(events_1),
            ],
            [
                Some("{}"),
                None,
                None,
                Some("{}"),
                Some(empty_record),
                Some("[]"),
                Some("[]"),
            ],
            [None; 7],
            [
                Some("{x}"),
                Some("{-0.0001}"),
                None,
                Some(r#"{"a": 7}"#),
                Some(&record_4),
                Some("[[-9223372036854775807]]"),
                None,
            ],
            [None; 7],
            [
                None,
                None,
                Some("{NULL}"),
                None,
                None,
                None,
                Some(r#"[{"k": "z", "v": -2.0}]"#),
            ],
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_columns_land_in_clickhouse_as_arrays_tuples_and_json_text() {
    let ch = ClickHouse::start().unwrap();
    land_in_store(&format!("type = \"clickhouse\"\nurl = {:?}\n", ch.url)).await;
    let sql = format!(
        "SELECT {} FROM nested ORDER BY id FORMAT TabSeparated",
        NAMES.join(", ")
    );
    let text = ch.query(&sql).await.unwrap();
    let found: Vec<Vec<Option<String>>> = text
        .lines()
        .map(|line| {
            line.split('\t')
                .map(|c| (c != "\\N").then(|| c.to_owned()))
                .collect()
        })
        .collect();
    let types = ch
        .query("SELECT name, type FROM system.columns WHERE table = 'nested' FORMAT TabSeparated")
        .await
        .unwrap();
    // 18.16 has no Map and cannot read a tuple inside an array from JSONEachRow: those are
    // JSON text. It has no nullable array or tuple: a null list is empty, a null struct a
    // tuple of nulls.
    for column in [
        "tags\tArray(Nullable(String))",
        "scores\tArray(Nullable(Decimal(20, 4)))",
        "attrs\tNullable(String)",
        "matrix\tArray(Array(Nullable(Int64)))",
        "events\tNullable(String)",
    ] {
        assert!(types.contains(column), "{column} in {types}");
    }
    let keys = format!("['{ID}']");
    let null_record = "(NULL,NULL,[],NULL)";
    check_texts(
        &found,
        &[
            [
                Some("['a',NULL,'c']"),
                Some("[1234567890123456.7891,0.5000,NULL]"),
                Some(&keys),
                Some(r#"{"http.status":200,"retries":null}"#),
                Some(r#"(7,'2026-11-29 12:00:00',[],'{"x":[1,2]}')"#),
                Some("[[1,2],[],[],[3]]"),
                Some(r#"[{"k":"a","v":1.5},null,{"k":null,"v":null}]"#),
            ],
            [
                Some("[]"),
                Some("[]"),
                Some("[]"),
                Some("{}"),
                Some(null_record),
                Some("[]"),
                Some("[]"),
            ],
            [
                Some("[]"),
                Some("[]"),
                Some("[]"),
                None,
                Some(null_record),
                Some("[]"),
                None,
            ],
            [
                Some("['x']"),
                Some("[-0.0001]"),
                Some("[]"),
                Some(r#"{"a":7}"#),
                Some(r#"(8,'2026-11-29 12:00:00',['l'],'"s"')"#),
                Some("[[-9223372036854775807]]"),
                None,
            ],
            [
                Some("[]"),
                Some("[]"),
                Some("[]"),
                None,
                Some(null_record),
                Some("[]"),
                None,
            ],
            [
                Some("[]"),
                Some("[]"),
                Some("[NULL]"),
                None,
                Some(null_record),
                Some("[]"),
                Some(r#"[{"k":"z","v":-2.0}]"#),
            ],
        ],
    );
}
