//! `list`, `struct` and `map` columns through the ClickHouse doors in ClickHouse's own formats,
//! sent by real clients as their READMEs show: clickhouse-connect's `insert()` (`Native` over
//! HTTP), clickhouse-driver's `INSERT ... VALUES` (`Native` over the native protocol), Debian's
//! `clickhouse-client` 18.16 inserting `TabSeparated` (which it sends as `Native` blocks of the
//! types it is told), and `RowBinary` and `TabSeparated` bodies over HTTP. The lake is read back
//! by an independent reader, Python `deltalake`, with every value as sent: nulls inside lists
//! and structs, empty lists and maps. A value that does not fit is refused with its way into the
//! column, and nothing of its insert lands.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Server, python, python_json};

const CONFIG: &str = r#"
[flush]
max_age = "100ms"

[clickhouse]
tcp_listen = "127.0.0.1:0"

[tables.nested]
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "tags", type = "list<string>" },
  { name = "grid", type = "list<list<int64>>" },
  { name = "labels", type = "map<string, float64>" },
  { name = "record", type = "struct<code: int32, at: timestamp, tags: list<string>>" },
  { name = "pair", type = "Tuple(String, UInt8)" },
]
"#;

/// Reads the lake's table `nested`, sorted by `id`, each row an object of its columns in plain
/// JSON: timestamps in ISO form, maps as lists of key and value.
const READ: &str = r#"
import datetime, json, os, sys
from deltalake import DeltaTable
def plain(v):
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v
data = DeltaTable(sys.argv[1]).to_pyarrow_table().sort_by("id")
rows = [{k: plain(v) for k, v in r.items()} for r in data.to_pylist()]
types = {f.name: str(f.type) for f in data.schema}
print(json.dumps({"rows": rows, "types": types}), flush=True)
os._exit(0)
"#;

/// Stops the server, which lands what it holds, and reads the lake back.
fn landed(mut server: Server) -> Value {
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let table = server.data_dir.join("nested");
    python_json(READ, &[&table.to_string_lossy()], &[], "the lake")
}

fn native_port(server: &Server) -> String {
    let addr = server
        .native_addr
        .expect("the config turns the native protocol on");
    addr.port().to_string()
}

/// Runs `command` with `stdin`; its exit code, stdout and stderr.
fn run(mut command: Command, stdin: &str) -> (i32, String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// clickhouse-connect's `insert()`: `DESCRIBE TABLE`, then a `Native` block of the types it
/// announces. A named tuple goes as a dict, an unnamed one as a tuple, a map as a dict.
const CONNECT: &str = r#"
import datetime, json, sys
import clickhouse_connect
client = clickhouse_connect.get_client(host="127.0.0.1", port=int(sys.argv[1]))
described = client.query("DESCRIBE TABLE nested").result_rows
at = datetime.datetime(2026, 12, 6, 10, 0, 0, 250000, tzinfo=datetime.timezone.utc)
rows = [
    [1, ["a", None, "c"], [[1, None], [], [3]], {"k": 1.5, "n": None},
     {"code": 7, "at": at, "tags": []}, ("x", 2)],
    [2, [], [], {}, {"code": None, "at": None, "tags": ["t", None]}, ("", 0)],
]
names = ["id", "tags", "grid", "labels", "record", "pair"]
written = client.insert("nested", rows, column_names=names).written_rows
print(json.dumps({"written": written, "types": [[r[0], r[1]] for r in described]}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_connect_inserts_lists_maps_and_tuples_in_native_blocks() {
    let server = Server::start(CONFIG);
    let mut command = Command::new(python());
    command.args(["-c", CONNECT, &server.addr.port().to_string()]);
    let (code, stdout, stderr) = run(command, "");
    assert_eq!(code, 0, "clickhouse-connect failed: {stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["written"], 2, "{out}");
    assert_eq!(
        out["types"],
        json!([
            ["id", "Int64"],
            ["tags", "Array(Nullable(String))"],
            ["grid", "Array(Array(Nullable(Int64)))"],
            ["labels", "Map(String, Nullable(Float64))"],
            [
                "record",
                "Tuple(code Nullable(Int32), at Nullable(DateTime64(6, 'UTC')), \
                 tags Array(Nullable(String)))"
            ],
            ["pair", "Tuple(Nullable(String), Nullable(UInt8))"],
        ])
    );
    server
        .wait_rows_written("nested", 2, Duration::from_secs(10))
        .await;
    let read = landed(server);
    assert_eq!(
        read["rows"],
        json!([
            {"id": 1, "tags": ["a", null, "c"], "grid": [[1, null], [], [3]],
             "labels": [["k", 1.5], ["n", null]],
             "record": {"code": 7, "at": "2026-12-06T10:00:00.250000+00:00", "tags": []},
             "pair": {"1": "x", "2": 2}},
            {"id": 2, "tags": [], "grid": [], "labels": [],
             "record": {"code": null, "at": null, "tags": ["t", null]},
             "pair": {"1": "", "2": 0}},
        ]),
        "{read}"
    );
    assert_eq!(read["types"]["labels"], "map<string, double>", "{read}");
}

/// clickhouse-driver's `INSERT ... VALUES` with rows: the native protocol's opening block tells
/// it the types, and it sends `Native` blocks of them, plain and LZ4-compressed.
const DRIVER: &str = r#"
import datetime, json, sys
from clickhouse_driver import Client
at = datetime.datetime(2026, 12, 6, 10, 0, 0)
out = {}
for n, compression in enumerate([False, "lz4"]):
    client = Client("127.0.0.1", port=int(sys.argv[1]), compression=compression)
    rows = [
        (10 * n + 10, ["d"], [[-1, None]], {"a": 2.5, "b": None}, (8, at, ["u", None]), ("y", 255)),
        (10 * n + 11, [None], [[None], []], {}, (None, None, []), (None, None)),
    ]
    out[str(compression)] = client.execute(
        "INSERT INTO nested (id, tags, grid, labels, record, pair) VALUES", rows)
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_driver_inserts_nested_values_over_the_native_protocol() {
    let server = Server::start(CONFIG);
    let mut command = Command::new(python());
    command.args(["-c", DRIVER, &native_port(&server)]);
    let (code, stdout, stderr) = run(command, "");
    assert_eq!(code, 0, "clickhouse-driver failed: {stderr}");
    let out: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&out["False"], &out["lz4"]),
        (&json!(2), &json!(2)),
        "{out}"
    );
    server
        .wait_rows_written("nested", 4, Duration::from_secs(10))
        .await;
    let full = |id: i64| {
        json!({"id": id, "tags": ["d"], "grid": [[-1, null]],
               "labels": [["a", 2.5], ["b", null]],
               "record": {"code": 8, "at": "2026-12-06T10:00:00+00:00", "tags": ["u", null]},
               "pair": {"1": "y", "2": 255}})
    };
    let sparse = |id: i64| {
        json!({"id": id, "tags": [null], "grid": [[null], []], "labels": [],
               "record": {"code": null, "at": null, "tags": []},
               "pair": {"1": null, "2": null}})
    };
    let read = landed(server);
    assert_eq!(
        read["rows"],
        json!([full(10), sparse(11), full(20), sparse(21)]),
        "{read}"
    );
}

/// `clickhouse-client --query "INSERT INTO nested FORMAT TabSeparated" < rows`, as Debian's 18.16
/// runs it against sluice's native port.
fn clickhouse_client(port: &str, stdin: &str) -> (i32, String, String) {
    let mut command = Command::new("clickhouse-client");
    command
        .args(["--host", "127.0.0.1", "--port", port])
        .args(["--query", "INSERT INTO nested FORMAT TabSeparated"]);
    run(command, stdin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_client_18_16_inserts_tab_separated_text_of_nested_values() {
    let server = Server::start(CONFIG);
    let port = native_port(&server);
    // 18.16 knows no Map and no DateTime64: it is told the labels are Array(Tuple(String,
    // Nullable(Float64))), laid out as a Map is, and the timestamp a String, whose text sluice
    // reads.
    let rows = "20\t['e',NULL,'it\\'s']\t[[5],[]]\t[('k',-1),('z',NULL)]\t\
                (NULL,'2026-12-06 10:00:00',[])\t('q',7)\n\
                21\t[]\t[]\t[]\t(9,NULL,['v'])\t(NULL,NULL)\n";
    let (code, _, stderr) = clickhouse_client(&port, rows);
    assert_eq!(code, 0, "{stderr}");
    let bad = "22\t[]\t[]\t[]\t(1,'noon',[])\t('',0)\n";
    let (code, _, stderr) = clickhouse_client(&port, bad);
    assert_eq!(code, 117, "{stderr}");
    assert!(
        stderr.contains("row 1, column 'record.at'") && stderr.contains("noon"),
        "{stderr}"
    );
    server
        .wait_rows_written("nested", 2, Duration::from_secs(10))
        .await;
    let read = landed(server);
    assert_eq!(
        read["rows"],
        json!([
            {"id": 20, "tags": ["e", null, "it's"], "grid": [[5], []],
             "labels": [["k", -1.0], ["z", null]],
             "record": {"code": null, "at": "2026-12-06T10:00:00+00:00", "tags": []},
             "pair": {"1": "q", "2": 7}},
            {"id": 21, "tags": [], "grid": [], "labels": [],
             "record": {"code": 9, "at": null, "tags": ["v"]},
             "pair": {"1": null, "2": null}},
        ]),
        "{read}"
    );
}

/// One row of the table in `RowBinary`, as `DESCRIBE TABLE` announces its types: an array as
/// its length then its elements, a map as its entries' count then each key and value, a tuple
/// as its elements, a `Nullable` as a byte before the value.
fn row_binary() -> Vec<u8> {
    let string = |out: &mut Vec<u8>, s: &str| {
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    };
    let mut row = 30_i64.to_le_bytes().to_vec();
    row.extend_from_slice(&[2, 0]);
    string(&mut row, "r");
    row.push(1);
    row.extend_from_slice(&[1, 2, 0]);
    row.extend_from_slice(&42_i64.to_le_bytes());
    row.extend_from_slice(&[1, 1]);
    string(&mut row, "m");
    row.push(0);
    row.extend_from_slice(&0.25_f64.to_le_bytes());
    row.push(0);
    row.extend_from_slice(&(-5_i32).to_le_bytes());
    row.push(0);
    row.extend_from_slice(&1_796_551_200_000_000_i64.to_le_bytes());
    row.extend_from_slice(&[1, 1, 0, 0]);
    row.push(0);
    row.push(9);
    row
}

async fn post(server: &Server, query: &str, body: Vec<u8>) -> (u16, String) {
    let answer = reqwest::Client::new()
        .post(server.url(&format!("/?query={query}&sluice_ack=committed")))
        .body(body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_binary_and_tab_separated_bodies_over_http_and_refusals_naming_the_way() {
    let server = Server::start(CONFIG);
    let (status, answer) = post(
        &server,
        "INSERT%20INTO%20nested%20FORMAT%20RowBinary",
        row_binary(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let tsv = "31\t['\\\\',NULL]\t[[NULL]]\t{'k':1,'j':NULL}\t(1,NULL,['w'])\t('',0)\n";
    let (status, answer) = post(
        &server,
        "INSERT%20INTO%20nested%20FORMAT%20TabSeparated",
        tsv.into(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    for (format, body, says) in [
        (
            "TabSeparated",
            "32\t[]\t[[1,'x']]\t{}\t(1,NULL,[])\t('',0)\n",
            "line 1, column 'grid[0][1]': 'x' is not a whole number",
        ),
        (
            "TabSeparated",
            "33\t[]\t[]\t{'k':'y'}\t(1,NULL,[])\t('',0)\n",
            "line 1, column 'labels.k': 'y' is not a number",
        ),
        (
            "JSONCompactEachRow",
            "[34, [], [], {}, {\"code\": 1, \"nope\": 2}, [\"\", 0]]",
            "row 1, column 'record': the struct has no field 'nope'",
        ),
        (
            "Values",
            "(35, [], [], {}, (1, NULL, []), ('', 300))",
            "row 1, column 'pair.2': 300 is out of range for uint8",
        ),
    ] {
        let query = format!("INSERT%20INTO%20nested%20FORMAT%20{format}");
        let (status, answer) = post(&server, &query, body.into()).await;
        assert_eq!(status, 400, "{format}: {answer}");
        assert!(answer.contains(says), "{format}: {answer}");
    }
    server
        .wait_rows_written("nested", 2, Duration::from_secs(10))
        .await;
    let read = landed(server);
    assert_eq!(
        read["rows"],
        json!([
            {"id": 30, "tags": ["r", null], "grid": [[42, null]], "labels": [["m", 0.25]],
             "record": {"code": -5, "at": "2026-12-06T10:00:00+00:00", "tags": [null]},
             "pair": {"1": "", "2": 9}},
            {"id": 31, "tags": ["\\", null], "grid": [[null]], "labels": [["k", 1.0], ["j", null]],
             "record": {"code": 1, "at": null, "tags": ["w"]},
             "pair": {"1": "", "2": 0}},
        ]),
        "{read}"
    );
}
