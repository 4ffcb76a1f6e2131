//! The SQLite sink on a real database file: tables created from the schema with the documented
//! types, one transaction per flush, the ledger that skips a replayed flush, errors classified,
//! identifiers quoted whatever they hold.

use rusqlite::Connection;
use sluice_core::{
    Column, ColumnType, DecodeOptions, FlushBatch, FlushId, FlushPolicy, PartitionKey, Sink,
    TableDef, TableLayout, TableName, decode_ndjson,
};
use sluice_sinks::{SqliteConfig, SqliteSink};

/// id, ts, day, ok, latency as SQLite returns them.
type Row = (
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<f64>,
);

fn table(name: &str, columns: Vec<Column>, partition_by: &str) -> TableDef {
    let layout = TableLayout {
        columns,
        partition_by: partition_by.into(),
        sort_by: vec![],
    };
    TableDef::new(
        TableName::new(name).unwrap(),
        layout,
        FlushPolicy::default(),
    )
    .unwrap()
}

fn events() -> TableDef {
    table(
        "events",
        vec![
            Column::new("id", ColumnType::Int64).required(),
            Column::new("ts", ColumnType::Timestamp),
            Column::new("day", ColumnType::Date),
            Column::new("ok", ColumnType::Bool),
            Column::new("latency", ColumnType::Float64),
            Column::new("service", ColumnType::String),
        ],
        "service",
    )
}

fn flush<'a>(
    table: &'a TableDef,
    key: PartitionKey,
    seqs: (u64, u64),
    rows: &str,
) -> FlushBatch<'a> {
    let batch = decode_ndjson(table.schema(), rows.as_bytes(), &DecodeOptions::default()).unwrap();
    FlushBatch {
        table,
        id: FlushId {
            table: table.name().clone(),
            partition: key,
            first_seq: seqs.0,
            last_seq: seqs.1,
        },
        // Two batches, as a flush of several inserts arrives.
        batches: vec![batch.slice(0, 1), batch.slice(1, batch.num_rows() - 1)],
    }
}

#[tokio::test]
async fn lands_rows_with_the_documented_types_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    let events = events();
    sink.create_table(&events).await.unwrap();
    let api = PartitionKey::Value("api".into());
    let rows = r#"{"id":1,"ts":"2026-11-29T12:00:00.5Z","day":"2026-11-29","ok":true,"latency":1.5,"service":"api"}
                  {"id":2,"service":"api"}"#;
    let landed = sink
        .write(flush(&events, api.clone(), (3, 7), rows))
        .await
        .unwrap();
    assert_eq!(landed.parts, 1);
    // The same flush again (a replay): skipped.
    let again = sink
        .write(flush(&events, api.clone(), (3, 7), rows))
        .await
        .unwrap();
    assert_eq!(again.parts, 0);
    // A later flush of another partition lands.
    sink.write(flush(
        &events,
        PartitionKey::Value("web".into()),
        (8, 8),
        r#"{"id":3,"service":"web"}"#,
    ))
    .await
    .unwrap();

    let conn = Connection::open(&path).unwrap();
    let rows: Vec<Row> = conn
        .prepare("SELECT id, ts, day, ok, latency FROM events ORDER BY id")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        [
            (
                1,
                Some("2026-11-29 12:00:00.500000".into()),
                Some("2026-11-29".into()),
                Some(1),
                Some(1.5)
            ),
            (2, None, None, None, None),
            (3, None, None, None, None),
        ]
    );
    let declared: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        declared.contains("\"id\" INTEGER NOT NULL") && declared.contains("\"ts\" TEXT"),
        "{declared}"
    );

    let mut committed = sink.committed(&events).await.unwrap();
    committed.sort();
    assert_eq!(
        committed,
        [(api, 7), (PartitionKey::Value("web".into()), 8)]
    );
}

#[tokio::test]
async fn a_table_that_does_not_fit_is_a_permanent_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE t (something_else TEXT)")
        .unwrap();
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    let t = table("t", vec![Column::new("id", ColumnType::Int64)], "");
    sink.create_table(&t).await.unwrap();
    let error = sink
        .write(flush(&t, PartitionKey::Whole, (1, 1), r#"{"id":1}"#))
        .await
        .unwrap_err();
    assert!(!error.is_retriable(), "{error}");
    assert!(error.to_string().contains("no column named id"), "{error}");
    // Nothing half-written: the ledger did not move.
    assert!(sink.committed(&t).await.unwrap().is_empty());
}

#[tokio::test]
async fn hostile_names_are_quoted_not_executed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    let nasty = "x\"); DROP TABLE _sluice_ledger; --";
    let t = table("victim", vec![Column::new(nasty, ColumnType::String)], "");
    sink.create_table(&t).await.unwrap();
    let body = format!(
        "{{{}:\"Robert'); DROP TABLE victim; --\"}}",
        serde_json::to_string(nasty).unwrap()
    );
    sink.write(flush(&t, PartitionKey::Whole, (1, 1), &body))
        .await
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    let value: String = conn
        .query_row(
            &format!("SELECT \"{}\" FROM victim", nasty.replace('"', "\"\"")),
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(value, "Robert'); DROP TABLE victim; --");
    let ledger: i64 = conn
        .query_row("SELECT count(*) FROM _sluice_ledger", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ledger, 1);
}
