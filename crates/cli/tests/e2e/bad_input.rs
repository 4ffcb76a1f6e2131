//! Each kind of bad input gets the right status and a message that says what and where, and
//! nothing else is lost or blocked: a producer running alongside lands all its rows exactly once,
//! and no row of a refused insert lands.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{Server, assert_exactly_once, id_counts};
use reqwest::StatusCode;
use sluice_lab::events::COLUMNS_TOML;
use sluice_lab::load::{Endpoint, LoadConfig, Progress, Stop};

const STRICT: &str = r#"
auto_create = false
max_body_bytes = "64KiB"
max_rows_per_insert = 1000
max_partitions_per_insert = 3

[wal]
enabled = false

[flush]
max_age = "100ms"

[tables.strict]
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "name", type = "string" },
  { name = "small", type = "int8" },
  { name = "ratio", type = "float64" },
]

[tables.parted]
columns = [
  { name = "id", type = "int64", nullable = false },
  { name = "name", type = "string" },
]
partition_by = "name"

"#;

struct Case {
    what: &'static str,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
    status: StatusCode,
    says: Vec<&'static str>,
}

fn native(what: &'static str, body: &str, status: StatusCode, says: &[&'static str]) -> Case {
    native_to("strict", what, body, status, says)
}

/// [`native`] into `table`.
fn native_to(
    table: &str,
    what: &'static str,
    body: &str,
    status: StatusCode,
    says: &[&'static str],
) -> Case {
    Case {
        what,
        path: format!("/v1/tables/{table}/rows"),
        headers: vec![],
        body: body.as_bytes().to_vec(),
        status,
        says: says.to_vec(),
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn cases() -> Vec<Case> {
    use StatusCode as S;
    // Ids of refused inserts start at 1,000,000,000; none of them may land.
    let mut cases = vec![
        native(
            "bad JSON",
            "{\"id\":1000000001}\n{\"id\":1000000002",
            S::BAD_REQUEST,
            &["line 2", "invalid JSON"],
        ),
        native(
            "wrong type",
            "{\"id\":1000000003}\n{\"id\":\"abc\"}",
            S::BAD_REQUEST,
            &["line 2, column 'id'"],
        ),
        native(
            "missing required column",
            "{\"id\":1000000004}\n{\"name\":\"x\"}",
            S::BAD_REQUEST,
            &["line 2, column 'id'", "required"],
        ),
        native(
            "null in a required column",
            "{\"id\":null}",
            S::BAD_REQUEST,
            &["column 'id'", "null"],
        ),
        native(
            "unknown column",
            "{\"id\":1000000005,\"nope\":1}",
            S::BAD_REQUEST,
            &["column 'nope'", "unknown column"],
        ),
        native(
            "number out of range",
            "{\"id\":1000000006,\"small\":300}",
            S::BAD_REQUEST,
            &["column 'small'"],
        ),
        native(
            "not an object",
            "[1,2,3]",
            S::BAD_REQUEST,
            &["line 1", "expected a JSON object"],
        ),
    ];
    // Malformed JSON that arrow-json alone took, plain, gzipped, and at the end of a large body.
    let missing_comma = "{\"id\":1000000070}\n{\"id\":1000000071 \"name\":\"b\"}";
    cases.push(native(
        "missing comma",
        missing_comma,
        S::BAD_REQUEST,
        &["line 2, column 18: invalid JSON: expected `,` or `}`"],
    ));
    let mut large: String = (0..900)
        .map(|i| format!("{{\"id\":{},\"name\":\"n\"}}\n", 1_000_000_100 + i))
        .collect();
    large.push_str("{\"id\":1000001000,,\"name\":\"n\"}\n");
    cases.push(Case {
        what: "doubled comma, gzipped, after 900 good lines",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![("content-encoding", "gzip")],
        body: gzip(large.as_bytes()),
        status: S::BAD_REQUEST,
        says: vec!["line 901, column 18: invalid JSON"],
    });
    cases.push(native(
        "raw control character in a string",
        "{\"id\":1000000072,\"name\":\"a\tb\"}",
        S::BAD_REQUEST,
        &["line 1, column 27", "control character"],
    ));
    cases.push(Case {
        what: "invalid UTF-8",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![],
        body: b"{\"id\":1000000008,\"name\":\"\xff\xfe\"}".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["line 1"],
    });
    for (name, says) in [
        ("a%2Fb", "not allowed"),
        ("..%2Fx", "not allowed"),
        ("a%00b", "not allowed"),
        ("1abc", "not allowed"),
    ] {
        cases.push(Case {
            what: "bad table name",
            path: format!("/v1/tables/{name}/rows"),
            headers: vec![],
            body: b"{\"id\":1000000009}".to_vec(),
            status: S::BAD_REQUEST,
            says: vec!["bad table name", says],
        });
    }
    cases.push(Case {
        what: "table name too long",
        path: format!("/v1/tables/{}/rows", "t".repeat(129)),
        headers: vec![],
        body: b"{\"id\":1000000010}".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["at most 128"],
    });
    cases.push(Case {
        what: "unknown table",
        path: "/v1/tables/nowhere/rows".into(),
        headers: vec![],
        body: b"{\"id\":1000000011}".to_vec(),
        status: S::NOT_FOUND,
        says: vec!["'nowhere' does not exist"],
    });
    let big: String = (0..5_000)
        .map(|i| format!("{{\"id\":{}}}\n", 1_100_000_000 + i))
        .collect();
    cases.push(Case {
        what: "oversized body",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![],
        body: big.clone().into_bytes(),
        status: S::PAYLOAD_TOO_LARGE,
        says: vec!["larger than the limit"],
    });
    cases.push(Case {
        what: "gzip bomb",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![("content-encoding", "gzip")],
        body: gzip(big.as_bytes()),
        status: S::PAYLOAD_TOO_LARGE,
        says: vec!["decompresses to more than the limit"],
    });
    cases.push(Case {
        what: "broken gzip",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![("content-encoding", "gzip")],
        body: b"not gzip at all".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["not valid gzip"],
    });
    cases.push(Case {
        what: "wrong Content-Encoding",
        path: "/v1/tables/strict/rows".into(),
        headers: vec![("content-encoding", "compress")],
        body: b"{\"id\":1000000012}".to_vec(),
        status: S::UNSUPPORTED_MEDIA_TYPE,
        says: vec!["Content-Encoding 'compress'"],
    });
    cases.push(Case {
        what: "durable without the WAL",
        path: "/v1/tables/strict/rows?ack=durable".into(),
        headers: vec![],
        body: b"{\"id\":1000000013}".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["needs the write-ahead log"],
    });
    cases.push(Case {
        what: "unknown parameter",
        path: "/v1/tables/strict/rows?akc=async".into(),
        headers: vec![],
        body: b"{\"id\":1000000014}".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["unknown query parameter 'akc'"],
    });
    let ch =
        |what: &'static str, query: &str, body: &str, status: StatusCode, says: &[&'static str]| {
            Case {
                what,
                path: format!("/?query={}", query.replace(' ', "%20")),
                headers: vec![],
                body: body.as_bytes().to_vec(),
                status,
                says: says.to_vec(),
            }
        };
    cases.push(ch(
        "unknown format",
        "INSERT INTO strict FORMAT Parquet",
        "1000000015\n",
        S::BAD_REQUEST,
        &[
            "Code: 73.",
            "format Parquet is not supported",
            "sluice reads JSONEachRow",
        ],
    ));
    cases.push(ch(
        "VALUES of a function",
        "INSERT INTO strict (id) VALUES (now())",
        "",
        S::BAD_REQUEST,
        &["Code: 117.", "row 1: 'now' at byte 2 is not a literal"],
    ));
    cases.push(ch(
        "a read of rows",
        "SELECT id FROM strict",
        "",
        S::BAD_REQUEST,
        &[
            "Code: 62.",
            "sluice takes INSERT statements",
            "not a read from strict",
        ],
    ));
    cases.push(ch(
        "syntax error",
        "INSERT INTO strict (id FORMAT JSONEachRow",
        "",
        S::BAD_REQUEST,
        &["Code: 62.", "Syntax error"],
    ));
    cases.push(ch(
        "ClickHouse bad row",
        "INSERT INTO strict FORMAT JSONEachRow",
        "{\"id\":1000000017}\n{\"id\":\"x\"}",
        S::BAD_REQUEST,
        &["Code: 117.", "line 2, column 'id'"],
    ));
    cases.push(ch(
        "ClickHouse malformed row",
        "INSERT INTO strict FORMAT JSONEachRow",
        "[{\"id\":1000000073},\n{\"id\": 1000000074,,}]",
        S::BAD_REQUEST,
        &["Code: 117.", "line 2, column 19: invalid JSON"],
    ));
    cases.push(ch(
        "ClickHouse text between rows",
        "INSERT INTO strict FORMAT JSONEachRow",
        "{\"id\":1000000075} ; {\"id\":1000000076}",
        S::BAD_REQUEST,
        &["Code: 117.", "line 1, column 19", "found ';'"],
    ));
    cases.push(ch(
        "ClickHouse column list",
        "INSERT INTO strict (id) FORMAT JSONEachRow",
        "{\"id\":1000000018,\"name\":\"n\"}",
        S::BAD_REQUEST,
        &["column 'name'", "column list"],
    ));
    cases.push(ch(
        "ClickHouse unknown table",
        "INSERT INTO db.nowhere FORMAT JSONEachRow",
        "{\"id\":1000000019}",
        S::NOT_FOUND,
        &["Code: 60."],
    ));
    cases.push(ch(
        "not in compressed blocks",
        "INSERT INTO strict FORMAT JSONEachRow&decompress=1",
        "{\"id\":1000000020}",
        S::BAD_REQUEST,
        &["decompress=1: compressed block 1 at byte 0"],
    ));
    cases.push(ch(
        "ClickHouse too many rows",
        "INSERT INTO strict FORMAT JSONEachRow",
        &"{\"id\":1000000040}\n".repeat(1001),
        S::PAYLOAD_TOO_LARGE,
        &["Code: 307.", "1001 rows"],
    ));
    // A Delta table reads an empty partition value back as null: refused, not changed.
    cases.push(native_to(
        "parted",
        "empty partition value",
        "{\"id\":1000000050,\"name\":\"a\"}\n{\"id\":1000000051,\"name\":\"\"}",
        S::BAD_REQUEST,
        &["column 'name'", "row 2: an empty string", "null"],
    ));
    // Four partitions in one insert, one more than the limit: refused whole, ClickHouse's way.
    let spread = "{\"id\":1000000054,\"name\":\"a\"}\n{\"id\":1000000055,\"name\":\"b\"}\n\
                  {\"id\":1000000056,\"name\":\"c\"}\n{\"id\":1000000057}";
    cases.push(native_to(
        "parted",
        "too many partitions",
        spread,
        S::BAD_REQUEST,
        &[
            "Too many partitions for single INSERT block (more than 3)",
            "spans 4",
        ],
    ));
    cases.push(ch(
        "ClickHouse too many partitions",
        "INSERT INTO parted FORMAT JSONEachRow",
        spread,
        S::BAD_REQUEST,
        &["Code: 252.", "TOO_MANY_PARTS"],
    ));
    // A request's max_partitions_per_insert_block lowers the limit for its insert...
    cases.push(ch(
        "ClickHouse setting lowers the partition limit",
        "INSERT INTO parted SETTINGS max_partitions_per_insert_block = 2 FORMAT JSONEachRow",
        "{\"id\":1000000060,\"name\":\"a\"}\n{\"id\":1000000061,\"name\":\"b\"}\n\
         {\"id\":1000000062,\"name\":\"c\"}",
        S::BAD_REQUEST,
        &[
            "Code: 252.",
            "(more than 2)",
            "spans 3",
            "this request's max_partitions_per_insert_block",
        ],
    ));
    // ...and can neither lift nor raise the server's.
    for asked in ["0", "100"] {
        cases.push(ch(
            "ClickHouse setting cannot raise the partition limit",
            &format!(
                "INSERT INTO parted SETTINGS max_partitions_per_insert_block = {asked} FORMAT \
                 JSONEachRow"
            ),
            spread,
            S::BAD_REQUEST,
            &["Code: 252.", "(more than 3)", "can lower it, not raise it"],
        ));
    }
    cases.push(ch(
        "ClickHouse partition limit that is not a number",
        "INSERT INTO parted SETTINGS max_partitions_per_insert_block = 'many' FORMAT JSONEachRow",
        "{\"id\":1000000063,\"name\":\"a\"}",
        S::BAD_REQUEST,
        &["max_partitions_per_insert_block: 'many' is not a whole number"],
    ));
    // A lake table by this name would make the data directory look like a Delta table, and
    // could not be opened at the next start.
    cases.push(native_to(
        "_delta_log",
        "reserved table name",
        "{\"id\":1000000053}",
        S::BAD_REQUEST,
        &["'_delta_log' is reserved"],
    ));
    cases.push(ch(
        "ClickHouse empty partition value",
        "INSERT INTO parted FORMAT JSONEachRow",
        "{\"id\":1000000052,\"name\":\"\"}",
        S::BAD_REQUEST,
        &["column 'name'", "an empty string"],
    ));
    cases.extend(hostile_values());
    cases
}

/// Values that look like JSON numbers or rows but are not what the column holds, and bodies that
/// are not rows at all.
fn hostile_values() -> Vec<Case> {
    use StatusCode as S;
    let deep = format!(
        "{{\"id\":1000000030,\"name\":{}{}}}",
        "[".repeat(30_000),
        "]".repeat(30_000)
    );
    let long_line = format!(
        "{{\"id\":1000000031,\"name\":\"{}\"}}",
        "x".repeat(10 * 1024 * 1024)
    );
    let mut cases = vec![
        native(
            "NaN",
            "{\"id\":1000000021,\"ratio\":NaN}",
            S::BAD_REQUEST,
            &["line 1"],
        ),
        native(
            "Infinity",
            "{\"id\":1000000022,\"ratio\":Infinity}",
            S::BAD_REQUEST,
            &["line 1"],
        ),
        native(
            "float out of range",
            "{\"id\":1000000023,\"ratio\":1e400}",
            S::BAD_REQUEST,
            &["line 1, column 30", "number out of range"],
        ),
        native(
            "integer too large for int64",
            "{\"id\":99999999999999999999}",
            S::BAD_REQUEST,
            &["line 1", "column 'id'"],
        ),
        native(
            "fraction into an integer column",
            "{\"id\":1000000024.5}",
            S::BAD_REQUEST,
            &["line 1", "column 'id'"],
        ),
        native(
            "object where a scalar goes",
            "{\"id\":1000000025,\"name\":{\"first\":\"a\"}}",
            S::BAD_REQUEST,
            &["line 1", "column 'name'"],
        ),
        native(
            "array where a scalar goes",
            "{\"id\":1000000026,\"small\":[1]}",
            S::BAD_REQUEST,
            &["line 1", "column 'small'"],
        ),
        native(
            "duplicate key",
            "{\"id\":1000000027,\"id\":1000000028}",
            S::BAD_REQUEST,
            &["line 1", "'id'", "more than once"],
        ),
        native(
            "truncated mid-string",
            "{\"id\":1000000029,\"name\":\"ab",
            S::BAD_REQUEST,
            &["line 1"],
        ),
        native("deep nesting", &deep, S::BAD_REQUEST, &["line 1"]),
        native("empty body", "", S::BAD_REQUEST, &["no rows"]),
        native("only blank lines", "\n\n  \n", S::BAD_REQUEST, &["no rows"]),
        native(
            "too many rows",
            &"{\"id\":1000000032}\n".repeat(1001),
            S::PAYLOAD_TOO_LARGE,
            &["1001 lines", "max_rows_per_insert"],
        ),
        native(
            "a million tiny lines",
            &"{}\n".repeat(1_000_000),
            S::PAYLOAD_TOO_LARGE,
            &["larger than the limit"],
        ),
        native(
            "10 MB single line",
            &long_line,
            S::PAYLOAD_TOO_LARGE,
            &["larger than the limit"],
        ),
        native(
            "a scalar instead of an object",
            "1000000033",
            S::BAD_REQUEST,
            &["line 1", "expected a JSON object"],
        ),
    ];
    cases.push(Case {
        what: "SQL in a table name",
        path: "/v1/tables/x%3BDROP%20TABLE%20strict/rows".into(),
        headers: vec![],
        body: b"{\"id\":1000000034}".to_vec(),
        status: S::BAD_REQUEST,
        says: vec!["not allowed"],
    });
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_input_gets_its_status_and_message_and_blocks_nothing() {
    let mut server = Server::start(&format!(
        "{STRICT}\n[tables.load]\ncolumns = {COLUMNS_TOML}\n"
    ));
    // A well-behaved producer runs the whole time.
    let config = LoadConfig {
        addr: server.addr,
        table: "load".into(),
        endpoint: Endpoint::Native,
        producers: 4,
        rows_per_insert: 5,
        rate: Some(2_000.0),
        stop: Stop::After(Duration::from_secs(3)),
        ack: "committed".into(),
        seed: 3,
        id_offset: 0,
        format: sluice_lab::events::RowFormat::JsonEachRow,
        keyed: false,
    };
    let good = tokio::spawn(sluice_lab::load::run(
        config,
        Arc::new(Progress::default()),
        true,
    ));

    let client = reqwest::Client::new();
    let mut failures = Vec::new();
    for case in cases() {
        let mut request = client.post(server.url(&case.path)).body(case.body.clone());
        for (k, v) in &case.headers {
            request = request.header(*k, *v);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                failures.push(format!("{}: no answer: {e:?}", case.what));
                continue;
            }
        };
        let status = response.status();
        let reason = response
            .headers()
            .get("x-sluice-error")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        if status != case.status || !case.says.iter().all(|s| text.contains(s)) {
            failures.push(format!(
                "{}: got {status} {text:?}, want {} with {:?}",
                case.what, case.status, case.says
            ));
        }
        if reason.is_none() {
            failures.push(format!("{}: no X-Sluice-Error header", case.what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Good inserts still work: into the strict table, in the column list form too, and into the
    // partitioned one, null partition values included.
    for (path, body) in [
        (
            "/?query=INSERT%20INTO%20strict%20(id,%20name)%20FORMAT%20JSONEachRow",
            "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}",
        ),
        (
            "/v1/tables/parted/rows",
            "{\"id\":3,\"name\":\"a\"}\n{\"id\":4}",
        ),
    ] {
        let ok = client
            .post(server.url(path))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), StatusCode::OK, "{path}: {:?}", ok.text().await);
    }

    let report = good.await.unwrap().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.rows_acked > 0);
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());

    assert_exactly_once(
        &id_counts(&server.data_dir, "load"),
        report.acked_ids.as_deref().unwrap(),
    );
    for (table, landed) in [("strict", [1, 2]), ("parted", [3, 4])] {
        let mut ids: Vec<i64> = id_counts(&server.data_dir, table).into_keys().collect();
        ids.sort_unstable();
        assert_eq!(ids, landed, "{table}: rows of refused inserts landed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_mid_stream_lands_nothing_and_the_server_stays_up() {
    use tokio::io::AsyncWriteExt;

    let mut server = Server::start(STRICT);
    let cut_short: [&[u8]; 2] = [
        b"POST /v1/tables/strict/rows HTTP/1.1\r\nHost: sluice\r\nContent-Length: 1000\r\n\r\n\
          {\"id\":1000000035}\n{\"id\":10",
        b"POST /v1/tables/strict/rows HTTP/1.1\r\nHost: sluice\r\nTransfer-Encoding: chunked\r\n\r\n\
          12\r\n{\"id\":1000000036}\n\r\n8\r\n{\"id\":1",
    ];
    for request in cut_short {
        let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        stream.flush().await.unwrap();
        drop(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let ok = reqwest::Client::new()
        .post(server.url("/v1/tables/strict/rows"))
        .body("{\"id\":5}")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let ids: Vec<i64> = id_counts(&server.data_dir, "strict").into_keys().collect();
    assert_eq!(ids, [5], "only the whole insert landed");
}
