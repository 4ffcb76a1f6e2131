//! Draining at SIGTERM, for an instance behind a load balancer: `/health` answers 503
//! `stopping` at once, inserts are still taken for `drain_delay`, on both doors, and every
//! answer carries `Connection: close`, so kept-alive clients reconnect elsewhere. A native
//! connection is closed between queries instead, and clickhouse-driver reconnects. Then the
//! doors close and what was taken lands. A second signal cuts the delay short.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::common::{Server, assert_exactly_once, id_counts, python};
use sluice_lab::events::COLUMNS_TOML;

/// Table `load`, flushing often, with the native protocol on.
fn config() -> String {
    format!(
        "[clickhouse]\ntcp_listen = \"127.0.0.1:0\"\n\
         [tables.load]\ncolumns = {COLUMNS_TOML}\n[tables.load.flush]\nmax_age = \"200ms\"\n"
    )
}

/// One HTTP/1.1 connection kept open between requests, read by hand so that the answers'
/// `Connection` header and the connection's end can be seen.
struct KeepAlive {
    stream: BufReader<TcpStream>,
}

/// An answer: its status, its headers (names in lower case) and its body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn closes(&self) -> bool {
        self.headers
            .iter()
            .any(|(name, value)| name == "connection" && value.eq_ignore_ascii_case("close"))
    }
}

impl KeepAlive {
    async fn open(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(addr).await.unwrap();
        KeepAlive {
            stream: BufReader::new(stream),
        }
    }

    async fn request(&mut self, method: &str, path: &str, body: &str) -> Answer {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: sluice\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let stream = self.stream.get_mut();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        self.read_answer().await
    }

    async fn read_answer(&mut self) -> Answer {
        let mut line = String::new();
        self.stream.read_line(&mut line).await.unwrap();
        let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.unwrap();
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        let length: usize = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .map_or(0, |(_, value)| value.parse().unwrap());
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await.unwrap();
        Answer {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    }

    /// Whether the server closed the connection: a read finds its end, within 5 s.
    async fn is_closed_by_server(&mut self) -> bool {
        let mut byte = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), self.stream.read(&mut byte)).await;
        matches!(read, Ok(Ok(0)))
    }
}

/// A `durable` insert of the row with `id`.
async fn insert(connection: &mut KeepAlive, id: u64) -> Answer {
    let row = format!("{{\"id\":{id},\"service\":\"api\"}}\n");
    connection
        .request("POST", "/v1/tables/load/rows?ack=durable", &row)
        .await
}

/// Polls `/health`, each time on a new connection, until it says `stopping`; that answer.
async fn wait_until_stopping(addr: SocketAddr) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = KeepAlive::open(addr)
            .await
            .request("GET", "/health", "")
            .await;
        if answer.body.contains("stopping") {
            return answer;
        }
        assert!(Instant::now() < deadline, "never stopping: {}", answer.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigtermed_server_says_stopping_takes_inserts_through_its_drain_delay_and_lands_them() {
    let delay = Duration::from_secs(5);
    let mut server = Server::start_with_env(&config(), &[("SLUICE_DRAIN_DELAY", "5s")]);
    let mut kept = KeepAlive::open(server.addr).await;
    let before = insert(&mut kept, 0).await;
    assert_eq!(before.status, 200, "{}", before.body);
    assert!(!before.closes(), "{:?}", before.headers);
    let health = kept.request("GET", "/health", "").await;
    assert_eq!(
        (health.status, health.closes()),
        (200, false),
        "{}",
        health.body
    );

    server.sigterm();
    let signalled = Instant::now();
    let health = wait_until_stopping(server.addr).await;
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(health.closes(), "{:?}", health.headers);

    // The connection kept from before the signal: its next insert is taken, and answered with
    // `Connection: close`, after which the server closes it.
    let during = insert(&mut kept, 1).await;
    assert_eq!(during.status, 200, "{}", during.body);
    assert!(during.closes(), "{:?}", during.headers);
    assert!(kept.is_closed_by_server().await);
    // New connections are still taken too, one insert each.
    for id in 2..20 {
        let answer = insert(&mut KeepAlive::open(server.addr).await, id).await;
        assert_eq!(
            (answer.status, answer.closes()),
            (200, true),
            "{}",
            answer.body
        );
    }
    assert!(
        signalled.elapsed() < delay,
        "the inserts took longer than the delay: {:?}",
        signalled.elapsed()
    );

    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= delay,
        "exited {:?} after the signal, before its drain delay",
        signalled.elapsed()
    );
    // Everything taken, before the signal and during the delay, landed once.
    assert_exactly_once(&id_counts(&server.data_dir, "load"), &[(0, 20)]);
}

/// clickhouse-driver, one `Client` held across the signal and new ones during the delay. It
/// inserts id 0, says `inserted`, and waits for a line on stdin: the test sends it once
/// `/health` says `stopping`. Then it watches whether the server closes the held connection,
/// inserts ids 1 to 8, and prints what it saw as JSON. The driver pings before each query on a
/// connection it holds, and reconnects when the ping finds the connection closed, with a
/// warning, which is counted.
const HELD_THROUGH_THE_DRAIN: &str = r#"
import json, logging, select, socket, sys
from clickhouse_driver import Client

class Reconnects(logging.Handler):
    count = 0
    def emit(self, record):
        if "reconnecting" in record.getMessage():
            Reconnects.count += 1

logging.getLogger("clickhouse_driver.connection").addHandler(Reconnects())
port = int(sys.argv[1])
acked = []

def client():
    return Client("127.0.0.1", port=port, send_receive_timeout=20)

def insert(client, id):
    client.execute("INSERT INTO load (id, service) VALUES", [(id, "api")])
    acked.append(id)

def closed_by_server(client, within):
    """Whether the client's socket reads its end (a FIN, not a reset) within `within` s."""
    sock = client.connection.socket
    readable, _, _ = select.select([sock], [], [], within)
    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""

held = client()
insert(held, 0)
print("inserted", flush=True)
sys.stdin.readline()
out = {"held_closed": closed_by_server(held, 5)}
insert(held, 1)
out["reconnects_for_the_held"] = Reconnects.count
out["new_closed_after_their_query"] = []
for id in range(2, 6):
    new = client()
    insert(new, id)
    out["new_closed_after_their_query"].append(closed_by_server(new, 5))
    new.disconnect()
for id in range(6, 9):
    insert(held, id)
out["reconnects"] = Reconnects.count
out["acked"] = acked
print(json.dumps(out), flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_connection_is_closed_between_queries_and_clickhouse_driver_reconnects() {
    // A delay no test outlasts, and the default idle timeout of an hour: only the drain can
    // close a native connection here. The second signal ends the test.
    let mut server = Server::start(&format!("drain_delay = \"10m\"\n{}", config()));
    let port = server.native_addr.unwrap().port().to_string();
    let mut driver = Command::new(python())
        .args(["-c", HELD_THROUGH_THE_DRAIN, &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(driver.stdout.take().unwrap()).lines();
    let mut next_line = || said.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(next_line(), "inserted", "{}", stderr_of(driver));

    server.sigterm();
    wait_until_stopping(server.addr).await;
    writeln!(driver.stdin.as_mut().unwrap(), "stopping").unwrap();
    let line = next_line();
    let Ok(out) = serde_json::from_str::<serde_json::Value>(&line) else {
        panic!("clickhouse-driver failed: {line}{}", stderr_of(driver));
    };
    assert!(driver.wait().unwrap().success());

    // The held connection, idle at the signal, was closed while the script waited for it to
    // close, not at the idle timeout.
    assert_eq!(out["held_closed"], true, "{out}");
    // Its next insert found it closed and went on a new connection.
    assert_eq!(out["reconnects_for_the_held"], 1, "{out}");
    // New connections were taken, and each was closed after its query.
    assert_eq!(
        out["new_closed_after_their_query"],
        serde_json::json!([true, true, true, true]),
        "{out}"
    );
    // So was each later connection of the held client: one reconnect per insert.
    assert_eq!(out["reconnects"], 4, "{out}");
    assert_eq!(out["acked"], serde_json::json!((0..9).collect::<Vec<_>>()));

    server.sigterm();
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    // Every acknowledged insert, before the signal and during the delay, landed once.
    assert_exactly_once(&id_counts(&server.data_dir, "load"), &[(0, 9)]);
}

/// What a child process wrote to stderr, once it has exited.
fn stderr_of(child: std::process::Child) -> String {
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_cuts_the_drain_delay_short() {
    let mut server = Server::start(&format!("drain_delay = \"10m\"\n{}", config()));
    let mut kept = KeepAlive::open(server.addr).await;
    assert_eq!(insert(&mut kept, 0).await.status, 200);
    server.sigterm();
    wait_until_stopping(server.addr).await;
    let second = Instant::now();
    server.sigterm();
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    eprintln!("exited {:?} after the second signal", second.elapsed());
    assert_exactly_once(&id_counts(&server.data_dir, "load"), &[(0, 1)]);
}
