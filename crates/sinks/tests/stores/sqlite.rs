//! The SQLite sink on a real database file: tables created from the schema with the documented
//! types, one transaction per flush, the ledger that skips a replayed flush, errors classified,
//! identifiers quoted whatever they hold, a declared table that exists given the columns its
//! config adds, a table no insert could fill refused untouched, two writers' ledgers kept
//! apart, insert keys kept with the rows, and decimals, UUIDs and JSON kept as their exact
//! text.

use rusqlite::Connection;
use sluice_core::{
    Column, ColumnType, DecodeOptions, FlushBatch, FlushId, FlushPolicy, InsertKey, KeysToKeep,
    PartitionKey, Sink, TableDef, TableLayout, TableName, decode_ndjson,
};
use sluice_sinks::{LedgerWriter, SqliteConfig, SqliteSink};

use crate::{nested_types, new_types};

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
        keys: Default::default(),
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

/// A sink into the database at `path` for the sluice data directory named `writer`.
fn writer_of(path: &std::path::Path, writer: &str) -> SqliteSink {
    SqliteSink::open(SqliteConfig::new(path))
        .unwrap()
        .with_writer(LedgerWriter::new(writer))
}

#[tokio::test]
async fn two_writers_into_one_table_each_keep_their_own_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    // Two sluice data directories, so two sequences of numbers, landing in one table.
    let (a, b) = (writer_of(&path, "a"), writer_of(&path, "b"));
    let events = events();
    a.create_table(&events).await.unwrap();
    b.create_table(&events).await.unwrap();
    let api = PartitionKey::Value("api".into());
    let landed = |rows: &'static str| flush(&events, api.clone(), (1, 1), rows);
    a.write(flush(
        &events,
        api.clone(),
        (900, 1_000),
        r#"{"id":1}
                                                          {"id":2}"#,
    ))
    .await
    .unwrap();
    // Numbered below a's flush: not a replay of it. (With one ledger row per partition it was
    // skipped as one, and its rows lost.)
    let written = b
        .write(flush(
            &events,
            api.clone(),
            (40, 50),
            r#"{"id":3}
                                                         {"id":4}"#,
        ))
        .await
        .unwrap();
    assert_eq!(written.parts, 1);
    // Each still skips a replay of its own.
    assert_eq!(
        b.write(landed(
            r#"{"id":5}
                                 {"id":6}"#
        ))
        .await
        .unwrap()
        .parts,
        0
    );
    assert_eq!(a.committed(&events).await.unwrap(), [(api.clone(), 1_000)]);
    assert_eq!(b.committed(&events).await.unwrap(), [(api.clone(), 50)]);
    let count: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 4);

    // A ledger row from before ledgers named writers counts for every writer.
    Connection::open(&path)
        .unwrap()
        .execute_batch("INSERT INTO _sluice_ledger VALUES ('events', '=web', 77)")
        .unwrap();
    let web = PartitionKey::Value("web".into());
    let mut held = b.committed(&events).await.unwrap();
    held.sort();
    assert_eq!(held, [(api, 50), (web, 77)]);
}

#[tokio::test]
async fn insert_keys_are_kept_with_the_rows_and_a_key_taken_meanwhile_fails_retriably() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let (a, b) = (writer_of(&path, "a"), writer_of(&path, "b"));
    let events = events();
    a.create_table(&events).await.unwrap();
    let api = PartitionKey::Value("api".into());
    let key = |name: &str, rows_hash| InsertKey {
        key: name.to_owned(),
        rows_hash,
    };
    let keyed = |seqs, rows: &'static str, keys: Vec<InsertKey>| FlushBatch {
        keys: KeysToKeep {
            keys,
            now_ms: 10_000,
            expired_before_ms: 5_000,
        },
        ..flush(&events, api.clone(), seqs, rows)
    };
    let name = events.name();
    assert!(a.keeps_keys());
    a.write(keyed((1, 1), r#"{"id":1}"#, vec![key("k1", u64::MAX)]))
        .await
        .unwrap();
    let asked = [key("k1", 0), key("k2", 0)];
    let held = b.held_keys(name, &api, &asked, 5_000).await.unwrap();
    assert_eq!(held, [key("k1", u64::MAX)], "every bit of the hash is kept");
    assert!(
        b.held_keys(name, &api, &asked, 10_001)
            .await
            .unwrap()
            .is_empty()
    );
    let web = PartitionKey::Value("web".into());
    assert!(b.held_keys(name, &web, &asked, 0).await.unwrap().is_empty());
    // b did not ask, or asked before a's flush committed: its flush adds nothing.
    let error = b
        .write(keyed(
            (7, 7),
            r#"{"id":2}"#,
            vec![key("k2", 2), key("k1", 1)],
        ))
        .await
        .unwrap_err();
    assert!(error.is_retriable(), "{error}");
    assert!(error.to_string().contains("'k1'"), "{error}");
    let count: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 1, "the refused flush landed no row");
    // A key past its window is taken as new.
    let later = FlushBatch {
        keys: KeysToKeep {
            keys: vec![key("k1", 3)],
            now_ms: 20_000,
            expired_before_ms: 15_000,
        },
        ..flush(&events, api.clone(), (8, 8), r#"{"id":3}"#)
    };
    b.write(later).await.unwrap();
    let held = b.held_keys(name, &api, &asked, 15_000).await.unwrap();
    assert_eq!(held, [key("k1", 3)]);
}

/// A database that `sql` has set up, in a folder of its own (kept while the first is held),
/// with a sink on it.
fn database_with(sql: &str) -> (tempfile::TempDir, std::path::PathBuf, SqliteSink) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    (dir, path, sink)
}

#[tokio::test]
async fn a_batch_the_table_refuses_is_a_permanent_error() {
    let (_dir, path, sink) = database_with("CREATE TABLE t (id INTEGER CHECK (id > 100))");
    let t = table("t", vec![Column::new("id", ColumnType::Int64)], "");
    sink.create_table(&t).await.unwrap();
    let error = sink
        .write(flush(
            &t,
            PartitionKey::Whole,
            (1, 1),
            "{\"id\":1}\n{\"id\":200}",
        ))
        .await
        .unwrap_err();
    assert!(!error.is_retriable(), "{error}");
    assert!(
        error.to_string().contains("CHECK constraint failed"),
        "{error}"
    );
    // Nothing half-written: no row, and the ledger did not move.
    assert!(sink.committed(&t).await.unwrap().is_empty());
    let rows: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}

/// `t`'s columns as SQLite declares them: name, type, NOT NULL.
fn declared_columns(path: &std::path::Path) -> Vec<(String, String, bool)> {
    Connection::open(path)
        .unwrap()
        .prepare("SELECT name, type, \"notnull\" FROM pragma_table_info('t')")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn a_declared_table_gets_the_columns_its_config_adds() {
    let (_dir, path, sink) = database_with(
        "CREATE TABLE t (ID INTEGER NOT NULL, legacy TEXT NOT NULL DEFAULT 'x'); \
             INSERT INTO t (id) VALUES (1)",
    );
    let columns = vec![
        Column::new("id", ColumnType::Int64).required(),
        Column::new("note", ColumnType::String),
        Column::new("at", ColumnType::Timestamp),
    ];
    let t = table("t", columns, "").declared();
    sink.create_table(&t).await.unwrap();
    // Opened again (the next start), it fits as it is.
    sink.create_table(&t).await.unwrap();
    assert_eq!(
        declared_columns(&path),
        [
            ("ID".to_owned(), "INTEGER".to_owned(), true),
            ("legacy".to_owned(), "TEXT".to_owned(), true),
            ("note".to_owned(), "TEXT".to_owned(), false),
            ("at".to_owned(), "TEXT".to_owned(), false),
        ]
    );
    sink.write(flush(
        &t,
        PartitionKey::Whole,
        (1, 2),
        "{\"id\":2,\"note\":\"n\"}\n{\"id\":3,\"at\":\"2026-12-01T00:00:00Z\"}",
    ))
    .await
    .unwrap();
    let rows: Vec<(i64, String, Option<String>, Option<String>)> = Connection::open(&path)
        .unwrap()
        .prepare("SELECT id, legacy, note, at FROM t ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        [
            (1, "x".to_owned(), None, None),
            (2, "x".to_owned(), Some("n".to_owned()), None),
            (
                3,
                "x".to_owned(),
                None,
                Some("2026-12-01 00:00:00.000000".to_owned())
            ),
        ]
    );
}

#[tokio::test]
async fn a_table_no_insert_could_fill_is_refused_and_left_as_it_is() {
    let (_dir, path, sink) = database_with("CREATE TABLE t (id INTEGER, legacy TEXT NOT NULL)");
    let before = declared_columns(&path);
    let id = || Column::new("id", ColumnType::Int64);
    let refusals = [
        // A NOT NULL column without a default that the layout lacks.
        (
            table(
                "t",
                vec![id(), Column::new("legacy2", ColumnType::String)],
                "",
            )
            .declared(),
            "has a column 'legacy' that may not be null and has no default",
        ),
        // A layout that is not declared changes no table.
        (
            table(
                "t",
                vec![
                    id(),
                    Column::new("legacy", ColumnType::String),
                    Column::new("z", ColumnType::String),
                ],
                "",
            ),
            "has no column 'z': sluice adds columns only to a table declared in the config",
        ),
        // A new column that may not be null: the rows there have no value for it.
        (
            table(
                "t",
                vec![
                    id(),
                    Column::new("legacy", ColumnType::String),
                    Column::new("n", ColumnType::Int64).required(),
                ],
                "",
            )
            .declared(),
            "has no column 'n', which the config says may not be null",
        ),
    ];
    for (t, expected) in refusals {
        let error = sink.create_table(&t).await.unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        assert!(error.to_string().contains(expected), "{error}");
        assert_eq!(declared_columns(&path), before, "{error}");
    }
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

/// Every row `sql` answers in the database at `path`, read by Python's own `sqlite3` module,
/// each cell's text (`None`: null) and, after it, its storage class, so a number where text
/// was meant shows.
fn python_sqlite(path: &std::path::Path, sql: &str) -> Vec<Vec<Option<String>>> {
    const SCRIPT: &str = r#"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(json.dumps([[None if v is None else str(v) for v in row]
                  for row in db.execute(sys.argv[2])]))
"#;
    let text = new_types::output("python3", &["-c", SCRIPT, &path.to_string_lossy(), sql]);
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn decimals_uuids_and_json_land_as_their_exact_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("types.db");
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    let t = new_types::table("typed", &[], false);
    sink.create_table(&t).await.unwrap();
    let batches = vec![new_types::batch(&t, 0..3), new_types::batch(&t, 3..6)];
    sink.write(new_types::flush(&t, 1, batches)).await.unwrap();
    let rows = python_sqlite(
        &path,
        "SELECT id, amount, whole, fraction, small, key, doc FROM typed ORDER BY id",
    );
    assert_eq!(rows, new_types::expected(None));
    // Stored as text, in columns that keep text as text.
    let classes = python_sqlite(
        &path,
        "SELECT DISTINCT typeof(amount), typeof(whole), typeof(fraction), typeof(small), \
         typeof(key), typeof(doc) FROM typed WHERE id <> 4",
    );
    assert_eq!(classes, [vec![Some("text".to_owned()); 6]]);
    let declared = python_sqlite(&path, "SELECT type FROM pragma_table_info('typed')");
    let declared: Vec<String> = declared.into_iter().flatten().flatten().collect();
    assert_eq!(
        declared,
        ["INTEGER", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT"]
    );
}

#[tokio::test]
async fn a_column_that_would_read_text_as_a_number_is_refused_for_decimals_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("types.db");
    let conn = Connection::open(&path).unwrap();
    for (name, amount, doc) in [("money", "DECIMAL(38,2)", "TEXT"), ("docs", "TEXT", "JSON")] {
        conn.execute_batch(&format!(
            "CREATE TABLE {name} (id INTEGER NOT NULL, amount {amount}, whole TEXT, \
             fraction TEXT, small TEXT, key UUID, doc {doc})"
        ))
        .unwrap();
    }
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    for (name, column) in [
        ("money", "'amount' is DECIMAL(38,2)"),
        ("docs", "'doc' is JSON"),
    ] {
        let error = sink
            .create_table(&new_types::table(name, &[], false))
            .await
            .unwrap_err();
        assert!(!error.is_retriable(), "{error}");
        assert!(
            error.message.contains(column) && error.message.contains("declare it TEXT"),
            "{error}"
        );
    }
    // A UUID never reads as a number: a column declared UUID keeps it.
    conn.execute_batch(
        "ALTER TABLE docs RENAME COLUMN doc TO old_doc; ALTER TABLE docs ADD COLUMN doc TEXT",
    )
    .unwrap();
    let t = new_types::table("docs", &[], false);
    sink.create_table(&t).await.unwrap();
    sink.write(new_types::flush(&t, 1, vec![new_types::batch(&t, 0..6)]))
        .await
        .unwrap();
    let rows = python_sqlite(
        &path,
        "SELECT id, amount, whole, fraction, small, key, doc FROM docs ORDER BY id",
    );
    assert_eq!(rows, new_types::expected(None));
}

#[tokio::test]
async fn lists_structs_and_maps_land_as_their_json_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.db");
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    let t = nested_types::table("nested");
    sink.create_table(&t).await.unwrap();
    let batches = vec![nested_types::batch(&t, 0..2), nested_types::batch(&t, 2..4)];
    sink.write(new_types::flush(&t, 1, batches)).await.unwrap();
    let select = format!(
        "SELECT {} FROM nested ORDER BY id",
        nested_types::select_list()
    );
    assert_eq!(python_sqlite(&path, &select), nested_types::documents());
    // Every value is JSON SQLite's own functions read, in TEXT columns.
    let read = python_sqlite(
        &path,
        "SELECT json_extract(names, '$[2]'), json_extract(rec, '$.tags[0]'), \
         json_extract(pairs, '$[0].v.n'), json_extract(scores, '$.bad'), typeof(grid) \
         FROM nested WHERE id = 1",
    );
    let want = ["é \"q\", a\\b", "x", "1", "NaN", "text"];
    assert_eq!(read, [want.map(|w| Some(w.to_owned())).to_vec()]);
    let declared = python_sqlite(
        &path,
        "SELECT DISTINCT type FROM pragma_table_info('nested')",
    );
    assert_eq!(
        declared,
        [
            vec![Some("INTEGER".to_owned())],
            vec![Some("TEXT".to_owned())]
        ]
    );
}

#[tokio::test]
async fn a_table_that_exists_takes_nested_values_only_in_text_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.db");
    let conn = Connection::open(&path).unwrap();
    let t = nested_types::table("kept");
    let columns: Vec<String> = nested_types::columns()
        .iter()
        .map(|(name, _)| format!("{name} TEXT"))
        .collect();
    conn.execute_batch(&format!(
        "CREATE TABLE kept (id INTEGER NOT NULL, {})",
        columns.join(", ")
    ))
    .unwrap();
    let sink = SqliteSink::open(SqliteConfig::new(&path)).unwrap();
    sink.create_table(&t).await.unwrap();
    sink.write(new_types::flush(&t, 1, vec![nested_types::batch(&t, 0..4)]))
        .await
        .unwrap();
    let select = format!(
        "SELECT {} FROM kept ORDER BY id",
        nested_types::select_list()
    );
    assert_eq!(python_sqlite(&path, &select), nested_types::documents());

    conn.execute_batch(&format!(
        "CREATE TABLE wrong (id INTEGER NOT NULL, {})",
        columns.join(", ").replace("grid TEXT", "grid INTEGER")
    ))
    .unwrap();
    let error = sink
        .create_table(&nested_types::table("wrong"))
        .await
        .unwrap_err();
    assert!(!error.is_retriable(), "{error}");
    assert!(
        error.message.contains("column 'grid' is INTEGER")
            && error.message.contains("declare it TEXT"),
        "{error}"
    );
}
