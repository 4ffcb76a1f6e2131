//! Every input format the ClickHouse door reads, sent as curl would, lands the same rows with the
//! values sent: the same two rows in each format, read back from the lake column by column.
//! Also the encodings ClickHouse takes (`Content-Encoding`, `decompress=1`) and the refusals.

use std::io::Write;
use std::time::Duration;

use reqwest::StatusCode;

use crate::common::{Server, stop_and_read};

const CONFIG: &str = r#"
[flush]
max_age = "100ms"

[tables.f]
columns = [
  { name = "id", type = "Int64", nullable = false },
  { name = "name", type = "String" },
  { name = "score", type = "Float64" },
  { name = "at", type = "timestamp" },
  { name = "ok", type = "bool" },
  { name = "day", type = "date" },
]
"#;

/// The two rows each format carries, as the lake shows them (`id` is the format's own).
fn expected(id: i64) -> [Vec<Option<String>>; 2] {
    let text = |s: &str| Some(s.to_owned());
    [
        vec![
            Some(id.to_string()),
            text("a\tb \"c\""),
            text("1.5"),
            text("2026-11-29T12:00:00Z"),
            text("true"),
            text("2026-11-29"),
        ],
        vec![
            Some((id + 1).to_string()),
            None,
            None,
            None,
            text("false"),
            None,
        ],
    ]
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.push(u8::try_from(s.len()).unwrap());
    out.extend_from_slice(s.as_bytes());
}

/// The rows in `RowBinary`, as `DESCRIBE TABLE` announces the columns.
fn row_binary(id: i64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&id.to_le_bytes());
    out.push(0);
    string(&mut out, "a\tb \"c\"");
    out.push(0);
    out.extend_from_slice(&1.5_f64.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&1_795_953_600_000_000_i64.to_le_bytes());
    out.extend_from_slice(&[0, 1, 0]);
    out.extend_from_slice(&20_786_i32.to_le_bytes());
    out.extend_from_slice(&(id + 1).to_le_bytes());
    out.extend_from_slice(&[1, 1, 1, 0, 0, 1]);
    out
}

/// The rows in `RowBinaryWithNamesAndTypes`, with types of the client's choosing: `DateTime`
/// (seconds), `Date` (`UInt16` days), `Int32` for the id.
fn row_binary_with_types(id: i64) -> Vec<u8> {
    let mut out = vec![6];
    for name in ["day", "at", "ok", "score", "name", "id"] {
        string(&mut out, name);
    }
    for ty in [
        "Nullable(Date)",
        "Nullable(DateTime('UTC'))",
        "Bool",
        "Nullable(Float64)",
        "LowCardinality(Nullable(String))",
        "Int32",
    ] {
        string(&mut out, ty);
    }
    let id = i32::try_from(id).unwrap();
    out.push(0);
    out.extend_from_slice(&20_786_u16.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&1_795_953_600_u32.to_le_bytes());
    out.push(1);
    out.push(0);
    out.extend_from_slice(&1.5_f64.to_le_bytes());
    out.push(0);
    string(&mut out, "a\tb \"c\"");
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&[1, 1, 0, 1, 1]);
    out.extend_from_slice(&(id + 1).to_le_bytes());
    out
}

/// A `Native` block of one row with the columns `DESCRIBE TABLE` announces: the id, then the
/// other columns' values or null.
fn native_block(id: i64, values: Option<(&str, f64, i64, i32)>) -> Vec<u8> {
    let mut out = vec![6, 1];
    let mut column = |name: &str, ty: &str, data: &[u8]| {
        string(&mut out, name);
        string(&mut out, ty);
        out.extend_from_slice(data);
    };
    column("id", "Int64", &id.to_le_bytes());
    let null = u8::from(values.is_none());
    let (name, score, at, day) = values.unwrap_or(("", 0.0, 0, 0));
    let mut text = vec![null];
    string(&mut text, name);
    column("name", "Nullable(String)", &text);
    column(
        "score",
        "Nullable(Float64)",
        &[&[null][..], &score.to_le_bytes()].concat(),
    );
    column(
        "at",
        "Nullable(DateTime64(6, 'UTC'))",
        &[&[null][..], &at.to_le_bytes()].concat(),
    );
    column("ok", "Bool", &[u8::from(values.is_some())]);
    column(
        "day",
        "Nullable(Date32)",
        &[&[null][..], &day.to_le_bytes()].concat(),
    );
    out
}

/// The rows in `Native`, a block each.
fn native(id: i64) -> Vec<u8> {
    let first = native_block(id, Some(("a\tb \"c\"", 1.5, 1_795_953_600_000_000, 20_786)));
    [first, native_block(id + 1, None)].concat()
}

/// Each format and its body holding [`expected`]'s rows for `id`.
fn bodies(id: i64) -> Vec<(&'static str, Vec<u8>)> {
    let next = id + 1;
    let names = "id\tname\tscore\tat\tok\tday\n";
    let types = "Int64\tNullable(String)\tNullable(Float64)\tDateTime\tBool\tDate\n";
    let tsv_rows = format!(
        "{id}\ta\\tb \"c\"\t1.5\t2026-11-29 12:00:00\ttrue\t2026-11-29\n\
         {next}\t\\N\t\\N\t\\N\tfalse\t\\N\n"
    );
    let csv_rows =
        format!("{id},\"a\tb \"\"c\"\"\",1.5,1795953600,1,2026-11-29\n{next},\\N,,,0,\n");
    let compact_rows = format!(
        "[{id},\"a\\tb \\\"c\\\"\",1.5,1795953600,true,\"2026-11-29\"]\n\
         [\"{next}\",null,null,null,false,null]\n"
    );
    let json_names = "[\"id\",\"name\",\"score\",\"at\",\"ok\",\"day\"]\n";
    let json_types = "[\"Int64\",\"String\",\"Float64\",\"DateTime\",\"Bool\",\"Date\"]\n";
    vec![
        (
            "JSONEachRow",
            format!(
                "{{\"id\":{id},\"name\":\"a\\tb \\\"c\\\"\",\"score\":1.5,\
                 \"at\":1795953600,\"ok\":true,\"day\":\"2026-11-29\"}}\n\
                 {{\"id\":\"{next}\",\"ok\":false}}"
            )
            .into_bytes(),
        ),
        (
            "JSONStringsEachRow",
            format!(
                "{{\"id\":\"{id}\",\"name\":\"a\\tb \\\"c\\\"\",\"score\":\"1.5\",\
                 \"at\":\"2026-11-29 12:00:00\",\"ok\":\"true\",\"day\":\"2026-11-29\"}}\n\
                 {{\"id\":\"{next}\",\"ok\":\"false\"}}"
            )
            .into_bytes(),
        ),
        ("JSONCompactEachRow", compact_rows.clone().into_bytes()),
        (
            "JSONCompactStringsEachRow",
            format!(
                "[\"{id}\",\"a\\tb \\\"c\\\"\",\"1.5\",\"1795953600\",\"1\",\"2026-11-29\"]\n\
                 [\"{next}\",null,null,null,\"0\",null]\n"
            )
            .into_bytes(),
        ),
        (
            "JSONCompactEachRowWithNames",
            format!("{json_names}{compact_rows}").into_bytes(),
        ),
        (
            "JSONCompactEachRowWithNamesAndTypes",
            format!("{json_names}{json_types}{compact_rows}").into_bytes(),
        ),
        ("TabSeparated", tsv_rows.clone().into_bytes()),
        ("TSVWithNames", format!("{names}{tsv_rows}").into_bytes()),
        (
            "TabSeparatedWithNamesAndTypes",
            format!("{names}{types}{tsv_rows}").into_bytes(),
        ),
        ("CSV", csv_rows.clone().into_bytes()),
        (
            "CSVWithNames",
            format!("id,name,score,at,ok,day\n{csv_rows}").into_bytes(),
        ),
        (
            "Values",
            format!(
                "({id}, 'a\\tb \"c\"', 1.5, '2026-11-29 12:00:00', true, '2026-11-29'), \
                 ({next}, NULL, NULL, NULL, false, NULL)"
            )
            .into_bytes(),
        ),
        ("RowBinary", row_binary(id)),
        ("RowBinaryWithNamesAndTypes", row_binary_with_types(id)),
        ("Native", native(id)),
    ]
}

/// Posts `body` with `query` and the URL parameters `params`; fails the test unless it is
/// answered 200.
async fn insert_with(
    server: &Server,
    query: &str,
    params: &[(&str, &str)],
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> String {
    let mut request = reqwest::Client::new()
        .post(server.url("/"))
        .query(&[("query", query)])
        .query(params)
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{query}: {text}");
    text
}

async fn insert(server: &Server, query: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> String {
    insert_with(server, query, &[], body, headers).await
}

fn landed(server: Server) -> Vec<Vec<Option<String>>> {
    stop_and_read(server, "f")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_format_lands_the_values_sent() {
    let server = Server::start(CONFIG);
    let mut want = Vec::new();
    let formats: Vec<&str> = bodies(0).into_iter().map(|(format, _)| format).collect();
    for (n, format) in formats.into_iter().enumerate() {
        let id = 10 * n as i64;
        let body = bodies(id).swap_remove(n).1;
        insert(
            &server,
            &format!("INSERT INTO f FORMAT {format}"),
            body,
            &[],
        )
        .await;
        want.extend(expected(id));
    }
    // The query and its data in one body, as clients that put the query first send it.
    let mut body = b"INSERT INTO f FORMAT RowBinary\n".to_vec();
    body.extend(row_binary(1000));
    insert_body(&server, body).await;
    want.extend(expected(1000));
    let values = "INSERT INTO default.f (id, ok) VALUES (2000, 1), (2001, 0)";
    insert_body(&server, values.as_bytes().to_vec()).await;
    want.push(vec![
        Some("2000".into()),
        None,
        None,
        None,
        Some("true".into()),
        None,
    ]);
    want.push(vec![
        Some("2001".into()),
        None,
        None,
        None,
        Some("false".into()),
        None,
    ]);

    let rows = want.len() as u64;
    server
        .wait_rows_written("f", rows, Duration::from_secs(10))
        .await;
    assert_eq!(landed(server), want);
}

async fn insert_body(server: &Server, body: Vec<u8>) {
    let response = reqwest::Client::new()
        .post(server.url("/"))
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    assert_eq!(status, StatusCode::OK, "{}", response.text().await.unwrap());
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn lz4_frame(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn finished<W: Write>(mut encoder: W, bytes: &[u8]) -> W {
    encoder.write_all(bytes).unwrap();
    encoder
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    finished(encoder, bytes).finish().unwrap()
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    drop(finished(
        brotli::CompressorWriter::new(&mut out, 4096, 5, 22),
        bytes,
    ));
    out
}

fn xz(bytes: &[u8]) -> Vec<u8> {
    let options = lzma_rust2::XzOptions::with_preset(1);
    let encoder = lzma_rust2::XzWriter::new(Vec::new(), options).unwrap();
    finished(encoder, bytes).finish().unwrap()
}

fn bz2(bytes: &[u8]) -> Vec<u8> {
    let encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    finished(encoder, bytes).finish().unwrap()
}

/// One Hadoop snappy block of one chunk, as ClickHouse reads `Content-Encoding: snappy`.
fn hadoop_snappy(bytes: &[u8]) -> Vec<u8> {
    let chunk = snap::raw::Encoder::new().compress_vec(bytes).unwrap();
    let mut out = u32::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
    out.extend(u32::try_from(chunk.len()).unwrap().to_be_bytes());
    out.extend(chunk);
    out
}

/// One of ClickHouse's compressed blocks (`decompress=1`) holding `bytes` by `method`: its
/// CityHash128 1.0.2 checksum, the method byte, the sizes, the payload.
fn compressed_block(method: u8, bytes: &[u8]) -> Vec<u8> {
    let payload = match method {
        0x02 => bytes.to_vec(),
        0x82 => lz4_flex::block::compress(bytes),
        0x90 => zstd::bulk::compress(bytes, 3).unwrap(),
        other => panic!("no method {other}"),
    };
    let mut block = vec![method];
    block.extend(u32::try_from(9 + payload.len()).unwrap().to_le_bytes());
    block.extend(u32::try_from(bytes.len()).unwrap().to_le_bytes());
    block.extend(payload);
    let hash = cityhash_rs::cityhash_102_128(&block);
    // cityhash-rs gives CityHash's first half in the upper bits; ClickHouse stores it first.
    let mut out = ((hash >> 64) as u64).to_le_bytes().to_vec();
    out.extend((hash as u64).to_le_bytes());
    out.extend(block);
    out
}

/// A row of table `f` in TSV with its id and name, the rest null.
fn tsv_row(id: u32, name: &str) -> Vec<u8> {
    format!("{id}\t{name}\t\\N\t\\N\t\\N\t\\N\n").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_encoding_and_compressed_block_lands_and_bad_bodies_are_refused() {
    let server = Server::start(CONFIG);
    let query = "INSERT INTO f FORMAT TSV";
    let encoded = |name: &'static str, body: Vec<u8>| (name, body);
    // Two LZ4 frames back to back, as clickhouse-connect sends a body of several blocks.
    let frames = [lz4_frame(&tsv_row(2, "lz4")), lz4_frame(&tsv_row(3, "lz4"))].concat();
    for (encoding, body) in [
        encoded("deflate", deflate(&tsv_row(1, "deflate"))),
        encoded("lz4", frames),
        encoded("br", brotli(&tsv_row(4, "br"))),
        encoded("xz", xz(&tsv_row(5, "xz"))),
        encoded("bz2", bz2(&tsv_row(6, "bz2"))),
        encoded("snappy", hadoop_snappy(&tsv_row(7, "snappy"))),
        encoded(
            "zstd",
            zstd::bulk::compress(&tsv_row(8, "zstd"), 3).unwrap(),
        ),
    ] {
        insert(&server, query, body, &[("content-encoding", encoding)]).await;
    }
    // Compressed blocks, one per method, a row split across two of them, gzipped on top, which
    // is undone first.
    let split = tsv_row(10, "blocks");
    let mut blocks = compressed_block(0x90, &tsv_row(9, "blocks"));
    blocks.extend(compressed_block(0x82, &split[..4]));
    blocks.extend(compressed_block(0x02, &split[4..]));
    let in_blocks = [("decompress", "1")];
    insert_with(
        &server,
        query,
        &in_blocks,
        gzip(&blocks),
        &[("content-encoding", "gzip")],
    )
    .await;
    // A null for the required id is its default, 0, when the insert asks, as ClickHouse does.
    let null_id = b"\\N,null as default,,,,\n".to_vec();
    let defaults = [("input_format_null_as_default", "1")];
    insert_with(&server, "INSERT INTO f FORMAT CSV", &defaults, null_id, &[]).await;

    let client = reqwest::Client::new();
    // Native's second block, cut inside its first column's value.
    let second_block_at = native(4).len() - native_block(5, None).len();
    let cut_native = native(4)[..second_block_at + 16].to_vec();
    for (format, body, says) in [
        (
            "TSV",
            &b"4\ta\t\\N\t\\N\t\\N\t\\N\t5\n"[..],
            "line 1: the row has 7 values",
        ),
        (
            "CSV",
            b"\\N,a,,,,\n",
            "line 1, column 'id': the column is required (not nullable) and the row has null",
        ),
        (
            "CSV",
            b"4,a,,,,\n5,b,x,,,\n",
            "line 2, column 'score': 'x' is not a number",
        ),
        (
            "RowBinary",
            &4_i64.to_le_bytes()[..5],
            "row 1, column 'id': the body ends",
        ),
        ("Native", &cut_native, "row 2, column 'id': the body ends"),
        (
            "JSONCompactEachRow",
            b"[4,\"a\",null,null,null,null]\n[5,,]",
            "row 2: invalid JSON",
        ),
        (
            "Values",
            b"(4, 'a', NULL, NULL, NULL, NULL) x",
            "row 2: unexpected 'x'",
        ),
        (
            "JSONEachRow",
            b"{\"id\": 4,,}",
            "line 1, column 10: invalid JSON",
        ),
    ] {
        let response = client
            .post(server.url("/"))
            .query(&[("query", format!("INSERT INTO f FORMAT {format}"))])
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{format}");
        assert_eq!(response.headers()["x-clickhouse-exception-code"], "117");
        let text = response.text().await.unwrap();
        assert!(text.contains(says), "{format}: {text}");
    }
    let mut corrupt = compressed_block(0x82, &tsv_row(11, "corrupt"));
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let refused = client
        .post(server.url("/"))
        .query(&[("query", query)])
        .query(&in_blocks)
        .body(corrupt)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("compressed block 1 at byte 0: checksum mismatch"),
        "{text}"
    );

    server
        .wait_rows_written("f", 11, Duration::from_secs(10))
        .await;
    let landed: Vec<(String, String)> = landed(server)
        .into_iter()
        .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
        .collect();
    let names = [
        "deflate", "lz4", "lz4", "br", "xz", "bz2", "snappy", "zstd", "blocks", "blocks",
    ];
    let want: Vec<(String, String)> = ["null as default"]
        .iter()
        .chain(&names)
        .enumerate()
        .map(|(i, name)| (i.to_string(), (*name).to_owned()))
        .collect();
    assert_eq!(
        landed, want,
        "every encoding landed its row; a refused insert left none"
    );
}
