//! ClickHouse's native protocol with real clients, each used as its README shows with only the
//! host and port changed: Python's `clickhouse-driver` (plain, LZ4 and ZSTD, async inserts,
//! users, TLS) and Debian's `clickhouse-client` 18.16 inserting CSV. Every row lands once; a
//! refused insert and a client killed mid-insert land nothing.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use std::io::{BufRead, BufReader};
use std::time::Instant;

use crate::common::{Server, python, read_landed, stop_and_read};

const CONFIG: &str = r#"
[flush]
max_age = "100ms"

[clickhouse]
tcp_listen = "127.0.0.1:0"

[tables.t]
columns = [
  { name = "id", type = "Int64", nullable = false },
  { name = "name", type = "String" },
  { name = "at", type = "timestamp" },
  { name = "ok", type = "bool" },
]
"#;

fn native_port(server: &Server) -> String {
    server
        .native_addr
        .expect("the config turns the native protocol on")
        .port()
        .to_string()
}

/// Runs `command`; its exit code, stdout and stderr.
fn run(mut command: Command) -> (i32, String, String) {
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The rows of table `t` in the lake: id, name, timestamp, flag.
fn landed(server: Server) -> Vec<Vec<Option<String>>> {
    stop_and_read(server, "t")
}

fn row(id: i64, name: Option<&str>, at: Option<&str>, ok: bool) -> Vec<Option<String>> {
    vec![
        Some(id.to_string()),
        name.map(str::to_owned),
        at.map(str::to_owned),
        Some(ok.to_string()),
    ]
}

/// clickhouse-driver as its README shows, over each compression, then the refusals it reads.
const DRIVER: &str = r#"
import datetime, json, sys
from clickhouse_driver import Client
from clickhouse_driver.errors import ServerException

port = int(sys.argv[1])
out = {}
at = datetime.datetime(2026, 12, 6, 10, 0, 0, 250000)
for n, compression in enumerate([False, "lz4", "zstd"]):
    client = Client("127.0.0.1", port=port, compression=compression)
    rows = [(10 * n, "driver", at, True), (10 * n + 1, None, None, False)]
    out[str(compression)] = client.execute("INSERT INTO t (id, name, at, ok) VALUES", rows)
client = Client("127.0.0.1", port=port)
out["async"] = client.execute(
    "INSERT INTO t (id, ok) VALUES", [(100, True)],
    settings={"async_insert": 1, "wait_for_async_insert": 0},
)
out["version"] = client.execute("SELECT version()")[0][0]
for name, query, rows in [
    ("unknown_table", "INSERT INTO nope VALUES", [(1,)]),
    ("unknown_column", "INSERT INTO t (id, nope) VALUES", [(1, 2)]),
    ("other_statement", "SELECT * FROM t", None),
]:
    try:
        client.execute(query, rows) if rows else client.execute(query)
    except ServerException as e:
        out[name] = [e.code, e.message]
out["inline"] = client.execute("INSERT INTO t (id, ok) VALUES (200, 1)")
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_driver_inserts_plain_and_compressed_and_reads_refusals() {
    let server = Server::start(CONFIG);
    let mut command = Command::new(python());
    command.args(["-c", DRIVER, &native_port(&server)]);
    let (code, stdout, stderr) = run(command);
    assert_eq!(code, 0, "clickhouse-driver failed: {stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for compression in ["False", "lz4", "zstd"] {
        assert_eq!(out[compression], 2, "{compression}: {out}");
    }
    assert_eq!(out["version"], "25.8.1.1");
    assert_eq!(out["unknown_table"][0], 60, "{out}");
    assert_eq!(out["unknown_column"][0], 117, "{out}");
    assert!(
        out["unknown_column"][1].as_str().unwrap().contains("nope"),
        "{out}"
    );
    assert_eq!(out["other_statement"][0], 62, "{out}");
    server
        .wait_rows_written("t", 8, Duration::from_secs(10))
        .await;
    let at = Some("2026-12-06T10:00:00.250Z");
    let mut want = Vec::new();
    for n in 0..3 {
        want.push(row(10 * n, Some("driver"), at, true));
        want.push(row(10 * n + 1, None, None, false));
    }
    want.push(row(100, None, None, true));
    want.push(row(200, None, None, true));
    assert_eq!(landed(server), want);
}

/// `clickhouse-client --query "INSERT INTO t FORMAT CSV" < file`, as Debian's 18.16 runs it.
fn clickhouse_client(port: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new("clickhouse-client")
        .args(["--host", "127.0.0.1", "--port", port])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clickhouse-client: scripts/services/clickhouse.sh installs it");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_client_18_16_inserts_csv_and_a_bad_row_lands_nothing() {
    let server = Server::start(CONFIG);
    let port = native_port(&server);
    let insert = ["--query", "INSERT INTO t FORMAT CSV"];
    let csv = "1,one,2026-12-06 10:00:00.5,true\n2,\\N,\\N,0\n";
    let (code, _, stderr) = clickhouse_client(&port, &insert, csv);
    assert_eq!(code, 0, "{stderr}");
    let uncompressed = [&insert[..], &["--compression", "0"]].concat();
    let (code, _, stderr) = clickhouse_client(&port, &uncompressed, "3,three,\\N,1\n");
    assert_eq!(code, 0, "{stderr}");
    // 18.16 predates DateTime64: the column is announced as String and its text read here.
    let bad = "4,four,2026-12-06,1\n5,five,not a time,1\n";
    let (code, _, stderr) = clickhouse_client(&port, &insert, bad);
    assert_eq!(code, 117, "{stderr}");
    assert!(
        stderr.contains("row 2, column 'at'") && stderr.contains("not a time"),
        "{stderr}"
    );
    server
        .wait_rows_written("t", 3, Duration::from_secs(10))
        .await;
    assert_eq!(
        landed(server),
        [
            row(1, Some("one"), Some("2026-12-06T10:00:00.500Z"), true),
            row(2, None, None, false),
            row(3, Some("three"), None, true),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_insert_lands_nothing_of_it() {
    let server = Server::start(CONFIG);
    let port = native_port(&server);
    // Blocks of two rows: the client sends each as soon as it has read it.
    let mut client = Command::new("clickhouse-client")
        .args(["--host", "127.0.0.1", "--port", &port])
        .args(["--max_insert_block_size", "2"])
        .args(["--query", "INSERT INTO t FORMAT CSV"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    stdin
        .write_all(b"1,a,\\N,1\n2,b,\\N,1\n3,c,\\N,1\n4,d,\\N,1\n")
        .unwrap();
    stdin.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.kill().unwrap();
    client.wait().unwrap();
    drop(stdin);
    let (code, _, stderr) = clickhouse_client(
        &port,
        &["--query", "INSERT INTO t FORMAT CSV"],
        "9,after,\\N,0\n",
    );
    assert_eq!(code, 0, "{stderr}");
    server
        .wait_rows_written("t", 1, Duration::from_secs(10))
        .await;
    assert_eq!(landed(server), [row(9, Some("after"), None, false)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_and_tls_are_the_http_doors() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = crate::tls::certificate(dir.path());
    let config = format!(
        "{CONFIG}\n[auth]\nusers = {{ alice = \"secret\" }}\n\n[tls]\ncert = {:?}\nkey = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let server = Server::start(&config);
    let script = r#"
import json, sys
from clickhouse_driver import Client
from clickhouse_driver.errors import ServerException
port, ca = int(sys.argv[1]), sys.argv[2]
out = {}
ok = Client("127.0.0.1", port=port, user="alice", password="secret", secure=True, ca_certs=ca)
out["alice"] = ok.execute("INSERT INTO t (id, ok) VALUES", [(1, True)])
try:
    Client("127.0.0.1", port=port, user="alice", password="wrong", secure=True, ca_certs=ca).execute(
        "INSERT INTO t (id, ok) VALUES", [(2, True)])
except ServerException as e:
    out["wrong"] = e.code
print(json.dumps(out))
"#;
    let mut command = Command::new(python());
    command.args(["-c", script, &native_port(&server)]);
    command.arg(&cert);
    let (code, stdout, stderr) = run(command);
    assert_eq!(code, 0, "clickhouse-driver failed: {stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["alice"], 1, "{out}");
    assert_eq!(out["wrong"], 516, "{out}");
    // The HTTP door speaks HTTPS here too: the rows are read after a stop, which lands them.
    assert_eq!(landed(server), [row(1, None, None, true)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_connections_and_answers_the_insert_in_flight() {
    let mut server = Server::start(CONFIG);
    let port = native_port(&server);
    // A pooled client's connection, open and idle between queries.
    let idle_client = r#"
import sys, time
from clickhouse_driver import Client
client = Client("127.0.0.1", port=int(sys.argv[1]))
client.execute("SELECT 1")
print("connected", flush=True)
time.sleep(60)
"#;
    let mut idle = Command::new(python())
        .args(["-c", idle_client, &port])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(idle.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "connected");
    // An insert whose first block has arrived and whose last is still to come.
    let mut client = Command::new("clickhouse-client")
        .args(["--host", "127.0.0.1", "--port", &port])
        .args(["--max_insert_block_size", "2"])
        .args(["--query", "INSERT INTO t FORMAT CSV"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"1,a,\\N,1\n2,b,\\N,1\n").unwrap();
    stdin.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stdin.write_all(b"3,c,\\N,1\n").unwrap();
    drop(stdin);
    let answered = client.wait_with_output().unwrap();
    assert!(
        answered.status.success(),
        "the insert in flight is answered: {}",
        String::from_utf8_lossy(&answered.stderr)
    );
    let stopping = Instant::now();
    assert!(server.wait(Duration::from_secs(10)).success());
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "the idle connection does not hold the shutdown up"
    );
    idle.kill().unwrap();
    let _ = idle.wait();
    let ids: Vec<_> = read_landed(&server.data_dir, "t")
        .into_iter()
        .map(|row| row[0].clone().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2", "3"]);
}
