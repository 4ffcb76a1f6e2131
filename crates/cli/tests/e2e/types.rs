//! `decimal`, `uuid` and `json` columns through both doors into every store, read back by an
//! independent reader with exactly the values sent: the lake with Python `deltalake`, SQLite with
//! Python's `sqlite3`, PostgreSQL by its own text output, ClickHouse by its own.
//!
//! Rows 1-3 come through sluice's NDJSON API, rows 4-6 through the ClickHouse door's
//! `JSONEachRow`: decimals as numbers, in quotes and in exponent form, at 38 digits, negative
//! and zero; UUIDs in four spellings; json objects, arrays, a string, a number, empty ones and
//! nulls.

use std::time::Duration;

use serde_json::{Value, json};
use sluice_lab::load::http_post;
use sluice_lab::services::{ClickHouse, Postgres};

use crate::common::{Server, python, python_json};

const COLUMNS: &str = "[{name = \"id\", type = \"int64\", nullable = false}, \
     {name = \"amount\", type = \"decimal(38, 9)\"}, {name = \"price\", type = \"Decimal(10, 2)\"}, \
     {name = \"user\", type = \"uuid\"}, {name = \"attrs\", type = \"json\"}]";

const ID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

/// What goes in through the native API.
fn native_rows() -> String {
    format!(
        "{{\"id\":1,\"amount\":12.5,\"price\":\"19.99\",\"user\":\"{}\",\
         \"attrs\":{{\"http\": {{\"status\": 200}}, \"tags\": [\"a\", null]}}}}\n\
         {{\"id\":2,\"amount\":\"-{}.{}\",\"price\":-0.5,\"user\":\"{{{ID}}}\",\"attrs\":[]}}\n\
         {{\"id\":3,\"amount\":0,\"price\":null,\"user\":null,\"attrs\":\"text\"}}\n",
        ID.to_uppercase(),
        "9".repeat(29),
        "9".repeat(9),
    )
}

/// What goes in through the ClickHouse door.
fn clickhouse_rows() -> String {
    format!(
        "{{\"id\":4,\"amount\":null,\"attrs\":null}}\n\
         {{\"id\":5,\"amount\":1.5e2,\"price\":99999999.99,\"user\":\"{}\",\"attrs\":{{}}}}\n\
         {{\"id\":6,\"amount\":\"0.000000001\",\"user\":\"urn:uuid:{ID}\",\"attrs\":3.25}}\n",
        ID.replace('-', "")
    )
}

/// A row as it must read back: id, amount and price without trailing zeros, user, attrs.
type Row = (
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<Value>,
);

/// Every row as it must read back.
fn expected() -> Vec<Row> {
    let s = |text: &str| Some(text.to_owned());
    vec![
        (
            1,
            s("12.5"),
            s("19.99"),
            s(ID),
            Some(json!({"http": {"status": 200}, "tags": ["a", null]})),
        ),
        (
            2,
            Some(format!("-{}.{}", "9".repeat(29), "9".repeat(9))),
            s("-0.5"),
            s(ID),
            Some(json!([])),
        ),
        (3, s("0"), None, None, Some(json!("text"))),
        (4, None, None, None, None),
        (5, s("150"), s("99999999.99"), s(ID), Some(json!({}))),
        (6, s("0.000000001"), None, s(ID), Some(json!(3.25))),
    ]
}

/// The json texts as sent, which every store but PostgreSQL's `jsonb` keeps to the byte.
const SENT_JSON: [(i64, &str); 5] = [
    (1, "{\"http\": {\"status\": 200}, \"tags\": [\"a\", null]}"),
    (2, "[]"),
    (3, "\"text\""),
    (5, "{}"),
    (6, "3.25"),
];

/// A decimal's text without trailing zeros after the point, and without the point when nothing
/// follows it: `12.500` -> `12.5`, `150.000` -> `150`, `-0.0` -> `0`.
fn plain(text: &str) -> String {
    let text = text.trim();
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    };
    if text.trim_start_matches('-').chars().all(|c| c == '0') {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// Starts sluice with `sink` (a `[sinks.store]` table, or nothing for the lake), sends both
/// halves, checks that a decimal that does not fit is refused, and stops it.
async fn send_through_both_doors(sink: &str) -> Server {
    let table_sink = if sink.is_empty() {
        ""
    } else {
        "sink = \"store\"\n"
    };
    let config = format!(
        "[flush]\nmax_age = \"100ms\"\n\n{sink}\n[tables.typed]\n{table_sink}columns = {COLUMNS}\n"
    );
    let mut server = Server::start(&config);
    let native = "/v1/tables/typed/rows?ack=committed";
    let (status, answer) = http_post(server.addr, native, native_rows()).await.unwrap();
    assert_eq!(status, 200, "{answer}");
    let door = "/?query=INSERT%20INTO%20typed%20FORMAT%20JSONEachRow&sluice_ack=committed";
    let (status, answer) = http_post(server.addr, door, clickhouse_rows())
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = http_post(server.addr, native, "{\"id\":9,\"price\":1.239}")
        .await
        .unwrap();
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("price") && answer.contains("3 digits after the point"),
        "{answer}"
    );
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    server
}

/// Checks `rows` (id, amount, price, user, attrs as text) against [`expected`]; `exact_json`:
/// the json texts must be the ones sent, byte for byte.
fn check(rows: &Value, exact_json: bool) {
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), expected().len(), "{rows:?}");
    for (row, (id, amount, price, user, attrs)) in rows.iter().zip(expected()) {
        let text = |i: usize| row[i].as_str().map(str::to_owned);
        assert_eq!(row[0].as_i64(), Some(id), "{row}");
        assert_eq!(text(1).map(|t| plain(&t)), amount, "amount of {row}");
        assert_eq!(text(2).map(|t| plain(&t)), price, "price of {row}");
        assert_eq!(text(3), user, "user of {row}");
        let parsed = text(4).map(|t| serde_json::from_str::<Value>(&t).unwrap());
        assert_eq!(parsed, attrs, "attrs of {row}");
        if exact_json && let Some((_, sent)) = SENT_JSON.iter().find(|(i, _)| *i == id) {
            assert_eq!(text(4).as_deref(), Some(*sent), "attrs of {row}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_types_land_in_the_lake_as_sent() {
    let server = send_through_both_doors("").await;
    const READ: &str = r#"
import json, os, sys
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1]).to_pyarrow_table().sort_by("id")
text = lambda v: None if v is None else format(v, "f")
rows = [[r["id"], text(r["amount"]), text(r["price"]), r["user"], r["attrs"]]
        for r in table.to_pylist()]
types = {f.name: str(f.type) for f in table.schema}
print(json.dumps({"rows": rows, "types": types}), flush=True)
os._exit(0)
"#;
    let table = server.data_dir.join("typed");
    let read = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    check(&read["rows"], true);
    assert_eq!(read["types"]["amount"], "decimal128(38, 9)", "{read}");
    assert_eq!(read["types"]["price"], "decimal128(10, 2)", "{read}");
    assert_eq!(read["types"]["user"], "string", "{read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_types_land_in_sqlite_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typed.sqlite");
    let sink = format!(
        "[sinks.store]\ntype = \"sqlite\"\npath = {:?}\n",
        db.display().to_string()
    );
    send_through_both_doors(&sink).await;
    const READ: &str = r#"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute('SELECT id, amount, price, "user", attrs FROM typed ORDER BY id').fetchall()
print(json.dumps([[r[0]] + [None if v is None else str(v) for v in r[1:]] for r in rows]))
"#;
    let rows = python_json(READ, &[&db.to_string_lossy()], &[], "SQLite");
    check(&rows, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_types_land_in_postgres_as_numeric_uuid_and_jsonb() {
    let pg = Postgres::start().unwrap();
    send_through_both_doors(&format!(
        "[sinks.store]\ntype = \"postgres\"\nurl = {:?}\n",
        pg.url
    ))
    .await;
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let types: Vec<String> = client
        .query(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'typed'::regclass AND attnum > 0 ORDER BY attnum",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        types,
        ["bigint", "numeric(38,9)", "numeric(10,2)", "uuid", "jsonb"]
    );
    // PostgreSQL's own text for each value.
    let rows: Vec<Value> = client
        .query(
            "SELECT id, amount::text, price::text, \"user\"::text, attrs::text FROM typed \
             ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let text = |i| r.get::<_, Option<String>>(i);
            json!([r.get::<_, i64>(0), text(1), text(2), text(3), text(4)])
        })
        .collect();
    check(&Value::Array(rows), false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_types_land_in_clickhouse_as_decimal_uuid_and_string() {
    let ch = ClickHouse::start().unwrap();
    send_through_both_doors(&format!(
        "[sinks.store]\ntype = \"clickhouse\"\nurl = {:?}\n",
        ch.url
    ))
    .await;
    let types = ch
        .query("SELECT name, type FROM system.columns WHERE table = 'typed' FORMAT TabSeparated")
        .await
        .unwrap();
    for column in [
        "amount\tNullable(Decimal(38, 9))",
        "price\tNullable(Decimal(10, 2))",
        "user\tNullable(UUID)",
        "attrs\tNullable(String)",
    ] {
        assert!(types.contains(column), "{column} in {types}");
    }
    // ClickHouse's own text for each value. (18.16's toString garbles a wide Decimal128.)
    let text = ch
        .query("SELECT id, amount, price, user, attrs FROM typed ORDER BY id FORMAT TabSeparated")
        .await
        .unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|line| {
            let cells: Vec<Option<&str>> = line
                .split('\t')
                .map(|c| (c != "\\N").then_some(c))
                .collect();
            let id = cells[0].and_then(|id| id.parse::<i64>().ok());
            json!([id, cells[1], cells[2], cells[3], cells[4]])
        })
        .collect();
    check(&Value::Array(rows), true);
}

/// clickhouse-connect's `insert()`, which asks for the table's types (`DESCRIBE TABLE`) and
/// sends a `Native` block of them: `Decimal` and `UUID` columns in ClickHouse's binary layouts.
const NATIVE_INSERT: &str = r#"
import decimal, json, sys, uuid
import clickhouse_connect
client = clickhouse_connect.get_client(host="127.0.0.1", port=int(sys.argv[1]))
rows = [
    [7, decimal.Decimal("123.456"), decimal.Decimal("-1.25"), uuid.UUID(sys.argv[2]), '{"k": [1]}'],
    [8, decimal.Decimal("-0.000000001"), None, None, None],
]
written = client.insert("typed", rows, column_names=["id", "amount", "price", "user", "attrs"])
print(json.dumps({"written": written.written_rows}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_connect_sends_decimals_and_uuids_in_native_blocks() {
    let config = format!("[flush]\nmax_age = \"100ms\"\n\n[tables.typed]\ncolumns = {COLUMNS}\n");
    let mut server = Server::start(&config);
    let output = std::process::Command::new(python())
        .args(["-c", NATIVE_INSERT, &server.addr.port().to_string(), ID])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["written"], 2, "{out}");
    server
        .wait_rows_written("typed", 2, Duration::from_secs(10))
        .await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    const READ: &str = r#"
import json, os, sys
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1]).to_pyarrow_table().sort_by("id")
text = lambda v: None if v is None else format(v, "f")
print(json.dumps([[r["id"], text(r["amount"]), text(r["price"]), r["user"], r["attrs"]]
                  for r in table.to_pylist()]), flush=True)
os._exit(0)
"#;
    let table = server.data_dir.join("typed");
    let rows = python_json(READ, &[&table.to_string_lossy()], &[], "the lake");
    assert_eq!(
        rows,
        json!([
            [7, "123.456000000", "-1.25", ID, "{\"k\": [1]}"],
            [8, "-0.000000001", null, null, null]
        ])
    );
}
