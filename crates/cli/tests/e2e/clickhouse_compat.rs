//! What ClickHouse HTTP clients send works unchanged: the query in the URL or as the body's first
//! line, `db.table`, column lists, gzip bodies, `wait_for_async_insert=0`,
//! `input_format_skip_unknown_fields=1`, JSONEachRow's looseness (`[ ]`, commas, quoted numbers),
//! `GET /ping`; and the native API takes zstd bodies, and none of that looseness.

use std::io::Write;
use std::time::Duration;

use crate::common::{Server, id_counts};
use reqwest::StatusCode;

const CONFIG: &str = r#"
[flush]
max_age = "100ms"

[tables.t]
columns = [
  { name = "id", type = "Int64", nullable = false },
  { name = "name", type = "String" },
]
"#;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickhouse_clients_work_unchanged() {
    let mut server = Server::start(CONFIG);
    let client = reqwest::Client::new();

    for path in ["/ping", "/"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "Ok.\n");
    }

    // Query in the URL, gzip body.
    let response = client
        .post(server.url("/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow"))
        .header("content-encoding", "gzip")
        .body(gzip(
            b"{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let summary = response.headers()["x-clickhouse-summary"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(summary.contains("\"written_rows\":\"2\""), "{summary}");

    // Query as the body's first line, db.table, column list, async ack.
    let response = client
        .post(server.url("/?wait_for_async_insert=0"))
        .body("INSERT INTO db.t (id) FORMAT JSONEachRow\n{\"id\":3}\n{\"id\":4}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "{:?}",
        response.text().await
    );

    // Unknown keys refused, unless the client asks to skip them (URL or SETTINGS clause).
    let body = "{\"id\":5,\"extra\":true}";
    let refused = client
        .post(server.url("/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert_eq!(refused.headers()["x-clickhouse-exception-code"], "117");
    let skipped = client
        .post(server.url(
            "/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow&input_format_skip_unknown_fields=1",
        ))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(skipped.status(), StatusCode::OK);
    let settings = client
        .post(server.url("/"))
        .body("INSERT INTO t SETTINGS input_format_skip_unknown_fields = 1 FORMAT JSONEachRow {\"id\":6,\"x\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        settings.status(),
        StatusCode::OK,
        "{:?}",
        settings.text().await
    );

    // ClickHouse's JSONEachRow looseness: rows inside [ ], separated by commas, one over several
    // lines, a 64-bit integer in quotes.
    let loose = "[{\"id\":8,\"name\":\"h\"},\n {\"id\":\"9\"} ,{\n  \"id\": 10\n},\n]";
    let response = client
        .post(server.url("/?query=INSERT%20INTO%20t%20FORMAT%20JSONEachRow"))
        .body(loose)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let summary = response.headers()["x-clickhouse-summary"].to_str().unwrap();
    assert!(summary.contains("\"written_rows\":\"3\""), "{summary}");
    // The native API takes none of it.
    for body in [loose, "{\"id\":\"11\"}"] {
        let response = client
            .post(server.url("/v1/tables/t/rows"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
    }

    // The native API with a zstd body.
    let zstd = zstd::encode_all(&b"{\"id\":7,\"name\":\"z\"}"[..], 3).unwrap();
    let response = client
        .post(server.url("/v1/tables/t/rows"))
        .header("content-encoding", "zstd")
        .body(zstd)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    server
        .wait_rows_written("t", 10, Duration::from_secs(10))
        .await;
    server.sigterm();
    assert!(server.wait(Duration::from_secs(30)).success());
    let mut ids: Vec<i64> = id_counts(&server.data_dir, "t").into_keys().collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
}
